// SPDX-License-Identifier: GPL-2.0

//! The receive side of a connection: bytes from the socket, through the protocol core's
//! stream parser, placed into posted receive buffers, completed into the receive CQ.
//!
//! Everything here comes from the wire and is checked before use: the parser validates
//! framing, CRC, DDP and RDMAP headers, MSNs and offsets; placement checks each receive
//! buffer's memory (region, key, protection domain, rights, bounds) and the message's
//! length against it. A violation ends in a Terminate for the peer and an error for the
//! QP, never in a write outside the buffer.
//!
//! The small steps of each message's path are `#[inline(always)]`: their calls cost more
//! than their bodies, under TCG (where the benchmarks run) most of all, as every return
//! and every call to another page adds a lookup of the next translated block.

use crate::cq::{Completion, RiwCq};
use crate::crc::KernelCrc32c;
use crate::device::RiwDevice;
use crate::kernel_ext::rdma::{access, Device, Qp};
use crate::kernel_ext::socket::{LockedSocket, TcpStream};
use crate::kernel_ext::trace;
use crate::mr::{pd_id, Denied, MemRegion, RiwMr};
use crate::proto::{
    Error as WireError, Opcode, Placement, RdmapHeader, RtrMode, RxConfig, RxEvent, RxHeader,
    StreamParser, TermCause, Terminate,
};
use crate::qp::RiwQp;
use crate::reads::{InboundRead, Reads};
use crate::uapi;
use kernel::prelude::*;
use kernel::sync::Arc;

/// Bytes read from the socket at a time during the MPA exchange (frames and what follows).
const RX_BUF_LEN: usize = 4096;

/// How a receive run ended. Small, as it goes back from every run: the Terminate a
/// violation owes the peer, with the offending segment's headers, waits in the receiver
/// ([`Receiver::take_terminate`]).
pub(crate) enum RxEnd {
    /// Everything available was taken.
    Idle,
    /// The budget is used up; more may be waiting.
    Budget,
    /// The peer closed its direction in order.
    Eof,
    /// The socket failed.
    SocketError(Error),
    /// The peer broke the protocol (or sent what riw cannot take): send the Terminate
    /// and end the connection.
    Violation { cause: TermCause, why: Why },
    /// A receive buffer could not take the message (local error): the same, with the
    /// receive completed in error.
    LocalError { cause: TermCause },
    /// The peer sent a Terminate.
    Terminated(TermCause),
}

impl RxEnd {
    /// The Terminate this end owes the peer, if any: about the segment that caused it,
    /// its headers copied if `h`, the header being processed, is known.
    fn terminate(
        &self,
        parser: &StreamParser<KernelCrc32c>,
        h: Option<&RxHeader>,
    ) -> Option<Terminate> {
        let (Self::Violation { cause, .. } | Self::LocalError { cause }) = self else {
            return None;
        };
        Some(match h {
            Some(h) => {
                let (raw, ulpdu_len) = parser.current_header();
                Terminate::about_segment(*cause, ulpdu_len.max(h.ulpdu_len), raw)
            }
            None => Terminate::new(*cause),
        })
    }
}

/// What a peer did wrong, for the log.
pub(crate) enum Why {
    /// The protocol core's finding.
    Wire(WireError),
    /// A placement or access check.
    Refused(&'static str),
}

impl From<WireError> for Why {
    fn from(e: WireError) -> Self {
        Self::Wire(e)
    }
}

impl From<&'static str> for Why {
    fn from(what: &'static str) -> Self {
        Self::Refused(what)
    }
}

impl core::fmt::Display for Why {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Wire(e) => e.fmt(f),
            Self::Refused(what) => f.write_str(what),
        }
    }
}

/// One receive buffer element, checked.
#[derive(Clone, Default)]
struct Target {
    region: Option<Arc<MemRegion>>,
    addr: u64,
    len: u32,
}

/// Where the payload of the tagged FPDU being received goes: checked memory, from `addr`.
struct Sink {
    region: Arc<MemRegion>,
    addr: u64,
}

