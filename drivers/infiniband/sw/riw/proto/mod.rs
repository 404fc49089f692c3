// SPDX-License-Identifier: GPL-2.0

//! iWARP wire protocol core: MPA (RFC 5044, RFC 6581), DDP (RFC 5041),
//! RDMAP (RFC 5040, RFC 7306) and CRC32c.
//!
//! This module is pure protocol: no allocation, no I/O, no kernel
//! dependency, entirely safe code. Buffers are the caller's, state is fixed-size,
//! and every parser is total over hostile input (errors, never panics). The
//! same files build inside the riw kernel crate and as the host crate
//! `riw-proto`, where they are unit-, property- and fuzz-tested.
//!
//! # Connection setup ([`mpa`])
//!
//! The initiator sends [`MpaConfig::request`] (encode with
//! [`MpaFrame::encode`]) and feeds the socket into an
//! [`MpaFrameParser`]`::new(FrameKind::Reply)` until it is complete; bytes
//! beyond the frame (`MpaProgress::consumed`) already belong to the FPDU
//! stream. [`MpaConfig::complete`] then checks the reply and returns the
//! [`Negotiated`] parameters. The responder parses a `FrameKind::Request`
//! and answers with [`MpaConfig::respond`], or [`MpaConfig::reject`] on
//! error. Markers are never used: a peer asking for them gets
//! [`Error::MpaMarkersRequested`]. In peer-to-peer mode ([`Negotiated::rtr`])
//! the initiator sends the agreed zero-length ready-to-receive message first
//! (for a Write or Read, with a non-zero STag: Chelsio rejects STag 0).
//!
//! # Transmit ([`fpdu`])
//!
//! A message becomes FPDUs through a [`Segmenter`], which yields per-segment
//! [`FpduHeader`]s (Last flag, TO or MO filled in) and the payload range of
//! each. For each segment the engine calls [`FpduWriter::begin`] to write the
//! MPA length and headers into a small buffer (at most
//! [`MAX_FRAME_HEADER_LEN`] bytes), sends the payload from wherever it lives
//! while passing the same bytes to [`FpduWriter::payload`] for the CRC, and
//! calls [`FpduWriter::finish`] for pad and CRC (at most [`MAX_TRAILER_LEN`]
//! bytes). [`encode_fpdu`] does all of it into one buffer for small messages.
//!
//! # Receive ([`rx`])
//!
//! A [`StreamParser`] takes the byte stream after the MPA frames in chunks
//! of any size and yields [`RxEvent`]s: the validated [`RxHeader`], then
//! payload slices of the input for direct placement, then `End` after pad
//! and CRC are verified. It checks versions, reserved bits, opcodes, queue
//! numbers, MSN and message offset continuity ([`UntaggedTracker`]), tagged
//! offset wrap and lengths against the negotiated maximum.
//!
//! # Errors and Terminate ([`terminate`])
//!
//! Every failure is an [`Error`]; [`Error::terminate_cause`] names the layer,
//! error type and code to report, and [`StreamParser::terminate_for`] builds
//! the [`Terminate`] with the faulting headers copied in. A Terminate is sent
//! as an untagged message on queue 2 with [`RdmapHeader::Terminate`].
//!
//! # CRC ([`crc`])
//!
//! Framing is generic over [`Crc32c`]; [`SoftCrc32c`] is the portable
//! implementation, the kernel build plugs in the kernel's `crc32c()`.
//!
//! # Testing
//!
//! `cargo test --manifest-path drivers/infiniband/sw/riw/proto/Cargo.toml`
//! runs unit tests on frames written out by hand from the RFC layouts,
//! property tests (round trips, chunking independence) and
//! `tests/captures.rs`, which decodes every recorded `testdata/*.pcap`:
//! siw-to-siw traffic of rping and perftest, with and without CRC and in
//! peer-to-peer mode, recorded in the test guest by `testdata/capture.sh`.
//! `drivers/infiniband/sw/riw/proto/fuzz/run.sh SECONDS` fuzzes the MPA
//! frame, FPDU stream and Terminate parsers.

#![forbid(unsafe_code)]
// Inside the kernel crate this is a private module of which the engine uses a
// part; the host crate re-exports everything and keeps these lints meaningful.
#![cfg_attr(CONFIG_RUST, allow(dead_code, unreachable_pub, unused_imports))]

pub mod crc;
pub mod ddp;
mod error;
pub mod fpdu;
pub mod mpa;
pub mod rdmap;
pub mod rx;
pub mod terminate;
mod wire;

pub use crc::{Crc32c, SoftCrc32c};
pub use ddp::{Placement, SegmentHeader, UntaggedTracker};
pub use error::Error;
pub use fpdu::{
    decode_fpdu, encode_fpdu, Fpdu, FpduHeader, FpduWriter, Segment, Segmenter,
    MAX_FRAME_HEADER_LEN, MAX_TRAILER_LEN,
};
pub use mpa::{
    FrameKind, MpaConfig, MpaFrame, MpaFrameParser, MpaProgress, MpaRevision, Negotiated, RtrMode,
    RtrModes,
};
pub use rdmap::{Opcode, RdmapHeader, ReadRequest, QUEUE_READ_REQUEST, QUEUE_SEND};
pub use rx::{RxConfig, RxEvent, RxHeader, RxStep, StreamParser};
pub use terminate::{Layer, TermCause, Terminate};
