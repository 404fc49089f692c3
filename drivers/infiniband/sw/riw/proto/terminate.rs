// SPDX-License-Identifier: GPL-2.0

//! Terminate messages (RFC 5040 §4.8) and their error causes (RFC 5040 §7,
//! RFC 5041 §7, RFC 5044 §8, RFC 6581 §9).
//!
//! Wire layout of the RDMAP part, after the untagged DDP header (queue 2):
//!
//! ```text
//!  0       4       8               16 17 18 19                     31
//! +-------+-------+---------------+--+--+--+-------------------------+
//! | Layer | EType |  Error Code   |M |D |R |   Reserved (zero)       |
//! +-------+-------+---------------+--+--+--+-------------------------+
//! | DDP Segment Length (16)  |  Terminated DDP header (14 or 18) ... |
//! +--------------------------+                                       |
//! | ... Terminated RDMAP header (Read Request 28, Atomic Request 52) |
//! +------------------------------------------------------------------+
//! ```
//!
//! The segment length field is present whenever any of M, D or R is set
//! (this is what Linux siw emits); M says whether its value is meaningful.

use super::ddp::{TAGGED_HEADER_LEN, UNTAGGED_HEADER_LEN};
use super::rdmap::Opcode;
use super::wire::{Reader, Writer};
use super::Error;

/// Protocol layer that detected an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Layer {
    /// RDMAP (RFC 5040).
    Rdmap = 0,
    /// DDP (RFC 5041).
    Ddp = 1,
    /// The lower layer protocol: MPA over TCP (RFC 5044).
    Llp = 2,
}

/// The (layer, error type, error code) triple a Terminate carries.
///
/// Values read from the wire are kept as they are, so an undefined cause from
/// a peer still round-trips; the named constants cover every cause the RFCs
/// define.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TermCause {
    layer: u8,
    etype: u8,
    code: u8,
}

