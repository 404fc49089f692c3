// SPDX-License-Identifier: GPL-2.0

//! Terminate parsing: never panics, and what parses re-encodes to the same
//! bytes.

#![no_main]

use libfuzzer_sys::fuzz_target;
use riw_proto::terminate::MAX_TERMINATE_LEN;
use riw_proto::*;

fuzz_target!(|data: &[u8]| {
    if let Ok(term) = Terminate::parse(data) {
        let mut buf = [0u8; MAX_TERMINATE_LEN];
        let n = term.encode(&mut buf).expect("parsed Terminate re-encodes");
        assert_eq!(&buf[..n], data);
        assert_eq!(term.encoded_len(), n);
    }
    // Building one about an arbitrary "faulting header" never panics.
    if let [layer, etype, code, rest @ ..] = data {
        let layer = match layer % 3 {
            0 => Layer::Rdmap,
            1 => Layer::Ddp,
            _ => Layer::Llp,
        };
        let cause = TermCause::new(layer, *etype, *code);
        let term = Terminate::about_segment(cause, rest.len() as u16, rest);
        let mut buf = [0u8; MAX_TERMINATE_LEN];
        let n = term.encode(&mut buf).expect("built Terminate encodes");
        assert_eq!(Terminate::parse(&buf[..n]), Ok(term));
    }
});
