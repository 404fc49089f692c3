// SPDX-License-Identifier: GPL-2.0

//! MPA FPDUs (RFC 5044 §4, markers off) carrying one DDP segment each, and
//! the transmit side: header/trailer framing around payload the engine
//! copies itself, and segmentation of a message into FPDUs.
//!
//! ```text
//! | ULPDU length (16) | DDP/RDMAP header | payload | pad 0..3 | CRC32c (32) |
//!                     \______ ULPDU ______________/
//! ```
//!
//! The pad makes length field + ULPDU + pad a multiple of 4. The CRC covers
//! everything before it; it is all zeros when CRC was not negotiated.

use core::marker::PhantomData;

use super::crc::{crc32c_finish, crc32c_from_wire, crc32c_to_wire, Crc32c, CRC32C_INIT};
use super::ddp::{Control, Placement, SegmentHeader, TAGGED_HEADER_LEN, UNTAGGED_HEADER_LEN};
use super::rdmap::{Opcode, RdmapHeader, QUEUE_TERMINATE};
use super::terminate::{Terminate, MAX_TERMINATE_LEN};
use super::wire::{Reader, Writer};
use super::Error;

/// Length of the MPA ULPDU length field.
pub const MPA_LEN_FIELD: usize = 2;
/// Length of the MPA CRC field.
pub const MPA_CRC_LEN: usize = 4;
/// Longest trailer: 3 pad bytes and the CRC.
pub const MAX_TRAILER_LEN: usize = 3 + MPA_CRC_LEN;
/// Longest DDP + RDMAP header (an untagged Terminate copying an Atomic
/// Request).
pub const MAX_HEADER_LEN: usize = UNTAGGED_HEADER_LEN + MAX_TERMINATE_LEN;
/// Longest MPA length field + DDP/RDMAP header, the most the transmit side
/// writes in front of a payload.
pub const MAX_FRAME_HEADER_LEN: usize = MPA_LEN_FIELD + MAX_HEADER_LEN;
/// Length field and the longest DDP header: what precedes the payload of an FPDU
/// without an RDMAP header, at most.
const SHORT_FRAME_HEADER_LEN: usize = MPA_LEN_FIELD + UNTAGGED_HEADER_LEN;

/// Pad bytes after a ULPDU of `ulpdu_len` bytes.
pub const fn pad_len(ulpdu_len: u16) -> usize {
    // (2 + len + pad) % 4 == 0, computed without widening overflow.
    (4 - ((ulpdu_len as usize + MPA_LEN_FIELD) & 3)) & 3
}

/// Total FPDU length for a ULPDU of `ulpdu_len` bytes.
pub const fn fpdu_len(ulpdu_len: u16) -> usize {
    MPA_LEN_FIELD + ulpdu_len as usize + pad_len(ulpdu_len) + MPA_CRC_LEN
}

/// Largest ULPDU whose FPDU fits one TCP segment of `mss` bytes (RFC 5044
/// §4.1 with markers off), capped at the 16-bit length field.
pub const fn max_ulpdu_for_mss(mss: u32) -> u16 {
    let fpdu = mss & !3;
    let ulpdu = fpdu.saturating_sub((MPA_LEN_FIELD + MPA_CRC_LEN) as u32);
    if ulpdu > u16::MAX as u32 {
        u16::MAX
    } else {
        ulpdu as u16
    }
}

/// The complete header of one FPDU's DDP segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FpduHeader {
    /// DDP header with the RDMAP control bits.
    pub segment: SegmentHeader,
    /// RDMAP header, which must fit `segment.opcode`.
    pub rdmap: RdmapHeader,
}

impl FpduHeader {
    /// A header for a message with no RDMAP header beyond the control bits.
    pub const fn new(segment: SegmentHeader) -> Self {
        Self {
            segment,
            rdmap: RdmapHeader::None,
        }
    }

    /// The header of a Terminate message (untagged, queue 2, MSN 1: a stream carries at
    /// most one).
    pub const fn terminate(term: Terminate) -> Self {
        Self {
            segment: SegmentHeader {
                opcode: Opcode::Terminate,
                last: true,
                placement: Placement::Untagged {
                    inval_stag: 0,
                    queue: QUEUE_TERMINATE,
                    msn: 1,
                    mo: 0,
                },
            },
            rdmap: RdmapHeader::Terminate(term),
        }
    }

