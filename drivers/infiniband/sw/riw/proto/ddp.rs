// SPDX-License-Identifier: GPL-2.0

//! DDP segment headers (RFC 5041 §4) and untagged reassembly bookkeeping.
//!
//! DDP leaves the second control byte and, for untagged segments, one 32-bit
//! word to its upper layer; RDMAP (its only user here) puts its version and
//! opcode in the former and the invalidate STag in the latter, so
//! [`SegmentHeader`] decodes both layers' control bits at once.
//!
//! ```text
//! byte 0: |T|L| Rsvd(4) |DV(2)|   byte 1: |RV(2)|Rsvd(2)| Opcode(4) |
//! tagged:   STag (32)  TO (64)                                 14 bytes
//! untagged: Invalidate STag (32)  QN (32)  MSN (32)  MO (32)   18 bytes
//! ```

use super::rdmap::{Opcode, NUM_QUEUES, RDMAP_VERSION};
use super::wire::{Reader, Writer};
use super::Error;

/// DDP version spoken (RFC 5041).
pub const DDP_VERSION: u8 = 1;
/// Length of a tagged DDP header, control bytes included.
pub const TAGGED_HEADER_LEN: usize = 14;
/// Length of an untagged DDP header, control bytes included.
pub const UNTAGGED_HEADER_LEN: usize = 18;

const T_FLAG: u8 = 0x80;
const L_FLAG: u8 = 0x40;
const DDP_RESERVED: u8 = 0x3c;
const DDP_VERSION_MASK: u8 = 0x03;
const RDMAP_RESERVED: u8 = 0x30;
const OPCODE_MASK: u8 = 0x0f;

/// Where a segment's payload goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Tagged buffer model: directly into registered memory.
    Tagged {
        /// Steering tag of the target buffer.
        stag: u32,
        /// Tagged offset of this segment's first payload byte.
        to: u64,
    },
    /// Untagged buffer model: into the next buffer posted on a queue.
    Untagged {
        /// STag to invalidate (Send with Invalidate); zero otherwise.
        inval_stag: u32,
        /// Queue number, fixed by the opcode.
        queue: u32,
        /// Message sequence number on that queue, starting at 1.
        msn: u32,
        /// Offset of this segment's payload in its message.
        mo: u32,
    },
}

/// The DDP header of one segment, with the RDMAP control bits it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    /// RDMAP opcode.
    pub opcode: Opcode,
    /// The Last flag: this segment ends its message.
    pub last: bool,
    /// Placement information.
    pub placement: Placement,
}

/// Control bits decoded from the first two ULPDU bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Control {
    pub(crate) opcode: Opcode,
    pub(crate) last: bool,
}

impl Control {
    /// Validates versions, reserved bits, the opcode and that the tagged flag
    /// fits the opcode; DDP checks come first, as DDP is the lower layer.
    pub(crate) fn decode(bytes: [u8; 2]) -> Result<Self, Error> {
        let [ddp, rdmap] = bytes;
        let tagged = ddp & T_FLAG != 0;
        if ddp & DDP_VERSION_MASK != DDP_VERSION {
            return Err(Error::DdpVersion {
                tagged,
                version: ddp & DDP_VERSION_MASK,
            });
        }
        if ddp & DDP_RESERVED != 0 {
            return Err(Error::DdpReservedBits);
        }
        if rdmap >> 6 != RDMAP_VERSION {
            return Err(Error::RdmapVersion(rdmap >> 6));
        }
        if rdmap & RDMAP_RESERVED != 0 {
            return Err(Error::RdmapReservedBits);
        }
        let raw = rdmap & OPCODE_MASK;
        let opcode = Opcode::from_wire(raw).ok_or(Error::UnknownOpcode(raw))?;
        if opcode.is_tagged() != tagged {
            return Err(Error::OpcodeTagMismatch { opcode: raw });
        }
        Ok(Self {
            opcode,
            last: ddp & L_FLAG != 0,
        })
    }
}

impl SegmentHeader {
    /// Encoded length: [`TAGGED_HEADER_LEN`] or [`UNTAGGED_HEADER_LEN`].
    pub const fn encoded_len(&self) -> usize {
        match self.placement {
            Placement::Tagged { .. } => TAGGED_HEADER_LEN,
            Placement::Untagged { .. } => UNTAGGED_HEADER_LEN,
        }
    }

