// SPDX-License-Identifier: GPL-2.0

//! MPA connection setup: request/reply frames (RFC 5044 §7.1), the enhanced
//! connection establishment of MPA revision 2 (RFC 6581), an incremental
//! frame parser and the negotiation rules.
//!
//! ```text
//! | Key (16): "MPA ID Req Frame" or "MPA ID Rep Frame"                  |
//! |M|C|R|E| Res | Rev (8) | PD_Length (16)                              |
//! revision 2 with E set: private data starts with
//! |P|S|  IRD (14)  |W|Rd|  ORD (14)  |
//! | private data (PD_Length bytes in all, at most 512)                  |
//! ```
//!
//! M: markers, C: CRC, R: reject. E ("enhanced") is the bit Linux siw and
//! iw_cxgb4 set on revision 2 frames that carry the IRD/ORD words, and
//! require before reading them. P: peer-to-peer mode; S, W, Rd: the
//! ready-to-receive message types, a zero-length Send, RDMA Write or RDMA
//! Read Request. L (0x08 of the flags, "Res" in RFC 5044) is the bit Linux siw
//! calls its GSO flag: the sender takes FPDUs larger than one TCP segment, and
//! sends them if the other side sets it too. Implementations that do not know
//! it ignore it, as RFC 5044 asks of reserved bits. Other reserved bits are
//! sent as zero and ignored.

use super::wire::{Reader, Writer};
use super::Error;

/// Key that starts an MPA request frame.
pub const MPA_KEY_REQUEST: [u8; 16] = *b"MPA ID Req Frame";
/// Key that starts an MPA reply frame.
pub const MPA_KEY_REPLY: [u8; 16] = *b"MPA ID Rep Frame";
/// Length of a request/reply frame without private data.
pub const MPA_HEADER_LEN: usize = 20;
/// Most private data a frame may carry, IRD/ORD words included.
pub const MPA_MAX_PRIVATE_DATA: usize = 512;
/// Length of the revision 2 IRD/ORD words.
pub const MPA_ENHANCED_LEN: usize = 4;
/// Longest request/reply frame.
pub const MPA_MAX_FRAME_LEN: usize = MPA_HEADER_LEN + MPA_MAX_PRIVATE_DATA;
/// Largest IRD or ORD the 14-bit fields hold.
pub const MPA_MAX_IRD_ORD: u16 = 0x3fff;

const FLAG_MARKERS: u8 = 0x80;
const FLAG_CRC: u8 = 0x40;
const FLAG_REJECT: u8 = 0x20;
const FLAG_ENHANCED: u8 = 0x10;
const FLAG_LARGE_FPDUS: u8 = 0x08;
const IRD_PEER_TO_PEER: u16 = 0x8000;
const IRD_RTR_SEND: u16 = 0x4000;
const ORD_RTR_WRITE: u16 = 0x8000;
const ORD_RTR_READ: u16 = 0x4000;

/// Which of the two frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameKind {
    /// Sent by the initiator.
    Request,
    /// Sent by the responder, accepting or rejecting.
    Reply,
}

impl FrameKind {
    /// The frame's key.
    pub const fn key(self) -> &'static [u8; 16] {
        match self {
            Self::Request => &MPA_KEY_REQUEST,
            Self::Reply => &MPA_KEY_REPLY,
        }
    }
}

/// MPA revision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum MpaRevision {
    /// RFC 5044.
    V1 = 1,
    /// RFC 6581 enhanced connection establishment.
    V2 = 2,
}

/// A ready-to-receive message type of peer-to-peer mode: the zero-length
/// message the initiator sends first so the responder may start sending.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RtrMode {
    /// Zero-length RDMA Write.
    Write,
    /// Zero-length RDMA Read Request.
    Read,
    /// Zero-length Send.
    Send,
}

/// A set of [`RtrMode`]s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RtrModes {
    /// Zero-length RDMA Write.
    pub write: bool,
    /// Zero-length RDMA Read Request.
    pub read: bool,
    /// Zero-length Send.
    pub send: bool,
}

impl RtrModes {
    /// No mode.
    pub const NONE: Self = Self {
        write: false,
        read: false,
        send: false,
    };
    /// Every mode.
    pub const ALL: Self = Self {
        write: true,
        read: true,
        send: true,
    };

