// SPDX-License-Identifier: GPL-2.0

//! Incremental parser of the FPDU stream that follows MPA negotiation.
//!
//! Fed arbitrary chunks of the TCP byte stream, it reports for each FPDU:
//! the validated header ([`RxEvent::Header`]), then the payload as slices of
//! the caller's input ([`RxEvent::Payload`]) so the engine can place them
//! straight into target memory, then [`RxEvent::End`] once pad and CRC have
//! been checked. The engine must not complete a work request before `End`.
//! An FPDU that starts a chunk and lies wholly in it (most small ones) comes
//! as one [`RxEvent::Whole`] instead, checked to its CRC before any of it is
//! placed.
//!
//! Only the header and trailer are buffered, in fixed arrays; payload is
//! never copied. Chunk boundaries do not change what the events say, only
//! how it is split: payload may arrive in more, smaller slices, and an FPDU
//! as `Header`, `Payload` and `End` rather than `Whole`.

use core::marker::PhantomData;

use super::crc::{crc32c_finish, crc32c_from_wire, Crc32c, CRC32C_INIT};
use super::ddp::{SegmentHeader, UntaggedTracker, UNTAGGED_HEADER_LEN};
use super::fpdu::{
    pad_len, split_ulpdu, FpduHeader, MAX_FRAME_HEADER_LEN, MAX_TRAILER_LEN, MPA_CRC_LEN,
    MPA_LEN_FIELD,
};
use super::rdmap::{RdmapHeader, READ_REQUEST_LEN};
use super::terminate::Terminate;
use super::Error;

/// Header bytes needed to learn the ULPDU length and the control bits.
const CONTROL_END: usize = MPA_LEN_FIELD + 2;
/// A length field and an untagged DDP header: the longest header but a Read Request's
/// and a Terminate's.
const SHORT_HEADER: usize = MPA_LEN_FIELD + UNTAGGED_HEADER_LEN;
/// A length field and a Read Request's headers: the longest header but a Terminate's.
const LONG_HEADER: usize = SHORT_HEADER + READ_REQUEST_LEN;

/// Receive-side settings from the MPA negotiation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxConfig {
    /// Whether CRCs are checked (the CRC field is ignored otherwise).
    pub crc: bool,
    /// Largest ULPDU accepted. MPA bounds what a sender emits by its own
    /// path MTU, not what a receiver must take, so this is normally
    /// `u16::MAX`; a smaller value enforces a locally advertised limit.
    pub max_ulpdu: u16,
}

/// A validated FPDU header: its DDP part. The RDMAP header of the few messages that
/// have one (Read Request, Terminate, the RFC 7306 ones) stays in the parser,
/// [`StreamParser::rdmap`]: it is large, and most FPDUs carry none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxHeader {
    /// DDP header with the RDMAP control bits.
    pub segment: SegmentHeader,
    /// ULPDU length from the MPA header.
    pub ulpdu_len: u16,
    /// Payload bytes that follow.
    pub payload_len: u16,
}

/// What the parser found in the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxEvent<'a> {
    /// A new FPDU's header, fully validated.
    Header(RxHeader),
    /// Payload bytes of the current FPDU, borrowed from the input.
    Payload {
        /// Offset of `data` within this FPDU's payload.
        offset: u16,
        /// The bytes.
        data: &'a [u8],
    },
    /// The current FPDU ended and its CRC (if on) is correct.
    End,
    /// A whole FPDU, its CRC (if on) correct: its `Header`, its payload (when
    /// not empty, a `Payload` at offset 0) and its `End` at once.
    Whole {
        /// The FPDU's header, as `Header` gives it.
        header: RxHeader,
        /// All of its payload, borrowed from the input.
        data: &'a [u8],
    },
}

/// Result of one [`StreamParser::poll`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxStep<'a> {
    /// Input bytes taken.
    pub consumed: usize,
    /// The event found, if any; `None` means all input was consumed.
    pub event: Option<RxEvent<'a>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Header,
    Payload,
    Trailer,
}