/// The receive buffer of the message being placed. Its elements are the receiver's
/// `targets`, filled in place: taking a receive allocates nothing and moves little.
struct Message {
    wr_id: u64,
    /// The buffer's non-empty elements: the first `elements` of the receiver's `targets`.
    elements: usize,
    capacity: u64,
    /// Bytes placed so far (the highest message offset reached).
    placed: u64,
    /// Set once the buffer's elements failed their checks.
    bad_buffer: bool,
    /// Its first segment arrived. A receive is taken as soon as the one before it
    /// completes, before its message comes: checking it is then off the critical path.
    started: bool,
    solicited: bool,
    invalidate: Option<u32>,
}

/// Bytes read from the socket during the MPA exchange: frames, and FPDUs that may follow
/// the last one.
pub(crate) struct MpaInput {
    buf: KVVec<u8>,
    start: usize,
    end: usize,
}

impl MpaInput {
    pub(crate) fn new() -> Result<Self> {
        Ok(Self {
            buf: KVVec::from_elem(0u8, RX_BUF_LEN, GFP_KERNEL)?,
            start: 0,
            end: 0,
        })
    }

    /// Reads from the socket if nothing is buffered; returns the buffered bytes (empty:
    /// nothing there now), `Ok(None)` at end of stream.
    pub(crate) fn fill<H: crate::kernel_ext::socket::SocketHandler>(
        &mut self,
        sock: &TcpStream<H>,
    ) -> Result<Option<&[u8]>> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            match sock.recv(&mut self.buf) {
                Ok(0) => return Ok(None),
                Ok(n) => self.end = n,
                Err(e) if e == EAGAIN => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Some(&self.buf[self.start..self.end]))
    }

    /// Drops `n` buffered bytes that were used.
    pub(crate) fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.end);
    }

    /// Hands the buffer over (to the receiver), leaving an empty one.
    pub(crate) fn take(&mut self) -> Self {
        core::mem::replace(
            self,
            Self {
                buf: KVVec::new(),
                start: 0,
                end: 0,
            },
        )
    }
}

/// Receive state of a connection.
pub(crate) struct Receiver {
    /// What came in with the last MPA frame, received first.
    input: Option<MpaInput>,
    parser: Option<StreamParser<KernelCrc32c>>,
    /// The header of the FPDU being processed.
    header: Option<RxHeader>,
    /// The Terminate a violation found owes the peer.
    terminate: Option<Terminate>,
    message: Option<Message>,
    /// The checked elements of the message's receive buffer (see `Message`).
    targets: [Target; uapi::SIW_MAX_SGE as usize],
    /// The receive work request being taken, copied out of its ring.
    rqe: uapi::siw_rqe,
    /// The target of the tagged FPDU being received, if it carries payload.
    sink: Option<Sink>,
    /// Responder: the initiator's first FPDU, still expected.
    first_expected: Option<FirstFpdu>,
    first_received: bool,
}

/// What a responder waits for before it may send (RFC 5044, section 7.1.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FirstFpdu {
    /// Peer-to-peer mode: the agreed ready-to-receive message, and nothing else.
    Rtr(RtrMode),
    /// Any valid FPDU.
    Any,
}

impl Receiver {
    pub(crate) fn new() -> Self {
        Self {
            input: None,
            parser: None,
            header: None,
            terminate: None,
            message: None,
            targets: Default::default(),
            rqe: uapi::siw_rqe::default(),
            sink: None,
            first_expected: None,
            first_received: false,
        }
    }

    /// The MPA exchange is over: FPDUs follow, with CRC or not, `input` first; a
    /// responder waits for `first`.
    pub(crate) fn start_fpdus(&mut self, crc: bool, first: Option<FirstFpdu>, input: MpaInput) {
        self.parser = Some(StreamParser::new(RxConfig {
            crc,
            max_ulpdu: u16::MAX,
        }));
        self.first_expected = first;
        self.input = Some(input);
    }