    /// The set holding only `mode`.
    pub const fn only(mode: RtrMode) -> Self {
        Self {
            write: matches!(mode, RtrMode::Write),
            read: matches!(mode, RtrMode::Read),
            send: matches!(mode, RtrMode::Send),
        }
    }

    /// Modes in both sets.
    pub const fn intersect(self, other: Self) -> Self {
        Self {
            write: self.write && other.write,
            read: self.read && other.read,
            send: self.send && other.send,
        }
    }

    /// The mode to use from this set: Write, else Read, else Send. Write is
    /// preferred because it needs neither a posted receive nor a responder
    /// read resource.
    pub const fn preferred(self) -> Option<RtrMode> {
        if self.write {
            Some(RtrMode::Write)
        } else if self.read {
            Some(RtrMode::Read)
        } else if self.send {
            Some(RtrMode::Send)
        } else {
            None
        }
    }
}

/// The revision 2 IRD/ORD words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EnhancedParams {
    /// Inbound RDMA Read queue depth of the sender (14 bits).
    pub ird: u16,
    /// Outbound RDMA Read queue depth of the sender (14 bits).
    pub ord: u16,
    /// Peer-to-peer mode: a ready-to-receive message follows the reply.
    pub peer_to_peer: bool,
    /// Ready-to-receive types offered (request) or chosen (reply).
    pub rtr: RtrModes,
}

impl EnhancedParams {
    fn to_bytes(self) -> Result<[u8; 4], Error> {
        if self.ird > MPA_MAX_IRD_ORD || self.ord > MPA_MAX_IRD_ORD {
            return Err(Error::IrdOrdTooLarge);
        }
        let bit = |on: bool, mask: u16| if on { mask } else { 0 };
        let ird =
            self.ird | bit(self.peer_to_peer, IRD_PEER_TO_PEER) | bit(self.rtr.send, IRD_RTR_SEND);
        let ord = self.ord | bit(self.rtr.write, ORD_RTR_WRITE) | bit(self.rtr.read, ORD_RTR_READ);
        let [a, b] = ird.to_be_bytes();
        let [c, d] = ord.to_be_bytes();
        Ok([a, b, c, d])
    }

    fn from_bytes(bytes: [u8; 4]) -> Self {
        let [a, b, c, d] = bytes;
        let ird = u16::from_be_bytes([a, b]);
        let ord = u16::from_be_bytes([c, d]);
        Self {
            ird: ird & MPA_MAX_IRD_ORD,
            ord: ord & MPA_MAX_IRD_ORD,
            peer_to_peer: ird & IRD_PEER_TO_PEER != 0,
            rtr: RtrModes {
                write: ord & ORD_RTR_WRITE != 0,
                read: ord & ORD_RTR_READ != 0,
                send: ird & IRD_RTR_SEND != 0,
            },
        }
    }
}

/// An MPA request or reply frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MpaFrame<'a> {
    /// Request or reply.
    pub kind: FrameKind,
    /// The sender wants markers on the FPDUs it receives.
    pub markers: bool,
    /// The sender wants CRCs (request) or CRCs are on (reply).
    pub crc: bool,
    /// The responder rejects the connection (replies only).
    pub reject: bool,
    /// The sender takes FPDUs larger than one TCP segment (request), or both
    /// sides may send them (reply).
    pub large_fpdus: bool,
    /// Revision.
    pub revision: MpaRevision,
    /// The IRD/ORD words, sent with the enhanced flag in revision 2.
    pub enhanced: Option<EnhancedParams>,
    /// Private data for the ULP, after any IRD/ORD words.
    pub private_data: &'a [u8],
}

/// Fixed-size part of a frame, validated.
struct FrameHeader {
    markers: bool,
    crc: bool,
    reject: bool,
    large_fpdus: bool,
    enhanced: bool,
    revision: MpaRevision,
    pd_len: usize,
}

/// Checks as much of the key as has arrived.
fn check_key(kind: FrameKind, received: &[u8]) -> Result<(), Error> {
    let key = kind.key();
    match key.get(..received.len().min(key.len())) {
        Some(want) if received.starts_with(want) => Ok(()),
        _ => Err(Error::MpaKeyMismatch { expected: kind }),
    }
}

