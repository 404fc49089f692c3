// SPDX-License-Identifier: GPL-2.0

//! Property tests: build → bytes → parse round trips, and chunking
//! independence of the incremental parsers.

use proptest::prelude::*;
use riw_proto::mpa::{EnhancedParams, MPA_MAX_FRAME_LEN};
use riw_proto::rdmap::{AtomicOp, AtomicRequest, AtomicResponse, ReadRequest};
use riw_proto::terminate::TermCause;
use riw_proto::*;

type Crc = SoftCrc32c;

fn opcode() -> impl Strategy<Value = Opcode> {
    prop::sample::select(vec![
        Opcode::RdmaWrite,
        Opcode::ReadRequest,
        Opcode::ReadResponse,
        Opcode::Send,
        Opcode::SendInvalidate,
        Opcode::SendSolicited,
        Opcode::SendSolicitedInvalidate,
        Opcode::Terminate,
        Opcode::AtomicRequest,
        Opcode::AtomicResponse,
        Opcode::ImmediateData,
        Opcode::ImmediateDataSolicited,
    ])
}

fn term_cause() -> impl Strategy<Value = TermCause> {
    prop::sample::select(vec![
        TermCause::RDMAP_LOCAL_CATASTROPHIC,
        TermCause::RDMAP_INVALID_STAG,
        TermCause::RDMAP_UNEXPECTED_OPCODE,
        TermCause::DDP_TAGGED_BASE_BOUNDS,
        TermCause::DDP_UNTAGGED_MSN_RANGE,
        TermCause::MPA_CRC,
        TermCause::MPA_NO_MATCHING_RTR,
    ])
}

/// An RDMAP header fitting `op`, built from random words.
fn rdmap_header(op: Opcode, w: [u64; 6], cause: TermCause, copy: u8) -> RdmapHeader {
    match op {
        Opcode::ReadRequest => RdmapHeader::ReadRequest(ReadRequest {
            sink_stag: w[0] as u32,
            sink_to: w[1],
            size: (w[0] >> 32) as u32,
            source_stag: w[2] as u32,
            source_to: w[3],
        }),
        Opcode::AtomicRequest => RdmapHeader::AtomicRequest(AtomicRequest {
            op: if w[0] & 1 == 0 {
                AtomicOp::FetchAdd
            } else {
                AtomicOp::CompareSwap
            },
            request_id: (w[0] >> 1) as u32,
            stag: w[1] as u32,
            to: w[2],
            add_swap: w[3],
            add_swap_mask: w[4],
            compare: w[5],
            compare_mask: !w[5],
        }),
        Opcode::AtomicResponse => RdmapHeader::AtomicResponse(AtomicResponse {
            request_id: w[0] as u32,
            original: w[1],
        }),
        Opcode::ImmediateData | Opcode::ImmediateDataSolicited => {
            RdmapHeader::ImmediateData(w[0].to_be_bytes())
        }
        Opcode::Terminate => {
            // Copy a plausible faulting header: a Read Request or a Write.
            let mut faulty = [0u8; 18 + 28];
            let (ctrl, len) = if copy & 1 == 0 {
                ([0x41, 0x41], 46)
            } else {
                ([0xc1, 0x40], 14)
            };
            faulty[..2].copy_from_slice(&ctrl);
            faulty[9] = 1;
            let t = if copy & 2 == 0 {
                Terminate::new(cause)
            } else {
                Terminate::about_segment(cause, w[0] as u16, &faulty[..len])
            };
            RdmapHeader::Terminate(t)
        }
        _ => RdmapHeader::None,
    }
}

/// One message of a valid stream: header template and payload.
#[derive(Clone, Debug)]
struct Message {
    template: FpduHeader,
    payload: Vec<u8>,
}

