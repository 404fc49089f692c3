// SPDX-License-Identifier: GPL-2.0

//! RDMAP opcodes and headers (RFC 5040 §4, RFC 7306 §5 and §6).
//!
//! Opcodes, their buffer model and queue:
//!
//! | opcode | message                       | DDP             | RDMAP header |
//! |--------|-------------------------------|-----------------|--------------|
//! | 0x0    | RDMA Write                    | tagged          | -            |
//! | 0x1    | RDMA Read Request             | untagged, QN 1  | 28 bytes     |
//! | 0x2    | RDMA Read Response            | tagged          | -            |
//! | 0x3    | Send                          | untagged, QN 0  | -            |
//! | 0x4    | Send with Invalidate          | untagged, QN 0  | -            |
//! | 0x5    | Send with Solicited Event     | untagged, QN 0  | -            |
//! | 0x6    | Send with SE and Invalidate   | untagged, QN 0  | -            |
//! | 0x7    | Terminate                     | untagged, QN 2  | 4 + copies   |
//! | 0x8    | Immediate Data (RFC 7306)     | untagged, QN 0  | 8 bytes      |
//! | 0x9    | Immediate Data with SE        | untagged, QN 0  | 8 bytes      |
//! | 0xa    | Atomic Request (RFC 7306)     | untagged, QN 1  | 52 bytes     |
//! | 0xb    | Atomic Response (RFC 7306)    | untagged, QN 3  | 12 bytes     |
//!
//! RFC 7306 takes the four opcodes after Terminate, in that order (1000b to
//! 1011b); 0xc to 0xf stay unassigned. Linux siw speaks none of them (its
//! `iwarp.h` ends at Terminate), so no recorded capture exercises them.
//!
//! Messages with an RDMAP header beyond the control byte are single-segment
//! and carry no other payload.

use super::terminate::{Terminate, MAX_TERMINATE_LEN};
use super::wire::{Reader, Writer};
use super::Error;

/// RDMAP version spoken (RFC 5040).
pub const RDMAP_VERSION: u8 = 1;

/// Untagged queue of Send-type and Immediate Data messages.
pub const QUEUE_SEND: u32 = 0;
/// Untagged queue of RDMA Read Requests and Atomic Requests.
pub const QUEUE_READ_REQUEST: u32 = 1;
/// Untagged queue of Terminate messages.
pub const QUEUE_TERMINATE: u32 = 2;
/// Untagged queue of Atomic Responses (RFC 7306).
pub const QUEUE_ATOMIC_RESPONSE: u32 = 3;
/// Number of untagged queues in use.
pub const NUM_QUEUES: usize = 4;

/// Length of a Read Request header.
pub const READ_REQUEST_LEN: usize = 28;
/// Length of an Atomic Request header.
pub const ATOMIC_REQUEST_LEN: usize = 52;
/// Length of an Atomic Response header.
pub const ATOMIC_RESPONSE_LEN: usize = 12;
/// Length of an Immediate Data header.
pub const IMMEDIATE_DATA_LEN: usize = 8;

/// An RDMAP message type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Opcode {
    /// RDMA Write.
    RdmaWrite = 0x0,
    /// RDMA Read Request.
    ReadRequest = 0x1,
    /// RDMA Read Response.
    ReadResponse = 0x2,
    /// Send.
    Send = 0x3,
    /// Send with Invalidate.
    SendInvalidate = 0x4,
    /// Send with Solicited Event.
    SendSolicited = 0x5,
    /// Send with Solicited Event and Invalidate.
    SendSolicitedInvalidate = 0x6,
    /// Terminate.
    Terminate = 0x7,
    /// Immediate Data (RFC 7306).
    ImmediateData = 0x8,
    /// Immediate Data with Solicited Event (RFC 7306).
    ImmediateDataSolicited = 0x9,
    /// Atomic Request (RFC 7306).
    AtomicRequest = 0xa,
    /// Atomic Response (RFC 7306).
    AtomicResponse = 0xb,
}

impl Opcode {
    /// Decodes the 4-bit opcode field.
    pub const fn from_wire(raw: u8) -> Option<Self> {
        Some(match raw {
            0x0 => Self::RdmaWrite,
            0x1 => Self::ReadRequest,
            0x2 => Self::ReadResponse,
            0x3 => Self::Send,
            0x4 => Self::SendInvalidate,
            0x5 => Self::SendSolicited,
            0x6 => Self::SendSolicitedInvalidate,
            0x7 => Self::Terminate,
            0x8 => Self::ImmediateData,
            0x9 => Self::ImmediateDataSolicited,
            0xa => Self::AtomicRequest,
            0xb => Self::AtomicResponse,
            _ => return None,
        })
    }

    /// The 4-bit opcode field.
    pub const fn to_wire(self) -> u8 {
        self as u8
    }

    /// Whether the message uses the tagged buffer model.
    pub const fn is_tagged(self) -> bool {
        matches!(self, Self::RdmaWrite | Self::ReadResponse)
    }