    /// Length of DDP and RDMAP headers together.
    pub fn encoded_len(&self) -> usize {
        self.segment.encoded_len() + self.rdmap.encoded_len()
    }

    /// Writes DDP and RDMAP headers (no MPA length) into `out`.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, Error> {
        let mut w = Writer::new(out);
        self.write(&mut w)?;
        Ok(w.written())
    }

    fn write(&self, w: &mut Writer<'_>) -> Result<(), Error> {
        if !self.rdmap.fits(self.segment.opcode) {
            return Err(Error::OpcodeTagMismatch {
                opcode: self.segment.opcode.to_wire(),
            });
        }
        self.segment.write(w)?;
        self.rdmap.write(w)
    }

    /// Parses a DDP/RDMAP header that spans all of `buf` (for header-only
    /// messages, the whole ULPDU), applying every stateless check.
    pub fn parse(buf: &[u8]) -> Result<Self, Error> {
        let mut rdmap = RdmapHeader::None;
        let segment = Self::parse_split(buf, &mut rdmap)?;
        Ok(Self { segment, rdmap })
    }

    /// As [`FpduHeader::parse`], the RDMAP header written to `rdmap` and the DDP header
    /// returned. `rdmap` is written only for an opcode with an RDMAP header: the receive
    /// path never moves the large header of messages that carry none.
    pub(crate) fn parse_split(buf: &[u8], rdmap: &mut RdmapHeader) -> Result<SegmentHeader, Error> {
        let mut r = Reader::new(buf);
        let segment = SegmentHeader::read(&mut r)?;
        let opcode = segment.opcode;
        if opcode.is_header_only() {
            let mo = match segment.placement {
                Placement::Untagged { mo, .. } => mo,
                Placement::Tagged { .. } => 0,
            };
            if !segment.last || mo != 0 {
                return Err(Error::NotSingleSegment);
            }
            RdmapHeader::parse_into(opcode, r.remaining(), rdmap)?;
        } else {
            if !r.remaining().is_empty() {
                return Err(Error::NotSingleSegment);
            }
            *rdmap = RdmapHeader::None;
        }
        Ok(segment)
    }
}

/// Splits a ULPDU of `ulpdu_len` bytes whose first two bytes are `control`
/// into header and payload lengths, after validating the control bits.
pub(crate) fn split_ulpdu(control: [u8; 2], ulpdu_len: u16) -> Result<(usize, usize), Error> {
    let opcode = Control::decode(control)?.opcode;
    let ddp_len = if opcode.is_tagged() {
        TAGGED_HEADER_LEN
    } else {
        UNTAGGED_HEADER_LEN
    };
    let len = usize::from(ulpdu_len);
    let header = if opcode == Opcode::Terminate {
        // A Terminate is all header; its copies make its length variable.
        if len > MAX_HEADER_LEN {
            return Err(Error::TerminateMalformed);
        }
        len
    } else {
        ddp_len + opcode.rdmap_header_len()
    };
    let payload = len
        .checked_sub(header)
        .ok_or(Error::UlpduTooShort { len: ulpdu_len })?;
    if opcode.is_header_only() && payload != 0 {
        return Err(Error::NotSingleSegment);
    }
    Ok((header, payload))
}

/// Frames one FPDU around a payload the caller moves itself.
///
/// [`FpduWriter::begin`] writes the MPA length and headers; the caller then
/// sends the payload, passing the same bytes, in any number of pieces,
/// through [`FpduWriter::payload`] for the CRC (or only their length through
/// [`FpduWriter::skip_payload`] when CRC is off); [`FpduWriter::finish`]
/// writes pad and CRC.
#[derive(Debug)]
pub struct FpduWriter<C: Crc32c> {
    crc: Option<u32>,
    ulpdu_len: u16,
    payload_left: usize,
    _crc: PhantomData<fn() -> C>,
}

