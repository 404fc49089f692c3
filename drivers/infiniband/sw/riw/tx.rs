// SPDX-License-Identifier: GPL-2.0

//! The send side of a connection: work requests taken from the send queue (copied once
//! out of the shared ring and validated), segmented into FPDUs no larger than the path
//! allows, handed to the socket without blocking, and completed into the send CQ.

use crate::cq::{Completion, RiwCq};
use crate::crc::KernelCrc32c;
use crate::device::RiwDevice;
use crate::kernel_ext::rdma::{Device, Qp};
use crate::kernel_ext::socket::{SocketHandler, TcpStream};
use crate::kernel_ext::uapi::{SqeExt, INLINE_AREA};
use crate::mr::{pd_id, MemRegion, RiwMr};
use crate::proto::fpdu::max_ulpdu_for_mss;
use crate::proto::{
    FpduHeader, FpduWriter, Opcode, Placement, RdmapHeader, SegmentHeader, Segmenter, Terminate,
    MAX_FRAME_HEADER_LEN, MAX_TRAILER_LEN,
};
use crate::qp::RiwQp;
use crate::uapi;
use kernel::prelude::*;
use kernel::sync::Arc;

/// Largest message, as the device advertises it.
const MAX_MESSAGE: u64 = 1 << 31;

/// How a send run ended.
pub(crate) enum TxEnd {
    /// The send queue is empty and everything went to the socket.
    Idle,
    /// The socket is full; its write-space callback resumes us.
    Blocked,
    /// The budget is used up; more may be waiting.
    Budget,
    /// A work request failed locally (completed in error): the connection ends.
    LocalError,
    /// The socket failed.
    SocketError(Error),
}

/// Where a message's payload comes from.
enum Source {
    /// A checked element of a registered region.
    Region {
        region: Arc<MemRegion>,
        addr: u64,
        len: u32,
    },
    /// Inline data, copied into the work request at post time.
    Inline { len: u32 },
}

/// The message being sent.
struct Message {
    wr_id: u64,
    opcode: u8,
    signalled: bool,
    sources: KVec<Source>,
    inline: [u8; INLINE_AREA],
    segments: Segmenter,
}

/// Send state of a connection.
pub(crate) struct Sender {
    crc: bool,
    max_ulpdu: u16,
    /// Next MSN on the Send queue.
    send_msn: u32,
    /// The FPDU being handed to the socket and how much of it went.
    frame: KVec<u8>,
    frame_len: usize,
    frame_sent: usize,
    message: Option<Message>,
}

impl Sender {
    /// A sender for a connection with CRC on or off, over a path of `mss`-byte segments.
    pub(crate) fn new(crc: bool, mss: u32) -> Result<Self> {
        let max_ulpdu = max_ulpdu_for_mss(mss.max(128));
        let len = MAX_FRAME_HEADER_LEN + usize::from(max_ulpdu) + MAX_TRAILER_LEN;
        let frame = KVec::from_elem(0u8, len, GFP_KERNEL)?;
        Ok(Self {
            crc,
            max_ulpdu,
            send_msn: 1,
            frame,
            frame_len: 0,
            frame_sent: 0,
            message: None,
        })
    }

    /// Whether nothing is half-sent.
    pub(crate) fn is_idle(&self) -> bool {
        self.message.is_none() && self.frame_sent == self.frame_len
    }