    /// The connection ended: a receive half placed completes as flushed.
    pub(crate) fn flush(&mut self, qp: &Qp<RiwDevice>) {
        if let Some(m) = self.message.take() {
            release(&mut self.targets, m.elements);
            let c =
                Completion::flushed(m.wr_id, uapi::siw_opcode_SIW_OP_RECEIVE, true, qp.qp_num());
            RiwCq::deliver(qp.recv_cq::<RiwDevice>(), &c);
        }
        self.sink = None;
        self.parser = None;
    }

    /// The Terminate the last violation or local error owes the peer, for `cause` if
    /// none was built where it was found.
    pub(crate) fn take_terminate(&mut self, cause: TermCause) -> Terminate {
        self.terminate
            .take()
            .unwrap_or_else(|| Terminate::new(cause))
    }

    /// Whether the first FPDU the responder waited for arrived and is not taken yet.
    pub(crate) fn first_pending(&self) -> bool {
        self.first_received
    }

    /// Whether the first FPDU the responder waited for arrived (once).
    pub(crate) fn take_first(&mut self) -> bool {
        core::mem::take(&mut self.first_received)
    }

    /// Receives and places what the socket holds, up to `budget` FPDUs.
    pub(crate) fn run(
        &mut self,
        sock: &LockedSocket<'_>,
        dev: &Device<RiwDevice>,
        qp: &Qp<RiwDevice>,
        reads: &mut Reads,
        budget: u32,
        wake_sender: &dyn Fn(u32),
    ) -> RxEnd {
        let Self {
            input: mpa_input,
            parser,
            header,
            terminate,
            message,
            targets,
            rqe,
            sink,
            first_expected,
            first_received,
        } = self;
        let Some(parser) = parser.as_mut() else {
            return RxEnd::Idle;
        };
        let mut input = FpduInput {
            parser,
            terminate,
            place: Placer {
                dev,
                qp,
                reads,
                wake_sender,
                header,
                message,
                targets,
                rqe,
                sink,
                first_expected,
                first_received,
            },
            budget,
        };
        // Bytes that came in with the last MPA frame go first.
        if let Some(mpa) = mpa_input.as_mut() {
            let (used, stop) = input.feed(mpa.buf.get(mpa.start..mpa.end).unwrap_or_default());
            mpa.start += used;
            if let Some(stop) = stop {
                return stop;
            }
            if mpa.start >= mpa.end {
                *mpa_input = None;
            }
        }
        // Then the socket's own buffers: payload goes from them straight to its target.
        loop {
            let mut stop = None;
            let (read, drained) = sock.read_in_place(&mut |chunk| {
                if stop.is_some() {
                    return 0;
                }
                let (used, end) = input.feed(chunk);
                stop = end;
                used
            });
            if let Some(stop) = stop {
                return stop;
            }
            match read {
                Ok(0) => return RxEnd::Eof,
                // Saves a second read (and its clock reading) on every message.
                Ok(_) if drained => return RxEnd::Idle,
                Ok(_) => {}
                Err(e) if e == EAGAIN => return RxEnd::Idle,
                Err(e) => return RxEnd::SocketError(e),
            }
        }
    }
}

/// The FPDU parser and the placement of what it finds, fed a run of bytes at a time.
struct FpduInput<'a> {
    parser: &'a mut StreamParser<KernelCrc32c>,
    /// Where a violation leaves the Terminate it owes.
    terminate: &'a mut Option<Terminate>,
    place: Placer<'a>,
    /// Messages still to finish before the receiver lets other work run.
    budget: u32,
}