impl<C: Crc32c> FpduWriter<C> {
    /// Writes the MPA length field and `header` into `out` for a segment
    /// carrying `payload_len` bytes; returns the writer and bytes written
    /// (at most [`MAX_FRAME_HEADER_LEN`]). Up to 20 bytes of `out` may be
    /// written, zeros past the header: where its payload or trailer goes.
    pub fn begin(
        header: &FpduHeader,
        payload_len: usize,
        crc: bool,
        out: &mut [u8],
    ) -> Result<(Self, usize), Error> {
        Self::begin_parts(&header.segment, &header.rdmap, payload_len, crc, out)
    }

    /// As [`FpduWriter::begin`] for the header of `segment` of a message whose headers
    /// are `template` (see [`Segmenter`]).
    #[inline(always)]
    pub fn begin_segment(
        template: &FpduHeader,
        segment: &Segment,
        crc: bool,
        out: &mut [u8],
    ) -> Result<(Self, usize), Error> {
        let len = usize::try_from(segment.len).map_err(|_| Error::LengthMismatch)?;
        Self::begin_parts(&segment.segment, &template.rdmap, len, crc, out)
    }

    /// As [`FpduWriter::begin`], the header given as its DDP and RDMAP parts.
    #[inline(always)]
    fn begin_parts(
        segment: &SegmentHeader,
        rdmap: &RdmapHeader,
        payload_len: usize,
        crc: bool,
        out: &mut [u8],
    ) -> Result<(Self, usize), Error> {
        let ulpdu = (segment.encoded_len() + rdmap.encoded_len())
            .checked_add(payload_len)
            .ok_or(Error::LengthMismatch)?;
        let ulpdu_len = u16::try_from(ulpdu).map_err(|_| Error::LengthMismatch)?;
        if segment.opcode.is_header_only() && payload_len != 0 {
            return Err(Error::NotSingleSegment);
        }
        if !rdmap.fits(segment.opcode) {
            return Err(Error::OpcodeTagMismatch {
                opcode: segment.opcode.to_wire(),
            });
        }
        let written = match (rdmap, out.first_chunk_mut::<SHORT_FRAME_HEADER_LEN>()) {
            // Most FPDUs: the length field and the DDP header, at fixed offsets.
            (RdmapHeader::None, Some(head)) => {
                let [len_high, len_low, ddp_header @ ..] = head;
                [*len_high, *len_low] = ulpdu_len.to_be_bytes();
                segment.encode(ddp_header)?;
                MPA_LEN_FIELD + segment.encoded_len()
            }
            _ => {
                let mut w = Writer::new(&mut *out);
                w.u16(ulpdu_len)?;
                segment.write(&mut w)?;
                rdmap.write(&mut w)?;
                w.written()
            }
        };
        let crc = match (crc, out.get(..written)) {
            (false, _) => None,
            (true, Some(bytes)) => Some(C::update(CRC32C_INIT, bytes)),
            (true, None) => return Err(Error::BufferTooSmall),
        };
        let writer = Self {
            crc,
            ulpdu_len,
            payload_left: payload_len,
            _crc: PhantomData,
        };
        Ok((writer, written))
    }

    /// Accounts for payload bytes sent; feeds them to the CRC if it is on.
    #[inline(always)]
    pub fn payload(&mut self, bytes: &[u8]) -> Result<(), Error> {
        self.payload_left = self
            .payload_left
            .checked_sub(bytes.len())
            .ok_or(Error::LengthMismatch)?;
        if let Some(crc) = &mut self.crc {
            *crc = C::update(*crc, bytes);
        }
        Ok(())
    }

    /// Accounts for `len` payload bytes the caller sends from elsewhere and
    /// feeds to the CRC itself: `update` continues the CRC register over them
    /// (called only if CRC is on). `Ok(None)` if `update` could not.
    pub fn payload_elsewhere(
        &mut self,
        len: usize,
        update: impl FnOnce(u32) -> Option<u32>,
    ) -> Result<Option<()>, Error> {
        let left = self
            .payload_left
            .checked_sub(len)
            .ok_or(Error::LengthMismatch)?;
        if let Some(crc) = &mut self.crc {
            match update(*crc) {
                Some(next) => *crc = next,
                None => return Ok(None),
            }
        }
        self.payload_left = left;
        Ok(Some(()))
    }