    /// The untagged queue the message travels on; `None` for tagged ones.
    pub const fn queue(self) -> Option<u32> {
        match self {
            Self::RdmaWrite | Self::ReadResponse => None,
            Self::Send
            | Self::SendInvalidate
            | Self::SendSolicited
            | Self::SendSolicitedInvalidate
            | Self::ImmediateData
            | Self::ImmediateDataSolicited => Some(QUEUE_SEND),
            Self::ReadRequest | Self::AtomicRequest => Some(QUEUE_READ_REQUEST),
            Self::Terminate => Some(QUEUE_TERMINATE),
            Self::AtomicResponse => Some(QUEUE_ATOMIC_RESPONSE),
        }
    }

    /// Length of the fixed RDMAP header after the DDP header; for Terminate,
    /// the control word only (copied headers follow).
    pub const fn rdmap_header_len(self) -> usize {
        match self {
            Self::ReadRequest => READ_REQUEST_LEN,
            Self::AtomicRequest => ATOMIC_REQUEST_LEN,
            Self::AtomicResponse => ATOMIC_RESPONSE_LEN,
            Self::ImmediateData | Self::ImmediateDataSolicited => IMMEDIATE_DATA_LEN,
            Self::Terminate => 4,
            _ => 0,
        }
    }

    /// Whether the message is one segment whose ULPDU is all header.
    pub const fn is_header_only(self) -> bool {
        self.rdmap_header_len() != 0
    }

    /// Whether this is one of the four Send messages.
    pub const fn is_send(self) -> bool {
        matches!(
            self,
            Self::Send | Self::SendInvalidate | Self::SendSolicited | Self::SendSolicitedInvalidate
        )
    }

    /// Whether the untagged header's first word is an STag to invalidate.
    pub const fn invalidates(self) -> bool {
        matches!(self, Self::SendInvalidate | Self::SendSolicitedInvalidate)
    }

    /// Whether the message asks for a solicited event.
    pub const fn solicited(self) -> bool {
        matches!(
            self,
            Self::SendSolicited | Self::SendSolicitedInvalidate | Self::ImmediateDataSolicited
        )
    }
}

/// RDMA Read Request header (RFC 5040 §4.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadRequest {
    /// STag of the requester's buffer the response is placed into.
    pub sink_stag: u32,
    /// Tagged offset in the sink buffer.
    pub sink_to: u64,
    /// Bytes to read.
    pub size: u32,
    /// STag of the responder's buffer to read.
    pub source_stag: u32,
    /// Tagged offset in the source buffer.
    pub source_to: u64,
}

/// Atomic operation (RFC 7306 §5.2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum AtomicOp {
    /// Fetch and add, with an add mask splitting the word into fields.
    FetchAdd = 0,
    /// Compare and swap, both under masks.
    CompareSwap = 1,
}

/// Atomic Request header (RFC 7306 §5.2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicRequest {
    /// Operation.
    pub op: AtomicOp,
    /// Identifier the response echoes.
    pub request_id: u32,
    /// STag of the target 64-bit word.
    pub stag: u32,
    /// Tagged offset of the target word.
    pub to: u64,
    /// Value to add (FetchAdd) or swap in (CompareSwap).
    pub add_swap: u64,
    /// Add mask (FetchAdd) or swap mask (CompareSwap).
    pub add_swap_mask: u64,
    /// Value to compare with (CompareSwap).
    pub compare: u64,
    /// Compare mask (CompareSwap).
    pub compare_mask: u64,
}

/// Atomic Response header (RFC 7306 §5.2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicResponse {
    /// The request identifier being answered.
    pub request_id: u32,
    /// The target word's value before the operation.
    pub original: u64,
}

/// The RDMAP-specific header of a message, after its DDP header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RdmapHeader {
    /// Write, Read Response and Send variants: control bits only.
    None,
    /// RDMA Read Request.
    ReadRequest(ReadRequest),
    /// Atomic Request.
    AtomicRequest(AtomicRequest),
    /// Atomic Response.
    AtomicResponse(AtomicResponse),
    /// Immediate Data, with or without solicited event.
    ImmediateData([u8; IMMEDIATE_DATA_LEN]),
    /// Terminate.
    Terminate(Terminate),
}

impl RdmapHeader {
    /// Whether this header is the one `opcode` carries.
    pub fn fits(&self, opcode: Opcode) -> bool {
        matches!(
            (self, opcode),
            (Self::ReadRequest(_), Opcode::ReadRequest)
                | (Self::AtomicRequest(_), Opcode::AtomicRequest)
                | (Self::AtomicResponse(_), Opcode::AtomicResponse)
                | (
                    Self::ImmediateData(_),
                    Opcode::ImmediateData | Opcode::ImmediateDataSolicited
                )
                | (Self::Terminate(_), Opcode::Terminate)
        ) || matches!(self, Self::None) && !opcode.is_header_only()
    }

    /// Encoded length.
    pub fn encoded_len(&self) -> usize {
        match self {
            Self::None => 0,
            Self::ReadRequest(_) => READ_REQUEST_LEN,
            Self::AtomicRequest(_) => ATOMIC_REQUEST_LEN,
            Self::AtomicResponse(_) => ATOMIC_RESPONSE_LEN,
            Self::ImmediateData(_) => IMMEDIATE_DATA_LEN,
            Self::Terminate(t) => t.encoded_len(),
        }
    }