impl FpduInput<'_> {
    /// Parses and places `input`: the bytes used, and why receiving stops, if it does.
    /// Inlined into the socket's read callback: a call per read costs TCG two block
    /// lookups.
    #[inline(always)]
    fn feed(&mut self, input: &[u8]) -> (usize, Option<RxEnd>) {
        let mut used = 0;
        while used < input.len() {
            let step = match self.parser.poll(&input[used..]) {
                Ok(step) => step,
                Err(why) => {
                    *self.terminate = Some(self.parser.terminate_for(&why));
                    let stop = RxEnd::Violation {
                        cause: why.terminate_cause(),
                        why: Why::Wire(why),
                    };
                    return (used, Some(stop));
                }
            };
            used += step.consumed;
            let Some(event) = step.event else {
                if step.consumed == 0 {
                    break;
                }
                continue;
            };
            let result = match event {
                RxEvent::Header(h) => {
                    self.place.dev.stats.received(&h);
                    self.place.header(&h, self.parser.rdmap())
                }
                RxEvent::Payload { offset, data } => self.place.payload(offset, data),
                RxEvent::End => {
                    self.budget = self.budget.saturating_sub(1);
                    self.place.end()
                }
                RxEvent::Whole { header, data } => {
                    self.place.dev.stats.received(&header);
                    self.budget = self.budget.saturating_sub(1);
                    self.place.whole(&header, self.parser.rdmap(), data)
                }
            };
            if let Err(end) = result {
                if let Some(t) = end.terminate(self.parser, self.place.header.as_ref()) {
                    *self.terminate = Some(t);
                }
                return (used, Some(end));
            }
            if self.budget == 0 {
                return (used, Some(RxEnd::Budget));
            }
        }
        (used, None)
    }
}

/// The placement of one FPDU's events.
struct Placer<'a> {
    dev: &'a Device<RiwDevice>,
    qp: &'a Qp<RiwDevice>,
    reads: &'a mut Reads,
    wake_sender: &'a dyn Fn(u32),
    header: &'a mut Option<RxHeader>,
    message: &'a mut Option<Message>,
    targets: &'a mut [Target; uapi::SIW_MAX_SGE as usize],
    rqe: &'a mut uapi::siw_rqe,
    sink: &'a mut Option<Sink>,
    first_expected: &'a mut Option<FirstFpdu>,
    first_received: &'a mut bool,
}

fn violation(cause: TermCause, why: impl Into<Why>) -> RxEnd {
    RxEnd::Violation {
        cause,
        why: why.into(),
    }
}