fn messages() -> impl Strategy<Value = Vec<Message>> {
    let one = (
        opcode(),
        any::<[u64; 6]>(),
        term_cause(),
        any::<u8>(),
        prop::collection::vec(any::<u8>(), 0..300),
    );
    prop::collection::vec(one, 1..8).prop_map(|specs| {
        let mut next_msn = [1u32; 4];
        specs
            .into_iter()
            .map(|(op, w, cause, copy, payload)| {
                let placement = match op.queue() {
                    None => Placement::Tagged {
                        stag: w[0] as u32 | 1,
                        to: w[1] >> 2,
                    },
                    Some(q) => {
                        let msn = &mut next_msn[q as usize];
                        let p = Placement::Untagged {
                            inval_stag: if op.invalidates() { w[2] as u32 } else { 0 },
                            queue: q,
                            msn: *msn,
                            mo: 0,
                        };
                        *msn += 1;
                        p
                    }
                };
                let template = FpduHeader {
                    segment: SegmentHeader {
                        opcode: op,
                        last: true,
                        placement,
                    },
                    rdmap: rdmap_header(op, w, cause, copy),
                };
                let payload = if op.rdmap_header_len() != 0 {
                    Vec::new()
                } else {
                    payload
                };
                Message { template, payload }
            })
            .collect()
    })
}

/// Encodes `msgs` as a stream; returns it and the expected (header, payload)
/// of every segment.
fn encode_stream(
    msgs: &[Message],
    max_ulpdu: u16,
    crc: bool,
) -> (Vec<u8>, Vec<(FpduHeader, Vec<u8>)>) {
    let mut stream = Vec::new();
    let mut expect = Vec::new();
    for m in msgs {
        let segs = Segmenter::new(&m.template, m.payload.len() as u32, max_ulpdu).unwrap();
        for s in segs {
            let part = &m.payload[s.offset as usize..(s.offset + s.len) as usize];
            let mut buf = vec![0u8; part.len() + MAX_FRAME_HEADER_LEN + MAX_TRAILER_LEN];
            let n = encode_fpdu::<Crc>(&s.header(&m.template), part, crc, &mut buf).unwrap();
            stream.extend_from_slice(&buf[..n]);
            expect.push((s.header(&m.template), part.to_vec()));
        }
    }
    (stream, expect)
}

/// Segments as parsed: header and reassembled payload.
type Parsed = Vec<(FpduHeader, Vec<u8>)>;

/// Runs the stream parser over `stream` cut at `cuts`, collapsing events.
/// `Ok(true)` means the stream ended between FPDUs.
fn parse_stream(stream: &[u8], cuts: &[usize], config: RxConfig) -> (Parsed, Result<bool, Error>) {
    let mut parser = StreamParser::<Crc>::new(config);
    let mut out: Parsed = Vec::new();
    let mut ended = true;
    let mut start = 0;
    let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
    bounds.sort_unstable();
    bounds.push(stream.len());
    for end in bounds {
        let mut events = parser.events(&stream[start..end]);
        while let Some(ev) = events.next() {
            match ev {
                Ok(RxEvent::Header(h)) => {
                    assert!(ended, "header before end of previous FPDU");
                    ended = false;
                    out.push((events.header(&h), Vec::new()));
                }
                Ok(RxEvent::Payload { offset, data }) => {
                    let cur = &mut out.last_mut().unwrap().1;
                    assert_eq!(usize::from(offset), cur.len());
                    assert!(!data.is_empty());
                    cur.extend_from_slice(data);
                }
                Ok(RxEvent::End) => ended = true,
                Ok(RxEvent::Whole { header, data }) => {
                    assert!(ended, "header before end of previous FPDU");
                    assert_eq!(data.len(), usize::from(header.payload_len));
                    out.push((events.header(&header), data.to_vec()));
                }
                Err(e) => {
                    // An FPDU that fails at its trailer (CRC) has been reported in
                    // part if it came in pieces, not at all if it came whole.
                    if !ended {
                        out.pop();
                    }
                    return (out, Err(e));
                }
            }
        }
        start = end;
    }
    let clean = parser.at_boundary();
    (out, Ok(clean))
}