/// The FPDU stream parser. See the module documentation.
#[derive(Clone, Debug)]
pub struct StreamParser<C: Crc32c> {
    config: RxConfig,
    phase: Phase,
    header: [u8; MAX_FRAME_HEADER_LEN],
    header_have: usize,
    header_need: usize,
    ulpdu_len: u16,
    payload_len: u16,
    payload_done: u16,
    trailer: [u8; MAX_TRAILER_LEN],
    trailer_have: usize,
    crc: u32,
    tracker: UntaggedTracker,
    /// The RDMAP header of the current FPDU (`None` for messages without one).
    rdmap: RdmapHeader,
    error: Option<Error>,
    _crc: PhantomData<fn() -> C>,
}

/// Appends up to `need - *have` bytes of `src` to `dst`; returns the count.
fn fill(dst: &mut [u8], have: &mut usize, need: usize, src: &[u8]) -> usize {
    let take = need.saturating_sub(*have).min(src.len());
    let end = have.saturating_add(take);
    if let (Some(d), Some(s)) = (dst.get_mut(*have..end), src.get(..take)) {
        // Equal lengths, but not provably so: a zip copies without a panic path.
        d.iter_mut().zip(s).for_each(|(d, s)| *d = *s);
        *have = end;
        take
    } else {
        0
    }
}

impl<C: Crc32c> StreamParser<C> {
    /// A parser at the start of a stream (MSN 1 expected on every queue).
    pub const fn new(config: RxConfig) -> Self {
        Self {
            config,
            phase: Phase::Header,
            header: [0; MAX_FRAME_HEADER_LEN],
            header_have: 0,
            header_need: MPA_LEN_FIELD,
            ulpdu_len: 0,
            payload_len: 0,
            payload_done: 0,
            trailer: [0; MAX_TRAILER_LEN],
            trailer_have: 0,
            crc: CRC32C_INIT,
            tracker: UntaggedTracker::new(),
            rdmap: RdmapHeader::None,
            error: None,
            _crc: PhantomData,
        }
    }

    /// The settings in use.
    pub const fn config(&self) -> RxConfig {
        self.config
    }

    /// The RDMAP header of the FPDU whose [`RxEvent::Header`] came last: a Read
    /// Request's, a Terminate's, or [`RdmapHeader::None`].
    pub const fn rdmap(&self) -> &RdmapHeader {
        &self.rdmap
    }

    /// Untagged reassembly state.
    pub const fn tracker(&self) -> &UntaggedTracker {
        &self.tracker
    }

    /// Whether the parser sits between FPDUs (a clean place for the stream
    /// to end).
    pub fn at_boundary(&self) -> bool {
        self.error.is_none() && self.phase == Phase::Header && self.header_have == 0
    }

    /// The raw DDP/RDMAP header bytes of the current FPDU received so far,
    /// and its ULPDU length, for copying into a Terminate.
    pub fn current_header(&self) -> (&[u8], u16) {
        let raw = self
            .header
            .get(MPA_LEN_FIELD..self.header_have)
            .unwrap_or(&[]);
        (raw, self.ulpdu_len)
    }

    /// The Terminate to send for `error`, copying the current FPDU's headers
    /// as the cause calls for.
    pub fn terminate_for(&self, error: &Error) -> Terminate {
        let (raw, ulpdu_len) = self.current_header();
        Terminate::about_segment(error.terminate_cause(), ulpdu_len, raw)
    }