    /// Accounts for `len` payload bytes without looking at them; only valid
    /// when CRC is off.
    pub fn skip_payload(&mut self, len: usize) -> Result<(), Error> {
        if self.crc.is_some() {
            return Err(Error::LengthMismatch);
        }
        self.payload_left = self
            .payload_left
            .checked_sub(len)
            .ok_or(Error::LengthMismatch)?;
        Ok(())
    }

    /// Writes pad and CRC into `out`, returning their length (at most
    /// [`MAX_TRAILER_LEN`]). Fails if payload bytes are still missing.
    #[inline(always)]
    pub fn finish(self, out: &mut [u8]) -> Result<usize, Error> {
        if self.payload_left != 0 {
            return Err(Error::LengthMismatch);
        }
        let pad_len = pad_len(self.ulpdu_len);
        let zeros = [0u8; 3];
        let pad = zeros.get(..pad_len).unwrap_or(&[]);
        let crc = self.crc.map_or(0, |crc| crc32c_finish(C::update(crc, pad)));
        let len = pad_len + MPA_CRC_LEN;
        // With room for the longest trailer (the engine's frames have it): fixed-size
        // stores, the longest pad and then the CRC over its tail, rather than copies of a
        // length known only now. This runs for every FPDU sent.
        if let Some(trailer) = out.first_chunk_mut::<MAX_TRAILER_LEN>() {
            if let Some((head, _)) = trailer.split_first_chunk_mut::<3>() {
                *head = zeros;
            }
            if let Some(field) = trailer
                .get_mut(pad_len..len)
                .and_then(|f| f.first_chunk_mut::<MPA_CRC_LEN>())
            {
                *field = crc32c_to_wire(crc);
                return Ok(len);
            }
        }
        let mut w = Writer::new(out);
        w.put(pad)?;
        w.put(&crc32c_to_wire(crc))?;
        Ok(w.written())
    }
}

/// Builds a complete FPDU with `payload` into `out`; returns its length.
pub fn encode_fpdu<C: Crc32c>(
    header: &FpduHeader,
    payload: &[u8],
    crc: bool,
    out: &mut [u8],
) -> Result<usize, Error> {
    let (mut writer, head) = FpduWriter::<C>::begin(header, payload.len(), crc, out)?;
    let rest = out.get_mut(head..).ok_or(Error::BufferTooSmall)?;
    let (body, trailer) = rest
        .split_at_mut_checked(payload.len())
        .ok_or(Error::BufferTooSmall)?;
    body.copy_from_slice(payload);
    writer.payload(payload)?;
    let tail = writer.finish(trailer)?;
    // Bounded by `out.len()`.
    Ok(head + payload.len() + tail)
}

/// A parsed FPDU borrowed from a contiguous buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fpdu<'a> {
    /// Its header.
    pub header: FpduHeader,
    /// Its payload.
    pub payload: &'a [u8],
    /// Bytes the whole FPDU occupies.
    pub len: usize,
}

/// Parses one whole FPDU at the start of `buf` (stateless checks only; use
/// [`super::StreamParser`] for streams). `Err(Truncated)` means more bytes
/// are needed.
pub fn decode_fpdu<C: Crc32c>(buf: &[u8], crc: bool, max_ulpdu: u16) -> Result<Fpdu<'_>, Error> {
    let mut r = Reader::new(buf);
    let ulpdu_len = r.u16()?;
    if ulpdu_len > max_ulpdu {
        return Err(Error::UlpduTooLong {
            len: ulpdu_len,
            max: max_ulpdu,
        });
    }
    let ulpdu = r.remaining().get(..usize::from(ulpdu_len));
    let control = match ulpdu.and_then(|u| u.first_chunk::<2>()) {
        Some(c) => *c,
        None if ulpdu_len < 2 => return Err(Error::UlpduTooShort { len: ulpdu_len }),
        None => return Err(Error::Truncated),
    };
    let (header_len, payload_len) = split_ulpdu(control, ulpdu_len)?;
    let header = FpduHeader::parse(r.bytes(header_len)?)?;
    let payload = r.bytes(payload_len)?;
    r.bytes(pad_len(ulpdu_len))?;
    let covered_len = buf.len() - r.remaining().len();
    let received = crc32c_from_wire(r.array()?);
    if crc {
        let covered = buf.get(..covered_len).ok_or(Error::Truncated)?;
        let computed = crc32c_finish(C::update(CRC32C_INIT, covered));
        if computed != received {
            return Err(Error::CrcMismatch { computed, received });
        }
    }
    let len = fpdu_len(ulpdu_len);
    if let Placement::Tagged { to, .. } = header.segment.placement {
        to.checked_add(payload.len() as u64)
            .ok_or(Error::TaggedOffsetWrap)?;
    }
    Ok(Fpdu {
        header,
        payload,
        len,
    })
}