impl FrameHeader {
    fn parse(kind: FrameKind, bytes: &[u8; MPA_HEADER_LEN]) -> Result<Self, Error> {
        check_key(kind, bytes)?;
        let mut r = Reader::new(bytes);
        r.array::<16>()?;
        let flags = r.u8()?;
        let revision = match r.u8()? {
            1 => MpaRevision::V1,
            2 => MpaRevision::V2,
            other => return Err(Error::MpaUnsupportedRevision(other)),
        };
        let pd_len = usize::from(r.u16()?);
        if pd_len > MPA_MAX_PRIVATE_DATA {
            return Err(Error::MpaPrivateDataTooLong(pd_len));
        }
        let reject = flags & FLAG_REJECT != 0;
        if reject && kind == FrameKind::Request {
            return Err(Error::MpaRejectInRequest);
        }
        let enhanced = revision == MpaRevision::V2 && flags & FLAG_ENHANCED != 0;
        if enhanced && pd_len < MPA_ENHANCED_LEN {
            return Err(Error::MpaEnhancedDataMissing);
        }
        Ok(Self {
            markers: flags & FLAG_MARKERS != 0,
            crc: flags & FLAG_CRC != 0,
            reject,
            large_fpdus: flags & FLAG_LARGE_FPDUS != 0,
            enhanced,
            revision,
            pd_len,
        })
    }

    /// Builds the frame once `pd` (exactly `pd_len` bytes) is available.
    fn frame<'a>(&self, kind: FrameKind, pd: &'a [u8]) -> Result<MpaFrame<'a>, Error> {
        let mut r = Reader::new(pd);
        let enhanced = if self.enhanced {
            Some(EnhancedParams::from_bytes(r.array()?))
        } else {
            None
        };
        Ok(MpaFrame {
            kind,
            markers: self.markers,
            crc: self.crc,
            reject: self.reject,
            large_fpdus: self.large_fpdus,
            revision: self.revision,
            enhanced,
            private_data: r.remaining(),
        })
    }
}

impl<'a> MpaFrame<'a> {
    /// Checks that this is a `kind` frame, not a reject (else `on_reject`), and that it
    /// does not ask for markers, which riw never uses.
    fn expect(&self, kind: FrameKind, on_reject: Error) -> Result<(), Error> {
        if self.kind != kind {
            return Err(Error::MpaKeyMismatch { expected: kind });
        }
        if self.reject {
            return Err(on_reject);
        }
        if self.markers {
            return Err(Error::MpaMarkersRequested);
        }
        Ok(())
    }

    /// Total private data length on the wire, IRD/ORD words included.
    pub fn pd_len(&self) -> usize {
        self.private_data.len()
            + if self.enhanced.is_some() {
                MPA_ENHANCED_LEN
            } else {
                0
            }
    }

    /// Encoded length.
    pub fn encoded_len(&self) -> usize {
        MPA_HEADER_LEN + self.pd_len()
    }

    /// Writes the frame into `out`, returning its length.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, Error> {
        let pd_len = self.pd_len();
        if pd_len > MPA_MAX_PRIVATE_DATA {
            return Err(Error::MpaPrivateDataTooLong(pd_len));
        }
        if self.enhanced.is_some() && self.revision != MpaRevision::V2 {
            return Err(Error::MpaRevisionMismatch {
                requested: 2,
                replied: self.revision as u8,
            });
        }
        if self.reject && self.kind == FrameKind::Request {
            return Err(Error::MpaRejectInRequest);
        }
        let mut flags = 0;
        for (on, bit) in [
            (self.markers, FLAG_MARKERS),
            (self.crc, FLAG_CRC),
            (self.reject, FLAG_REJECT),
            (self.enhanced.is_some(), FLAG_ENHANCED),
            (self.large_fpdus, FLAG_LARGE_FPDUS),
        ] {
            if on {
                flags |= bit;
            }
        }
        let mut w = Writer::new(out);
        w.put(self.kind.key())?;
        w.u8(flags)?;
        w.u8(self.revision as u8)?;
        // At most 512, checked above.
        w.u16(pd_len as u16)?;
        if let Some(e) = self.enhanced {
            w.put(&e.to_bytes()?)?;
        }
        w.put(self.private_data)?;
        Ok(w.written())
    }

    /// Parses a complete frame of `kind` at the start of `buf`, returning it
    /// and the bytes it occupies; `Err(Truncated)` if `buf` ends early.
    pub fn decode(buf: &'a [u8], kind: FrameKind) -> Result<(Self, usize), Error> {
        let Some(header) = buf.first_chunk::<MPA_HEADER_LEN>() else {
            check_key(kind, buf)?;
            return Err(Error::Truncated);
        };
        let header = FrameHeader::parse(kind, header)?;
        let len = MPA_HEADER_LEN + header.pd_len;
        let pd = buf.get(MPA_HEADER_LEN..len).ok_or(Error::Truncated)?;
        Ok((header.frame(kind, pd)?, len))
    }
}