    /// Consumes input up to the next event. Once an error is returned, every
    /// later call returns it again.
    pub fn poll<'a>(&mut self, input: &'a [u8]) -> Result<RxStep<'a>, Error> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let step = self.step(input);
        if let Err(e) = step {
            self.error = Some(e);
        }
        step
    }

    /// Iterates over the events in `input`; stops after the first error.
    pub fn events<'p, 'a>(&'p mut self, input: &'a [u8]) -> RxEvents<'p, 'a, C> {
        RxEvents {
            parser: self,
            input,
            done: false,
        }
    }

    fn step<'a>(&mut self, input: &'a [u8]) -> Result<RxStep<'a>, Error> {
        let mut consumed = 0;
        loop {
            let rest = input.get(consumed..).unwrap_or(&[]);
            let event = match self.phase {
                Phase::Header => {
                    if self.header_have == 0 {
                        // Most headers come whole: taken in one go, not a field at a time.
                        let (used, header) = self.header_whole(rest)?;
                        consumed += used;
                        if let Some(header) = header {
                            let rest = input.get(consumed..).unwrap_or(&[]);
                            let event = match self.body_whole(rest)? {
                                Some((used, data)) => {
                                    consumed += used;
                                    RxEvent::Whole { header, data }
                                }
                                None => RxEvent::Header(header),
                            };
                            return Ok(RxStep {
                                consumed,
                                event: Some(event),
                            });
                        }
                        if used != 0 {
                            continue;
                        }
                    }
                    let need = self.header_need;
                    consumed += fill(&mut self.header, &mut self.header_have, need, rest);
                    if self.header_have < need {
                        None
                    } else if let Some(header) = self.header_step()? {
                        Some(RxEvent::Header(header))
                    } else {
                        continue;
                    }
                }
                Phase::Payload => {
                    let left = usize::from(self.payload_len.saturating_sub(self.payload_done));
                    if left == 0 {
                        self.phase = Phase::Trailer;
                        continue;
                    }
                    let take = left.min(rest.len());
                    let data = rest.get(..take).unwrap_or(&[]);
                    if data.is_empty() {
                        None
                    } else {
                        let offset = self.payload_done;
                        if self.config.crc {
                            self.crc = C::update(self.crc, data);
                        }
                        consumed += take;
                        // `take <= left`, so this stays within `payload_len`.
                        self.payload_done = offset.saturating_add(take as u16);
                        Some(RxEvent::Payload { offset, data })
                    }
                }
                Phase::Trailer => {
                    let need = pad_len(self.ulpdu_len) + MPA_CRC_LEN;
                    if let (0, Some(whole)) = (self.trailer_have, rest.get(..need)) {
                        // The whole trailer is there: checked in place.
                        consumed += need;
                        self.check_trailer(whole)?;
                        Some(RxEvent::End)
                    } else {
                        consumed += fill(&mut self.trailer, &mut self.trailer_have, need, rest);
                        if self.trailer_have < need {
                            None
                        } else {
                            let trailer = self.trailer;
                            self.check_trailer(trailer.get(..need).ok_or(Error::Truncated)?)?;
                            Some(RxEvent::End)
                        }
                    }
                }
            };
            if event.is_some() || consumed >= input.len() {
                return Ok(RxStep { consumed, event });
            }
        }
    }

    /// Starts a header from `input` when it holds [`SHORT_HEADER`] bytes or more: takes a
    /// fixed-size prefix at once (a copy of known length, where a field at a time would
    /// copy three times) and as much of the header as it holds. Returns the bytes taken,
    /// and the header if it was all there.
    fn header_whole(&mut self, input: &[u8]) -> Result<(usize, Option<RxHeader>), Error> {
        let have = if let Some(prefix) = input.first_chunk::<LONG_HEADER>() {
            if let Some(head) = self.header.first_chunk_mut::<LONG_HEADER>() {
                *head = *prefix;
            }
            LONG_HEADER
        } else if let Some(prefix) = input.first_chunk::<SHORT_HEADER>() {
            if let Some(head) = self.header.first_chunk_mut::<SHORT_HEADER>() {
                *head = *prefix;
            }
            SHORT_HEADER
        } else {
            return Ok((0, None));
        };
        // The length field, then the control bits: each sets what is needed next.
        self.header_have = MPA_LEN_FIELD;
        self.length_field()?;
        self.header_have = CONTROL_END;
        self.control_field()?;
        let need = self.header_need;
        if need > have {
            // A long Terminate: the rest of it comes the slow way.
            self.header_have = have;
            return Ok((have, None));
        }
        self.header_have = need;
        Ok((need, Some(self.header_done()?)))
    }

    /// Right after a header that `header_whole` took: if `input` holds the
    /// FPDU's payload and trailer, takes both and checks the trailer. Returns
    /// the bytes taken and the payload, or `None` (nothing taken) if the FPDU
    /// goes on beyond `input`.
    fn body_whole<'a>(&mut self, input: &'a [u8]) -> Result<Option<(usize, &'a [u8])>, Error> {
        let payload_len = usize::from(self.payload_len);
        let len = payload_len + pad_len(self.ulpdu_len) + MPA_CRC_LEN;
        let Some((data, trailer)) = input
            .get(..len)
            .and_then(|body| body.split_at_checked(payload_len))
        else {
            return Ok(None);
        };
        if self.config.crc {
            self.crc = C::update(self.crc, data);
        }
        self.payload_done = self.payload_len;
        self.check_trailer(trailer)?;
        Ok(Some((len, data)))
    }

    /// Advances header parsing once `header_need` bytes are buffered.
    fn header_step(&mut self) -> Result<Option<RxHeader>, Error> {
        if self.header_need == MPA_LEN_FIELD {
            self.length_field()?;
            return Ok(None);
        }
        if self.header_need == CONTROL_END {
            self.control_field()?;
            if self.header_need > CONTROL_END {
                return Ok(None);
            }
        }
        self.header_done().map(Some)
    }

    /// The length field is buffered: checks it; the control bits are needed next.
    #[inline]
    fn length_field(&mut self) -> Result<(), Error> {
        let len = self
            .header
            .first_chunk::<MPA_LEN_FIELD>()
            .ok_or(Error::Truncated)?;
        self.ulpdu_len = u16::from_be_bytes(*len);
        if self.ulpdu_len > self.config.max_ulpdu {
            return Err(Error::UlpduTooLong {
                len: self.ulpdu_len,
                max: self.config.max_ulpdu,
            });
        }
        if usize::from(self.ulpdu_len) < CONTROL_END - MPA_LEN_FIELD {
            return Err(Error::UlpduTooShort {
                len: self.ulpdu_len,
            });
        }
        self.header_need = CONTROL_END;
        Ok(())
    }

    /// The control bits are buffered: checks them; the whole header is needed next.
    #[inline]
    fn control_field(&mut self) -> Result<(), Error> {
        let control = self
            .header
            .get(MPA_LEN_FIELD..CONTROL_END)
            .and_then(|c| c.first_chunk::<2>())
            .ok_or(Error::Truncated)?;
        let (header_len, payload_len) = split_ulpdu(*control, self.ulpdu_len)?;
        // Both are bounded by the 16-bit ULPDU length.
        self.payload_len = payload_len as u16;
        self.header_need = MPA_LEN_FIELD + header_len;
        Ok(())
    }

    /// The whole header is buffered: parses and checks it against the stream's state.
    /// Inlined: a call per FPDU costs TCG two block lookups.
    #[inline(always)]
    fn header_done(&mut self) -> Result<RxHeader, Error> {
        let raw = self
            .header
            .get(..self.header_need)
            .ok_or(Error::Truncated)?;
        let segment =
            FpduHeader::parse_split(raw.get(MPA_LEN_FIELD..).unwrap_or(&[]), &mut self.rdmap)?;
        self.tracker.accept(&segment, u32::from(self.payload_len))?;
        if self.config.crc {
            self.crc = C::update(CRC32C_INIT, raw);
        }
        self.phase = Phase::Payload;
        self.payload_done = 0;
        Ok(RxHeader {
            segment,
            ulpdu_len: self.ulpdu_len,
            payload_len: self.payload_len,
        })
    }

    fn check_trailer(&mut self, trailer: &[u8]) -> Result<(), Error> {
        let (pad, crc) = trailer
            .split_at_checked(trailer.len().saturating_sub(MPA_CRC_LEN))
            .ok_or(Error::Truncated)?;
        let received = crc32c_from_wire(*crc.first_chunk::<MPA_CRC_LEN>().ok_or(Error::Truncated)?);
        if self.config.crc {
            let computed = crc32c_finish(C::update(self.crc, pad));
            if computed != received {
                return Err(Error::CrcMismatch { computed, received });
            }
        }
        self.phase = Phase::Header;
        self.header_have = 0;
        self.header_need = MPA_LEN_FIELD;
        self.trailer_have = 0;
        Ok(())
    }
}

