// SPDX-License-Identifier: GPL-2.0

//! RDMA Read state of a connection, and the order of send completions.
//!
//! Requester: each RDMA Read sent waits for its response, at most ORD of them at a time.
//! Work sent zero-copy waits until TCP no longer needs its pages. Send work finished while
//! earlier work waits is held behind it, so the send CQ sees completions in the order the
//! work was posted (a completion tells the consumer all earlier work is done too).
//! Responder: Read Requests wait, at most IRD of them, for the sender to answer them
//! between messages of the send queue.

use crate::cq::{send_completion_opcode, Completion, RiwCq};
use crate::device::RiwDevice;
use crate::kernel_ext::rdma::Qp;
use crate::mr::{pd_id, MemRegion};
use crate::qp::RiwQp;
use crate::uapi;
use kernel::prelude::*;
use kernel::sync::Arc;

/// A bounded first-in first-out queue, its storage allocated up front: the receiver and
/// the sender use it under a spinlock, where nothing may allocate.
pub(crate) struct Ring<T> {
    slots: KVVec<Option<T>>,
    head: usize,
    len: usize,
}

impl<T> Ring<T> {
    /// A queue that holds nothing.
    pub(crate) fn empty() -> Self {
        Self {
            slots: KVVec::new(),
            head: 0,
            len: 0,
        }
    }