    pub(crate) fn write(&self, w: &mut Writer<'_>) -> Result<(), Error> {
        let mut bytes = [0; UNTAGGED_HEADER_LEN];
        self.encode(&mut bytes)?;
        w.put(
            bytes
                .get(..self.encoded_len())
                .ok_or(Error::BufferTooSmall)?,
        )
    }

    /// Encodes the header into the first [`encoded_len`](Self::encoded_len) bytes of
    /// `out`, zeros after it: stores at fixed offsets, no bounds to check (this runs
    /// for every FPDU sent).
    #[inline(always)]
    pub(crate) fn encode(&self, out: &mut [u8; UNTAGGED_HEADER_LEN]) -> Result<(), Error> {
        let tagged = matches!(self.placement, Placement::Tagged { .. });
        if tagged != self.opcode.is_tagged() {
            return Err(Error::OpcodeTagMismatch {
                opcode: self.opcode.to_wire(),
            });
        }
        let mut ddp = DDP_VERSION;
        if tagged {
            ddp |= T_FLAG;
        }
        if self.last {
            ddp |= L_FLAG;
        }
        // The 32-bit words after the control bytes, the first in the top bits.
        let words = match self.placement {
            Placement::Tagged { stag, to } => u128::from(stag) << 96 | u128::from(to) << 32,
            Placement::Untagged {
                inval_stag,
                queue,
                msn,
                mo,
            } => {
                u128::from(inval_stag) << 96
                    | u128::from(queue) << 64
                    | u128::from(msn) << 32
                    | u128::from(mo)
            }
        };
        let [ddp_control, rdmap_control, rest @ ..] = out;
        *ddp_control = ddp;
        *rdmap_control = RDMAP_VERSION << 6 | self.opcode.to_wire();
        *rest = words.to_be_bytes();
        Ok(())
    }

    /// Parses and validates a DDP header at the start of `r`, checking
    /// everything that does not need stream state: versions, reserved bits,
    /// opcode, and the queue number the opcode implies.
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, Error> {
        let Control { opcode, last } = Control::decode(r.array()?)?;
        let placement = if opcode.is_tagged() {
            Placement::Tagged {
                stag: r.u32()?,
                to: r.u64()?,
            }
        } else {
            let inval_stag = r.u32()?;
            let queue = r.u32()?;
            if Some(queue) != opcode.queue() {
                return Err(Error::InvalidQueue { queue });
            }
            Placement::Untagged {
                inval_stag,
                queue,
                msn: r.u32()?,
                mo: r.u32()?,
            }
        };
        Ok(Self {
            opcode,
            last,
            placement,
        })
    }
}

/// Per-queue receive state for untagged messages (RFC 5041 §5.3).
///
/// Over TCP, segments arrive in order, so the MSN window is exactly one
/// message wide: every segment must carry its queue's current MSN and
/// continue its message at the offset where the previous segment ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UntaggedTracker {
    next_msn: [u32; NUM_QUEUES],
    next_mo: [u32; NUM_QUEUES],
}

impl Default for UntaggedTracker {
    fn default() -> Self {
        Self::new()
    }
}

impl UntaggedTracker {
    /// State at the start of a stream: MSN 1 expected on every queue.
    pub const fn new() -> Self {
        Self {
            next_msn: [1; NUM_QUEUES],
            next_mo: [0; NUM_QUEUES],
        }
    }

    /// The MSN the next message on `queue` must carry.
    pub fn expected_msn(&self, queue: u32) -> Option<u32> {
        self.next_msn.get(usize::try_from(queue).ok()?).copied()
    }