/// One FPDU of a segmented message: its DDP header and the part of the message
/// payload it carries. Its RDMAP header is the message's (the template's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// DDP header with Last flag and TO/MO set for this segment.
    pub segment: SegmentHeader,
    /// Offset of the segment's payload in the message.
    pub offset: u32,
    /// Payload bytes the segment carries.
    pub len: u32,
}

impl Segment {
    /// The one segment of a `message_len` byte message whose headers are `template`, if
    /// the message fits one FPDU of at most `max_ulpdu` bytes: what a [`Segmenter`] would
    /// yield, without planning a segmentation (most messages are small). `None` if it
    /// needs more FPDUs or cannot be sent (a TO that wraps). The template itself is
    /// checked when the segment is framed ([`FpduWriter::begin_segment`]).
    pub fn whole(template: &FpduHeader, message_len: u32, max_ulpdu: u16) -> Option<Self> {
        let ulpdu = template.encoded_len() + usize::try_from(message_len).ok()?;
        if ulpdu > usize::from(max_ulpdu) {
            return None;
        }
        let mut segment = template.segment;
        segment.last = true;
        match &mut segment.placement {
            Placement::Tagged { to, .. } => {
                to.checked_add(u64::from(message_len))?;
            }
            Placement::Untagged { mo, .. } => *mo = 0,
        }
        Some(Self {
            segment,
            offset: 0,
            len: message_len,
        })
    }

    /// The whole header of this segment of a message whose headers are `template`.
    pub fn header(&self, template: &FpduHeader) -> FpduHeader {
        FpduHeader {
            segment: self.segment,
            rdmap: template.rdmap,
        }
    }
}

/// Splits a message into DDP segments no larger than the negotiated maximum
/// ULPDU, yielding DDP headers and payload ranges; the engine copies payload
/// and frames each segment with [`FpduWriter::begin_segment`].
///
/// The template's placement gives the message's first TO (tagged) or its
/// MSN (untagged; its MO is ignored). A zero-length message yields one
/// empty segment. The segmenter keeps the template's DDP header only: the
/// caller keeps the template, whose RDMAP header every segment shares.
#[derive(Clone, Debug)]
pub struct Segmenter {
    segment: SegmentHeader,
    message_len: u32,
    max_payload: u32,
    offset: u32,
    done: bool,
}

impl Segmenter {
    /// Plans the segmentation of a `message_len` byte message.
    pub fn new(template: &FpduHeader, message_len: u32, max_ulpdu: u16) -> Result<Self, Error> {
        let header_len = template.encoded_len();
        if !template.rdmap.fits(template.segment.opcode) {
            return Err(Error::OpcodeTagMismatch {
                opcode: template.segment.opcode.to_wire(),
            });
        }
        if template.segment.opcode.is_header_only() && message_len != 0 {
            return Err(Error::NotSingleSegment);
        }
        let max_payload = usize::from(max_ulpdu).saturating_sub(header_len);
        if usize::from(max_ulpdu) < header_len || (max_payload == 0 && message_len != 0) {
            return Err(Error::SegmentTooSmall);
        }
        if let Placement::Tagged { to, .. } = template.segment.placement {
            to.checked_add(u64::from(message_len))
                .ok_or(Error::TaggedOffsetWrap)?;
        }
        Ok(Self {
            segment: template.segment,
            message_len,
            // At most u16::MAX.
            max_payload: max_payload as u32,
            offset: 0,
            done: false,
        })
    }
}

