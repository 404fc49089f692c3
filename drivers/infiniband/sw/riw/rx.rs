// SPDX-License-Identifier: GPL-2.0

//! The receive side of a connection: bytes from the socket, through the protocol core's
//! stream parser, placed into posted receive buffers, completed into the receive CQ.
//!
//! Everything here comes from the wire and is checked before use: the parser validates
//! framing, CRC, DDP and RDMAP headers, MSNs and offsets; placement checks each receive
//! buffer's memory (region, key, protection domain, rights, bounds) and the message's
//! length against it. A violation ends in a Terminate for the peer and an error for the
//! QP, never in a write outside the buffer.

use crate::cq::{Completion, RiwCq};
use crate::crc::KernelCrc32c;
use crate::device::RiwDevice;
use crate::kernel_ext::rdma::{access, Device, Qp};
use crate::kernel_ext::socket::TcpStream;
use crate::mr::{pd_id, MemRegion, RiwMr};
use crate::proto::{
    Error as WireError, Opcode, Placement, RdmapHeader, RtrMode, RxConfig, RxEvent, RxHeader,
    StreamParser, TermCause, Terminate,
};
use crate::qp::RiwQp;
use crate::uapi;
use kernel::prelude::*;
use kernel::sync::Arc;

/// Bytes read from the socket at a time.
const RX_BUF_LEN: usize = 16 * 1024;

/// How a receive run ended.
pub(crate) enum RxEnd {
    /// Everything available was taken.
    Idle,
    /// The budget is used up; more may be waiting.
    Budget,
    /// The peer closed its direction in order.
    Eof,
    /// The socket failed.
    SocketError(Error),
    /// The peer broke the protocol (or sent what riw cannot take): send `terminate` and
    /// end the connection.
    Violation {
        terminate: Terminate,
        why: Option<WireError>,
    },
    /// A receive buffer could not take the message (local error): the same, with the
    /// receive completed in error.
    LocalError { terminate: Terminate },
    /// The peer sent a Terminate.
    Terminated(Terminate),
}

/// One receive buffer element, checked.
#[derive(Clone)]
struct Target {
    region: Option<Arc<MemRegion>>,
    addr: u64,
    len: u32,
}

/// The receive buffer of the message being placed.
struct Message {
    wr_id: u64,
    targets: KVec<Target>,
    capacity: u64,
    /// Bytes placed so far (the highest message offset reached).
    placed: u64,
    /// Set once the buffer's elements failed their checks.
    bad_buffer: bool,
    solicited: bool,
    invalidate: Option<u32>,
}

/// Receive state of a connection.
pub(crate) struct Receiver {
    buf: KVec<u8>,
    start: usize,
    end: usize,
    parser: Option<StreamParser<KernelCrc32c>>,
    /// The header of the FPDU being processed.
    header: Option<RxHeader>,
    message: Option<Message>,
    /// Peer-to-peer mode, responder: the ready-to-receive message still expected.
    rtr_expected: Option<RtrMode>,
    rtr_received: bool,
}

