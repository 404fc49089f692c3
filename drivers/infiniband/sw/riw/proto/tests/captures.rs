// SPDX-License-Identifier: GPL-2.0

//! Decodes recorded siw/riw traffic in `testdata/*.pcap` (and `*.pcapng`):
//! reassembles each TCP direction by sequence number, runs the MPA frame
//! parser on both (request from the client, reply from the server), learns
//! CRC and revision from them, and runs the FPDU stream parser over the rest,
//! requiring zero errors. Retransmitted and overlapping segments are merged;
//! a capture that ends mid-FPDU, or loses a segment, stops that stream
//! cleanly at the last contiguous byte. TCP connections that do not start
//! with an MPA request (e.g. perftest's out-of-band exchange) are skipped.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use riw_proto::*;

/// One TCP segment's payload as captured.
struct Segment {
    seq: u32,
    data: Vec<u8>,
    /// The capture cut the packet short: bytes after `data` are missing.
    truncated: bool,
}

#[derive(Default)]
struct Direction {
    syn_seq: Option<u32>,
    segments: Vec<Segment>,
}

type Endpoint = (Vec<u8>, u16);
type FlowKey = (Endpoint, Endpoint);

#[derive(Default)]
struct Capture {
    /// Directions keyed by (source, destination), in order of first sight.
    flows: BTreeMap<FlowKey, Direction>,
    order: Vec<FlowKey>,
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

impl Capture {
    /// Adds a link-layer frame; `cut` tells that the capture truncated it.
    fn add_frame(&mut self, linktype: u32, frame: &[u8], cut: bool) {
        let (ethertype, l3) = match linktype {
            // Ethernet, with any number of VLAN tags.
            1 => {
                let mut at = 12;
                let mut et = be16(frame, at);
                while matches!(et, Some(0x8100 | 0x88a8)) {
                    at += 4;
                    et = be16(frame, at);
                }
                (et, frame.get(at + 2..))
            }
            // Linux cooked capture v1 and v2.
            113 => (be16(frame, 14), frame.get(16..)),
            276 => (be16(frame, 0), frame.get(20..)),
            // Raw IP.
            101 | 12 | 228 | 229 => (None, Some(frame)),
            _ => return,
        };
        let Some(l3) = l3 else { return };
        let version = l3.first().map(|b| b >> 4);
        match (ethertype, version) {
            (Some(0x0800) | None, Some(4)) => self.add_ipv4(l3, cut),
            (Some(0x86dd) | None, Some(6)) => self.add_ipv6(l3, cut),
            _ => {}
        }
    }

    fn add_ipv4(&mut self, ip: &[u8], cut: bool) {
        let ihl = usize::from(ip[0] & 0xf) * 4;
        let (Some(total), Some(frag)) = (be16(ip, 2), be16(ip, 6)) else {
            return;
        };
        // Skip fragments (never seen on veth, and unreassemblable here).
        if ip.get(9) != Some(&6) || frag & 0x3fff != 0 {
            return;
        }
        let end = usize::from(total).min(ip.len());
        let cut = cut || usize::from(total) > ip.len();
        let (Some(src), Some(dst), Some(tcp)) = (ip.get(12..16), ip.get(16..20), ip.get(ihl..end))
        else {
            return;
        };
        self.add_tcp(src, dst, tcp, cut);
    }

    fn add_ipv6(&mut self, ip: &[u8], cut: bool) {
        let Some(plen) = be16(ip, 4) else { return };
        let mut next = ip.get(6).copied();
        let mut at = 40;
        // Hop-by-hop, routing and destination options headers.
        while matches!(next, Some(0 | 43 | 60)) {
            next = ip.get(at).copied();
            at += (usize::from(ip.get(at + 1).copied().unwrap_or(0)) + 1) * 8;
        }
        let end = (40 + usize::from(plen)).min(ip.len());
        let cut = cut || 40 + usize::from(plen) > ip.len();
        let (Some(src), Some(dst), Some(tcp)) = (ip.get(8..24), ip.get(24..40), ip.get(at..end))
        else {
            return;
        };
        if next == Some(6) {
            self.add_tcp(src, dst, tcp, cut);
        }
    }