impl Placer<'_> {
    fn header(&mut self, h: &RxHeader, rdmap: &RdmapHeader) -> Result<(), RxEnd> {
        *self.header = Some(*h);
        *self.sink = None;
        let seg = &h.segment;
        match *self.first_expected {
            None => {}
            Some(FirstFpdu::Any) => {
                *self.first_expected = None;
                *self.first_received = true;
            }
            Some(FirstFpdu::Rtr(mode)) => {
                // Peer-to-peer: the first FPDU must be the agreed zero-length message.
                let is_rtr = match mode {
                    RtrMode::Write => seg.opcode == Opcode::RdmaWrite,
                    RtrMode::Read => {
                        seg.opcode == Opcode::ReadRequest
                            && matches!(rdmap, RdmapHeader::ReadRequest(r) if r.size == 0)
                    }
                    RtrMode::Send => seg.opcode == Opcode::Send,
                } && h.payload_len == 0
                    && seg.last;
                if !is_rtr || mode == RtrMode::Send {
                    return Err(violation(
                        TermCause::MPA_NO_MATCHING_RTR,
                        WireError::MpaNoMatchingRtr,
                    ));
                }
                *self.first_expected = None;
                *self.first_received = true;
                if mode == RtrMode::Write {
                    return Ok(());
                }
            }
        }
        match seg.opcode {
            Opcode::Send
            | Opcode::SendSolicited
            | Opcode::SendInvalidate
            | Opcode::SendSolicitedInvalidate => self.send_header(h),
            Opcode::RdmaWrite => self.write_header(h),
            Opcode::ReadRequest => self.read_request(rdmap),
            Opcode::ReadResponse => self.response_header(h),
            Opcode::Terminate => match rdmap {
                RdmapHeader::Terminate(t) => Err(RxEnd::Terminated(t.cause)),
                _ => Err(violation(
                    TermCause::RDMAP_UNEXPECTED_OPCODE,
                    WireError::TerminateMalformed,
                )),
            },
            // The RFC 7306 extensions are not offered, so not taken.
            other => Err(violation(
                TermCause::RDMAP_UNEXPECTED_OPCODE,
                WireError::UnknownOpcode(other.to_wire()),
            )),
        }
    }

    /// An RDMA Write segment: its STag must name a region of the QP's domain that grants
    /// remote write and covers the segment. (Access is the STag's to grant, as RFC 5040
    /// has it: the QP's remote access flags are not checked, and librdmacm leaves them
    /// clear on an active side's QP.)
    fn write_header(&mut self, h: &RxHeader) -> Result<(), RxEnd> {
        let (stag, to) = write_target(h)?;
        // A zero-length Write touches no memory: nothing to check.
        if h.payload_len == 0 {
            return Ok(());
        }
        let len = u64::from(h.payload_len);
        let region = self
            .region(stag, access::REMOTE_WRITE, to, len)
            .map_err(|denied| violation(tagged_cause(denied), denied.what()))?;
        *self.sink = Some(Sink { region, addr: to });
        Ok(())
    }

    /// A whole RDMA Write segment with payload, as `write_header`, `payload` and `end`
    /// would take it, but with its region borrowed for the copy rather than referenced:
    /// two atomics and three calls less on the way to the data.
    fn write_whole(&mut self, h: &RxHeader, data: &[u8]) -> Result<(), RxEnd> {
        *self.header = None;
        *self.sink = None;
        let (stag, to) = write_target(h)?;
        let pd = pd_id(self.qp.pd::<RiwDevice>());
        RiwMr::with_region(self.dev, stag, |region| {
            let region = region.ok_or(Denied::Stag)?;
            region.check(stag, pd, access::REMOTE_WRITE, to, data.len() as u64)?;
            Ok(region.write(to, data))
        })
        .map_err(|denied: Denied| violation(tagged_cause(denied), denied.what()))?
        .map_err(placement_failed)
    }

    /// Looks up the region `stag` names and checks an access to it.
    #[inline(always)]
    fn region(
        &self,
        stag: u32,
        rights: u32,
        addr: u64,
        len: u64,
    ) -> core::result::Result<Arc<MemRegion>, Denied> {
        let pd = pd_id(self.qp.pd::<RiwDevice>());
        let region = RiwMr::lookup(self.dev, stag).ok_or(Denied::Stag)?;
        region.check(stag, pd, rights, addr, len)?;
        Ok(region)
    }

    /// A Read Request of the peer: checked against the source region and IRD, then queued
    /// for the sender to answer.
    fn read_request(&mut self, rdmap: &RdmapHeader) -> Result<(), RxEnd> {
        let RdmapHeader::ReadRequest(rr) = rdmap else {
            return Err(violation(
                TermCause::RDMAP_UNEXPECTED_OPCODE,
                "a Read Request without its header",
            ));
        };
        if !self.reads.may_accept_request() {
            // IRD Read Requests are outstanding already: queue 1 has no buffer for it.
            return Err(violation(
                TermCause::DDP_UNTAGGED_NO_BUFFER,
                "more Read Requests outstanding than IRD",
            ));
        }
        if rr.sink_to.checked_add(u64::from(rr.size)).is_none() {
            return Err(violation(
                TermCause::RDMAP_TO_WRAP,
                "a Read Request whose sink offset wraps",
            ));
        }
        let source = if rr.size == 0 {
            None
        } else {
            let region = self
                .region(
                    rr.source_stag,
                    access::REMOTE_READ,
                    rr.source_to,
                    u64::from(rr.size),
                )
                .map_err(|denied| violation(read_source_cause(denied), denied.what()))?;
            Some((region, rr.source_to))
        };
        let request = InboundRead {
            sink_stag: rr.sink_stag,
            sink_to: rr.sink_to,
            size: rr.size,
            source,
        };
        self.reads.accept_request(request).map_err(|_| {
            violation(
                TermCause::RDMAP_LOCAL_CATASTROPHIC,
                "no memory for a Read Request",
            )
        })?;
        (self.wake_sender)(rr.size);
        Ok(())
    }

    /// A Read Response segment: it must continue the response to the oldest Read waiting,
    /// at its sink STag, inside the size asked for.
    fn response_header(&mut self, h: &RxHeader) -> Result<(), RxEnd> {
        let Placement::Tagged { stag, to } = h.segment.placement else {
            return Err(violation(
                TermCause::DDP_TAGGED_INVALID_STAG,
                "a Read Response without a tagged header",
            ));
        };
        let Some(read) = self.reads.awaited() else {
            // No Read waits: the STag names nothing of this stream.
            return Err(violation(
                TermCause::DDP_TAGGED_INVALID_STAG,
                "a Read Response with no Read outstanding",
            ));
        };
        if stag != read.stag {
            return Err(violation(
                TermCause::DDP_TAGGED_INVALID_STAG,
                "a Read Response to another STag",
            ));
        }
        let len = u32::from(h.payload_len);
        let expected = read.to + u64::from(read.received);
        let end = read.received.checked_add(len);
        if to != expected || end.map_or(true, |end| end > read.size) {
            return Err(violation(
                TermCause::DDP_TAGGED_BASE_BOUNDS,
                "a Read Response out of order or beyond its size",
            ));
        }
        if len != 0 {
            let Some(region) = read.region.clone() else {
                return Err(violation(
                    TermCause::DDP_TAGGED_BASE_BOUNDS,
                    "a Read Response into no buffer",
                ));
            };
            *self.sink = Some(Sink {
                region,
                addr: read.to + u64::from(read.received),
            });
        }
        read.received += len;
        Ok(())
    }

    fn send_header(&mut self, h: &RxHeader) -> Result<(), RxEnd> {
        let seg = &h.segment;
        let Placement::Untagged { mo, inval_stag, .. } = seg.placement else {
            return Err(violation(
                TermCause::RDMAP_UNEXPECTED_OPCODE,
                WireError::OpcodeTagMismatch {
                    opcode: seg.opcode.to_wire(),
                },
            ));
        };
        if !self.message.as_ref().is_some_and(|m| m.started) {
            if mo != 0 {
                return Err(violation(
                    TermCause::DDP_UNTAGGED_INVALID_MO,
                    WireError::InvalidMessageOffset {
                        queue: 0,
                        expected: 0,
                        received: mo,
                    },
                ));
            }
            if self.message.is_none() && !self.take_receive() {
                // No receive posted: the peer sent more than the consumer asked for.
                return Err(violation(
                    TermCause::DDP_UNTAGGED_NO_BUFFER,
                    "a message without a posted receive",
                ));
            }
            if self.message.as_ref().is_some_and(|m| m.bad_buffer) {
                return Err(self.fail_receive(
                    uapi::siw_wc_status_SIW_WC_LOC_PROT_ERR,
                    TermCause::RDMAP_LOCAL_CATASTROPHIC,
                ));
            }
        }
        if let Some(m) = self.message.as_mut() {
            m.started = true;
            m.solicited = seg.opcode.solicited();
            if seg.opcode.invalidates() {
                m.invalidate = Some(inval_stag);
            }
            let end = u64::from(mo) + u64::from(h.payload_len);
            if end > m.capacity {
                return Err(self.fail_receive(
                    uapi::siw_wc_status_SIW_WC_LOC_LEN_ERR,
                    TermCause::DDP_UNTAGGED_MESSAGE_TOO_LONG,
                ));
            }
        }
        Ok(())
    }

    /// Takes the next posted receive as the next message's buffer, its elements checked
    /// (a bad one fails the message when it comes); false if none is posted.
    fn take_receive(&mut self) -> bool {
        if !RiwQp::take_recv(self.qp, self.rqe) {
            return false;
        }
        let rqe = &*self.rqe;
        let n = usize::from(rqe.num_sge);
        if trace::post_enabled() {
            let len = rqe
                .sge
                .iter()
                .take(n)
                .fold(0u32, |l, s| l.wrapping_add(s.length));
            let op = uapi::siw_opcode_SIW_OP_RECEIVE as u8;
            trace::post(self.qp, self.qp.qp_num(), true, rqe.id, op, len);
        }
        let mut m = Message {
            wr_id: rqe.id,
            elements: 0,
            capacity: 0,
            placed: 0,
            bad_buffer: n > uapi::SIW_MAX_SGE as usize,
            started: false,
            solicited: false,
            invalidate: None,
        };
        let pd = pd_id(self.qp.pd::<RiwDevice>());
        for sge in rqe.sge.iter().take(n) {
            if sge.length == 0 {
                continue;
            }
            let region = RiwMr::lookup(self.dev, sge.lkey).filter(|r| {
                r.permits(
                    sge.lkey,
                    pd,
                    access::LOCAL_WRITE,
                    sge.laddr,
                    u64::from(sge.length),
                )
            });
            if region.is_none() {
                m.bad_buffer = true;
            }
            match self.targets.get_mut(m.elements) {
                Some(slot) => {
                    *slot = Target {
                        region,
                        addr: sge.laddr,
                        len: sge.length,
                    };
                    m.elements += 1;
                }
                None => m.bad_buffer = true,
            }
            m.capacity += u64::from(sge.length);
        }
        *self.message = Some(m);
        true
    }

    /// Ends the current message: its buffer's region references go.
    fn take_message(&mut self) -> Option<Message> {
        let m = self.message.take()?;
        release(self.targets, m.elements);
        Some(m)
    }

    /// Completes the current receive with `status` and ends the connection.
    fn fail_receive(&mut self, status: u32, cause: TermCause) -> RxEnd {
        if let Some(m) = self.take_message() {
            self.complete(&m, status);
        }
        RxEnd::LocalError { cause }
    }

    #[inline(always)]
    fn complete(&self, m: &Message, status: u32) {
        let c = Completion {
            wr_id: m.wr_id,
            opcode: uapi::siw_opcode_SIW_OP_RECEIVE,
            status,
            bytes: if status == uapi::siw_wc_status_SIW_WC_SUCCESS {
                m.placed as u32
            } else {
                0
            },
            qp_num: self.qp.qp_num(),
            solicited: m.solicited,
            invalidated: if status == uapi::siw_wc_status_SIW_WC_SUCCESS {
                m.invalidate
            } else {
                None
            },
        };
        RiwCq::deliver(self.qp.recv_cq::<RiwDevice>(), &c);
    }

    #[inline(always)]
    fn payload(&mut self, offset: u16, data: &[u8]) -> Result<(), RxEnd> {
        let Some(h) = self.header.as_ref() else {
            return Ok(());
        };
        let Placement::Untagged { mo, .. } = h.segment.placement else {
            // Tagged: into the memory checked at the header.
            let Some(sink) = self.sink.as_ref() else {
                return Ok(());
            };
            return sink
                .region
                .write(sink.addr + u64::from(offset), data)
                .map_err(placement_failed);
        };
        let Some(m) = self.message.as_mut() else {
            return Ok(());
        };
        let at = u64::from(mo) + u64::from(offset);
        let targets = self.targets.get(..m.elements).unwrap_or_default();
        if place(targets, at, data).is_err() {
            return Err(self.fail_receive(
                uapi::siw_wc_status_SIW_WC_LOC_PROT_ERR,
                TermCause::RDMAP_LOCAL_CATASTROPHIC,
            ));
        }
        m.placed = m.placed.max(at + data.len() as u64);
        Ok(())
    }

    /// A whole FPDU, checked to its CRC: its header, payload and end in turn.
    fn whole(&mut self, h: &RxHeader, rdmap: &RdmapHeader, data: &[u8]) -> Result<(), RxEnd> {
        if h.segment.opcode == Opcode::RdmaWrite
            && !data.is_empty()
            && self.first_expected.is_none()
        {
            return self.write_whole(h, data);
        }
        self.header(h, rdmap)?;
        if !data.is_empty() {
            self.payload(0, data)?;
        }
        self.end()
    }

    #[inline(always)]
    fn end(&mut self) -> Result<(), RxEnd> {
        *self.sink = None;
        let Some(h) = self.header.take() else {
            return Ok(());
        };
        if !h.segment.last {
            return Ok(());
        }
        if h.segment.opcode == Opcode::ReadResponse {
            // The last segment: the response must be whole.
            let whole = self.reads.awaited().is_some_and(|r| r.received == r.size);
            if !whole {
                return Err(violation(
                    TermCause::DDP_TAGGED_BASE_BOUNDS,
                    "a Read Response shorter than the Read",
                ));
            }
            self.reads.read_done(self.qp);
            if self.reads.sender_wanted() {
                (self.wake_sender)(u32::MAX);
            }
            return Ok(());
        }
        // Only the last segment of a Send ends the message in progress (a Write or a Read
        // Request leaves it, and a receive taken before its message, alone).
        if !h.segment.opcode.is_send() || !self.message.as_ref().is_some_and(|m| m.started) {
            return Ok(());
        }
        // The completion goes first: what follows it is off the message's critical path.
        let Some(m) = self.message.take() else {
            return Ok(());
        };
        let mut result = Ok(());
        let mut status = uapi::siw_wc_status_SIW_WC_SUCCESS;
        if let Some(stag) = m.invalidate {
            let pd = pd_id(self.qp.pd::<RiwDevice>());
            if !RiwMr::invalidate(self.dev, stag, pd) {
                status = uapi::siw_wc_status_SIW_WC_REM_INV_REQ_ERR;
                result = Err(RxEnd::LocalError {
                    cause: TermCause::RDMAP_OPERATION_CANNOT_INVALIDATE,
                });
            }
        }
        self.complete(&m, status);
        release(self.targets, m.elements);
        // The next message's receive, while nothing waits for it (not from a shared
        // queue: another QP may need that one first).
        if result.is_ok() && self.qp.srq::<RiwDevice>().is_none() {
            self.take_receive();
        }
        result
    }
}