impl Receiver {
    pub(crate) fn new() -> Result<Self> {
        let buf = KVec::from_elem(0u8, RX_BUF_LEN, GFP_KERNEL)?;
        Ok(Self {
            buf,
            start: 0,
            end: 0,
            parser: None,
            header: None,
            message: None,
            rtr_expected: None,
            rtr_received: false,
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

    /// The MPA exchange is over: FPDUs follow, with CRC or not.
    pub(crate) fn start_fpdus(&mut self, crc: bool, rtr_expected: Option<RtrMode>) {
        self.parser = Some(StreamParser::new(RxConfig {
            crc,
            max_ulpdu: u16::MAX,
        }));
        self.rtr_expected = rtr_expected;
    }

    /// Whether the peer-to-peer ready-to-receive message arrived (once).
    pub(crate) fn take_rtr(&mut self) -> bool {
        core::mem::take(&mut self.rtr_received)
    }

    /// Receives and places what the socket holds, up to `budget` FPDUs.
    pub(crate) fn run<H: crate::kernel_ext::socket::SocketHandler>(
        &mut self,
        sock: &TcpStream<H>,
        dev: &Device<RiwDevice>,
        qp: &Qp<RiwDevice>,
        mut budget: u32,
    ) -> RxEnd {
        loop {
            match self.fill(sock) {
                Ok(None) => return RxEnd::Eof,
                Ok(Some([])) => return RxEnd::Idle,
                Ok(Some(_)) => {}
                Err(e) => return RxEnd::SocketError(e),
            }
            let Self {
                buf,
                start,
                end,
                parser,
                header,
                message,
                rtr_expected,
                rtr_received,
            } = self;
            let Some(parser) = parser.as_mut() else {
                return RxEnd::Idle;
            };
            let input = &buf[*start..*end];
            let step = match parser.poll(input) {
                Ok(step) => step,
                Err(why) => {
                    return RxEnd::Violation {
                        terminate: parser.terminate_for(&why),
                        why: Some(why),
                    }
                }
            };
            *start += step.consumed;
            let Some(event) = step.event else {
                continue;
            };
            let mut place = Placer {
                dev,
                qp,
                header,
                message,
                rtr_expected,
                rtr_received,
            };
            let result = match event {
                RxEvent::Header(h) => place.header(h),
                RxEvent::Payload { offset, data } => place.payload(offset, data),
                RxEvent::End => {
                    budget = budget.saturating_sub(1);
                    place.end()
                }
            };
            if let Err(end) = result {
                return end;
            }
            if budget == 0 {
                return RxEnd::Budget;
            }
        }
    }
}

/// The placement of one FPDU's events.
struct Placer<'a> {
    dev: &'a Device<RiwDevice>,
    qp: &'a Qp<RiwDevice>,
    header: &'a mut Option<RxHeader>,
    message: &'a mut Option<Message>,
    rtr_expected: &'a mut Option<RtrMode>,
    rtr_received: &'a mut bool,
}

fn violation(cause: TermCause, why: Option<WireError>) -> RxEnd {
    RxEnd::Violation {
        terminate: Terminate::new(cause),
        why,
    }
}

impl Placer<'_> {
    fn header(&mut self, h: RxHeader) -> Result<(), RxEnd> {
        *self.header = Some(h);
        let seg = h.header.segment;
        if let Some(mode) = *self.rtr_expected {
            // Peer-to-peer: the first FPDU must be the agreed zero-length message.
            let is_rtr = match mode {
                RtrMode::Write => seg.opcode == Opcode::RdmaWrite,
                RtrMode::Read => seg.opcode == Opcode::ReadRequest,
                RtrMode::Send => seg.opcode == Opcode::Send,
            } && h.payload_len == 0
                && seg.last;
            if !is_rtr || mode != RtrMode::Write {
                return Err(violation(
                    TermCause::MPA_NO_MATCHING_RTR,
                    Some(WireError::MpaNoMatchingRtr),
                ));
            }
            *self.rtr_expected = None;
            *self.rtr_received = true;
            return Ok(());
        }
        match seg.opcode {
            Opcode::Send
            | Opcode::SendSolicited
            | Opcode::SendInvalidate
            | Opcode::SendSolicitedInvalidate => self.send_header(h),
            Opcode::Terminate => match h.header.rdmap {
                RdmapHeader::Terminate(t) => Err(RxEnd::Terminated(t)),
                _ => Err(violation(
                    TermCause::RDMAP_UNEXPECTED_OPCODE,
                    Some(WireError::TerminateMalformed),
                )),
            },
            // RDMA Write, Read and the RFC 7306 extensions are not taken (yet).
            other => Err(violation(
                TermCause::RDMAP_UNEXPECTED_OPCODE,
                Some(WireError::UnknownOpcode(other.to_wire())),
            )),
        }
    }

    fn send_header(&mut self, h: RxHeader) -> Result<(), RxEnd> {
        let seg = h.header.segment;
        let Placement::Untagged { mo, inval_stag, .. } = seg.placement else {
            return Err(violation(
                TermCause::RDMAP_UNEXPECTED_OPCODE,
                Some(WireError::OpcodeTagMismatch {
                    opcode: seg.opcode.to_wire(),
                }),
            ));
        };
        if self.message.is_none() {
            if mo != 0 {
                return Err(violation(
                    TermCause::DDP_UNTAGGED_INVALID_MO,
                    Some(WireError::InvalidMessageOffset {
                        queue: 0,
                        expected: 0,
                        received: mo,
                    }),
                ));
            }
            let Some(rqe) = RiwQp::take_recv(self.qp) else {
                // No receive posted: the peer sent more than the consumer asked for.
                return Err(violation(TermCause::DDP_UNTAGGED_NO_BUFFER, None));
            };
            *self.message = Some(self.receive_buffer(&rqe)?);
        }
        if let Some(m) = self.message.as_mut() {
            m.solicited = matches!(
                seg.opcode,
                Opcode::SendSolicited | Opcode::SendSolicitedInvalidate
            );
            if matches!(
                seg.opcode,
                Opcode::SendInvalidate | Opcode::SendSolicitedInvalidate
            ) {
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

    /// Checks a receive work request's buffer: each non-empty element must name a valid
    /// region of the QP's protection domain, writable locally, covering it.
    fn receive_buffer(&mut self, rqe: &uapi::siw_rqe) -> Result<Message, RxEnd> {
        let n = usize::from(rqe.num_sge);
        let mut m = Message {
            wr_id: rqe.id,
            targets: KVec::new(),
            capacity: 0,
            placed: 0,
            bad_buffer: n > uapi::SIW_MAX_SGE as usize,
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
            let target = Target {
                region,
                addr: sge.laddr,
                len: sge.length,
            };
            if m.targets.push(target, GFP_KERNEL).is_err() {
                m.bad_buffer = true;
            }
            m.capacity += u64::from(sge.length);
        }
        if m.bad_buffer {
            *self.message = Some(m);
            return Err(self.fail_receive(
                uapi::siw_wc_status_SIW_WC_LOC_PROT_ERR,
                TermCause::RDMAP_LOCAL_CATASTROPHIC,
            ));
        }
        Ok(m)
    }

    /// Completes the current receive with `status` and ends the connection.
    fn fail_receive(&mut self, status: u32, cause: TermCause) -> RxEnd {
        if let Some(m) = self.message.take() {
            self.complete(&m, status);
        }
        RxEnd::LocalError {
            terminate: Terminate::new(cause),
        }
    }

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
        let cq = self.qp.recv_cq::<RiwDevice>();
        if RiwCq::push(cq, &c).is_err() {
            cq.report_overrun();
        }
    }

    fn payload(&mut self, offset: u16, data: &[u8]) -> Result<(), RxEnd> {
        let Some(h) = *self.header else {
            return Ok(());
        };
        let Placement::Untagged { mo, .. } = h.header.segment.placement else {
            return Ok(());
        };
        let Some(m) = self.message.as_mut() else {
            return Ok(());
        };
        let at = u64::from(mo) + u64::from(offset);
        if place(&m.targets, at, data).is_err() {
            return Err(self.fail_receive(
                uapi::siw_wc_status_SIW_WC_LOC_PROT_ERR,
                TermCause::RDMAP_LOCAL_CATASTROPHIC,
            ));
        }
        m.placed = m.placed.max(at + data.len() as u64);
        Ok(())
    }

    fn end(&mut self) -> Result<(), RxEnd> {
        let Some(h) = self.header.take() else {
            return Ok(());
        };
        if !h.header.segment.last || self.message.is_none() {
            return Ok(());
        }
        if let Some(m) = self.message.take() {
            if let Some(stag) = m.invalidate {
                let pd = pd_id(self.qp.pd::<RiwDevice>());
                match RiwMr::lookup(self.dev, stag) {
                    Some(r) if r.may_invalidate(stag, pd) => r.invalidate(),
                    _ => {
                        self.complete(&m, uapi::siw_wc_status_SIW_WC_REM_INV_REQ_ERR);
                        return Err(RxEnd::LocalError {
                            terminate: Terminate::new(TermCause::RDMAP_OPERATION_CANNOT_INVALIDATE),
                        });
                    }
                }
            }
            self.complete(&m, uapi::siw_wc_status_SIW_WC_SUCCESS);
        }
        Ok(())
    }
}

/// Copies `data` to message offset `at` of a receive buffer made of `targets`.
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