/// Progress of an [`MpaFrameParser`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MpaProgress {
    /// Input bytes taken; any rest belongs to the FPDU stream.
    pub consumed: usize,
    /// Whether the frame is complete.
    pub complete: bool,
}

/// Incremental parser for one request or reply frame, fed arbitrary chunks.
///
/// It takes no byte beyond the frame, buffers at most [`MPA_MAX_FRAME_LEN`]
/// bytes, rejects a wrong key as soon as the first differing byte arrives,
/// and is sticky on error.
#[derive(Clone, Debug)]
pub struct MpaFrameParser {
    kind: FrameKind,
    buf: [u8; MPA_MAX_FRAME_LEN],
    have: usize,
    need: usize,
    error: Option<Error>,
}

impl MpaFrameParser {
    /// A parser expecting a frame of `kind`.
    pub const fn new(kind: FrameKind) -> Self {
        Self {
            kind,
            buf: [0; MPA_MAX_FRAME_LEN],
            have: 0,
            need: MPA_HEADER_LEN,
            error: None,
        }
    }

    /// Takes bytes of the frame from the front of `input`.
    pub fn feed(&mut self, input: &[u8]) -> Result<MpaProgress, Error> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let result = self.step(input);
        if let Err(e) = result {
            self.error = Some(e);
        }
        result
    }

    fn step(&mut self, input: &[u8]) -> Result<MpaProgress, Error> {
        let mut consumed = 0;
        loop {
            let want = self.need.saturating_sub(self.have);
            if want == 0 {
                return Ok(MpaProgress {
                    consumed,
                    complete: true,
                });
            }
            let rest = input.get(consumed..).unwrap_or(&[]);
            if rest.is_empty() {
                return Ok(MpaProgress {
                    consumed,
                    complete: false,
                });
            }
            let take = want.min(rest.len());
            let end = self.have.checked_add(take).ok_or(Error::BufferTooSmall)?;
            let dst = self
                .buf
                .get_mut(self.have..end)
                .ok_or(Error::BufferTooSmall)?;
            dst.copy_from_slice(rest.get(..take).unwrap_or(&[]));
            self.have = end;
            consumed += take;
            let received = self.buf.get(..self.have).unwrap_or(&[]);
            check_key(self.kind, received)?;
            if self.have == MPA_HEADER_LEN && self.need == MPA_HEADER_LEN {
                let header = self
                    .buf
                    .first_chunk::<MPA_HEADER_LEN>()
                    .ok_or(Error::Truncated)?;
                self.need = MPA_HEADER_LEN + FrameHeader::parse(self.kind, header)?.pd_len;
            }
        }
    }

    /// Whether the whole frame has arrived.
    pub fn is_complete(&self) -> bool {
        // `need` only grows past the header once the header is validated.
        self.error.is_none() && self.have == self.need && self.have >= MPA_HEADER_LEN
    }

    /// The frame, once complete.
    pub fn frame(&self) -> Option<MpaFrame<'_>> {
        if !self.is_complete() {
            return None;
        }
        MpaFrame::decode(self.buf.get(..self.have)?, self.kind)
            .ok()
            .map(|(f, _)| f)
    }
}

/// Local MPA settings of a connection endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MpaConfig {
    /// Highest revision to speak.
    pub revision: MpaRevision,
    /// Ask for CRC (initiator) or insist on it (responder).
    pub crc: bool,
    /// Inbound RDMA Read depth offered.
    pub ird: u16,
    /// The most inbound RDMA Read depth this side can provide: the IRD is
    /// raised up to it to meet the peer's ORD (relaxed negotiation, as
    /// iw_cxgb4 and siw do), rather than failing the connection.
    pub ird_max: u16,
    /// Outbound RDMA Read depth wanted.
    pub ord: u16,
    /// Initiator: request peer-to-peer mode (revision 2 only).
    pub peer_to_peer: bool,
    /// Ready-to-receive types this side can send (initiator) or accept
    /// (responder).
    pub rtr: RtrModes,
    /// Offer to take FPDUs larger than one TCP segment.
    pub large_fpdus: bool,
}