/// 1024 cases unless `PROPTEST_CASES` says otherwise.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn fpdu_round_trip(msgs in messages(), crc in any::<bool>()) {
        for m in &msgs {
            let mut buf = vec![0u8; m.payload.len() + 200];
            let n = encode_fpdu::<Crc>(&m.template, &m.payload, crc, &mut buf).unwrap();
            prop_assert_eq!(n % 4, 0);
            let fpdu = decode_fpdu::<Crc>(&buf[..n], crc, u16::MAX).unwrap();
            prop_assert_eq!(fpdu.header, m.template);
            prop_assert_eq!(fpdu.payload, &m.payload[..]);
            prop_assert_eq!(fpdu.len, n);
            // Every proper prefix is reported as incomplete, never misparsed.
            for cut in [0, 1, 2, n / 2, n - 1] {
                prop_assert_eq!(decode_fpdu::<Crc>(&buf[..cut], crc, u16::MAX).err(), Some(Error::Truncated));
            }
        }
    }

    #[test]
    fn stream_chunking_is_invisible(
        msgs in messages(),
        max_ulpdu in 90u16..400,
        crc in any::<bool>(),
        cuts in prop::collection::vec(any::<usize>(), 0..40),
    ) {
        let (stream, expect) = encode_stream(&msgs, max_ulpdu, crc);
        let config = RxConfig { crc, max_ulpdu };
        let whole = parse_stream(&stream, &[], config);
        prop_assert_eq!(&whole, &(expect.clone(), Ok(true)));
        let chunked = parse_stream(&stream, &cuts, config);
        prop_assert_eq!(&chunked, &whole);
        let bytewise: Vec<usize> = (0..stream.len()).collect();
        prop_assert_eq!(parse_stream(&stream, &bytewise, config), whole);
    }

    #[test]
    fn corruption_is_detected_with_crc(
        msgs in messages(),
        at in any::<usize>(),
        flip in 1u8..=255,
    ) {
        let (mut stream, expect) = encode_stream(&msgs, 400, true);
        let at = at % stream.len();
        stream[at] ^= flip;
        let (got, end) = parse_stream(&stream, &[], RxConfig { crc: true, max_ulpdu: 400 });
        // A corrupted stream never parses to completion: some check fails,
        // or a corrupted length leaves the parser waiting inside an FPDU.
        prop_assert!(end != Ok(true), "corruption at {} went unnoticed", at);
        prop_assert!(got.len() <= expect.len());
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..600),
        crc in any::<bool>(),
        max_ulpdu in any::<u16>(),
        cuts in prop::collection::vec(any::<usize>(), 0..10),
    ) {
        let config = RxConfig { crc, max_ulpdu };
        let whole = parse_stream(&bytes, &[], config);
        prop_assert_eq!(parse_stream(&bytes, &cuts, config), whole);
        let _ = decode_fpdu::<Crc>(&bytes, crc, max_ulpdu);
        let _ = Terminate::parse(&bytes);
        let _ = MpaFrame::decode(&bytes, FrameKind::Request);
    }

    #[test]
    fn segments_tile_the_message(
        msgs in messages(),
        max_ulpdu in 60u16..2000,
    ) {
        for m in &msgs {
            let Ok(segs) = Segmenter::new(&m.template, m.payload.len() as u32, max_ulpdu) else {
                prop_assert!(m.template.encoded_len() + 1 > usize::from(max_ulpdu));
                continue;
            };
            let mut next = 0u32;
            let mut count = 0;
            for s in segs {
                prop_assert_eq!(s.offset, next);
                prop_assert!(s.header(&m.template).encoded_len() + s.len as usize <= usize::from(max_ulpdu));
                next += s.len;
                count += 1;
                prop_assert_eq!(s.segment.last, next as usize == m.payload.len());
            }
            prop_assert!(count >= 1);
            prop_assert_eq!(next as usize, m.payload.len());
        }
    }

    #[test]
    fn whole_segment_is_the_segmenters_only_one(
        msgs in messages(),
        max_ulpdu in 20u16..2000,
    ) {
        for m in &msgs {
            let len = m.payload.len() as u32;
            let planned: Option<Vec<Segment>> =
                Segmenter::new(&m.template, len, max_ulpdu).ok().map(Iterator::collect);
            let only = planned.filter(|segs| segs.len() == 1).map(|segs| segs[0]);
            prop_assert_eq!(Segment::whole(&m.template, len, max_ulpdu), only);
        }
    }

    #[test]
    fn mpa_frames_round_trip_in_chunks(
        reply in any::<bool>(),
        flags in any::<[bool; 4]>(),
        v2 in any::<bool>(),
        ird in 0u16..=0x3fff,
        ord in 0u16..=0x3fff,
        rtr in any::<[bool; 3]>(),
        pd in prop::collection::vec(any::<u8>(), 0..508),
        chunk in 1usize..64,
        trailing in prop::collection::vec(any::<u8>(), 0..8),
    ) {
        let kind = if reply { FrameKind::Reply } else { FrameKind::Request };
        let frame = MpaFrame {
            kind,
            markers: flags[0],
            crc: flags[1],
            reject: flags[2] && reply,
            large_fpdus: rtr[2],
            revision: if v2 { MpaRevision::V2 } else { MpaRevision::V1 },
            enhanced: (v2 && flags[3]).then_some(EnhancedParams {
                ird,
                ord,
                peer_to_peer: rtr[0] || rtr[1],
                rtr: RtrModes { write: rtr[0], read: rtr[1], send: rtr[2] },
            }),
            private_data: &pd,
        };
        let mut buf = vec![0u8; MPA_MAX_FRAME_LEN + 8];
        let n = frame.encode(&mut buf).unwrap();
        buf.truncate(n);
        buf.extend_from_slice(&trailing);
        prop_assert_eq!(MpaFrame::decode(&buf, kind), Ok((frame, n)));
        let mut parser = MpaFrameParser::new(kind);
        let mut taken = 0;
        for piece in buf.chunks(chunk) {
            taken += parser.feed(piece).unwrap().consumed;
        }
        prop_assert_eq!(taken, n);
        prop_assert_eq!(parser.frame(), Some(frame));
    }

    #[test]
    fn negotiation_agrees_on_both_sides(
        init_v2 in any::<bool>(),
        resp_v2 in any::<bool>(),
        crcs in any::<[bool; 2]>(),
        depths in any::<[u8; 4]>(),
        p2p in any::<bool>(),
        modes in any::<[bool; 6]>(),
        large in any::<[bool; 2]>(),
        ird_max in any::<[u8; 2]>(),
    ) {
        let rev = |v2| if v2 { MpaRevision::V2 } else { MpaRevision::V1 };
        let initiator = MpaConfig {
            revision: rev(init_v2),
            crc: crcs[0],
            ird: depths[0].into(),
            ird_max: ird_max[0].into(),
            ord: depths[1].into(),
            peer_to_peer: p2p,
            rtr: RtrModes { write: modes[0], read: modes[1], send: modes[2] },
            large_fpdus: large[0],
        };
        let responder = MpaConfig {
            revision: rev(resp_v2),
            crc: crcs[1],
            ird: depths[2].into(),
            ird_max: ird_max[1].into(),
            ord: depths[3].into(),
            peer_to_peer: false,
            rtr: RtrModes { write: modes[3], read: modes[4], send: modes[5] },
            large_fpdus: large[1],
        };
        let mut buf = [0u8; MPA_MAX_FRAME_LEN];
        let n = initiator.request(b"pd").encode(&mut buf).unwrap();
        let (request, _) = MpaFrame::decode(&buf[..n], FrameKind::Request).unwrap();
        match responder.respond(&request, &[]) {
            Ok((reply, theirs)) => {
                let n = reply.encode(&mut buf).unwrap();
                let (reply, _) = MpaFrame::decode(&buf[..n], FrameKind::Reply).unwrap();
                let ours = initiator.complete(&reply).unwrap();
                prop_assert_eq!(ours.crc, theirs.crc);
                prop_assert_eq!(ours.crc, crcs[0] || crcs[1]);
                prop_assert_eq!(ours.revision, theirs.revision);
                prop_assert_eq!(ours.rtr, theirs.rtr);
                prop_assert!(!ours.rtr_mismatch);
                prop_assert_eq!(ours.large_fpdus, theirs.large_fpdus);
                prop_assert_eq!(ours.large_fpdus, large[0] && large[1]);
                if ours.enhanced {
                    // Neither side may issue more reads than the other takes.
                    prop_assert!(ours.ord <= theirs.ird);
                    prop_assert!(theirs.ord <= ours.ird);
                }
            }
            Err(e) => prop_assert_eq!(e, Error::MpaNoMatchingRtr),
        }
    }
}