macro_rules! causes {
    ($($(#[$doc:meta])* $name:ident = ($layer:ident, $etype:expr, $code:expr);)*) => {
        impl TermCause {
            $($(#[$doc])* pub const $name: Self = Self::new(Layer::$layer, $etype, $code);)*
        }
    };
}

causes! {
    /// RDMAP: local catastrophic error.
    RDMAP_LOCAL_CATASTROPHIC = (Rdmap, 0, 0x00);
    /// RDMAP remote protection: invalid STag.
    RDMAP_INVALID_STAG = (Rdmap, 1, 0x00);
    /// RDMAP remote protection: base or bounds violation.
    RDMAP_BASE_BOUNDS = (Rdmap, 1, 0x01);
    /// RDMAP remote protection: access rights violation.
    RDMAP_ACCESS_RIGHTS = (Rdmap, 1, 0x02);
    /// RDMAP remote protection: STag not associated with this stream.
    RDMAP_STAG_NOT_ASSOCIATED = (Rdmap, 1, 0x03);
    /// RDMAP remote protection: tagged offset wrap.
    RDMAP_TO_WRAP = (Rdmap, 1, 0x04);
    /// RDMAP remote protection: STag cannot be invalidated.
    RDMAP_PROTECTION_CANNOT_INVALIDATE = (Rdmap, 1, 0x09);
    /// RDMAP remote protection: unspecified.
    RDMAP_PROTECTION_UNSPECIFIED = (Rdmap, 1, 0xff);
    /// RDMAP remote operation: invalid RDMAP version.
    RDMAP_INVALID_VERSION = (Rdmap, 2, 0x05);
    /// RDMAP remote operation: unexpected opcode.
    RDMAP_UNEXPECTED_OPCODE = (Rdmap, 2, 0x06);
    /// RDMAP remote operation: catastrophic error localised to this stream.
    RDMAP_CATASTROPHIC_STREAM = (Rdmap, 2, 0x07);
    /// RDMAP remote operation: catastrophic error, global.
    RDMAP_CATASTROPHIC_GLOBAL = (Rdmap, 2, 0x08);
    /// RDMAP remote operation: STag cannot be invalidated.
    RDMAP_OPERATION_CANNOT_INVALIDATE = (Rdmap, 2, 0x09);
    /// RDMAP remote operation: unspecified.
    RDMAP_REMOTE_OPERATION_UNSPECIFIED = (Rdmap, 2, 0xff);
    /// DDP: local catastrophic error.
    DDP_LOCAL_CATASTROPHIC = (Ddp, 0, 0x00);
    /// DDP tagged buffer: invalid STag.
    DDP_TAGGED_INVALID_STAG = (Ddp, 1, 0x00);
    /// DDP tagged buffer: base or bounds violation.
    DDP_TAGGED_BASE_BOUNDS = (Ddp, 1, 0x01);
    /// DDP tagged buffer: STag not associated with this stream.
    DDP_TAGGED_STAG_NOT_ASSOCIATED = (Ddp, 1, 0x02);
    /// DDP tagged buffer: tagged offset wrap.
    DDP_TAGGED_TO_WRAP = (Ddp, 1, 0x03);
    /// DDP tagged buffer: invalid DDP version.
    DDP_TAGGED_INVALID_VERSION = (Ddp, 1, 0x04);
    /// DDP untagged buffer: invalid queue number.
    DDP_UNTAGGED_INVALID_QN = (Ddp, 2, 0x01);
    /// DDP untagged buffer: invalid MSN, no buffer available.
    DDP_UNTAGGED_NO_BUFFER = (Ddp, 2, 0x02);
    /// DDP untagged buffer: invalid MSN, out of range.
    DDP_UNTAGGED_MSN_RANGE = (Ddp, 2, 0x03);
    /// DDP untagged buffer: invalid message offset.
    DDP_UNTAGGED_INVALID_MO = (Ddp, 2, 0x04);
    /// DDP untagged buffer: message too long for the available buffer.
    DDP_UNTAGGED_MESSAGE_TOO_LONG = (Ddp, 2, 0x05);
    /// DDP untagged buffer: invalid DDP version.
    DDP_UNTAGGED_INVALID_VERSION = (Ddp, 2, 0x06);
    /// MPA: TCP connection closed, terminated or lost.
    MPA_TCP_LOST = (Llp, 0, 0x01);
    /// MPA: received CRC error.
    MPA_CRC = (Llp, 0, 0x02);
    /// MPA: marker and ULPDU length disagree on the FPDU start; riw uses it
    /// for any ULPDU length that loses FPDU alignment.
    MPA_FPDU_START = (Llp, 0, 0x03);
    /// MPA: invalid request or reply frame.
    MPA_INVALID_REQUEST_REPLY = (Llp, 0, 0x04);
    /// MPA (RFC 6581): local catastrophic error.
    MPA_LOCAL_CATASTROPHIC = (Llp, 0, 0x05);
    /// MPA (RFC 6581): insufficient IRD resources.
    MPA_INSUFFICIENT_IRD = (Llp, 0, 0x06);
    /// MPA (RFC 6581): no matching ready-to-receive message type.
    MPA_NO_MATCHING_RTR = (Llp, 0, 0x07);
}

impl TermCause {
    /// Builds a cause; `etype` is truncated to its 4-bit field.
    pub const fn new(layer: Layer, etype: u8, code: u8) -> Self {
        Self {
            layer: layer as u8,
            etype: etype & 0xf,
            code,
        }
    }

    /// The layer, if it is one the RFCs define.
    pub const fn layer(&self) -> Option<Layer> {
        match self.layer {
            0 => Some(Layer::Rdmap),
            1 => Some(Layer::Ddp),
            2 => Some(Layer::Llp),
            _ => None,
        }
    }

    /// The raw 4-bit layer field.
    pub const fn layer_bits(&self) -> u8 {
        self.layer
    }

    /// The 4-bit error type.
    pub const fn etype(&self) -> u8 {
        self.etype
    }

    /// The 8-bit error code.
    pub const fn code(&self) -> u8 {
        self.code
    }

    /// Whether the peer should copy the faulting segment's headers into the
    /// Terminate: DDP errors and non-catastrophic RDMAP errors.
    pub const fn reports_headers(&self) -> bool {
        matches!((self.layer, self.etype), (1, _) | (0, 1) | (0, 2))
    }
}

/// Longest RDMAP header a Terminate may copy (an Atomic Request).
pub const MAX_COPIED_RDMAP_HEADER: usize = 52;
/// Longest Terminate-specific part: control word, segment length, the
/// largest DDP header and the largest RDMAP header.
pub const MAX_TERMINATE_LEN: usize = 4 + 2 + UNTAGGED_HEADER_LEN + MAX_COPIED_RDMAP_HEADER;

const FLAG_M: u32 = 1 << 15;
const FLAG_D: u32 = 1 << 14;
const FLAG_R: u32 = 1 << 13;
const RESERVED: u32 = (1 << 13) - 1;

/// A header copied into a Terminate, kept as raw bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopiedHeader {
    bytes: [u8; MAX_COPIED_RDMAP_HEADER],
    len: u8,
}

impl CopiedHeader {
    fn new(src: &[u8]) -> Result<Self, Error> {
        let mut bytes = [0; MAX_COPIED_RDMAP_HEADER];
        let dst = bytes
            .get_mut(..src.len())
            .ok_or(Error::TerminateMalformed)?;
        dst.copy_from_slice(src);
        // `src.len() <= 52` was just checked.
        Ok(Self {
            bytes,
            len: src.len() as u8,
        })
    }

    /// The copied bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..usize::from(self.len)).unwrap_or(&[])
    }
}

/// The RDMAP part of a Terminate message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Terminate {
    /// What went wrong, and where.
    pub cause: TermCause,
    /// Length of the faulting DDP segment, when known (the M flag).
    pub segment_len: Option<u16>,
    /// The faulting segment's DDP header (the D flag).
    pub ddp_header: Option<CopiedHeader>,
    /// The faulting message's RDMAP header (the R flag); empty for opcodes
    /// whose RDMAP header is only the control byte.
    pub rdmap_header: Option<CopiedHeader>,
}

/// Length of the RDMAP header following a DDP header whose first two bytes
/// are `control` (used to size copied headers).
fn copied_rdmap_len(control: [u8; 2]) -> usize {
    match Opcode::from_wire(control[1] & 0xf) {
        Some(Opcode::ReadRequest) => 28,
        Some(Opcode::AtomicRequest) => 52,
        _ => 0,
    }
}

fn ddp_header_len(first: u8) -> usize {
    if first & 0x80 != 0 {
        TAGGED_HEADER_LEN
    } else {
        UNTAGGED_HEADER_LEN
    }
}

impl Terminate {
    /// A Terminate that copies no headers.
    pub const fn new(cause: TermCause) -> Self {
        Self {
            cause,
            segment_len: None,
            ddp_header: None,
            rdmap_header: None,
        }
    }

    /// A Terminate about a received segment whose raw DDP/RDMAP header is
    /// `header` (as returned by the stream parser) and whose ULPDU length was
    /// `segment_len`. Copies what [`TermCause::reports_headers`] asks for;
    /// the RDMAP header only for RDMAP-layer causes.
    pub fn about_segment(cause: TermCause, segment_len: u16, header: &[u8]) -> Self {
        if !cause.reports_headers() {
            return Self::new(cause);
        }
        let copy = || -> Result<Self, Error> {
            let control = *header.first_chunk::<2>().ok_or(Error::Truncated)?;
            let ddp_len = ddp_header_len(control[0]);
            let (ddp, rest) = header.split_at_checked(ddp_len).ok_or(Error::Truncated)?;
            let rdmap_header = if cause.layer() == Some(Layer::Rdmap) {
                let rdmap = rest
                    .get(..copied_rdmap_len(control))
                    .ok_or(Error::Truncated)?;
                Some(CopiedHeader::new(rdmap)?)
            } else {
                None
            };
            Ok(Self {
                cause,
                segment_len: Some(segment_len),
                ddp_header: Some(CopiedHeader::new(ddp)?),
                rdmap_header,
            })
        };
        // A header too short to copy (e.g. the error hit before it arrived)
        // is simply not reported.
        copy().unwrap_or(Self::new(cause))
    }

    /// Encoded length of the RDMAP part.
    pub fn encoded_len(&self) -> usize {
        let copied = self.ddp_header.map_or(0, |h| h.as_bytes().len())
            + self.rdmap_header.map_or(0, |h| h.as_bytes().len());
        let has_len =
            self.segment_len.is_some() || self.ddp_header.is_some() || self.rdmap_header.is_some();
        4 + if has_len { 2 } else { 0 } + copied
    }

    /// Writes the RDMAP part into `out`, returning its length.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, Error> {
        let mut w = Writer::new(out);
        self.write(&mut w)?;
        Ok(w.written())
    }

    pub(crate) fn write(&self, w: &mut Writer<'_>) -> Result<(), Error> {
        let mut word = u32::from(self.cause.layer & 0xf) << 28
            | u32::from(self.cause.etype & 0xf) << 24
            | u32::from(self.cause.code) << 16;
        if self.segment_len.is_some() {
            word |= FLAG_M;
        }
        if self.ddp_header.is_some() {
            word |= FLAG_D;
        }
        if self.rdmap_header.is_some() {
            word |= FLAG_R;
        }
        w.u32(word)?;
        if word & (FLAG_M | FLAG_D | FLAG_R) != 0 {
            w.u16(self.segment_len.unwrap_or(0))?;
        }
        if let Some(h) = &self.ddp_header {
            w.put(h.as_bytes())?;
        }
        if let Some(h) = &self.rdmap_header {
            w.put(h.as_bytes())?;
        }
        Ok(())
    }

    /// Parses the RDMAP part of a Terminate, which must span all of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self, Error> {
        let malformed = |_| Error::TerminateMalformed;
        let mut r = Reader::new(buf);
        let word = r.u32().map_err(malformed)?;
        if word & RESERVED != 0 {
            return Err(Error::TerminateMalformed);
        }
        let cause = TermCause {
            layer: (word >> 28) as u8,
            etype: ((word >> 24) & 0xf) as u8,
            code: (word >> 16) as u8,
        };
        let (m, d, rflag) = (word & FLAG_M != 0, word & FLAG_D != 0, word & FLAG_R != 0);
        let mut term = Self::new(cause);
        if m || d || rflag {
            let len = r.u16().map_err(malformed)?;
            if !m && len != 0 {
                return Err(Error::TerminateMalformed);
            }
            term.segment_len = m.then_some(len);
        }
        // The RDMAP header's length depends on the copied DDP header's opcode.
        if rflag && !d {
            return Err(Error::TerminateMalformed);
        }
        if d {
            let rest = r.remaining();
            let control = *rest.first_chunk::<2>().ok_or(Error::TerminateMalformed)?;
            let ddp = r.bytes(ddp_header_len(control[0])).map_err(malformed)?;
            term.ddp_header = Some(CopiedHeader::new(ddp)?);
            if rflag {
                let rdmap = r.bytes(copied_rdmap_len(control)).map_err(malformed)?;
                term.rdmap_header = Some(CopiedHeader::new(rdmap)?);
            }
        }
        if !r.remaining().is_empty() {
            return Err(Error::TerminateMalformed);
        }
        Ok(term)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_terminate_layout() {
        // LLP / MPA / CRC error, no headers: 0x2002_0000.
        let t = Terminate::new(TermCause::MPA_CRC);
        let mut buf = [0u8; 8];
        assert_eq!(t.encode(&mut buf), Ok(4));
        assert_eq!(&buf[..4], &[0x20, 0x02, 0x00, 0x00]);
        assert_eq!(Terminate::parse(&buf[..4]), Ok(t));
    }

    #[test]
    fn copies_read_request_headers() {
        // Untagged DDP header of a Read Request (L=1, DV=1, RV=1, opcode 1).
        let mut hdr = [0u8; 18 + 28];
        hdr[0] = 0x41;
        hdr[1] = 0x41;
        hdr[9] = 1; // queue 1
        hdr[13] = 1; // MSN 1
        for (i, b) in hdr[18..].iter_mut().enumerate() {
            *b = i as u8;
        }
        let t = Terminate::about_segment(TermCause::RDMAP_INVALID_STAG, 46, &hdr);
        assert_eq!(t.ddp_header.unwrap().as_bytes(), &hdr[..18]);
        assert_eq!(t.rdmap_header.unwrap().as_bytes(), &hdr[18..]);
        let mut buf = [0u8; MAX_TERMINATE_LEN];
        let n = t.encode(&mut buf).unwrap();
        assert_eq!(n, 4 + 2 + 18 + 28);
        // Layer 0, type 1, code 0, M|D|R.
        assert_eq!(&buf[..6], &[0x01, 0x00, 0xe0, 0x00, 0x00, 46]);
        assert_eq!(Terminate::parse(&buf[..n]), Ok(t));
    }

    #[test]
    fn ddp_error_copies_only_ddp_header() {
        let hdr = [0xc1, 0x40, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0x10, 0];
        let t = Terminate::about_segment(TermCause::DDP_TAGGED_INVALID_STAG, 100, &hdr);
        assert_eq!(t.ddp_header.unwrap().as_bytes(), &hdr);
        assert!(t.rdmap_header.is_none());
        let mut buf = [0u8; MAX_TERMINATE_LEN];
        let n = t.encode(&mut buf).unwrap();
        assert_eq!(&buf[..4], &[0x11, 0x00, 0xc0, 0x00]);
        assert_eq!(Terminate::parse(&buf[..n]), Ok(t));
    }

    #[test]
    fn rejects_malformed() {
        assert_eq!(Terminate::parse(&[0, 0, 0]), Err(Error::TerminateMalformed));
        // Reserved bit set.
        assert_eq!(
            Terminate::parse(&[0, 0, 0, 1]),
            Err(Error::TerminateMalformed)
        );
        // R without D.
        assert_eq!(
            Terminate::parse(&[0, 0, 0x20, 0, 0, 0]),
            Err(Error::TerminateMalformed)
        );
        // D with a short header.
        assert_eq!(
            Terminate::parse(&[0, 0, 0x40, 0, 0, 0, 0x41]),
            Err(Error::TerminateMalformed)
        );
        // Trailing garbage.
        assert_eq!(
            Terminate::parse(&[0, 0, 0, 0, 9]),
            Err(Error::TerminateMalformed)
        );
    }
}