    fn add_tcp(&mut self, src: &[u8], dst: &[u8], tcp: &[u8], cut: bool) {
        let (Some(sport), Some(dport), Some(seq)) = (be16(tcp, 0), be16(tcp, 2), be32(tcp, 4))
        else {
            return;
        };
        let (Some(&off), Some(&flags)) = (tcp.get(12), tcp.get(13)) else {
            return;
        };
        let key = ((src.to_vec(), sport), (dst.to_vec(), dport));
        if !self.flows.contains_key(&key) {
            self.order.push(key.clone());
        }
        let dir = self.flows.entry(key).or_default();
        if flags & 0x02 != 0 {
            dir.syn_seq = Some(seq);
        }
        let data = tcp.get(usize::from(off >> 4) * 4..).unwrap_or(&[]);
        if !data.is_empty() || cut {
            dir.segments.push(Segment {
                seq,
                data: data.to_vec(),
                truncated: cut,
            });
        }
    }
}

impl Direction {
    /// The contiguous byte stream from the first byte after SYN (or from the
    /// first data segment), up to the first hole or truncation.
    fn stream(&self) -> (Vec<u8>, bool) {
        let Some(base) = self
            .syn_seq
            .map(|s| s.wrapping_add(1))
            .or_else(|| self.segments.first().map(|s| s.seq))
        else {
            return (Vec::new(), true);
        };
        let mut segs: Vec<(u32, &Segment)> = self
            .segments
            .iter()
            .map(|s| (s.seq.wrapping_sub(base), s))
            .filter(|(rel, _)| *rel < 1 << 31)
            .collect();
        segs.sort_by_key(|(rel, s)| (*rel, std::cmp::Reverse(s.data.len())));
        let mut out = Vec::new();
        for (rel, seg) in segs {
            let rel = rel as usize;
            if rel > out.len() {
                return (out, false); // lost segment
            }
            let end = rel + seg.data.len();
            if end > out.len() {
                out.extend_from_slice(&seg.data[out.len() - rel..]);
            }
            if seg.truncated && end >= out.len() {
                return (out, false);
            }
        }
        (out, true)
    }
}

fn endian_u32(bytes: &[u8], at: usize, le: bool) -> Option<u32> {
    let b: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
    Some(if le {
        u32::from_le_bytes(b)
    } else {
        u32::from_be_bytes(b)
    })
}

fn read_pcap(bytes: &[u8]) -> Result<Capture, String> {
    let mut cap = Capture::default();
    let magic = bytes.get(..4).ok_or("file too short")?;
    if magic == [0x0a, 0x0d, 0x0d, 0x0a] {
        return read_pcapng(bytes);
    }
    let le = match magic {
        [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => true,
        [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => false,
        _ => return Err("not a pcap file".into()),
    };
    let u32_at = |at: usize| endian_u32(bytes, at, le);
    let linktype = u32_at(20).ok_or("short header")? & 0x0fff_ffff;
    let mut at = 24;
    while let (Some(incl), Some(orig)) = (u32_at(at + 8), u32_at(at + 12)) {
        let start = at + 16;
        let Some(frame) = bytes.get(start..start + incl as usize) else {
            break; // capture file itself cut short
        };
        cap.add_frame(linktype, frame, incl < orig);
        at = start + incl as usize;
    }
    Ok(cap)
}

fn read_pcapng(bytes: &[u8]) -> Result<Capture, String> {
    let mut cap = Capture::default();
    let mut le = true;
    let mut linktypes = Vec::new();
    let mut at = 0;
    while let Some(kind) = bytes.get(at..at + 4) {
        if kind == [0x0a, 0x0d, 0x0d, 0x0a] {
            le = bytes.get(at + 8..at + 12) == Some(&[0x4d, 0x3c, 0x2b, 0x1a]);
            linktypes.clear();
        }
        let (Some(kind), Some(len)) = (endian_u32(bytes, at, le), endian_u32(bytes, at + 4, le))
        else {
            break;
        };
        let body = bytes
            .get(at + 8..at + len as usize)
            .ok_or("truncated block")?;
        let field = |off: usize| endian_u32(body, off, le);
        match kind {
            1 => {
                let lt = body.get(..2).ok_or("short IDB")?;
                let lt = if le {
                    u16::from_le_bytes([lt[0], lt[1]])
                } else {
                    u16::from_be_bytes([lt[0], lt[1]])
                };
                linktypes.push(u32::from(lt));
            }
            6 => {
                let (Some(iface), Some(incl), Some(orig)) = (field(0), field(12), field(16)) else {
                    return Err("short EPB".into());
                };
                let frame = body.get(20..20 + incl as usize).ok_or("short EPB data")?;
                let lt = *linktypes.get(iface as usize).ok_or("EPB before IDB")?;
                cap.add_frame(lt, frame, incl < orig);
            }
            _ => {}
        }
        if len < 12 {
            return Err("bad block length".into());
        }
        at += len as usize;
    }
    Ok(cap)
}

/// Per-stream summary, printed for the record.
#[derive(Default, Debug)]
struct Summary {
    fpdus: BTreeMap<String, usize>,
    payload: usize,
    ended_mid_fpdu: bool,
}

/// Parses the FPDU stream in `bytes`, in chunks of `chunk` bytes.
fn parse_fpdus(bytes: &[u8], crc: bool, chunk: usize) -> Result<Summary, (Error, usize)> {
    let mut parser = StreamParser::<SoftCrc32c>::new(RxConfig {
        crc,
        max_ulpdu: u16::MAX,
    });
    let mut summary = Summary::default();
    let mut at = 0;
    for piece in bytes.chunks(chunk) {
        let mut rest = piece;
        while !rest.is_empty() {
            let step = parser.poll(rest).map_err(|e| (e, at))?;
            at += step.consumed;
            rest = &rest[step.consumed..];
            match step.event {
                Some(RxEvent::Header(h)) => {
                    *summary
                        .fpdus
                        .entry(format!("{:?}", h.header.segment.opcode))
                        .or_default() += 1;
                }
                Some(RxEvent::Payload { data, .. }) => summary.payload += data.len(),
                Some(RxEvent::End) | None => {}
            }
        }
    }
    summary.ended_mid_fpdu = !parser.at_boundary();
    Ok(summary)
}

/// Parses an MPA frame of `kind` at the start of `bytes` incrementally.
fn parse_mpa(
    bytes: &[u8],
    kind: FrameKind,
) -> Result<Option<(MpaFrame<'static>, Vec<u8>, usize)>, Error> {
    let mut parser = MpaFrameParser::new(kind);
    let mut consumed = 0;
    for piece in bytes.chunks(7) {
        consumed += parser.feed(piece)?.consumed;
        if parser.is_complete() {
            break;
        }
    }
    let Some(frame) = parser.frame() else {
        return Ok(None);
    };
    let pd = frame.private_data.to_vec();
    let frame = MpaFrame {
        private_data: &[],
        ..frame
    };
    Ok(Some((frame, pd, consumed)))
}

/// Checks every MPA connection in a capture; returns a report line per
/// connection or the first failure.
fn check_capture(bytes: &[u8]) -> Result<Vec<String>, String> {
    let cap = read_pcap(bytes)?;
    let mut report = Vec::new();
    let mut seen = Vec::new();
    for key in &cap.order {
        let reverse = (key.1.clone(), key.0.clone());
        if seen.contains(&reverse) {
            continue;
        }
        seen.push(key.clone());
        let here = cap.flows[key].stream().0;
        let there = cap
            .flows
            .get(&reverse)
            .map(|d| d.stream().0)
            .unwrap_or_default();
        // The client is the side whose stream starts with the request key.
        let (client_key, client, server) = if here.starts_with(b"MPA ID Req Frame") {
            (key, here, there)
        } else if there.starts_with(b"MPA ID Req Frame") {
            (&reverse, there, here)
        } else {
            continue;
        };
        let name = format!(
            "{:?}:{} -> {:?}:{}",
            client_key.0 .0, client_key.0 .1, client_key.1 .0, client_key.1 .1
        );
        let request =
            parse_mpa(&client, FrameKind::Request).map_err(|e| format!("{name}: request: {e}"))?;
        let Some((request, _, req_len)) = request else {
            report.push(format!("{name}: capture ends inside the MPA request"));
            continue;
        };
        let reply =
            parse_mpa(&server, FrameKind::Reply).map_err(|e| format!("{name}: reply: {e}"))?;
        let Some((reply, _, rep_len)) = reply else {
            report.push(format!("{name}: capture ends before the MPA reply"));
            continue;
        };
        if reply.reject {
            report.push(format!("{name}: connection rejected"));
            continue;
        }
        if reply.crc != (reply.crc || request.crc) || reply.revision > request.revision {
            return Err(format!(
                "{name}: reply {reply:?} does not answer request {request:?}"
            ));
        }
        let crc = reply.crc;
        let mut line = format!(
            "{name}: MPA rev {:?}, crc {crc}, enhanced {:?}",
            reply.revision, reply.enhanced
        );
        for (side, stream, skip) in [("client", &client, req_len), ("server", &server, rep_len)] {
            let summary = parse_fpdus(&stream[skip..], crc, 1448).map_err(|(e, at)| {
                format!("{name}: {side} stream at byte {}: {e} ({e:?})", skip + at)
            })?;
            // Chunking must not matter on real traffic either.
            let bytewise = parse_fpdus(&stream[skip..stream.len().min(skip + 64 * 1024)], crc, 1);
            if let Err((e, at)) = bytewise {
                return Err(format!("{name}: {side} byte-wise at {}: {e}", skip + at));
            }
            line += &format!(
                "; {side}: {:?}, {} payload bytes{}",
                summary.fpdus,
                summary.payload,
                if summary.ended_mid_fpdu {
                    ", capture ends mid-FPDU"
                } else {
                    ""
                }
            );
        }
        report.push(line);
    }
    Ok(report)
}

fn capture_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| {
        matches!(
            p.extension().and_then(|e| e.to_str()),
            Some("pcap" | "pcapng")
        )
    });
    files.sort();
    files
}

#[test]
fn recorded_captures_decode_without_errors() {
    let files = capture_files();
    if files.is_empty() {
        println!("note: no captures in testdata/ yet; nothing to decode");
        return;
    }
    let mut failures = Vec::new();
    for file in files {
        let bytes = fs::read(&file).expect("read capture");
        match check_capture(&bytes) {
            Ok(lines) if lines.is_empty() => {
                failures.push(format!("{}: no MPA connection", file.display()))
            }
            Ok(lines) => lines
                .iter()
                .for_each(|l| println!("{}: {l}", file.display())),
            Err(e) => failures.push(format!("{}: {e}", file.display())),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// The reader itself, on a synthetic capture with retransmission, reordering
// and a capture cut short mid-FPDU.
mod synthetic {
    use super::*;
    use riw_proto::mpa::RtrModes;

    fn tcp_packet(
        src: [u8; 4],
        dst: [u8; 4],
        ports: (u16, u16),
        seq: u32,
        flags: u8,
        data: &[u8],
    ) -> Vec<u8> {
        let mut p = vec![0u8; 14];
        p[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let total = (20 + 20 + data.len()) as u16;
        p.extend_from_slice(&[0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 6, 0, 0]);
        p[16..18].copy_from_slice(&total.to_be_bytes());
        p.extend_from_slice(&src);
        p.extend_from_slice(&dst);
        p.extend_from_slice(&ports.0.to_be_bytes());
        p.extend_from_slice(&ports.1.to_be_bytes());
        p.extend_from_slice(&seq.to_be_bytes());
        p.extend_from_slice(&[0, 0, 0, 0, 0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
        p.extend_from_slice(data);
        p
    }

    fn pcap(packets: &[(Vec<u8>, usize)]) -> Vec<u8> {
        let mut f = vec![
            0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0,
            0,
        ];
        for (p, keep) in packets {
            let keep = (*keep).min(p.len());
            f.extend_from_slice(&[0; 8]);
            f.extend_from_slice(&(keep as u32).to_le_bytes());
            f.extend_from_slice(&(p.len() as u32).to_le_bytes());
            f.extend_from_slice(&p[..keep]);
        }
        f
    }

    /// The same packets as a little-endian pcapng file.
    fn pcapng(packets: &[(Vec<u8>, usize)]) -> Vec<u8> {
        fn block(kind: u32, body: &[u8]) -> Vec<u8> {
            let len = (12 + body.len().div_ceil(4) * 4) as u32;
            let mut b = kind.to_le_bytes().to_vec();
            b.extend_from_slice(&len.to_le_bytes());
            b.extend_from_slice(body);
            b.resize(len as usize - 4, 0);
            b.extend_from_slice(&len.to_le_bytes());
            b
        }
        let mut f = block(
            0x0a0d_0d0a,
            &[
                0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            ],
        );
        f.extend(block(1, &[1, 0, 0, 0, 0, 0, 0, 0]));
        for (p, keep) in packets {
            let keep = (*keep).min(p.len());
            let mut body = vec![0u8; 12];
            body.extend_from_slice(&(keep as u32).to_le_bytes());
            body.extend_from_slice(&(p.len() as u32).to_le_bytes());
            body.extend_from_slice(&p[..keep]);
            f.extend(block(6, &body));
        }
        f
    }

    fn send(msn: u32, payload: &[u8]) -> Vec<u8> {
        let header = FpduHeader::new(SegmentHeader {
            opcode: Opcode::Send,
            last: true,
            placement: Placement::Untagged {
                inval_stag: 0,
                queue: 0,
                msn,
                mo: 0,
            },
        });
        let mut out = vec![0u8; 4096];
        let n = encode_fpdu::<SoftCrc32c>(&header, payload, true, &mut out).unwrap();
        out.truncate(n);
        out
    }

    #[test]
    fn reassembles_and_decodes() {
        let (c, s) = ([192, 0, 2, 1], [192, 0, 2, 2]);
        let (cp, sp) = ((40000, 4791), (4791, 40000));
        let cfg = MpaConfig {
            revision: MpaRevision::V2,
            crc: true,
            ird: 4,
            ord: 4,
            peer_to_peer: false,
            rtr: RtrModes::ALL,
        };
        let mut req = vec![0u8; 600];
        let n = cfg.request(b"rping").encode(&mut req).unwrap();
        req.truncate(n);
        let (request, _) = MpaFrame::decode(&req, FrameKind::Request).unwrap();
        let (reply, _) = cfg.respond(&request, &[]).unwrap();
        let mut rep = vec![0u8; 600];
        let n = reply.encode(&mut rep).unwrap();
        rep.truncate(n);

        let mut client = req.clone();
        for msn in 1..=5 {
            client.extend(send(msn, &vec![msn as u8; 700]));
        }
        let mut server = rep.clone();
        server.extend(send(1, b"ack"));
        let (cisn, sisn) = (1000u32, u32::MAX - 10); // server's sequence wraps
        let mut pkts = vec![
            (tcp_packet(c, s, cp, cisn, 0x02, &[]), usize::MAX),
            (tcp_packet(s, c, sp, sisn, 0x12, &[]), usize::MAX),
        ];
        let segs: Vec<(u32, &[u8])> = client
            .chunks(500)
            .scan(0u32, |off, ch| {
                let o = *off;
                *off += ch.len() as u32;
                Some((o, ch))
            })
            .collect();
        // In order, then a retransmission of segment 2 and a swap of 4 and 5.
        let last = segs.len() - 1;
        assert!(last > 5);
        for i in [0, 1, 2, 1, 4, 3].into_iter().chain(5..last) {
            let (off, data) = segs[i];
            pkts.push((tcp_packet(c, s, cp, cisn + 1 + off, 0x18, data), usize::MAX));
        }
        pkts.push((
            tcp_packet(s, c, sp, sisn.wrapping_add(1), 0x18, &server),
            usize::MAX,
        ));
        // The last client segment is cut by the snap length.
        let (off, data) = segs[last];
        pkts.push((tcp_packet(c, s, cp, cisn + 1 + off, 0x18, data), 54 + 10));
        let report = check_capture(&pcap(&pkts)).unwrap();
        assert_eq!(check_capture(&pcapng(&pkts)).unwrap(), report);
        assert_eq!(report.len(), 1, "{report:?}");
        assert!(report[0].contains("crc true"), "{}", report[0]);
        assert!(report[0].contains("capture ends mid-FPDU"), "{}", report[0]);
        assert!(report[0].contains("server: {\"Send\": 1}"), "{}", report[0]);

        // A corrupted FPDU is reported.
        let mut bad = pkts.clone();
        let at = 2; // first client data segment, inside the first Send
        let n = bad[at].0.len();
        bad[at].0[n - 2] ^= 1;
        let err = check_capture(&pcap(&bad)).unwrap_err();
        assert!(err.contains("CRC"), "{err}");
    }
}