/// Iterator returned by [`StreamParser::events`].
#[derive(Debug)]
pub struct RxEvents<'p, 'a, C: Crc32c> {
    parser: &'p mut StreamParser<C>,
    input: &'a [u8],
    done: bool,
}

impl<C: Crc32c> RxEvents<'_, '_, C> {
    /// The whole header of the FPDU whose Header event `h` was the last one returned.
    pub fn header(&self, h: &RxHeader) -> FpduHeader {
        FpduHeader {
            segment: h.segment,
            rdmap: *self.parser.rdmap(),
        }
    }
}

impl<'a, C: Crc32c> Iterator for RxEvents<'_, 'a, C> {
    type Item = Result<RxEvent<'a>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.parser.poll(self.input) {
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
            Ok(RxStep { consumed, event }) => {
                self.input = self.input.get(consumed..).unwrap_or(&[]);
                if event.is_none() {
                    self.done = true;
                }
                event.map(Ok)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::crc::SoftCrc32c;
    use super::super::ddp::Placement;
    use super::super::fpdu::encode_fpdu;
    use super::super::rdmap::Opcode;
    use super::super::terminate::TermCause;
    use super::*;
    use std::vec::Vec;

    const CONFIG: RxConfig = RxConfig {
        crc: true,
        max_ulpdu: 1000,
    };

    fn send(msn: u32, last: bool, mo: u32) -> FpduHeader {
        FpduHeader::new(SegmentHeader {
            opcode: Opcode::Send,
            last,
            placement: Placement::Untagged {
                inval_stag: 0,
                queue: 0,
                msn,
                mo,
            },
        })
    }

    fn frame(header: &FpduHeader, payload: &[u8]) -> Vec<u8> {
        let mut out = [0u8; 2048];
        let n = encode_fpdu::<SoftCrc32c>(header, payload, true, &mut out).unwrap();
        out[..n].to_vec()
    }

    /// Collapses events so chunkings can be compared.
    fn collect(stream: &[u8], chunk: usize) -> (Vec<(FpduHeader, Vec<u8>)>, Option<Error>) {
        let mut parser = StreamParser::<SoftCrc32c>::new(CONFIG);
        let mut out: Vec<(FpduHeader, Vec<u8>)> = Vec::new();
        for piece in stream.chunks(chunk.max(1)) {
            let mut events = parser.events(piece);
            while let Some(ev) = events.next() {
                match ev {
                    Ok(RxEvent::Header(h)) => out.push((events.header(&h), Vec::new())),
                    Ok(RxEvent::Payload { offset, data }) => {
                        let cur = &mut out.last_mut().unwrap().1;
                        assert_eq!(usize::from(offset), cur.len());
                        cur.extend_from_slice(data);
                    }
                    Ok(RxEvent::End) => {}
                    Ok(RxEvent::Whole { header, data }) => {
                        out.push((events.header(&header), data.to_vec()))
                    }
                    Err(e) => return (out, Some(e)),
                }
            }
        }
        assert!(parser.at_boundary());
        (out, None)
    }

    #[test]
    fn chunking_does_not_change_events() {
        let mut stream = frame(&send(1, false, 0), b"hello ");
        stream.extend(frame(&send(1, true, 6), b"world!!"));
        stream.extend(frame(&send(2, true, 0), b""));
        let whole = collect(&stream, stream.len());
        assert_eq!(whole.0.len(), 3);
        assert_eq!(whole.0[1].1, b"world!!");
        for chunk in 1..stream.len() {
            assert_eq!(collect(&stream, chunk), whole, "chunk {chunk}");
        }
    }

    #[test]
    fn whole_fpdus_come_as_one_event() {
        let mut stream = frame(&send(1, true, 0), b"hello");
        stream.extend(frame(&send(2, true, 0), b""));
        let mut p = StreamParser::<SoftCrc32c>::new(CONFIG);
        let first = p.poll(&stream).unwrap();
        let Some(RxEvent::Whole { header, data }) = first.event else {
            panic!("{first:?}");
        };
        assert_eq!((header.payload_len, data), (5, &b"hello"[..]));
        let second = p.poll(&stream[first.consumed..]).unwrap();
        assert!(matches!(
            second.event,
            Some(RxEvent::Whole { data: b"", .. })
        ));
        assert_eq!(first.consumed + second.consumed, stream.len());
        assert!(p.at_boundary());

        // A bad CRC is found before any of the payload is handed out.
        let mut bad_crc = frame(&send(1, true, 0), b"x");
        bad_crc[20] ^= 0xff;
        let mut p = StreamParser::<SoftCrc32c>::new(CONFIG);
        let err = p.poll(&bad_crc).unwrap_err();
        assert!(matches!(err, Error::CrcMismatch { .. }));
        assert_eq!(p.terminate_for(&err).cause, TermCause::MPA_CRC);
        // The header stays for the Terminate, as when the FPDU came in pieces.
        assert_eq!(p.current_header(), (&bad_crc[2..20], 19));
    }

    #[test]
    fn errors_are_typed_and_sticky() {
        let good = frame(&send(1, true, 0), b"x");
        let mut bad_crc = good.clone();
        bad_crc[20] ^= 0xff;
        let (_, err) = collect(&bad_crc, 3);
        assert!(matches!(err, Some(Error::CrcMismatch { .. })));
        assert_eq!(err.unwrap().terminate_cause(), TermCause::MPA_CRC);

        let mut p = StreamParser::<SoftCrc32c>::new(CONFIG);
        assert_eq!(
            p.poll(&[0x03, 0xe9]),
            Err(Error::UlpduTooLong {
                len: 1001,
                max: 1000
            })
        );
        assert_eq!(
            p.poll(&good),
            Err(Error::UlpduTooLong {
                len: 1001,
                max: 1000
            })
        );

        let wrong_msn = frame(&send(2, true, 0), b"x");
        let (_, err) = collect(&wrong_msn, 1);
        assert_eq!(
            err,
            Some(Error::MsnOutOfWindow {
                queue: 0,
                expected: 1,
                received: 2
            })
        );

        let mut short = good.clone();
        short[1] = 10; // less than an untagged header
        assert_eq!(collect(&short, 1).1, Some(Error::UlpduTooShort { len: 10 }));
        short[1] = 1;
        assert_eq!(collect(&short, 1).1, Some(Error::UlpduTooShort { len: 1 }));

        let mut bad_qn = good.clone();
        bad_qn[11] = 5;
        assert_eq!(
            collect(&bad_qn, 1).1,
            Some(Error::InvalidQueue { queue: 5 })
        );
    }

    #[test]
    fn terminate_for_copies_headers() {
        let mut stream = frame(&send(1, true, 0), b"x");
        stream[15] = 9; // MSN 9
        let mut p = StreamParser::<SoftCrc32c>::new(CONFIG);
        let err = p.poll(&stream).unwrap_err();
        let term = p.terminate_for(&err);
        assert_eq!(term.cause, TermCause::DDP_UNTAGGED_MSN_RANGE);
        assert_eq!(term.segment_len, Some(19));
        assert_eq!(term.ddp_header.unwrap().as_bytes(), &stream[2..20]);
    }

    #[test]
    fn terminate_message_round_trips() {
        let term = Terminate::new(TermCause::RDMAP_CATASTROPHIC_STREAM);
        let header = FpduHeader::terminate(term);
        let stream = frame(&header, &[]);
        let (events, err) = collect(&stream, 1);
        assert_eq!(err, None);
        assert_eq!(events[0].0, header);
    }
}
