// SPDX-License-Identifier: GPL-2.0

//! The single error type of the protocol core.

use core::fmt;

use super::mpa::FrameKind;
use super::terminate::TermCause;

/// Everything that can go wrong while framing or parsing.
///
/// Errors caused by the peer carry enough context to be logged and map to
/// the Terminate cause to report with [`Error::terminate_cause`]. The
/// receive parsers are sticky: once one returns an error, the stream is dead
/// (iWARP has no resynchronisation without markers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// An output buffer is too small for what is being built (local).
    BufferTooSmall,
    /// A whole-buffer parser was handed fewer bytes than the structure needs.
    Truncated,
    /// A segmenter or FPDU writer was given inconsistent lengths (local).
    LengthMismatch,
    /// The negotiated maximum ULPDU cannot hold even one payload byte after
    /// the headers (local configuration error).
    SegmentTooSmall,

    /// An MPA frame did not start with the key expected here.
    MpaKeyMismatch {
        /// Which frame was expected.
        expected: FrameKind,
    },
    /// An MPA frame carries a revision other than 1 or 2.
    MpaUnsupportedRevision(u8),
    /// An MPA frame announces more than 512 bytes of private data.
    MpaPrivateDataTooLong(usize),
    /// A revision 2 frame flags enhanced mode but its private data is too
    /// short for the IRD/ORD words.
    MpaEnhancedDataMissing,
    /// The peer wants MPA markers; riw never uses them.
    MpaMarkersRequested,
    /// A request frame has the Reject flag set.
    MpaRejectInRequest,
    /// The responder rejected the connection.
    MpaRejected,
    /// The responder dropped the CRC the initiator asked for.
    MpaCrcMismatch,
    /// A reply's revision or enhanced mode does not match the request.
    MpaRevisionMismatch {
        /// Revision the request offered.
        requested: u8,
        /// Revision the reply chose.
        replied: u8,
    },
    /// The responder's ORD exceeds the IRD the initiator offered.
    MpaInsufficientIrd {
        /// Initiator IRD.
        ird: u16,
        /// Responder ORD.
        peer_ord: u16,
    },
    /// Peer-to-peer mode was requested but no ready-to-receive message type
    /// is supported by both sides.
    MpaNoMatchingRtr,
    /// An IRD or ORD to send does not fit the 14-bit field (local).
    IrdOrdTooLarge,

    /// The FPDU CRC does not match its contents.
    CrcMismatch {
        /// CRC computed over the received FPDU.
        computed: u32,
        /// CRC carried in the FPDU trailer.
        received: u32,
    },
    /// The ULPDU length is shorter than the headers its opcode implies.
    UlpduTooShort {
        /// ULPDU length from the MPA header.
        len: u16,
    },
    /// The ULPDU length exceeds the negotiated maximum.
    UlpduTooLong {
        /// ULPDU length from the MPA header.
        len: u16,
        /// Negotiated maximum.
        max: u16,
    },

    /// The DDP version is not 1.
    DdpVersion {
        /// The segment's tagged flag (selects the Terminate code).
        tagged: bool,
        /// Version found.
        version: u8,
    },
    /// Reserved bits of the DDP control field are set.
    DdpReservedBits,
    /// An untagged segment names a queue its opcode does not use.
    InvalidQueue {
        /// Queue number found.
        queue: u32,
    },
    /// An untagged segment's MSN is not the next message on its queue.
    MsnOutOfWindow {
        /// Queue number.
        queue: u32,
        /// MSN expected.
        expected: u32,
        /// MSN found.
        received: u32,
    },
    /// An untagged segment's message offset does not continue the message.
    InvalidMessageOffset {
        /// Queue number.
        queue: u32,
        /// Offset expected.
        expected: u32,
        /// Offset found.
        received: u32,
    },
    /// An untagged message grew beyond 4 GiB.
    MessageTooLong,
    /// A tagged segment's offset plus length wraps the 64-bit space.
    TaggedOffsetWrap,

    /// The RDMAP version is not 1.
    RdmapVersion(u8),
    /// Reserved bits of the RDMAP control field are set.
    RdmapReservedBits,
    /// The RDMAP opcode is not defined.
    UnknownOpcode(u8),
    /// The DDP tagged flag contradicts the RDMAP opcode.
    OpcodeTagMismatch {
        /// Opcode found.
        opcode: u8,
    },
    /// A message that must fit one segment (Read Request, Terminate, atomics,
    /// Immediate Data) is segmented, offset or carries extra payload.
    NotSingleSegment,
    /// An Atomic Request names an undefined atomic operation.
    UnknownAtomicOp(u8),
    /// A Terminate message's flags and copied headers are inconsistent.
    TerminateMalformed,
}

