// SPDX-License-Identifier: GPL-2.0

//! The FPDU stream parser on hostile input: chunked and whole-buffer runs
//! must yield the same events and the same error (but for what an FPDU that
//! fails its CRC reported before), never panic, and every FPDU it accepts
//! must re-encode to the same header bytes.
//!
//! Input: byte 0 bit 0 turns CRC on and bit 1 asks the harness to fix up
//! the CRCs (so mutated streams get past the CRC check), bytes 1-2 are the
//! maximum ULPDU (big-endian), byte 3 seeds the chunk sizes; the rest is the
//! stream.

#![no_main]

use libfuzzer_sys::fuzz_target;
use riw_proto::crc::crc32c;
use riw_proto::fpdu::{fpdu_len, pad_len, MPA_CRC_LEN, MPA_LEN_FIELD};
use riw_proto::*;

/// Collapsed run: per FPDU its DDP and RDMAP headers and payload, then how the run ended.
type Run = (
    Vec<(RxHeader, RdmapHeader, Vec<u8>, bool)>,
    Option<Error>,
    bool,
);

fn run(stream: &[u8], config: RxConfig, seed: u8) -> Run {
    let mut parser = StreamParser::<SoftCrc32c>::new(config);
    let mut out: Vec<(RxHeader, RdmapHeader, Vec<u8>, bool)> = Vec::new();
    let mut rest = stream;
    let mut size = usize::from(seed);
    while !rest.is_empty() {
        // Vary the chunk size: 1..=256 bytes, or all of it for seed 0.
        let take = if seed == 0 {
            rest.len()
        } else {
            (size % 256 + 1).min(rest.len())
        };
        size = size.wrapping_mul(31).wrapping_add(7);
        let (piece, tail) = rest.split_at(take);
        rest = tail;
        let mut events = parser.events(piece);
        while let Some(ev) = events.next() {
            match ev {
                Ok(RxEvent::Header(h)) => {
                    let rdmap = events.header(&h).rdmap;
                    out.push((h, rdmap, Vec::new(), false));
                }
                Ok(RxEvent::Payload { offset, data }) => {
                    let cur = out.last_mut().expect("payload after a header");
                    assert_eq!(usize::from(offset), cur.2.len());
                    cur.2.extend_from_slice(data);
                    assert!(cur.2.len() <= usize::from(cur.0.payload_len));
                }
                Ok(RxEvent::End) => {
                    let cur = out.last_mut().expect("end after a header");
                    assert_eq!(cur.2.len(), usize::from(cur.0.payload_len));
                    cur.3 = true;
                }
                Ok(RxEvent::Whole { header, data }) => {
                    assert_eq!(data.len(), usize::from(header.payload_len));
                    let rdmap = events.header(&header).rdmap;
                    out.push((header, rdmap, data.to_vec(), true));
                }
                Err(e) => {
                    // An FPDU that fails at its trailer (CRC) has been reported in
                    // part if it came in pieces, not at all if it came whole.
                    if out.last().is_some_and(|cur| !cur.3) {
                        out.pop();
                    }
                    let _ = parser.terminate_for(&e);
                    assert_eq!(parser.poll(b"x"), Err(e), "errors are sticky");
                    return (out, Some(e), false);
                }
            }
        }
    }
    let boundary = parser.at_boundary();
    (out, None, boundary)
}

/// Rewrites the CRC of every FPDU the length fields delimit.
fn fix_crcs(stream: &mut [u8]) {
    let mut at = 0;
    while let Some(len) = stream.get(at..at + 2) {
        let end = at + fpdu_len(u16::from_be_bytes([len[0], len[1]]));
        let Some(fpdu) = stream.get_mut(at..end) else {
            return;
        };
        let (covered, crc) = fpdu.split_at_mut(fpdu.len() - MPA_CRC_LEN);
        crc.copy_from_slice(&crc32c::<SoftCrc32c>(covered).to_le_bytes());
        at = end;
    }
}

fuzz_target!(|data: &[u8]| {
    let [flags, hi, lo, seed, stream @ ..] = data else {
        return;
    };
    let mut fixed;
    let stream = if flags & 2 != 0 {
        fixed = stream.to_vec();
        fix_crcs(&mut fixed);
        &fixed[..]
    } else {
        stream
    };
    let config = RxConfig {
        crc: flags & 1 != 0,
        max_ulpdu: u16::from_be_bytes([*hi, *lo]),
    };
    let whole = run(stream, config, 0);
    assert_eq!(run(stream, config, *seed), whole);

    // Every complete FPDU re-encodes to the bytes it came from, up to the
    // pad, which is not checked, and the CRC, which depends on the pad.
    let mut at = 0;
    for (h, rdmap, payload, ended) in &whole.0 {
        let header = FpduHeader {
            segment: h.segment,
            rdmap: *rdmap,
        };
        let len = MPA_LEN_FIELD + usize::from(h.ulpdu_len) + pad_len(h.ulpdu_len) + 4;
        if !ended {
            break;
        }
        let original = &stream[at..at + len];
        let mut buf = vec![0u8; len];
        let n = encode_fpdu::<SoftCrc32c>(&header, payload, config.crc, &mut buf)
            .expect("accepted FPDU re-encodes");
        assert_eq!(n, len);
        let covered = MPA_LEN_FIELD + usize::from(h.ulpdu_len);
        assert_eq!(&buf[..covered], &original[..covered]);
        let fpdu = decode_fpdu::<SoftCrc32c>(original, config.crc, config.max_ulpdu)
            .expect("stateless decoder accepts it too");
        assert_eq!(fpdu.header, header);
        at += len;
    }
    let _ = decode_fpdu::<SoftCrc32c>(stream, config.crc, config.max_ulpdu);
});