    /// Checks an incoming segment carrying `payload_len` bytes and advances
    /// the state. Tagged segments are only checked for offset wrap.
    pub fn accept(&mut self, header: &SegmentHeader, payload_len: u32) -> Result<(), Error> {
        let (queue, msn, mo) = match header.placement {
            Placement::Tagged { to, .. } => {
                return to
                    .checked_add(u64::from(payload_len))
                    .map(|_| ())
                    .ok_or(Error::TaggedOffsetWrap);
            }
            Placement::Untagged { queue, msn, mo, .. } => (queue, msn, mo),
        };
        let index = usize::try_from(queue).map_err(|_| Error::InvalidQueue { queue })?;
        let (Some(next_msn), Some(next_mo)) =
            (self.next_msn.get_mut(index), self.next_mo.get_mut(index))
        else {
            return Err(Error::InvalidQueue { queue });
        };
        if msn != *next_msn {
            return Err(Error::MsnOutOfWindow {
                queue,
                expected: *next_msn,
                received: msn,
            });
        }
        if mo != *next_mo {
            return Err(Error::InvalidMessageOffset {
                queue,
                expected: *next_mo,
                received: mo,
            });
        }
        let end = mo.checked_add(payload_len).ok_or(Error::MessageTooLong)?;
        if header.last {
            *next_msn = next_msn.wrapping_add(1);
            *next_mo = 0;
        } else {
            *next_mo = end;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn untagged(opcode: Opcode, last: bool, msn: u32, mo: u32) -> SegmentHeader {
        SegmentHeader {
            opcode,
            last,
            placement: Placement::Untagged {
                inval_stag: 0,
                queue: opcode.queue().unwrap(),
                msn,
                mo,
            },
        }
    }

    #[test]
    fn control_bits_from_rfc_layout() {
        // T=1 L=1 DV=01 | RV=01 opcode 0000 (RDMA Write).
        assert_eq!(
            Control::decode([0xc1, 0x40]),
            Ok(Control {
                opcode: Opcode::RdmaWrite,
                last: true
            })
        );
        // T=0 L=0 DV=01 | RV=01 opcode 0011 (Send).
        assert_eq!(
            Control::decode([0x01, 0x43]),
            Ok(Control {
                opcode: Opcode::Send,
                last: false
            })
        );
        assert_eq!(
            Control::decode([0xc2, 0x40]),
            Err(Error::DdpVersion {
                tagged: true,
                version: 2
            })
        );
        assert_eq!(Control::decode([0x41, 0x43]).map(|c| c.last), Ok(true));
        assert_eq!(Control::decode([0x05, 0x43]), Err(Error::DdpReservedBits));
        assert_eq!(Control::decode([0x01, 0x83]), Err(Error::RdmapVersion(2)));
        assert_eq!(Control::decode([0x01, 0x53]), Err(Error::RdmapReservedBits));
        assert_eq!(
            Control::decode([0x01, 0x4f]),
            Err(Error::UnknownOpcode(0xf))
        );
        assert_eq!(
            Control::decode([0x81, 0x43]),
            Err(Error::OpcodeTagMismatch { opcode: 3 })
        );
    }

    #[test]
    fn tracker_follows_messages() {
        let mut t = UntaggedTracker::new();
        assert_eq!(t.accept(&untagged(Opcode::Send, false, 1, 0), 100), Ok(()));
        assert_eq!(
            t.accept(&untagged(Opcode::Send, false, 1, 99), 1),
            Err(Error::InvalidMessageOffset {
                queue: 0,
                expected: 100,
                received: 99
            })
        );
        let mut t2 = t;
        assert_eq!(t2.accept(&untagged(Opcode::Send, true, 1, 100), 5), Ok(()));
        assert_eq!(t2.expected_msn(0), Some(2));
        assert_eq!(
            t.accept(&untagged(Opcode::Send, true, 2, 100), 5),
            Err(Error::MsnOutOfWindow {
                queue: 0,
                expected: 1,
                received: 2
            })
        );
        // Queues are independent.
        assert_eq!(
            t.accept(&untagged(Opcode::ReadRequest, true, 1, 0), 0),
            Ok(())
        );
        assert_eq!(t.expected_msn(1), Some(2));
        assert_eq!(t.expected_msn(0), Some(1));
        assert_eq!(
            t.accept(&untagged(Opcode::Send, false, 1, 100), u32::MAX),
            Err(Error::MessageTooLong)
        );
    }

    #[test]
    fn tagged_wrap() {
        let mut t = UntaggedTracker::new();
        let h = SegmentHeader {
            opcode: Opcode::RdmaWrite,
            last: true,
            placement: Placement::Tagged {
                stag: 1,
                to: u64::MAX - 3,
            },
        };
        assert_eq!(t.accept(&h, 3), Ok(()));
        assert_eq!(t.accept(&h, 4), Err(Error::TaggedOffsetWrap));
    }
}