impl Error {
    /// The Terminate cause (layer, error type, error code) to report to the
    /// peer for this error, per RFC 5040 §7, RFC 5041 §7, RFC 5044 §8 and
    /// RFC 6581 §9.
    ///
    /// Local errors map to an RDMAP local catastrophic error.
    pub const fn terminate_cause(&self) -> TermCause {
        use Error::*;
        match self {
            BufferTooSmall | LengthMismatch | SegmentTooSmall | IrdOrdTooLarge => {
                TermCause::RDMAP_LOCAL_CATASTROPHIC
            }
            MpaKeyMismatch { .. }
            | MpaUnsupportedRevision(_)
            | MpaPrivateDataTooLong(_)
            | MpaEnhancedDataMissing
            | MpaMarkersRequested
            | MpaRejectInRequest
            | MpaRejected
            | MpaCrcMismatch
            | MpaRevisionMismatch { .. } => TermCause::MPA_INVALID_REQUEST_REPLY,
            MpaInsufficientIrd { .. } => TermCause::MPA_INSUFFICIENT_IRD,
            MpaNoMatchingRtr => TermCause::MPA_NO_MATCHING_RTR,
            CrcMismatch { .. } => TermCause::MPA_CRC,
            UlpduTooShort { .. } | UlpduTooLong { .. } => TermCause::MPA_FPDU_START,
            DdpVersion { tagged: true, .. } => TermCause::DDP_TAGGED_INVALID_VERSION,
            DdpVersion { tagged: false, .. } => TermCause::DDP_UNTAGGED_INVALID_VERSION,
            DdpReservedBits => TermCause::DDP_LOCAL_CATASTROPHIC,
            InvalidQueue { .. } => TermCause::DDP_UNTAGGED_INVALID_QN,
            MsnOutOfWindow { .. } => TermCause::DDP_UNTAGGED_MSN_RANGE,
            InvalidMessageOffset { .. } => TermCause::DDP_UNTAGGED_INVALID_MO,
            MessageTooLong => TermCause::DDP_UNTAGGED_MESSAGE_TOO_LONG,
            TaggedOffsetWrap => TermCause::DDP_TAGGED_TO_WRAP,
            RdmapVersion(_) => TermCause::RDMAP_INVALID_VERSION,
            UnknownOpcode(_) | OpcodeTagMismatch { .. } => TermCause::RDMAP_UNEXPECTED_OPCODE,
            Truncated | RdmapReservedBits | NotSingleSegment | UnknownAtomicOp(_)
            | TerminateMalformed => TermCause::RDMAP_REMOTE_OPERATION_UNSPECIFIED,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Error::*;
        match self {
            BufferTooSmall => f.write_str("output buffer too small"),
            Truncated => f.write_str("input truncated"),
            LengthMismatch => f.write_str("payload length does not match the header"),
            SegmentTooSmall => f.write_str("maximum ULPDU too small for the headers"),
            MpaKeyMismatch { expected } => match expected {
                FrameKind::Request => f.write_str("no MPA request key"),
                FrameKind::Reply => f.write_str("no MPA reply key"),
            },
            MpaUnsupportedRevision(r) => write!(f, "unsupported MPA revision {r}"),
            MpaPrivateDataTooLong(n) => write!(f, "MPA private data length {n} exceeds 512"),
            MpaEnhancedDataMissing => f.write_str("MPA v2 frame lacks its IRD/ORD words"),
            MpaMarkersRequested => f.write_str("peer requires MPA markers, which riw does not use"),
            MpaRejectInRequest => f.write_str("MPA request has the reject flag set"),
            MpaRejected => f.write_str("peer rejected the MPA connection"),
            MpaCrcMismatch => f.write_str("MPA reply dropped the requested CRC"),
            MpaRevisionMismatch { requested, replied } => {
                write!(
                    f,
                    "MPA reply revision {replied} does not fit request revision {requested}"
                )
            }
            MpaInsufficientIrd { ird, peer_ord } => {
                write!(f, "peer ORD {peer_ord} exceeds local IRD {ird}")
            }
            MpaNoMatchingRtr => f.write_str("no common peer-to-peer ready-to-receive message"),
            IrdOrdTooLarge => f.write_str("IRD/ORD exceeds 14 bits"),
            CrcMismatch { computed, received } => {
                write!(f, "FPDU CRC {received:#010x} != computed {computed:#010x}")
            }
            UlpduTooShort { len } => write!(f, "ULPDU length {len} shorter than its headers"),
            UlpduTooLong { len, max } => write!(f, "ULPDU length {len} exceeds maximum {max}"),
            DdpVersion { version, .. } => write!(f, "DDP version {version}"),
            DdpReservedBits => f.write_str("DDP reserved bits set"),
            InvalidQueue { queue } => write!(f, "invalid DDP queue {queue}"),
            MsnOutOfWindow {
                queue,
                expected,
                received,
            } => {
                write!(f, "queue {queue}: MSN {received}, expected {expected}")
            }
            InvalidMessageOffset {
                queue,
                expected,
                received,
            } => {
                write!(
                    f,
                    "queue {queue}: message offset {received}, expected {expected}"
                )
            }
            MessageTooLong => f.write_str("untagged message exceeds 4 GiB"),
            TaggedOffsetWrap => f.write_str("tagged offset wraps"),
            RdmapVersion(v) => write!(f, "RDMAP version {v}"),
            RdmapReservedBits => f.write_str("RDMAP reserved bits set"),
            UnknownOpcode(op) => write!(f, "unknown RDMAP opcode {op:#x}"),
            OpcodeTagMismatch { opcode } => {
                write!(f, "tagged flag contradicts RDMAP opcode {opcode:#x}")
            }
            NotSingleSegment => f.write_str("single-segment RDMAP message is malformed"),
            UnknownAtomicOp(op) => write!(f, "unknown atomic operation {op:#x}"),
            TerminateMalformed => f.write_str("malformed Terminate message"),
        }
    }
}
