// SPDX-License-Identifier: GPL-2.0

//! MPA request/reply parsing: the incremental parser, fed in chunks, must
//! agree with the whole-buffer parser, never panic, and parsed frames must
//! survive encode/decode and negotiation.
//!
//! Input: byte 0 bit 0 selects a reply, byte 1 the chunk size; the rest is
//! the stream.

#![no_main]

use libfuzzer_sys::fuzz_target;
use riw_proto::*;

fuzz_target!(|data: &[u8]| {
    let [flags, chunk, stream @ ..] = data else {
        return;
    };
    let kind = if flags & 1 == 0 {
        FrameKind::Request
    } else {
        FrameKind::Reply
    };
    let chunk = usize::from(*chunk).max(1);

    let whole = MpaFrame::decode(stream, kind);
    let mut parser = MpaFrameParser::new(kind);
    let mut consumed = 0;
    let mut error = None;
    for piece in stream.chunks(chunk) {
        match parser.feed(piece) {
            Ok(p) => {
                consumed += p.consumed;
                if p.complete {
                    break;
                }
            }
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    match whole {
        Ok((frame, len)) => {
            assert_eq!(error, None);
            assert_eq!(consumed, len);
            assert_eq!(parser.frame(), Some(frame));
            let mut buf = [0u8; riw_proto::mpa::MPA_MAX_FRAME_LEN];
            let n = frame.encode(&mut buf).expect("parsed frame re-encodes");
            assert_eq!(MpaFrame::decode(&buf[..n], kind), Ok((frame, n)));
            let config = MpaConfig {
                revision: MpaRevision::V2,
                crc: flags & 2 != 0,
                ird: u16::from(flags >> 4),
                ird_max: u16::from(flags >> 2),
                ord: u16::from(flags & 0xc),
                peer_to_peer: flags & 2 != 0,
                rtr: RtrModes::ALL,
                large_fpdus: flags & 1 != 0,
            };
            match kind {
                FrameKind::Request => {
                    if let Ok((reply, _)) = config.respond(&frame, &[]) {
                        reply.encode(&mut buf).expect("reply encodes");
                    }
                }
                FrameKind::Reply => {
                    let _ = config.complete(&frame);
                }
            }
        }
        Err(Error::Truncated) => {
            assert_eq!(error, None);
            assert!(!parser.is_complete());
            assert_eq!(consumed, stream.len());
        }
        Err(e) => assert_eq!(error, Some(e)),
    }
});