    /// Hands the rest of the current FPDU to the socket.
    fn push<H: SocketHandler>(&mut self, sock: &TcpStream<H>, more: bool) -> Result<bool> {
        while self.frame_sent < self.frame_len {
            match sock.send(&self.frame[self.frame_sent..self.frame_len], more) {
                Ok(n) => self.frame_sent += n,
                Err(e) if e == EAGAIN => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Sends what the send queue holds, up to `budget` FPDUs.
    pub(crate) fn run<H: SocketHandler>(
        &mut self,
        sock: &TcpStream<H>,
        dev: &Device<RiwDevice>,
        qp: &Qp<RiwDevice>,
        mut budget: u32,
    ) -> TxEnd {
        loop {
            match self.push(sock, true) {
                Ok(true) => {}
                Ok(false) => return TxEnd::Blocked,
                Err(e) => return TxEnd::SocketError(e),
            }
            if budget == 0 {
                return TxEnd::Budget;
            }
            if self.message.is_none() {
                let Some(sqe) = RiwQp::take_send(qp) else {
                    return TxEnd::Idle;
                };
                match self.start(dev, qp, &sqe) {
                    Ok(m) => self.message = Some(m),
                    Err(status) => {
                        complete(qp, sqe.id, sqe.opcode, status, 0);
                        return TxEnd::LocalError;
                    }
                }
            }
            let Some(m) = self.message.as_mut() else {
                continue;
            };
            match m.segments.next() {
                Some(segment) => {
                    if self
                        .build(segment.header, segment.offset, segment.len)
                        .is_err()
                    {
                        let m = self.message.take();
                        if let Some(m) = m {
                            complete(
                                qp,
                                m.wr_id,
                                m.opcode,
                                uapi::siw_wc_status_SIW_WC_LOC_PROT_ERR,
                                0,
                            );
                        }
                        return TxEnd::LocalError;
                    }
                    budget -= 1;
                }
                None => {
                    // Every segment is with the socket: the Send is done for the sender.
                    if let Some(m) = self.message.take() {
                        self.send_msn = self.send_msn.wrapping_add(1);
                        if m.signalled {
                            let len = m.sources.iter().map(Source::len).sum::<u32>();
                            complete(
                                qp,
                                m.wr_id,
                                m.opcode,
                                uapi::siw_wc_status_SIW_WC_SUCCESS,
                                len,
                            );
                        }
                    }
                }
            }
        }
    }

    /// Validates a send work request and plans its segments; `Err` is the completion
    /// status to report.
    fn start(
        &self,
        dev: &Device<RiwDevice>,
        qp: &Qp<RiwDevice>,
        sqe: &uapi::siw_sqe,
    ) -> core::result::Result<Message, u32> {
        const LOC_QP_OP_ERR: u32 = uapi::siw_wc_status_SIW_WC_LOC_QP_OP_ERR;
        let flags = u32::from(sqe.flags);
        let known = uapi::siw_wqe_flags_SIW_WQE_VALID
            | uapi::siw_wqe_flags_SIW_WQE_INLINE
            | uapi::siw_wqe_flags_SIW_WQE_SIGNALLED
            | uapi::siw_wqe_flags_SIW_WQE_SOLICITED
            | uapi::siw_wqe_flags_SIW_WQE_READ_FENCE;
        if flags & !known != 0 {
            return Err(LOC_QP_OP_ERR);
        }
        let solicited = flags & uapi::siw_wqe_flags_SIW_WQE_SOLICITED != 0;
        let (opcode, inval_stag) = match u32::from(sqe.opcode) {
            uapi::siw_opcode_SIW_OP_SEND if solicited => (Opcode::SendSolicited, 0),
            uapi::siw_opcode_SIW_OP_SEND => (Opcode::Send, 0),
            uapi::siw_opcode_SIW_OP_SEND_REMOTE_INV if solicited => {
                (Opcode::SendSolicitedInvalidate, sqe.rkey)
            }
            uapi::siw_opcode_SIW_OP_SEND_REMOTE_INV => (Opcode::SendInvalidate, sqe.rkey),
            // RDMA Write and Read come with the data path engine.
            _ => return Err(LOC_QP_OP_ERR),
        };
        let mut sources = KVec::new();
        let mut inline = [0u8; INLINE_AREA];
        let mut total: u64 = 0;
        if flags & uapi::siw_wqe_flags_SIW_WQE_INLINE != 0 {
            let len = sqe.sges()[0].length;
            if len as usize > INLINE_AREA {
                return Err(LOC_QP_OP_ERR);
            }
            inline = sqe.inline_area();
            sources
                .push(Source::Inline { len }, GFP_KERNEL)
                .map_err(|_| LOC_QP_OP_ERR)?;
            total = u64::from(len);
        } else {
            let n = usize::from(sqe.num_sge);
            if n > uapi::SIW_MAX_SGE as usize {
                return Err(LOC_QP_OP_ERR);
            }
            let pd = pd_id(qp.pd::<RiwDevice>());
            for sge in sqe.sges().iter().take(n) {
                if sge.length == 0 {
                    continue;
                }
                let region = RiwMr::lookup(dev, sge.lkey)
                    .filter(|r| r.permits(sge.lkey, pd, 0, sge.laddr, u64::from(sge.length)))
                    .ok_or(uapi::siw_wc_status_SIW_WC_LOC_PROT_ERR)?;
                sources
                    .push(
                        Source::Region {
                            region,
                            addr: sge.laddr,
                            len: sge.length,
                        },
                        GFP_KERNEL,
                    )
                    .map_err(|_| LOC_QP_OP_ERR)?;
                total += u64::from(sge.length);
            }
        }
        if total > MAX_MESSAGE {
            return Err(uapi::siw_wc_status_SIW_WC_LOC_LEN_ERR);
        }
        let template = FpduHeader {
            segment: SegmentHeader {
                opcode,
                last: true,
                placement: Placement::Untagged {
                    inval_stag,
                    queue: 0,
                    msn: self.send_msn,
                    mo: 0,
                },
            },
            rdmap: RdmapHeader::None,
        };
        let segments =
            Segmenter::new(template, total as u32, self.max_ulpdu).map_err(|_| LOC_QP_OP_ERR)?;
        Ok(Message {
            wr_id: sqe.id,
            opcode: sqe.opcode,
            signalled: flags & uapi::siw_wqe_flags_SIW_WQE_SIGNALLED != 0,
            sources,
            inline,
            segments,
        })
    }

    /// Builds the FPDU of one segment of the current message into the frame buffer.
    fn build(&mut self, header: FpduHeader, offset: u32, len: u32) -> Result {
        let Self {
            crc,
            frame,
            frame_len,
            frame_sent,
            message,
            ..
        } = self;
        let m = message.as_ref().ok_or(EINVAL)?;
        let (mut writer, head) =
            FpduWriter::<KernelCrc32c>::begin(&header, len as usize, *crc, frame)
                .map_err(|_| EINVAL)?;
        let body_end = head + len as usize;
        let body = frame.get_mut(head..body_end).ok_or(EINVAL)?;
        gather(m, offset, body)?;
        writer.payload(body).map_err(|_| EINVAL)?;
        let tail = writer
            .finish(frame.get_mut(body_end..).ok_or(EINVAL)?)
            .map_err(|_| EINVAL)?;
        *frame_len = body_end + tail;
        *frame_sent = 0;
        Ok(())
    }

    /// Sends a Terminate, best effort (the connection ends right after).
    pub(crate) fn terminate<H: SocketHandler>(&mut self, sock: &TcpStream<H>, term: Terminate) {
        // Whatever was half-sent must go first, or the Terminate would land inside it.
        if !matches!(self.push(sock, true), Ok(true)) {
            return;
        }
        let header = FpduHeader::terminate(term);
        if let Ok(n) =
            crate::proto::encode_fpdu::<KernelCrc32c>(&header, &[], self.crc, &mut self.frame)
        {
            self.frame_len = n;
            self.frame_sent = 0;
            let _ = self.push(sock, false);
        }
    }

    /// Sends the peer-to-peer ready-to-receive message: a zero-length RDMA Write (with a
    /// non-zero STag, which some hardware insists on).
    pub(crate) fn ready_to_receive<H: SocketHandler>(&mut self, sock: &TcpStream<H>) -> Result {
        let header = FpduHeader::new(SegmentHeader {
            opcode: Opcode::RdmaWrite,
            last: true,
            placement: Placement::Tagged { stag: 1, to: 0 },
        });
        let n = crate::proto::encode_fpdu::<KernelCrc32c>(&header, &[], self.crc, &mut self.frame)
            .map_err(|_| EINVAL)?;
        self.frame_len = n;
        self.frame_sent = 0;
        self.push(sock, false).map(|_| ())
    }
}

impl Source {
    fn len(&self) -> u32 {
        match self {
            Self::Region { len, .. } | Self::Inline { len } => *len,
        }
    }
}

/// Copies bytes `offset..offset + out.len()` of the message's payload into `out`.
fn gather(m: &Message, mut offset: u32, mut out: &mut [u8]) -> Result {
    for s in m.sources.iter() {
        if out.is_empty() {
            break;
        }
        let len = s.len();
        if offset >= len {
            offset -= len;
            continue;
        }
        let n = ((len - offset) as usize).min(out.len());
        let (now, rest) = out.split_at_mut(n);
        match s {
            Source::Region { region, addr, .. } => region.read(addr + u64::from(offset), now)?,
            Source::Inline { .. } => {
                let start = offset as usize;
                now.copy_from_slice(m.inline.get(start..start + n).ok_or(EINVAL)?);
            }
        }
        out = rest;
        offset = 0;
    }
    if out.is_empty() {
        Ok(())
    } else {
        Err(EINVAL)
    }
}

/// Reports the completion of a send work request.
fn complete(qp: &Qp<RiwDevice>, wr_id: u64, opcode: u8, status: u32, bytes: u32) {
    let user_opcode = matches!(
        u32::from(opcode),
        uapi::siw_opcode_SIW_OP_SEND | uapi::siw_opcode_SIW_OP_SEND_REMOTE_INV
    );
    let c = Completion {
        wr_id,
        opcode: if user_opcode {
            u32::from(opcode)
        } else {
            uapi::siw_opcode_SIW_OP_SEND
        },
        status,
        bytes,
        qp_num: qp.qp_num(),
        solicited: false,
        invalidated: None,
    };
    let cq = qp.send_cq::<RiwDevice>();
    if RiwCq::push(cq, &c).is_err() {
        cq.report_overrun();
    }
}