/// The STag and tagged offset of an RDMA Write segment.
fn write_target(h: &RxHeader) -> Result<(u32, u64), RxEnd> {
    match h.segment.placement {
        Placement::Tagged { stag, to } => Ok((stag, to)),
        _ => Err(violation(
            TermCause::DDP_TAGGED_INVALID_STAG,
            "an RDMA Write without a tagged header",
        )),
    }
}

/// A copy into checked memory that failed.
fn placement_failed(_: Error) -> RxEnd {
    violation(
        TermCause::DDP_LOCAL_CATASTROPHIC,
        "placement into memory failed",
    )
}

/// The Terminate cause of a refused tagged placement (RDMA Write or Read Response).
fn tagged_cause(denied: Denied) -> TermCause {
    match denied {
        Denied::Stag => TermCause::DDP_TAGGED_INVALID_STAG,
        Denied::Domain => TermCause::DDP_TAGGED_STAG_NOT_ASSOCIATED,
        Denied::Rights => TermCause::RDMAP_ACCESS_RIGHTS,
        Denied::Bounds => TermCause::DDP_TAGGED_BASE_BOUNDS,
    }
}

/// The Terminate cause of a refused Read Request source.
fn read_source_cause(denied: Denied) -> TermCause {
    match denied {
        Denied::Stag => TermCause::RDMAP_INVALID_STAG,
        Denied::Domain => TermCause::RDMAP_STAG_NOT_ASSOCIATED,
        Denied::Rights => TermCause::RDMAP_ACCESS_RIGHTS,
        Denied::Bounds => TermCause::RDMAP_BASE_BOUNDS,
    }
}

/// Drops the region references of the first `n` receive buffer elements.
fn release(targets: &mut [Target], n: usize) {
    for t in targets.iter_mut().take(n) {
        t.region = None;
    }
}

/// Copies `data` to message offset `at` of a receive buffer made of `targets`.
#[inline(always)]
fn place(targets: &[Target], mut at: u64, mut data: &[u8]) -> Result {
    for t in targets {
        if data.is_empty() {
            break;
        }
        let len = u64::from(t.len);
        if at >= len {
            at -= len;
            continue;
        }
        let n = (len - at).min(data.len() as u64) as usize;
        let region = t.region.as_ref().ok_or(EFAULT)?;
        region.write(t.addr + at, &data[..n])?;
        data = &data[n..];
        at = 0;
    }
    if data.is_empty() {
        Ok(())
    } else {
        Err(EFAULT)
    }
}