    /// An empty queue of at most `limit` items.
    pub(crate) fn new(limit: usize) -> Result<Self> {
        let mut slots = KVVec::with_capacity(limit, GFP_KERNEL)?;
        for _ in 0..limit {
            // Cannot fail: the capacity is there.
            slots.push(None, GFP_KERNEL)?;
        }
        Ok(Self {
            slots,
            head: 0,
            len: 0,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// An index past the end, brought back into the ring: `at` is below twice its
    /// length (a division would do too, and cost a helper call under emulation).
    fn wrap(&self, at: usize) -> usize {
        if at >= self.slots.len() {
            at - self.slots.len()
        } else {
            at
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn is_full(&self) -> bool {
        self.len >= self.slots.len()
    }

    /// Appends `item`; gives it back if the queue is full.
    pub(crate) fn push_back(&mut self, item: T) -> core::result::Result<(), T> {
        if self.is_full() {
            return Err(item);
        }
        let at = self.wrap(self.head + self.len);
        match self.slots.get_mut(at) {
            Some(slot) => *slot = Some(item),
            None => return Err(item),
        }
        self.len += 1;
        Ok(())
    }

    pub(crate) fn front(&self) -> Option<&T> {
        if self.len == 0 {
            return None;
        }
        self.slots.get(self.head)?.as_ref()
    }

    /// The first item, oldest first, that `pred` accepts.
    pub(crate) fn find_mut(&mut self, mut pred: impl FnMut(&T) -> bool) -> Option<&mut T> {
        for i in 0..self.len {
            // Within the ring: `head` and `i` are both below its length.
            let at = self.wrap(self.head + i);
            if self
                .slots
                .get(at)
                .and_then(Option::as_ref)
                .is_some_and(&mut pred)
            {
                return self.slots.get_mut(at)?.as_mut();
            }
        }
        None
    }

    pub(crate) fn pop_front(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let item = self.slots.get_mut(self.head)?.take();
        self.head = self.wrap(self.head + 1);
        self.len -= 1;
        item
    }
}

/// A send work request, as its completion reports it.
#[derive(Clone, Copy)]
pub(crate) struct SendWork {
    pub(crate) wr_id: u64,
    /// The soft-iWARP opcode.
    pub(crate) opcode: u8,
    pub(crate) signalled: bool,
    pub(crate) bytes: u32,
}

impl SendWork {
    /// Work of send queue entry `sqe` that moves `bytes`.
    pub(crate) fn new(sqe: &uapi::siw_sqe, bytes: u32) -> Self {
        Self {
            wr_id: sqe.id,
            opcode: sqe.opcode,
            signalled: u32::from(sqe.flags) & uapi::siw_wqe_flags_SIW_WQE_SIGNALLED != 0,
            bytes,
        }
    }

    /// Work that ends in error (or a flush): reported whether signalled or not.
    pub(crate) fn failed(sqe: &uapi::siw_sqe) -> Self {
        Self {
            wr_id: sqe.id,
            opcode: sqe.opcode,
            signalled: true,
            bytes: 0,
        }
    }
}

/// Where the response to one of our RDMA Reads goes.
pub(crate) struct ReadSink {
    /// The STag and tagged offset the Read Request named as its sink.
    pub(crate) stag: u32,
    pub(crate) to: u64,
    pub(crate) size: u32,
    /// The local buffer, checked for local write access when the Read was posted
    /// (`None` for a zero-length Read).
    pub(crate) region: Option<Arc<MemRegion>>,
    /// Bytes of the response placed so far (responses arrive in order).
    pub(crate) received: u32,
}

/// What send work that left the send queue still waits for.
enum Wait {
    /// Nothing: it completes once the work before it has.
    Nothing,
    /// A Read waiting for its response.
    Read(ReadSink),
    /// Sent zero-copy, with the ticket of this token: TCP may still need its pages.
    ZeroCopy(u64),
}

/// Send work that left the send queue and has not been completed yet. Small enough to
/// move without a string copy: one goes in and out of the list per Read.
struct Pending {
    work: SendWork,
    wait: Wait,
}

impl Pending {
    fn waits(&self) -> bool {
        !matches!(self.wait, Wait::Nothing)
    }

    fn is_read(&self) -> bool {
        matches!(self.wait, Wait::Read(_))
    }
}

/// A Read Request of the peer, checked, waiting for its response.
pub(crate) struct InboundRead {
    pub(crate) sink_stag: u32,
    pub(crate) sink_to: u64,
    pub(crate) size: u32,
    /// The source: `None` for a zero-length Read.
    pub(crate) source: Option<(Arc<MemRegion>, u64)>,
}

/// What the Read state allows send work, as of one look.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct WorkLimits {
    /// Room to track more work (finished work can wait behind Reads).
    pub(crate) can_take: bool,
    /// Whether a Read posted now could be sent (below ORD); `None` if none ever could.
    pub(crate) may_read: Option<bool>,
    /// Reads wait for their responses (a fence waits for them).
    pub(crate) reads_waiting: bool,
}

impl WorkLimits {
    /// The limits while no work of ours waits in the Read state, with `ord`.
    pub(crate) fn none_pending(ord: u32) -> Self {
        Self {
            can_take: true,
            may_read: (ord != 0).then_some(true),
            reads_waiting: false,
        }
    }
}

/// The RDMA Read state of a connection.
pub(crate) struct Reads {
    /// Oldest first; the front, if any, is a Read waiting for its response.
    pending: Ring<Pending>,
    /// Reads waiting for their response.
    waiting: u32,
    /// Reads we may have waiting (ORD).
    ord: u32,
    /// Read Requests to answer.
    requests: Ring<InboundRead>,
    /// A response is being sent (it counts against IRD until it has gone).
    responding: bool,
    /// Read Requests the peer may have outstanding (IRD).
    ird: u32,
    /// The receiver changed what the sender may do: a Read Request came, or a Read's
    /// response came while the sender waited for one.
    sender_wanted: bool,
    /// The sender stopped until a Read completes (ORD, a fence, no room to track work, a
    /// close that waits for Reads): only then does a Read's response wake it, which
    /// saves a wake-up of the work item on every Read.
    sender_waits: bool,
}

impl Reads {
    /// The Read state of no connection: no Reads either way.
    pub(crate) fn none() -> Self {
        Self {
            pending: Ring::empty(),
            waiting: 0,
            ord: 0,
            requests: Ring::empty(),
            responding: false,
            ird: 0,
            sender_wanted: false,
            sender_waits: false,
        }
    }

    /// A connection's Read state, for the negotiated `ord` and `ird`, on a QP with
    /// `sq_depth` send queue entries.
    pub(crate) fn new(ord: u32, ird: u32, sq_depth: u32) -> Result<Self> {
        Ok(Self {
            pending: Ring::new(sq_depth as usize)?,
            waiting: 0,
            ord,
            requests: Ring::new(ird as usize)?,
            responding: false,
            ird,
            sender_wanted: false,
            sender_waits: false,
        })
    }

    /// Whether nothing waits: no Read for a response, no request for its answer.
    pub(crate) fn is_idle(&self) -> bool {
        self.pending.is_empty() && self.requests.is_empty() && !self.responding
    }

    /// Our Reads waiting for their responses, and the peer's Read Requests not yet
    /// answered (the one being answered included).
    pub(crate) fn occupancy(&self) -> (u32, u32) {
        let requests = self.requests.len() as u32 + u32::from(self.responding);
        (self.waiting, requests)
    }

    /// Whether work of ours waits here: a Read for its response, zero-copy work for its
    /// pages, or finished work behind them. Only the sender adds such work.
    pub(crate) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// What the Read state allows send work now.
    pub(crate) fn work_limits(&self) -> WorkLimits {
        WorkLimits {
            can_take: !self.pending.is_full(),
            may_read: (self.ord != 0).then_some(self.waiting < self.ord),
            reads_waiting: self.waiting != 0,
        }
    }

    /// Send work has gone: complete it now, or behind the work still waiting.
    pub(crate) fn finished(&mut self, qp: &Qp<RiwDevice>, work: SendWork) {
        if !work.signalled {
            return;
        }
        if self.pending.is_empty() {
            complete_send(qp, &work, uapi::siw_wc_status_SIW_WC_SUCCESS);
        } else if let Err(p) = self.pending.push_back(Pending {
            work,
            wait: Wait::Nothing,
        }) {
            // `WorkLimits::can_take` keeps room; should it not, order gives way to completion.
            complete_send(qp, &p.work, uapi::siw_wc_status_SIW_WC_SUCCESS);
        }
    }

    /// Send work has gone zero-copy with the ticket of `token`: it completes once the
    /// ticket is released (signalled or not, it holds back the work after it). Called
    /// before the sender drops its ticket, so the release cannot come first.
    pub(crate) fn finished_zero_copy(&mut self, qp: &Qp<RiwDevice>, work: SendWork, token: u64) {
        let entry = Pending {
            work,
            wait: Wait::ZeroCopy(token),
        };
        if let Err(p) = self.pending.push_back(entry) {
            // As in `finished`: completion before order. The consumer may reuse the pages
            // early, which only changes what retransmitted bytes carry.
            if p.work.signalled {
                complete_send(qp, &p.work, uapi::siw_wc_status_SIW_WC_SUCCESS);
            }
        }
    }

    /// TCP no longer needs the pages of the ticket of `token`: its work, and what waited
    /// behind it only, completes. Nothing waits for it once the connection was flushed.
    pub(crate) fn zero_copy_released(&mut self, qp: &Qp<RiwDevice>, token: u64) {
        if let Some(p) = self
            .pending
            .find_mut(|p| matches!(p.wait, Wait::ZeroCopy(t) if t == token))
        {
            p.wait = Wait::Nothing;
            self.complete_front(qp);
        }
    }

    /// Completes the work at the front that waits for nothing any more.
    fn complete_front(&mut self, qp: &Qp<RiwDevice>) {
        while self.pending.front().is_some_and(|p| !p.waits()) {
            let Some(p) = self.pending.pop_front() else {
                break;
            };
            if p.work.signalled {
                complete_send(qp, &p.work, uapi::siw_wc_status_SIW_WC_SUCCESS);
            }
        }
    }

    /// A Read Request has gone: its response is awaited.
    pub(crate) fn read_sent(&mut self, work: SendWork, sink: ReadSink) -> Result {
        self.pending
            .push_back(Pending {
                work,
                wait: Wait::Read(sink),
            })
            .map_err(|_| ENOMEM)?;
        self.waiting += 1;
        Ok(())
    }

    /// The Read whose response comes next (responses come in the order of the Reads).
    pub(crate) fn awaited(&mut self) -> Option<&mut ReadSink> {
        match &mut self.pending.find_mut(Pending::is_read)?.wait {
            Wait::Read(sink) => Some(sink),
            _ => None,
        }
    }

    /// The awaited Read's response is complete: it completes once nothing before it
    /// waits, with the work held behind it. A Read with local invalidate invalidates its
    /// sink first: a completion the consumer sees finds it invalid (it registers the
    /// region again at once).
    pub(crate) fn read_done(&mut self, qp: &Qp<RiwDevice>) {
        self.sender_wanted |= core::mem::take(&mut self.sender_waits);
        if let Some(p) = self.pending.find_mut(Pending::is_read) {
            self.waiting = self.waiting.saturating_sub(1);
            let invalidates = u32::from(p.work.opcode) == uapi::siw_opcode_SIW_OP_READ_LOCAL_INV;
            if let Wait::Read(ReadSink {
                stag,
                region: Some(region),
                ..
            }) = core::mem::replace(&mut p.wait, Wait::Nothing)
            {
                if invalidates {
                    region.invalidate_for(stag, pd_id(qp.pd::<RiwDevice>()));
                }
            }
        }
        self.complete_front(qp);
    }

    /// The sender stops until a Read completes, having seen the limits `seen`: false if a
    /// Read completed since, so that it decides again instead.
    pub(crate) fn sender_waits(&mut self, seen: WorkLimits) -> bool {
        self.sender_waits = true;
        seen == self.work_limits()
    }

    /// Whether nothing waits (see `is_idle`); if something does, a Read completing
    /// wakes the sender (a close waits for it).
    pub(crate) fn idle_or_wake_sender(&mut self) -> bool {
        let idle = self.is_idle();
        self.sender_waits |= !idle;
        idle
    }

    /// Whether the receiver changed what the sender may do (see `take_sender_wanted`).
    pub(crate) fn sender_wanted(&self) -> bool {
        self.sender_wanted
    }

    /// Whether the receiver changed what the sender may do since this was last asked.
    pub(crate) fn take_sender_wanted(&mut self) -> bool {
        core::mem::take(&mut self.sender_wanted)
    }

    /// Whether one more Read Request may be queued (IRD).
    pub(crate) fn may_accept_request(&self) -> bool {
        self.requests.len() + usize::from(self.responding) < self.ird as usize
    }

    /// Queues a checked Read Request of the peer.
    pub(crate) fn accept_request(&mut self, request: InboundRead) -> Result {
        if !self.may_accept_request() {
            return Err(ENOSPC);
        }
        self.sender_wanted = true;
        self.requests.push_back(request).map_err(|_| ENOMEM)
    }

    /// Whether Read Requests wait for their responses.
    pub(crate) fn has_requests(&self) -> bool {
        !self.requests.is_empty()
    }

    /// The next Read Request to answer; it counts against IRD until `responded`.
    pub(crate) fn take_request(&mut self) -> Option<InboundRead> {
        let request = self.requests.pop_front()?;
        self.responding = true;
        Some(request)
    }

    /// A response has gone to the socket.
    pub(crate) fn responded(&mut self) {
        self.responding = false;
    }

    /// The connection ended: what waits completes, Reads flushed, the work behind them
    /// as it went.
    pub(crate) fn flush(&mut self, qp: &Qp<RiwDevice>) {
        while let Some(p) = self.pending.pop_front() {
            if p.is_read() {
                complete_send(qp, &p.work, uapi::siw_wc_status_SIW_WC_WR_FLUSH_ERR);
            } else if p.work.signalled {
                // Handed to TCP whole (zero-copy work too: its pages stay referenced).
                complete_send(qp, &p.work, uapi::siw_wc_status_SIW_WC_SUCCESS);
            }
        }
        self.waiting = 0;
        while self.requests.pop_front().is_some() {}
        self.responding = false;
    }
}

/// Reports the completion of send work, whose byte count is reported on success only.
pub(crate) fn complete_send(qp: &Qp<RiwDevice>, work: &SendWork, status: u32) {
    let c = Completion {
        wr_id: work.wr_id,
        opcode: send_completion_opcode(work.opcode).unwrap_or(uapi::siw_opcode_SIW_OP_SEND),
        status,
        bytes: if status == uapi::siw_wc_status_SIW_WC_SUCCESS {
            work.bytes
        } else {
            0
        },
        qp_num: qp.qp_num(),
        solicited: false,
        invalidated: None,
    };
    RiwQp::release_kept(qp);
    RiwCq::deliver(qp.send_cq::<RiwDevice>(), &c);
}
