// SPDX-License-Identifier: GPL-2.0

//! Writes the fuzz seed corpus (valid frames) into fuzz/seeds/:
//! `cargo run --example fuzz_seeds`.

use std::fs;
use std::path::Path;

use riw_proto::mpa::MPA_MAX_FRAME_LEN;
use riw_proto::rdmap::ReadRequest;
use riw_proto::terminate::MAX_TERMINATE_LEN;
use riw_proto::*;

fn write(target: &str, name: &str, bytes: &[u8]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/seeds")
        .join(target);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join(name), bytes).unwrap();
}

fn fpdu(header: FpduHeader, payload: &[u8], crc: bool) -> Vec<u8> {
    let mut buf = vec![0u8; payload.len() + MAX_FRAME_HEADER_LEN + MAX_TRAILER_LEN];
    let n = encode_fpdu::<SoftCrc32c>(&header, payload, crc, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

fn untagged(opcode: Opcode, msn: u32, mo: u32, last: bool) -> SegmentHeader {
    let queue = opcode.queue().unwrap();
    SegmentHeader {
        opcode,
        last,
        placement: Placement::Untagged {
            inval_stag: 0,
            queue,
            msn,
            mo,
        },
    }
}

fn main() {
    let config = MpaConfig {
        revision: MpaRevision::V2,
        crc: false,
        ird: 16,
        ird_max: 16,
        ord: 16,
        peer_to_peer: true,
        rtr: RtrModes::ALL,
        large_fpdus: true,
    };
    let mut buf = [0u8; MPA_MAX_FRAME_LEN];
    let n = config.request(b"seed").encode(&mut buf).unwrap();
    write(
        "mpa_frame",
        "request_v2",
        &[&[0, 5][..], &buf[..n]].concat(),
    );
    let v1 = MpaConfig {
        revision: MpaRevision::V1,
        crc: true,
        ..config
    };
    let n = v1.request(&[]).encode(&mut buf).unwrap();
    write(
        "mpa_frame",
        "request_v1_crc",
        &[&[0, 1][..], &buf[..n]].concat(),
    );
    let request = buf[..n].to_vec();
    let (req, _) = MpaFrame::decode(&request, FrameKind::Request).unwrap();
    let n = config
        .respond(&req, b"ok")
        .unwrap()
        .0
        .encode(&mut buf)
        .unwrap();
    write("mpa_frame", "reply", &[&[1, 3][..], &buf[..n]].concat());
    let n = config.reject(&req, &[]).encode(&mut buf).unwrap();
    write("mpa_frame", "reject", &[&[1, 64][..], &buf[..n]].concat());

    for crc in [false, true] {
        let mut s = Vec::new();
        s.extend(fpdu(
            FpduHeader::new(untagged(Opcode::Send, 1, 0, false)),
            b"hello, ",
            crc,
        ));
        s.extend(fpdu(
            FpduHeader::new(untagged(Opcode::Send, 1, 7, true)),
            b"world",
            crc,
        ));
        let write_hdr = SegmentHeader {
            opcode: Opcode::RdmaWrite,
            last: true,
            placement: Placement::Tagged {
                stag: 0x1234,
                to: 0x1000,
            },
        };
        s.extend(fpdu(FpduHeader::new(write_hdr), &[0xab; 33], crc));
        let rr = FpduHeader {
            segment: untagged(Opcode::ReadRequest, 1, 0, true),
            rdmap: RdmapHeader::ReadRequest(ReadRequest {
                sink_stag: 1,
                sink_to: 2,
                size: 3,
                source_stag: 4,
                source_to: 5,
            }),
        };
        let rr_at = s.len() + 2;
        s.extend(fpdu(rr, &[], crc));
        let imm = FpduHeader {
            segment: untagged(Opcode::ImmediateData, 2, 0, true),
            rdmap: RdmapHeader::ImmediateData(*b"immediat"),
        };
        s.extend(fpdu(imm, &[], crc));
        let term =
            Terminate::about_segment(TermCause::RDMAP_INVALID_STAG, 46, &s[rr_at..rr_at + 46]);
        let t = FpduHeader {
            segment: untagged(Opcode::Terminate, 1, 0, true),
            rdmap: RdmapHeader::Terminate(term),
        };
        s.extend(fpdu(t, &[], crc));
        let mut parser = StreamParser::<SoftCrc32c>::new(RxConfig {
            crc,
            max_ulpdu: 0x800,
        });
        assert!(parser.events(&s).all(|e| e.is_ok()) && parser.at_boundary());
        let prefix = [u8::from(crc), 0x08, 0x00, 9];
        write(
            "fpdu_stream",
            if crc { "mixed_crc" } else { "mixed" },
            &[&prefix[..], &s].concat(),
        );

        let mut tb = [0u8; MAX_TERMINATE_LEN];
        let n = term.encode(&mut tb).unwrap();
        write("terminate", "read_request_copy", &tb[..n]);
    }
    let n = Terminate::new(TermCause::MPA_CRC).encode(&mut buf).unwrap();
    write("terminate", "bare", &buf[..n]);
}