impl Iterator for Segmenter {
    type Item = Segment;

    fn next(&mut self) -> Option<Segment> {
        if self.done {
            return None;
        }
        let left = self.message_len.checked_sub(self.offset)?;
        let len = left.min(self.max_payload);
        let last = len == left;
        let mut segment = self.segment;
        segment.last = last;
        segment.placement = match segment.placement {
            Placement::Tagged { stag, to } => {
                // Checked against the whole message in `new`.
                Placement::Tagged {
                    stag,
                    to: to.checked_add(u64::from(self.offset))?,
                }
            }
            Placement::Untagged {
                inval_stag,
                queue,
                msn,
                ..
            } => Placement::Untagged {
                inval_stag,
                queue,
                msn,
                mo: self.offset,
            },
        };
        let next = Segment {
            segment,
            offset: self.offset,
            len,
        };
        self.offset = self.offset.checked_add(len)?;
        self.done = last;
        Some(next)
    }
}

#[cfg(test)]
mod tests {
    use super::super::crc::SoftCrc32c;
    use super::super::rdmap::ReadRequest;
    use super::*;
    use std::vec::Vec;

    fn send(msn: u32) -> FpduHeader {
        FpduHeader::new(SegmentHeader {
            opcode: Opcode::Send,
            last: true,
            placement: Placement::Untagged {
                inval_stag: 0,
                queue: 0,
                msn,
                mo: 0,
            },
        })
    }

    /// An FPDU whose payload the caller sends itself, header and trailer written
    /// apart, is the same on the wire as one built whole.
    #[test]
    fn payload_sent_elsewhere_matches_whole_fpdu() {
        let payload: Vec<u8> = (0..1001u32).map(|i| (i * 7) as u8).collect();
        for crc in [false, true] {
            let mut whole = [0u8; 2048];
            let n = encode_fpdu::<SoftCrc32c>(&send(5), &payload, crc, &mut whole).unwrap();
            let mut head = [0u8; MAX_FRAME_HEADER_LEN];
            let (mut w, h) =
                FpduWriter::<SoftCrc32c>::begin(&send(5), payload.len(), crc, &mut head).unwrap();
            let (a, b) = payload.split_at(300);
            w.payload(a).unwrap();
            let fed = w.payload_elsewhere(b.len(), |r| Some(SoftCrc32c::update(r, b)));
            assert_eq!(fed, Ok(Some(())));
            let mut tail = [0u8; MAX_TRAILER_LEN];
            let t = w.finish(&mut tail).unwrap();
            let mut built = head[..h].to_vec();
            built.extend_from_slice(&payload);
            built.extend_from_slice(&tail[..t]);
            assert_eq!(&whole[..n], &built[..]);
        }
    }

    /// A failed CRC update or too many bytes leave the writer unfinishable.
    #[test]
    fn payload_elsewhere_refuses() {
        let mut head = [0u8; MAX_FRAME_HEADER_LEN];
        let (mut w, _) = FpduWriter::<SoftCrc32c>::begin(&send(1), 8, true, &mut head).unwrap();
        assert_eq!(
            w.payload_elsewhere(9, |r| Some(r)),
            Err(Error::LengthMismatch)
        );
        assert_eq!(w.payload_elsewhere(8, |_| None), Ok(None));
        let mut tail = [0u8; MAX_TRAILER_LEN];
        assert_eq!(w.finish(&mut tail), Err(Error::LengthMismatch));
    }

    #[test]
    fn pads() {
        assert_eq!(pad_len(18), 0);
        assert_eq!(pad_len(19), 3);
        assert_eq!(pad_len(20), 2);
        assert_eq!(pad_len(21), 1);
        assert_eq!(pad_len(u16::MAX), 3);
        assert_eq!(fpdu_len(18), 24);
        assert_eq!(max_ulpdu_for_mss(1448), 1442);
        assert_eq!(max_ulpdu_for_mss(1450), 1442);
        assert_eq!(max_ulpdu_for_mss(1 << 20), u16::MAX);
    }