/// What the MPA exchange settled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Negotiated {
    /// Revision in use.
    pub revision: MpaRevision,
    /// Whether FPDUs carry CRCs, in both directions.
    pub crc: bool,
    /// Whether IRD/ORD were exchanged (revision 2, enhanced).
    pub enhanced: bool,
    /// Inbound RDMA Read depth to provide.
    pub ird: u16,
    /// Outbound RDMA Read depth allowed.
    pub ord: u16,
    /// Peer-to-peer mode: the initiator sends this ready-to-receive message
    /// first, and the responder sends nothing until it arrives.
    pub rtr: Option<RtrMode>,
    /// Initiator: the reply advertised no ready-to-receive type of those
    /// offered. iw_cxgb4 responders reply with their own configured type
    /// whatever was offered, and then expect the one offered: `rtr` is that.
    pub rtr_mismatch: bool,
    /// Both sides take FPDUs larger than one TCP segment.
    pub large_fpdus: bool,
}

impl MpaConfig {
    /// The initiator's request frame.
    pub fn request<'a>(&self, private_data: &'a [u8]) -> MpaFrame<'a> {
        let enhanced = (self.revision == MpaRevision::V2).then_some(EnhancedParams {
            ird: self.ird,
            ord: self.ord,
            peer_to_peer: self.peer_to_peer,
            rtr: if self.peer_to_peer {
                self.rtr
            } else {
                RtrModes::NONE
            },
        });
        MpaFrame {
            kind: FrameKind::Request,
            markers: false,
            crc: self.crc,
            reject: false,
            large_fpdus: self.large_fpdus,
            revision: self.revision,
            enhanced,
            private_data,
        }
    }

    /// Responder: decides on `request`. On success returns the reply to send
    /// and the settled parameters; on error the caller sends
    /// [`MpaConfig::reject`] and closes.
    pub fn respond<'a>(
        &self,
        request: &MpaFrame<'_>,
        private_data: &'a [u8],
    ) -> Result<(MpaFrame<'a>, Negotiated), Error> {
        request.expect(FrameKind::Request, Error::MpaRejectInRequest)?;
        let revision = self.revision.min(request.revision);
        let crc = self.crc || request.crc;
        let large_fpdus = self.large_fpdus && request.large_fpdus;
        let mut settled = Negotiated {
            revision,
            crc,
            enhanced: false,
            ird: self.ird,
            ord: self.ord,
            rtr: None,
            rtr_mismatch: false,
            large_fpdus,
        };
        let mut enhanced = None;
        if let (MpaRevision::V2, Some(theirs)) = (revision, request.enhanced) {
            // Never promise more reads than the peer issues or takes; provide as many
            // as it issues, up to what this side can (relaxed negotiation).
            settled.enhanced = true;
            settled.ird = theirs.ord.min(self.ird.max(self.ird_max));
            settled.ord = self.ord.min(theirs.ird);
            if theirs.peer_to_peer {
                let mode = theirs
                    .rtr
                    .intersect(self.rtr)
                    .preferred()
                    .ok_or(Error::MpaNoMatchingRtr)?;
                settled.rtr = Some(mode);
            }
            enhanced = Some(EnhancedParams {
                ird: settled.ird,
                ord: settled.ord,
                peer_to_peer: settled.rtr.is_some(),
                rtr: settled.rtr.map_or(RtrModes::NONE, RtrModes::only),
            });
        }
        let reply = MpaFrame {
            kind: FrameKind::Reply,
            markers: false,
            crc,
            reject: false,
            large_fpdus,
            revision,
            enhanced,
            private_data,
        };
        Ok((reply, settled))
    }

    /// Responder: a reply rejecting `request`.
    pub fn reject<'a>(&self, request: &MpaFrame<'_>, private_data: &'a [u8]) -> MpaFrame<'a> {
        let revision = self.revision.min(request.revision);
        let enhanced =
            (revision == MpaRevision::V2 && request.enhanced.is_some()).then_some(EnhancedParams {
                ird: self.ird,
                ord: self.ord,
                peer_to_peer: false,
                rtr: RtrModes::NONE,
            });
        MpaFrame {
            kind: FrameKind::Reply,
            markers: false,
            crc: false,
            reject: true,
            large_fpdus: false,
            revision,
            enhanced,
            private_data,
        }
    }

    /// Initiator: checks the peer's `reply` to the request this config sent.
    pub fn complete(&self, reply: &MpaFrame<'_>) -> Result<Negotiated, Error> {
        reply.expect(FrameKind::Reply, Error::MpaRejected)?;
        let mismatch = Error::MpaRevisionMismatch {
            requested: self.revision as u8,
            replied: reply.revision as u8,
        };
        if reply.revision > self.revision {
            return Err(mismatch);
        }
        if self.crc && !reply.crc {
            return Err(Error::MpaCrcMismatch);
        }
        let mut settled = Negotiated {
            revision: reply.revision,
            crc: reply.crc,
            enhanced: false,
            ird: self.ird,
            ord: self.ord,
            rtr: None,
            rtr_mismatch: false,
            large_fpdus: self.large_fpdus && reply.large_fpdus,
        };
        if reply.revision == MpaRevision::V2 {
            // We sent the IRD/ORD words; a revision 2 reply must answer them.
            let theirs = reply.enhanced.ok_or(mismatch)?;
            // An IRD below the responder's ORD is raised as far as this side can.
            if theirs.ord > self.ird.max(self.ird_max) {
                return Err(Error::MpaInsufficientIrd {
                    ird: self.ird.max(self.ird_max),
                    peer_ord: theirs.ord,
                });
            }
            settled.enhanced = true;
            settled.ird = theirs.ord;
            settled.ord = self.ord.min(theirs.ird);
            if self.peer_to_peer && theirs.peer_to_peer {
                let offered = self.rtr.preferred().ok_or(Error::MpaNoMatchingRtr)?;
                // A reply naming none of the types offered (iw_cxgb4's names its own
                // configured type) gets the one offered, which such a responder expects.
                settled.rtr = match theirs.rtr.intersect(self.rtr).preferred() {
                    Some(mode) => Some(mode),
                    None => {
                        settled.rtr_mismatch = true;
                        Some(offered)
                    }
                };
            }
        }
        Ok(settled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A revision 2 request as siw sends it by default: CRC off, enhanced,
    // IRD 0x10, ORD 0x20, no peer-to-peer, private data "hi".
    const REQUEST_V2: [u8; 26] = [
        b'M', b'P', b'A', b' ', b'I', b'D', b' ', b'R', b'e', b'q', b' ', b'F', b'r', b'a', b'm',
        b'e', // key
        0x10, // M=0 C=0 R=0 E=1
        0x02, // revision 2
        0x00, 0x06, // PD_Length: 4 + 2
        0x00, 0x10, // P=0 S=0 IRD 16
        0x00, 0x20, // W=0 Rd=0 ORD 32
        b'h', b'i',
    ];

    fn config() -> MpaConfig {
        MpaConfig {
            revision: MpaRevision::V2,
            crc: false,
            ird: 16,
            ird_max: 16,
            ord: 32,
            peer_to_peer: false,
            rtr: RtrModes::ALL,
            large_fpdus: false,
        }
    }

    #[test]
    fn request_matches_hand_built_bytes() {
        let mut out = [0u8; MPA_MAX_FRAME_LEN];
        let req = config().request(b"hi");
        assert_eq!(req.encode(&mut out), Ok(26));
        assert_eq!(&out[..26], &REQUEST_V2);
        assert_eq!(
            MpaFrame::decode(&REQUEST_V2, FrameKind::Request),
            Ok((req, 26))
        );
    }

    #[test]
    fn incremental_byte_at_a_time() {
        let mut bytes = [0u8; 30];
        bytes[..26].copy_from_slice(&REQUEST_V2);
        bytes[26..].copy_from_slice(&[0x00, 0x12, 0x41, 0x43]);
        let mut p = MpaFrameParser::new(FrameKind::Request);
        let mut at = 0;
        while !p.is_complete() {
            let progress = p.feed(&bytes[at..at + 1]).unwrap();
            at += progress.consumed;
        }
        assert_eq!(at, 26);
        assert_eq!(
            p.feed(&bytes[at..]),
            Ok(MpaProgress {
                consumed: 0,
                complete: true
            })
        );
        assert_eq!(p.frame().unwrap().private_data, b"hi");
    }

    #[test]
    fn wrong_key_fails_early() {
        let mut p = MpaFrameParser::new(FrameKind::Reply);
        assert_eq!(
            p.feed(b"MPA ID Re"),
            Ok(MpaProgress {
                consumed: 9,
                complete: false
            })
        );
        let err = Err(Error::MpaKeyMismatch {
            expected: FrameKind::Reply,
        });
        assert_eq!(p.feed(b"q"), err);
        assert_eq!(p.feed(b" Frame"), err);
    }

    #[test]
    fn header_checks() {
        let mut f = REQUEST_V2;
        f[17] = 3;
        assert_eq!(
            MpaFrame::decode(&f, FrameKind::Request),
            Err(Error::MpaUnsupportedRevision(3))
        );
        f[17] = 2;
        f[18] = 0x02;
        f[19] = 0x01;
        assert_eq!(
            MpaFrame::decode(&f, FrameKind::Request),
            Err(Error::MpaPrivateDataTooLong(513))
        );
        f[18] = 0;
        f[19] = 2;
        assert_eq!(
            MpaFrame::decode(&f, FrameKind::Request),
            Err(Error::MpaEnhancedDataMissing)
        );
        f[16] = 0x20;
        assert_eq!(
            MpaFrame::decode(&f, FrameKind::Request),
            Err(Error::MpaRejectInRequest)
        );
        // Reserved bits, and E on revision 1, are ignored.
        let mut v1 = REQUEST_V2;
        v1[16] = 0x1f;
        v1[17] = 1;
        let (frame, _) = MpaFrame::decode(&v1, FrameKind::Request).unwrap();
        assert_eq!(frame.enhanced, None);
        assert_eq!(frame.private_data.len(), 6);
    }

    #[test]
    fn markers_refused() {
        let mut req = config().request(&[]);
        req.markers = true;
        assert_eq!(
            config().respond(&req, &[]).err(),
            Some(Error::MpaMarkersRequested)
        );
        let (mut reply, _) = config().respond(&config().request(&[]), &[]).unwrap();
        reply.markers = true;
        assert_eq!(config().complete(&reply), Err(Error::MpaMarkersRequested));
    }

    #[test]
    fn chelsio_style_peer_to_peer_with_crc() {
        let initiator = MpaConfig {
            crc: true,
            peer_to_peer: true,
            rtr: RtrModes {
                write: false,
                read: true,
                send: false,
            },
            ..config()
        };
        let responder = MpaConfig {
            ird: 8,
            ird_max: 8,
            ord: 8,
            ..config()
        };
        let req = initiator.request(&[]);
        let (reply, theirs) = responder.respond(&req, b"ok").unwrap();
        assert_eq!(theirs.rtr, Some(RtrMode::Read));
        assert!(theirs.crc);
        assert_eq!((theirs.ird, theirs.ord), (8, 8));
        let mut out = [0u8; 64];
        let n = reply.encode(&mut out).unwrap();
        // C and E set; P set in IRD, Rd set in ORD.
        assert_eq!(&out[16..24], &[0x50, 2, 0, 6, 0x80, 8, 0x40, 8]);
        let (parsed, _) = MpaFrame::decode(&out[..n], FrameKind::Reply).unwrap();
        let ours = initiator.complete(&parsed).unwrap();
        assert_eq!(ours.rtr, Some(RtrMode::Read));
        assert_eq!((ours.ird, ours.ord), (8, 8));
    }

    /// A reply as iw_cxgb4 sends it by default: revision 2, CRC and enhanced, P2P
    /// with a Read RTR (its module-wide type, whatever was offered), IRD/ORD 32.
    const CXGB4_REPLY: [u8; 24] = [
        b'M', b'P', b'A', b' ', b'I', b'D', b' ', b'R', b'e', b'p', b' ', b'F', b'r', b'a', b'm',
        b'e', // key
        0x50, // C=1 E=1
        0x02, // revision 2
        0x00, 0x04, // PD_Length: the IRD/ORD words only
        0x80, 0x20, // P=1 IRD 32
        0x40, 0x20, // Rd=1 ORD 32
    ];

    #[test]
    fn cxgb4_responder_gets_the_rtr_offered() {
        let initiator = MpaConfig {
            crc: true,
            ird: 8,
            ird_max: 32,
            peer_to_peer: true,
            rtr: RtrModes::only(RtrMode::Write),
            ..config()
        };
        let (reply, _) = MpaFrame::decode(&CXGB4_REPLY, FrameKind::Reply).unwrap();
        let ours = initiator.complete(&reply).unwrap();
        // The Write offered goes, and the mismatch is reported for the log.
        assert_eq!(ours.rtr, Some(RtrMode::Write));
        assert!(ours.rtr_mismatch);
        // Its ORD 32 is met by raising the IRD, within what this side can provide.
        assert_eq!((ours.ird, ours.ord), (32, 32));
        let small = MpaConfig {
            ird_max: 16,
            ..initiator
        };
        assert_eq!(
            small.complete(&reply),
            Err(Error::MpaInsufficientIrd {
                ird: 16,
                peer_ord: 32
            })
        );
        // A reply naming a type offered is no mismatch.
        let both = MpaConfig {
            rtr: RtrModes::ALL,
            ..initiator
        };
        let ours = both.complete(&reply).unwrap();
        assert_eq!((ours.rtr, ours.rtr_mismatch), (Some(RtrMode::Read), false));
    }

    #[test]
    fn responder_raises_ird_to_initiator_ord() {
        let responder = MpaConfig {
            ird: 4,
            ird_max: 16,
            ..config()
        };
        let request = MpaConfig {
            ord: 12,
            ..config()
        }
        .request(&[]);
        let (reply, theirs) = responder.respond(&request, &[]).unwrap();
        assert_eq!(theirs.ird, 12);
        assert_eq!(reply.enhanced.unwrap().ird, 12);
        let request = MpaConfig {
            ord: 40,
            ..config()
        }
        .request(&[]);
        assert_eq!(responder.respond(&request, &[]).unwrap().1.ird, 16);
    }

    #[test]
    fn large_fpdus_only_when_both_offer() {
        let large = MpaConfig {
            large_fpdus: true,
            ..config()
        };
        let mut out = [0u8; 64];
        let n = large.request(&[]).encode(&mut out).unwrap();
        assert_eq!(out[16], 0x18);
        let (request, _) = MpaFrame::decode(&out[..n], FrameKind::Request).unwrap();
        assert!(request.large_fpdus);
        let (reply, theirs) = large.respond(&request, &[]).unwrap();
        assert!(theirs.large_fpdus && reply.large_fpdus);
        assert!(large.complete(&reply).unwrap().large_fpdus);
        // A peer that does not set the bit (siw by default, hardware) gets none.
        let (reply, theirs) = config().respond(&request, &[]).unwrap();
        assert!(!theirs.large_fpdus && !reply.large_fpdus);
        assert!(!large.complete(&reply).unwrap().large_fpdus);
        let (_, theirs) = large.respond(&config().request(&[]), &[]).unwrap();
        assert!(!theirs.large_fpdus);
    }

    #[test]
    fn negotiation_failures() {
        let p2p = MpaConfig {
            peer_to_peer: true,
            rtr: RtrModes::only(RtrMode::Send),
            ..config()
        };
        let no_send = MpaConfig {
            rtr: RtrModes {
                send: false,
                ..RtrModes::ALL
            },
            ..config()
        };
        assert_eq!(
            no_send.respond(&p2p.request(&[]), &[]).err(),
            Some(Error::MpaNoMatchingRtr)
        );
        let reject = config().reject(&config().request(&[]), &[]);
        assert!(reject.reject);
        assert_eq!(config().complete(&reject), Err(Error::MpaRejected));
        let greedy = MpaConfig {
            ord: 64,
            ..config()
        };
        let (reply, _) = greedy
            .respond(
                &MpaConfig {
                    ird: 100,
                    ..config()
                }
                .request(&[]),
                &[],
            )
            .unwrap();
        assert_eq!(
            config().complete(&reply),
            Err(Error::MpaInsufficientIrd {
                ird: 16,
                peer_ord: 64
            })
        );
        let with_crc = MpaConfig {
            crc: true,
            ..config()
        };
        let (mut reply, _) = config().respond(&with_crc.request(&[]), &[]).unwrap();
        assert!(reply.crc);
        reply.crc = false;
        assert_eq!(with_crc.complete(&reply), Err(Error::MpaCrcMismatch));
        // A revision 1 peer answers a revision 2 request with revision 1.
        let v1 = MpaConfig {
            revision: MpaRevision::V1,
            ..config()
        };
        let (reply, _) = v1.respond(&config().request(&[]), &[]).unwrap();
        assert_eq!(reply.enhanced, None);
        let settled = config().complete(&reply).unwrap();
        assert_eq!(
            (settled.revision, settled.enhanced),
            (MpaRevision::V1, false)
        );
    }
}