    pub(crate) fn write(&self, w: &mut Writer<'_>) -> Result<(), Error> {
        match self {
            Self::None => Ok(()),
            Self::ReadRequest(rr) => {
                w.u32(rr.sink_stag)?;
                w.u64(rr.sink_to)?;
                w.u32(rr.size)?;
                w.u32(rr.source_stag)?;
                w.u64(rr.source_to)
            }
            Self::AtomicRequest(a) => {
                w.u32(a.op as u32)?;
                w.u32(a.request_id)?;
                w.u32(a.stag)?;
                w.u64(a.to)?;
                w.u64(a.add_swap)?;
                w.u64(a.add_swap_mask)?;
                w.u64(a.compare)?;
                w.u64(a.compare_mask)
            }
            Self::AtomicResponse(a) => {
                w.u32(a.request_id)?;
                w.u64(a.original)
            }
            Self::ImmediateData(data) => w.put(data),
            Self::Terminate(t) => t.write(w),
        }
    }

    /// Parses the RDMAP header of `opcode` from `buf`, which must hold exactly
    /// that header (the whole rest of the ULPDU for header-only messages), into `out`
    /// (left as it was on an error).
    pub(crate) fn parse_into(opcode: Opcode, buf: &[u8], out: &mut Self) -> Result<(), Error> {
        let mut r = Reader::new(buf);
        // Each header is written into `out` once whole and checked: a Read Request is the
        // receive path's, and the enum is large (a Terminate's copied headers).
        let all_read = |r: &Reader<'_>| {
            if r.remaining().is_empty() {
                Ok(())
            } else {
                Err(Error::NotSingleSegment)
            }
        };
        match opcode {
            Opcode::ReadRequest => {
                let rr = ReadRequest {
                    sink_stag: r.u32()?,
                    sink_to: r.u64()?,
                    size: r.u32()?,
                    source_stag: r.u32()?,
                    source_to: r.u64()?,
                };
                all_read(&r)?;
                *out = Self::ReadRequest(rr);
            }
            Opcode::AtomicRequest => {
                // 28 reserved bits, then the 4-bit operation.
                let word = r.u32()?;
                let op = match word {
                    0 => AtomicOp::FetchAdd,
                    1 => AtomicOp::CompareSwap,
                    _ if word > 0xf => return Err(Error::RdmapReservedBits),
                    _ => return Err(Error::UnknownAtomicOp(word as u8)),
                };
                let request = AtomicRequest {
                    op,
                    request_id: r.u32()?,
                    stag: r.u32()?,
                    to: r.u64()?,
                    add_swap: r.u64()?,
                    add_swap_mask: r.u64()?,
                    compare: r.u64()?,
                    compare_mask: r.u64()?,
                };
                all_read(&r)?;
                *out = Self::AtomicRequest(request);
            }
            Opcode::AtomicResponse => {
                let response = AtomicResponse {
                    request_id: r.u32()?,
                    original: r.u64()?,
                };
                all_read(&r)?;
                *out = Self::AtomicResponse(response);
            }
            Opcode::ImmediateData | Opcode::ImmediateDataSolicited => {
                let data = r.array()?;
                all_read(&r)?;
                *out = Self::ImmediateData(data);
            }
            Opcode::Terminate => {
                if buf.len() > MAX_TERMINATE_LEN {
                    return Err(Error::TerminateMalformed);
                }
                *out = Self::Terminate(Terminate::parse(buf)?);
            }
            _ => {
                all_read(&r)?;
                *out = Self::None;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcode_wire_values() {
        // RFC 5040 §4.2 (the values of siw's `enum rdma_opcode`), then RFC 7306.
        let all = [
            (0x0, Opcode::RdmaWrite),
            (0x1, Opcode::ReadRequest),
            (0x2, Opcode::ReadResponse),
            (0x3, Opcode::Send),
            (0x4, Opcode::SendInvalidate),
            (0x5, Opcode::SendSolicited),
            (0x6, Opcode::SendSolicitedInvalidate),
            (0x7, Opcode::Terminate),
            (0x8, Opcode::ImmediateData),
            (0x9, Opcode::ImmediateDataSolicited),
            (0xa, Opcode::AtomicRequest),
            (0xb, Opcode::AtomicResponse),
        ];
        for (raw, op) in all {
            assert_eq!(Opcode::from_wire(raw), Some(op));
            assert_eq!(op.to_wire(), raw);
        }
        for raw in 0xc..=0xff {
            assert_eq!(Opcode::from_wire(raw), None, "{raw:#x}");
        }
        assert_eq!(Opcode::ImmediateDataSolicited.queue(), Some(QUEUE_SEND));
        assert!(Opcode::ImmediateDataSolicited.solicited());
        assert_eq!(Opcode::AtomicResponse.queue(), Some(QUEUE_ATOMIC_RESPONSE));
    }
}