    // A Send of "abc", MSN 1, built by hand from RFC 5044/5041/5040 layouts.
    const SEND_ABC: [u8; 28] = [
        0x00, 0x15, // ULPDU length 21 = 18 + 3
        0x41, 0x43, // T=0 L=1 DV=1 | RV=1 Send
        0, 0, 0, 0, // reserved (invalidate STag)
        0, 0, 0, 0, // QN 0
        0, 0, 0, 1, // MSN 1
        0, 0, 0, 0, // MO 0
        b'a', b'b', b'c', 0x00, // payload, 1 pad byte
        0, 0, 0, 0, // CRC placeholder
    ];

    #[test]
    fn send_matches_hand_built_bytes() {
        let mut out = [0u8; 64];
        let n = encode_fpdu::<SoftCrc32c>(&send(1), b"abc", false, &mut out).unwrap();
        assert_eq!(&out[..n], &SEND_ABC);
        let n = encode_fpdu::<SoftCrc32c>(&send(1), b"abc", true, &mut out).unwrap();
        let crc = super::super::crc::crc32c::<SoftCrc32c>(&SEND_ABC[..24]);
        assert_eq!(&out[24..n], &crc.to_le_bytes());
        let fpdu = decode_fpdu::<SoftCrc32c>(&out[..n], true, 1000).unwrap();
        assert_eq!(fpdu.header, send(1));
        assert_eq!(fpdu.payload, b"abc");
        out[21] ^= 1;
        assert!(matches!(
            decode_fpdu::<SoftCrc32c>(&out[..n], true, 1000),
            Err(Error::CrcMismatch { .. })
        ));
    }

    #[test]
    fn read_request_layout() {
        let header = FpduHeader {
            segment: SegmentHeader {
                opcode: Opcode::ReadRequest,
                last: true,
                placement: Placement::Untagged {
                    inval_stag: 0,
                    queue: 1,
                    msn: 1,
                    mo: 0,
                },
            },
            rdmap: RdmapHeader::ReadRequest(ReadRequest {
                sink_stag: 0x1122_3344,
                sink_to: 0x0102_0304_0506_0708,
                size: 0x1000,
                source_stag: 0x5566_7788,
                source_to: 0x1112_1314_1516_1718,
            }),
        };
        let mut out = [0u8; 64];
        let n = encode_fpdu::<SoftCrc32c>(&header, &[], false, &mut out).unwrap();
        #[rustfmt::skip]
        let expect: [u8; 52] = [
            0x00, 0x2e, 0x41, 0x41, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0,
            0x11, 0x22, 0x33, 0x44, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0x10, 0,
            0x55, 0x66, 0x77, 0x88, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,
            0, 0, 0, 0,
        ];
        assert_eq!(&out[..n], &expect);
        assert_eq!(
            decode_fpdu::<SoftCrc32c>(&expect, false, 100)
                .unwrap()
                .header,
            header
        );
    }

    #[test]
    fn segments_a_write() {
        let template = FpduHeader::new(SegmentHeader {
            opcode: Opcode::RdmaWrite,
            last: false,
            placement: Placement::Tagged { stag: 7, to: 1000 },
        });
        let segs: [Option<Segment>; 4] = {
            let mut s = Segmenter::new(&template, 250, 14 + 100).unwrap();
            [s.next(), s.next(), s.next(), s.next()]
        };
        let lens: [Option<(u32, u32, bool)>; 4] =
            segs.map(|s| s.map(|s| (s.offset, s.len, s.segment.last)));
        assert_eq!(
            lens,
            [
                Some((0, 100, false)),
                Some((100, 100, false)),
                Some((200, 50, true)),
                None
            ]
        );
        assert_eq!(
            segs[2].unwrap().segment.placement,
            Placement::Tagged { stag: 7, to: 1200 }
        );
        let mut empty = Segmenter::new(&template, 0, 14).unwrap();
        assert_eq!(
            empty.next().map(|s| (s.len, s.segment.last)),
            Some((0, true))
        );
        assert!(empty.next().is_none());
        assert_eq!(
            Segmenter::new(&template, 1, 14).err(),
            Some(Error::SegmentTooSmall)
        );
    }
}
