// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: the send and receive rings in the soft-iWARP layout, sizes checked against
//! the device limits, and the iWARP QP state machine.

use crate::cq::{send_completion_opcode, Completion, RiwCq};
use crate::device::RiwDevice;
use crate::kernel_ext;
use crate::kernel_ext::errno::{ENOTCONN, EOPNOTSUPP};
use crate::kernel_ext::rdma::{
    access, Device, Mtu, Qp, QpAttr, QpCaps, QpInit, QpModify, QpRef, QpState, QueueMemory,
    RecvChain, SendChain, SendOp, Sge, UData,
};
use crate::kernel_ext::socket::SocketAddr;
use crate::kernel_ext::sync::{new_spinlock_bh, SpinLockBh};
use crate::kernel_ext::trace;
use crate::limits::{LIMITS, MMAP_KEY_MIN};
use crate::mr::{pd_id, RiwMr};
use crate::proto::Negotiated;
use crate::uapi;
use core::mem::{offset_of, size_of};
use kernel::c_str;
use kernel::prelude::*;
use kernel::sync::Arc;

const SQE_SIZE: usize = size_of::<uapi::siw_sqe>();
const RQE_SIZE: usize = size_of::<uapi::siw_rqe>();
const SQE_FLAGS: usize = offset_of!(uapi::siw_sqe, flags);
/// A send queue entry in 64-bit words: its fixed part, its SGE area, an SGE.
const SQE_WORDS: usize = SQE_SIZE / size_of::<u64>();
const SQE_SGE_WORD: usize = offset_of!(uapi::siw_sqe, __bindgen_anon_2) / size_of::<u64>();
const SGE_WORDS: usize = size_of::<uapi::siw_sge>() / size_of::<u64>();
const _: () = assert!(
    SQE_SIZE % size_of::<u64>() == 0
        && offset_of!(uapi::siw_sqe, __bindgen_anon_2) % size_of::<u64>() == 0
        && size_of::<uapi::siw_sge>() % size_of::<u64>() == 0
);
const RQE_FLAGS: usize = offset_of!(uapi::siw_rqe, flags);
const VALID: u16 = uapi::siw_wqe_flags_SIW_WQE_VALID as u16;
/// Inline data rides in the SGE slots after the first.
pub(crate) const MAX_INLINE: u32 =
    (size_of::<uapi::siw_sge>() * (uapi::SIW_MAX_SGE as usize - 1)) as u32;
/// QP numbers: 24 bits, 0 reserved.
const QP_NUM_MAX: u32 = (1 << 24) - 1;

/// How the consumer wants a connection to end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CloseMode {
    /// Send what is posted, then close (QP to SQD).
    Graceful = 1,
    /// Close at once with a reset (QP to ERROR, or destroyed).
    Abort = 2,
}

/// The connection endpoint a QP is bound to from RTS until the connection ends: what the
/// QP tells it. The QP calls these outside its own lock.
pub(crate) trait ConnectionEndpoint: Send + Sync {
    /// New send work, from a context that may sleep (the user library's doorbell).
    fn doorbell(self: Arc<Self>);
    /// New work posted by a kernel consumer, from any context.
    fn posted(self: Arc<Self>);
    /// The QP asks the connection to end.
    fn close(self: Arc<Self>, mode: CloseMode);
    /// The QP is entering ERROR (or RESET) and takes no more work from its queues: what
    /// the connection took from them completes as flushed now, before what is left in
    /// them. Called without the QP's lock (the endpoint's lock comes first); may sleep.
    fn flush_taken(&self);
    /// What the connection is, for those who inspect it (may sleep).
    fn info(&self) -> ConnectionInfo;
}

/// A snapshot of a connection, for `rdma resource show` and debugfs.
pub(crate) struct ConnectionInfo {
    /// Where the endpoint is in its lifecycle.
    pub(crate) state: &'static str,
    /// The socket's TCP state, while the endpoint has a socket.
    pub(crate) tcp_state: Option<&'static str>,
    pub(crate) local: Option<SocketAddr>,
    pub(crate) remote: Option<SocketAddr>,
    pub(crate) qp_num: Option<u32>,
    /// What the MPA exchange settled, once it did.
    pub(crate) mpa: Option<Negotiated>,
    /// The largest ULPDU of an FPDU sent (MULPDU), once established.
    pub(crate) mulpdu: Option<u32>,
    /// Our Reads waiting for their responses (ORQ) and the peer's Read Requests not yet
    /// answered (IRQ).
    pub(crate) reads_out: u32,
    pub(crate) reads_in: u32,
    /// Bytes in the socket the peer has not acknowledged.
    pub(crate) unacked: u32,
}

/// How full a QP's queues are, and its connection.
pub(crate) struct QpUsage {
    /// Send work posted and not yet taken by the engine.
    pub(crate) sq_posted: u32,
    pub(crate) sq_depth: u32,
    /// Receives posted and not yet taken (none with a shared receive queue).
    pub(crate) rq_posted: u32,
    pub(crate) rq_depth: u32,
    pub(crate) ird: u32,
    pub(crate) ord: u32,
    pub(crate) connection: Option<Arc<dyn ConnectionEndpoint>>,
}

/// Whether `bound` is `ep` (the same object, whatever the vtable of its reference).
fn bound_to(bound: &Option<Arc<dyn ConnectionEndpoint>>, ep: &dyn ConnectionEndpoint) -> bool {
    let ep: *const dyn ConnectionEndpoint = ep;
    bound
        .as_ref()
        .is_some_and(|b| core::ptr::addr_eq(&**b as *const dyn ConnectionEndpoint, ep))
}

/// Access rights a QP may grant its peer or itself; iWARP has no atomics here.
const QP_ACCESS_FLAGS: u32 = access::LOCAL_WRITE | access::REMOTE_WRITE | access::REMOTE_READ;
/// Rights a consumer may ask of a QP that riw grants as nothing, as siw and iw_cxgb4 do.
const QP_ACCESS_IGNORED: u32 = access::REMOTE_ATOMIC | access::MW_BIND;

/// What changes with `modify_qp`.
struct QpMutable {
    state: QpState,
    access_flags: u32,
    /// ORD.
    max_rd_atomic: u32,
    /// IRD.
    max_dest_rd_atomic: u32,
    /// Index of the next send queue entry to take.
    sq_next: u32,
    /// A taken send queue entry whose slot still reads as posted (see `take_send`).
    sq_kept: Option<u32>,
    /// Index of the next receive queue entry to take.
    rq_next: u32,
    /// Index of the next send queue entry a kernel consumer posts.
    sq_put: u32,
    /// Index of the next receive queue entry a kernel consumer posts.
    rq_put: u32,
    /// The connection, from RTS until it ends.
    ep: Option<Arc<dyn ConnectionEndpoint>>,
    /// The QP is being destroyed: the flusher must let go of it, even if a connection
    /// that ended at the same time asked it to watch the QP after the destroy's `forget`.
    destroyed: bool,
}

/// A riw queue pair.
#[pin_data]
pub(crate) struct RiwQp {
    sq: QueueMemory,
    num_sqe: u32,
    /// `None` with a shared receive queue.
    rq: Option<QueueMemory>,
    num_rqe: u32,
    caps: QpCaps,
    sig_all: bool,
    /// Softirqs off while held: kernel consumers post from softirq context.
    #[pin]
    mutable: SpinLockBh<QpMutable>,
}

/// Whether the QP's queues already meet the sizes `want` asks of a `modify_qp`.
fn caps_meet(qp: &RiwQp, want: &QpCaps) -> bool {
    let have = &qp.caps;
    want.max_send_wr <= have.max_send_wr
        && want.max_recv_wr <= have.max_recv_wr
        && want.max_send_sge <= have.max_send_sge
        && want.max_recv_sge <= have.max_recv_sge
        && want.max_inline_data <= have.max_inline_data
}

/// Rounds a requested queue depth up to the ring size, within the device limit (a depth
/// of 0 gets the smallest ring, as iw_cxgb4 and rxe round it up).
pub(crate) fn ring_depth(wanted: u32, max: u32) -> Result<u32> {
    if wanted > max {
        return Err(EINVAL);
    }
    Ok(wanted
        .max(1)
        .checked_next_power_of_two()
        .ok_or(EINVAL)?
        .min(max))
}

impl RiwQp {
    pub(crate) fn new(
        dev: &Device<RiwDevice>,
        init: &QpInit,
        udata: Option<&mut UData<'_>>,
    ) -> Result<(u32, QpCaps, impl PinInit<Self, Error>)> {
        if !init.is_rc {
            return Err(EOPNOTSUPP());
        }
        let want = &init.caps;
        if init.create_flags != 0 {
            return Err(EOPNOTSUPP());
        }
        if want.max_send_sge > LIMITS.max_send_sge
            || want.max_recv_sge > LIMITS.max_recv_sge
            || want.max_inline_data > MAX_INLINE
        {
            return Err(EINVAL);
        }
        let num_sqe = ring_depth(want.max_send_wr, LIMITS.max_qp_wr)?;
        let num_rqe = if init.has_srq {
            0
        } else {
            ring_depth(want.max_recv_wr, LIMITS.max_qp_wr)?
        };
        let caps = QpCaps {
            max_send_wr: num_sqe,
            max_recv_wr: num_rqe,
            max_send_sge: want.max_send_sge,
            max_recv_sge: if init.has_srq { 0 } else { want.max_recv_sge },
            max_inline_data: MAX_INLINE,
        };

        let quota = dev.qps.take(LIMITS.max_qp)?;
        let sq_len = num_sqe as usize * SQE_SIZE;
        let rq_len = num_rqe as usize * RQE_SIZE;
        let qp_num = dev.qp_nums.alloc(1, QP_NUM_MAX)?;
        let rings = match udata {
            Some(udata) => Self::user_rings(udata, qp_num, num_sqe, num_rqe, sq_len, rq_len),
            None => QueueMemory::new_kernel(sq_len).and_then(|sq| {
                let rq = (rq_len != 0)
                    .then(|| QueueMemory::new_kernel(rq_len))
                    .transpose()?;
                Ok((sq, rq))
            }),
        };
        let (sq, rq) = match rings {
            Ok(rings) => rings,
            Err(e) => {
                dev.qp_nums.free(qp_num);
                return Err(e);
            }
        };
        quota.keep();
        let sig_all = init.sig_all;
        let init = try_pin_init!(Self {
            sq,
            num_sqe,
            rq,
            num_rqe,
            caps,
            sig_all,
            mutable <- new_spinlock_bh!(
                QpMutable {
                    // iWARP's Idle: a new QP reports INIT, as siw's and iw_cxgb4's do, and
                    // takes receives before it is connected.
                    state: QpState::Init,
                    access_flags: 0,
                    max_rd_atomic: 0,
                    max_dest_rd_atomic: 0,
                    sq_next: 0,
                    sq_kept: None,
                    rq_next: 0,
                    sq_put: 0,
                    rq_put: 0,
                    ep: None,
                    destroyed: false,
                },
                "riw_qp"
            ),
        });
        Ok((qp_num, caps, init))
    }

    fn user_rings(
        udata: &mut UData<'_>,
        qp_num: u32,
        num_sqe: u32,
        num_rqe: u32,
        sq_len: usize,
        rq_len: usize,
    ) -> Result<(QueueMemory, Option<QueueMemory>)> {
        let (sq, sq_key) = QueueMemory::new_user(udata, sq_len, MMAP_KEY_MIN)?;
        let (rq, rq_key) = match rq_len {
            0 => (None, 0),
            len => {
                let (rq, key) = QueueMemory::new_user(udata, len, MMAP_KEY_MIN)?;
                (Some(rq), key)
            }
        };
        udata.respond(&uapi::siw_uresp_create_qp {
            qp_id: qp_num,
            num_sqe,
            num_rqe,
            pad: 0,
            sq_key,
            rq_key,
        })?;
        Ok((sq, rq))
    }

    /// The QP is being destroyed: its connection, if any, is aborted (and lets go of the
    /// QP, which the core waits for).
    pub(crate) fn destroy(qp: &Qp<RiwDevice>, dev: &Device<RiwDevice>) {
        let this: &Self = qp;
        let ep = {
            let mut q = this.mutable.lock();
            trace::qp_state(
                qp,
                qp.qp_num(),
                q.state,
                QpState::Error,
                c_str!("destroyed"),
            );
            q.state = QpState::Error;
            q.destroyed = true;
            q.ep.take()
        };
        if let Some(ep) = ep {
            ep.close(CloseMode::Abort);
        }
        dev.flusher.forget(qp);
        dev.qp_nums.free(qp.qp_num());
        dev.qps.put();
    }

    /// The connection manager established the QP's connection: it enters RTS with the
    /// negotiated RDMA Read depths.
    pub(crate) fn enter_rts(
        qp: &Qp<RiwDevice>,
        ep: Arc<dyn ConnectionEndpoint>,
        ord: u32,
        ird: u32,
    ) -> Result {
        let this: &Self = qp;
        let mut q = this.mutable.lock();
        if !matches!(q.state, QpState::Init | QpState::Rtr) || q.ep.is_some() {
            return Err(EINVAL);
        }
        trace::qp_state(qp, qp.qp_num(), q.state, QpState::Rts, c_str!("connected"));
        q.state = QpState::Rts;
        q.ep = Some(ep);
        q.max_rd_atomic = ord;
        q.max_dest_rd_atomic = ird;
        Ok(())
    }

    /// Whether the QP's connection is `ep`'s.
    pub(crate) fn is_bound_to(qp: &Qp<RiwDevice>, ep: &dyn ConnectionEndpoint) -> bool {
        let this: &Self = qp;
        let q = this.mutable.lock();
        bound_to(&q.ep, ep)
    }

    /// The connection of `ep` ended: if the QP is bound to it, the QP enters ERROR, which
    /// flushes its queues. Returns the endpoint, for the caller to drop outside the lock.
    pub(crate) fn connection_lost(
        dev: &Device<RiwDevice>,
        qp: &QpRef<RiwDevice>,
        ep: &dyn ConnectionEndpoint,
    ) -> Option<Arc<dyn ConnectionEndpoint>> {
        let this: &Self = qp;
        let mut q = this.mutable.lock();
        if !bound_to(&q.ep, ep) {
            return None;
        }
        let entering_error = q.state != QpState::Error;
        if entering_error {
            let cause = c_str!("connection ended");
            trace::qp_state(&**qp, qp.qp_num(), q.state, QpState::Error, cause);
            q.state = QpState::Error;
            Self::flush(qp, &mut q);
        }
        let bound = q.ep.take();
        drop(q);
        if entering_error && this.sq.is_user() {
            dev.flusher.watch(qp.clone());
        }
        bound
    }

    /// How full the queues are, and the connection if there is one.
    pub(crate) fn usage(qp: &Qp<RiwDevice>) -> QpUsage {
        let this: &Self = qp;
        let q = this.mutable.lock();
        let sq_posted = RingCursor::send(this).posted_from(q.sq_next);
        let rq_posted = RingCursor::recv(this).map_or(0, |r| r.posted_from(q.rq_next));
        QpUsage {
            sq_posted,
            sq_depth: this.num_sqe,
            rq_posted,
            rq_depth: this.num_rqe,
            ird: q.max_dest_rd_atomic,
            ord: q.max_rd_atomic,
            connection: q.ep.clone(),
        }
    }

    /// Entries of the send queue.
    pub(crate) fn send_depth(qp: &Qp<RiwDevice>) -> u32 {
        let this: &Self = qp;
        this.num_sqe
    }

    /// Takes the next send work request for the engine, copied out of the ring into
    /// `sqe`, if the QP sends (RTS, or SQD while draining), and whether the entry after it
    /// was posted then.
    ///
    /// A user QP's last taken entry keeps its slot marked posted (see `keeps_slot`), the
    /// one before it goes back. `idle_hands_back` (the work item, not the doorbell):
    /// finding the ring empty, the kept slot goes back too, and the entry after it is
    /// looked at once more.
    pub(crate) fn take_send(
        qp: &Qp<RiwDevice>,
        sqe: &mut uapi::siw_sqe,
        idle_hands_back: bool,
    ) -> Option<bool> {
        let this: &Self = qp;
        let mut q = this.mutable.lock();
        let ring = RingCursor::send(this);
        if !matches!(q.state, QpState::Rts | QpState::Sqd) {
            Self::hand_back_kept(&ring, &mut q);
            return None;
        }
        if idle_hands_back && !ring.is_valid(q.sq_next) {
            Self::hand_back_kept(&ring, &mut q);
        }
        let index = q.sq_next;
        let keep = this.keeps_slot();
        if !ring.take_sqe(&mut q.sq_next, sqe, !keep) {
            return None;
        }
        if keep {
            if let Some(kept) = q.sq_kept.replace(index) {
                ring.hand_back(kept);
            }
        }
        Some(ring.is_valid(q.sq_next))
    }

    /// Whether the send ring keeps the slot of its last taken entry marked posted.
    ///
    /// The user library rings the doorbell only if the entry before its first new one
    /// was handed back (see [`RingCursor::take`]). Kept, it lets a program that streams
    /// work requests post on without a system call each while the engine runs, and the
    /// engine frames what gathered in one go. The engine hands the slot back when it
    /// goes idle (the doorbell's own run has its work item do that) and before any send
    /// completion, so that a consumer that saw its work complete finds its whole ring
    /// free. Kernel consumers post through `post_send`, which needs no doorbell; a ring
    /// of one entry would find the kept entry again as its next.
    fn keeps_slot(&self) -> bool {
        self.sq.is_user() && self.num_sqe >= 2
    }

    /// Hands the kept slot back, if any.
    fn hand_back_kept(ring: &RingCursor<'_>, q: &mut QpMutable) {
        if let Some(kept) = q.sq_kept.take() {
            ring.hand_back(kept);
        }
    }

    /// Before a send completion: hands the kept slot back. An entry posted after it
    /// meanwhile is taken by the engine run that the kept slot implies (see
    /// `idle_needs_run`).
    pub(crate) fn release_kept(qp: &Qp<RiwDevice>) {
        let this: &Self = qp;
        if this.keeps_slot() {
            let mut q = this.mutable.lock();
            Self::hand_back_kept(&RingCursor::send(this), &mut q);
        }
    }

    /// The engine goes idle: whether it must run again for the send ring, because the
    /// slot of a taken entry is still kept, or, `sender_idle` (no work held back for
    /// Reads, whose completion wakes it), an entry is posted that the library may have
    /// posted without the doorbell while the slot was kept. `hand_back` (the work item)
    /// hands the kept slot back first.
    pub(crate) fn idle_needs_run(qp: &Qp<RiwDevice>, hand_back: bool, sender_idle: bool) -> bool {
        let this: &Self = qp;
        if !this.keeps_slot() {
            return false;
        }
        let mut q = this.mutable.lock();
        let ring = RingCursor::send(this);
        if hand_back {
            Self::hand_back_kept(&ring, &mut q);
        }
        q.sq_kept.is_some()
            || (sender_idle
                && matches!(q.state, QpState::Rts | QpState::Sqd)
                && ring.is_valid(q.sq_next))
    }

    /// Whether send work waits in the ring (a look at its next entry's flags only).
    pub(crate) fn send_waiting(qp: &Qp<RiwDevice>) -> bool {
        let this: &Self = qp;
        let q = this.mutable.lock();
        RingCursor::send(this).is_valid(q.sq_next)
    }

    /// Takes the next receive work request, from the QP's ring or its SRQ, copied into
    /// `rqe`; false if none is posted (or the QP does not receive).
    pub(crate) fn take_recv(qp: &Qp<RiwDevice>, rqe: &mut uapi::siw_rqe) -> bool {
        let this: &Self = qp;
        if let Some(srq) = qp.srq::<RiwDevice>() {
            if this.mutable.lock().state != QpState::Rts {
                return false;
            }
            return crate::srq::RiwSrq::take(srq, rqe);
        }
        let mut q = this.mutable.lock();
        if !matches!(q.state, QpState::Rts | QpState::Sqd) {
            return false;
        }
        RingCursor::recv(this).is_some_and(|ring| ring.take(&mut q.rq_next, rqe))
    }

    /// Applies a `modify_qp` request: the iWARP transitions and attributes, all or nothing.
    pub(crate) fn modify(dev: &Device<RiwDevice>, qp: &Qp<RiwDevice>, m: &QpModify) -> Result {
        let this: &Self = qp;
        let mut q = this.mutable.lock();
        let next = m.state.unwrap_or(q.state);
        // RESET and INIT are both iWARP's Idle: either names it as the current state.
        let idle = |s| matches!(s, QpState::Reset | QpState::Init);
        let cur_wrong = m
            .cur_state
            .is_some_and(|s| s != q.state && !(idle(s) && idle(q.state)));
        if cur_wrong {
            return Err(EINVAL);
        }
        if !transition_allowed(q.state, next) {
            return Err(EINVAL);
        }
        let has_attrs = m.access_flags.is_some()
            || m.port.is_some()
            || m.pkey_index.is_some()
            || m.max_rd_atomic.is_some()
            || m.max_dest_rd_atomic.is_some();
        if has_attrs && matches!(next, QpState::Reset | QpState::Error) {
            return Err(EINVAL);
        }
        if m.port.is_some_and(|p| p != 1)
            || m.pkey_index.is_some_and(|i| i != 0)
            || m
                .access_flags
                .is_some_and(|f| f & !(QP_ACCESS_FLAGS | QP_ACCESS_IGNORED) != 0)
            // The rings cannot be resized: a size they already meet is no change.
            || m.cap.is_some_and(|c| !caps_meet(this, &c))
            || m.max_rd_atomic
                .is_some_and(|o| o > LIMITS.max_qp_init_rd_atom)
            || m.max_dest_rd_atomic
                .is_some_and(|i| i > LIMITS.max_qp_rd_atom)
        {
            return Err(EINVAL);
        }
        q.access_flags = m
            .access_flags
            .map_or(q.access_flags, |f| f & QP_ACCESS_FLAGS);
        q.max_rd_atomic = m.max_rd_atomic.unwrap_or(q.max_rd_atomic);
        q.max_dest_rd_atomic = m.max_dest_rd_atomic.unwrap_or(q.max_dest_rd_atomic);
        let prev = q.state;
        let entering_error = next == QpState::Error && prev != QpState::Error;
        if entering_error || next == QpState::Reset {
            if let Some(ep) = q.ep.clone() {
                // Completions come in order: what the connection took from the queues (a
                // receive it holds for the next message, Reads awaiting responses) is
                // older than what is left in them, and a consumer draining the QP counts
                // on the drain's completion coming last. The state stops the taking, the
                // endpoint flushes what it took, then the queues are flushed below.
                q.state = next;
                drop(q);
                ep.flush_taken();
                q = this.mutable.lock();
            }
        }
        if next == QpState::Reset {
            // A QP back in RESET starts over: the consumer re-creates its rings' contents.
            q.sq_kept = None;
            q.sq_next = 0;
            q.rq_next = 0;
            q.sq_put = 0;
            q.rq_put = 0;
        }
        let draining = next == QpState::Sqd && prev == QpState::Rts;
        let watch = entering_error && this.sq.is_user();
        if next != prev {
            trace::qp_state(qp, qp.qp_num(), prev, next, c_str!("modify_qp"));
        }
        q.state = next;
        let (ep, mode) = if entering_error || next == QpState::Reset {
            Self::flush(qp, &mut q);
            (q.ep.take(), CloseMode::Abort)
        } else if draining {
            // iWARP's "closing": what is posted goes out, then the connection closes.
            (q.ep.clone(), CloseMode::Graceful)
        } else {
            (None, CloseMode::Abort)
        };
        drop(q);
        if let Some(ep) = ep {
            ep.close(mode);
        }
        if watch {
            dev.flusher.watch(qp.new_ref());
        }
        Ok(())
    }

    /// Flushes what userspace posted since, if the QP is in ERROR; false if it is not, or
    /// is being destroyed (the destroy waits for the flusher's reference).
    pub(crate) fn flush_if_error(qp: &Qp<RiwDevice>) -> bool {
        let this: &Self = qp;
        let mut q = this.mutable.lock();
        if q.state != QpState::Error || q.destroyed {
            return false;
        }
        Self::flush(qp, &mut q);
        true
    }

    pub(crate) fn query(&self, dev: &Device<RiwDevice>) -> QpAttr {
        let path_mtu = Mtu::not_above(dev.netdev().map_or(0, |nd| nd.mtu()));
        let q = self.mutable.lock();
        QpAttr {
            state: q.state,
            // In SQD the connection closes once what was posted has gone.
            sq_draining: q.state == QpState::Sqd,
            path_mtu,
            access_flags: q.access_flags,
            caps: self.caps,
            max_rd_atomic: q.max_rd_atomic,
            max_dest_rd_atomic: q.max_dest_rd_atomic,
            sig_all: self.sig_all,
        }
    }

    /// New send work in the shared ring. Without a connection there is nothing to send:
    /// a QP in ERROR flushes what was posted, any other state refuses.
    #[inline(always)]
    pub(crate) fn doorbell(qp: &Qp<RiwDevice>) -> Result {
        let this: &Self = qp;
        let mut q = this.mutable.lock();
        match (q.state, q.ep.clone()) {
            (QpState::Rts | QpState::Sqd, Some(ep)) => {
                drop(q);
                ep.doorbell();
                Ok(())
            }
            // Still bound: the modify that set ERROR flushes, after what the connection
            // took.
            (QpState::Error, Some(_)) => Ok(()),
            (QpState::Error, None) => {
                Self::flush(qp, &mut q);
                Ok(())
            }
            _ => Err(ENOTCONN()),
        }
    }

    /// Queues a kernel consumer's send work requests in the send ring, as the user library
    /// does in its own. Posting before the QP is connected is an error; in ERROR they are
    /// flushed at once.
    pub(crate) fn post_send(
        dev: &Device<RiwDevice>,
        qp: &Qp<RiwDevice>,
        wrs: &mut SendChain<'_>,
    ) -> Result {
        let this: &Self = qp;
        let mut q = this.mutable.lock();
        if matches!(q.state, QpState::Reset | QpState::Init | QpState::Rtr) {
            return Err(EINVAL);
        }
        let mut sges = [Sge::default(); uapi::SIW_MAX_SGE as usize];
        let max_sge = (this.caps.max_send_sge as usize).min(sges.len());
        let result = (|| {
            while let Some(next) = wrs.next_send(&mut sges[..max_sge]) {
                let (wr, n) = next.map_err(|()| EINVAL)?;
                let mut registration_access = None;
                let (opcode, raddr, rkey) = match wr.op {
                    SendOp::Send => (uapi::siw_opcode_SIW_OP_SEND, 0, 0),
                    SendOp::SendWithInv(stag) => (uapi::siw_opcode_SIW_OP_SEND_REMOTE_INV, 0, stag),
                    SendOp::RdmaWrite { remote_addr, rkey } => {
                        (uapi::siw_opcode_SIW_OP_WRITE, remote_addr, rkey)
                    }
                    SendOp::RdmaRead { remote_addr, rkey } if n <= LIMITS.max_sge_rd as usize => {
                        (uapi::siw_opcode_SIW_OP_READ, remote_addr, rkey)
                    }
                    // What is invalidated is the sink, the one SGE (all a ring entry can
                    // name). The rdma_rw API names its region in `invalidate` but with the
                    // key from before it updated the sink's: the index must match, the key
                    // is the SGE's.
                    SendOp::RdmaReadWithInv {
                        remote_addr,
                        rkey,
                        invalidate,
                    } if n == 1 && sges[0].lkey >> 8 == invalidate >> 8 => {
                        (uapi::siw_opcode_SIW_OP_READ_LOCAL_INV, remote_addr, rkey)
                    }
                    SendOp::LocalInv(stag) => (uapi::siw_opcode_SIW_OP_INVAL_STAG, 0, stag),
                    SendOp::Reg(reg) => {
                        // The extent is read now; key and rights ride in the entry.
                        let region = RiwMr::lookup(dev, reg.mr_lkey)
                            .filter(|_| reg.key >> 8 == reg.mr_lkey >> 8)
                            .ok_or(EINVAL)?;
                        region.post_registration(pd_id(qp.pd::<RiwDevice>()), &reg)?;
                        registration_access = Some(u64::from(reg.access));
                        (uapi::siw_opcode_SIW_OP_REG_MR, 0, reg.key)
                    }
                    _ => return Err(EINVAL),
                };
                if wr.inline {
                    return Err(EINVAL);
                }
                let mut flags = VALID;
                if wr.signaled || this.sig_all {
                    flags |= uapi::siw_wqe_flags_SIW_WQE_SIGNALLED as u16;
                }
                if wr.solicited {
                    flags |= uapi::siw_wqe_flags_SIW_WQE_SOLICITED as u16;
                }
                if wr.fence {
                    flags |= uapi::siw_wqe_flags_SIW_WQE_READ_FENCE as u16;
                }
                let mut sqe = uapi::siw_sqe {
                    id: wr.wr_id,
                    num_sge: n as u8,
                    opcode: opcode as u8,
                    rkey,
                    ..Default::default()
                };
                sqe.__bindgen_anon_1.raddr = raddr;
                sqe.__bindgen_anon_2 = match registration_access {
                    Some(access) => uapi::siw_sqe__bindgen_ty_2 { access },
                    None => uapi::siw_sqe__bindgen_ty_2 {
                        sge: siw_sges(&sges[..n]),
                    },
                };
                let send = RingCursor::send(this);
                send.produce(&mut q.sq_put, &sqe, flags)?;
                wrs.advance();
            }
            Ok(())
        })();
        if q.state == QpState::Error && q.ep.is_none() {
            Self::flush(qp, &mut q);
        }
        let ep = q.ep.clone();
        drop(q);
        if let Some(ep) = ep {
            ep.posted();
        }
        result
    }

    /// Queues a kernel consumer's receive work requests in the receive ring.
    pub(crate) fn post_recv(qp: &Qp<RiwDevice>, wrs: &mut RecvChain<'_>) -> Result {
        let this: &Self = qp;
        let mut q = this.mutable.lock();
        let Some(recv) = RingCursor::recv(this) else {
            // Receives of a QP on an SRQ go to the SRQ.
            return Err(EINVAL);
        };
        if q.state == QpState::Reset {
            return Err(EINVAL);
        }
        let result = post_receives(&recv, &mut q.rq_put, this.caps.max_recv_sge, wrs);
        if q.state == QpState::Error && q.ep.is_none() {
            Self::flush(qp, &mut q);
        }
        result
    }

    /// Completes every posted work request of both queues with "flushed" (or an error for
    /// a malformed one), as a QP in ERROR does.
    fn flush(qp: &Qp<RiwDevice>, q: &mut QpMutable) {
        let this: &Self = qp;
        let qp_num = qp.qp_num();
        let send = RingCursor::send(this);
        Self::hand_back_kept(&send, q);
        send.flush(
            &mut q.sq_next,
            qp.send_cq::<RiwDevice>(),
            |sqe: uapi::siw_sqe| flushed_send(&sqe, qp_num),
        );
        if let Some(recv) = RingCursor::recv(this) {
            recv.flush(
                &mut q.rq_next,
                qp.recv_cq::<RiwDevice>(),
                |rqe: uapi::siw_rqe| flushed_recv(&rqe, qp_num),
            );
        }
    }
}

/// A work queue ring and where its entries' flags are.
pub(crate) struct RingCursor<'a> {
    ring: &'a QueueMemory,
    /// A power of two.
    entries: u32,
    entry_size: usize,
    flags: usize,
}

impl<'a> RingCursor<'a> {
    fn send(qp: &'a RiwQp) -> Self {
        Self {
            ring: &qp.sq,
            entries: qp.num_sqe,
            entry_size: SQE_SIZE,
            flags: SQE_FLAGS,
        }
    }

    fn recv(qp: &'a RiwQp) -> Option<Self> {
        let ring = qp.rq.as_ref()?;
        Some(Self::rqes(ring, qp.num_rqe))
    }

    /// A ring of `siw_rqe` entries (a QP's receive queue or an SRQ).
    pub(crate) fn rqes(ring: &'a QueueMemory, entries: u32) -> Self {
        Self {
            ring,
            entries,
            entry_size: RQE_SIZE,
            flags: RQE_FLAGS,
        }
    }

    /// Writes `entry` at `put` with its flags last; ENOMEM if the slot is still taken (the
    /// queue is full).
    fn produce<E: kernel::types::AsBytes>(&self, put: &mut u32, entry: &E, flags: u16) -> Result {
        let offset = self.offset(*put);
        if self
            .ring
            .load_u16_acquire(offset + self.flags)
            .ok_or(EINVAL)?
            & VALID
            != 0
        {
            return Err(ENOMEM);
        }
        self.ring.write(offset, entry)?;
        self.ring.store_u16_release(offset + self.flags, flags)?;
        *put = put.wrapping_add(1);
        Ok(())
    }

    /// Where in the ring the entry at `index` (counting on past the end) lies.
    fn offset(&self, index: u32) -> usize {
        (index & (self.entries - 1)) as usize * self.entry_size
    }

    /// Whether the entry at `index` is posted.
    pub(crate) fn is_valid(&self, index: u32) -> bool {
        self.ring
            .load_u16_acquire(self.offset(index) + self.flags)
            .unwrap_or(0)
            & VALID
            != 0
    }

    /// How many entries from `next` on are posted, in a row: what waits to be taken.
    pub(crate) fn posted_from(&self, next: u32) -> u32 {
        (0..self.entries)
            .take_while(|&i| self.is_valid(next.wrapping_add(i)))
            .count() as u32
    }

    /// Takes the entry at `next` if it is posted: copies it out once into `entry`, hands
    /// the slot back and moves on.
    pub(crate) fn take<E: kernel::types::FromBytes>(&self, next: &mut u32, entry: &mut E) -> bool {
        self.take_with(next, true, |offset| self.ring.read_into(offset, entry))
    }

    /// As [`Self::take`] for a send queue entry: its fixed part, then only the SGEs it
    /// names, at least one (all of the SGE area for inline data, which lives there). The
    /// SGEs beyond keep what an earlier entry had; nothing reads them. The slot is handed
    /// back only if `hand_back`.
    fn take_sqe(&self, next: &mut u32, sqe: &mut uapi::siw_sqe, hand_back: bool) -> bool {
        self.take_with(next, hand_back, |offset| {
            if !self.ring.read_words_into(offset, sqe, 0..SQE_SGE_WORD) {
                return false;
            }
            // The first SGE slot always: a registration's access word is there.
            let sge_words = if sqe.flags & uapi::siw_wqe_flags_SIW_WQE_INLINE as u16 != 0 {
                SQE_WORDS - SQE_SGE_WORD
            } else {
                usize::from(sqe.num_sge).clamp(1, uapi::SIW_MAX_SGE as usize) * SGE_WORDS
            };
            self.ring
                .read_words_into(offset, sqe, SQE_SGE_WORD..SQE_SGE_WORD + sge_words)
        })
    }

    /// Takes the entry at `next` if it is posted, `copy_out` copying it from its offset in
    /// the ring: `next` moves on once it did, and the slot is handed back if `hand_back`.
    fn take_with(
        &self,
        next: &mut u32,
        hand_back: bool,
        copy_out: impl FnOnce(usize) -> bool,
    ) -> bool {
        if !self.is_valid(*next) {
            return false;
        }
        let offset = self.offset(*next);
        if !copy_out(offset) {
            return false;
        }
        if hand_back {
            self.hand_back(*next);
        }
        *next = next.wrapping_add(1);
        true
    }

    /// Marks the slot of the entry at `index` free.
    fn hand_back(&self, index: u32) {
        // The user library rings the doorbell only if it finds the entry before its new
        // one handed back: the hand-back must be ordered before our look at the next.
        let _ = self.ring.store_u16_mb(self.offset(index) + self.flags, 0);
    }

    /// Takes the valid entries from `next` on, at most one pass over the ring (userspace
    /// may keep refilling it), copying each out once before handing its slot back, and
    /// completes them into `cq`. A full CQ is reported to its consumer and ends the flush.
    fn flush<E: kernel::types::FromBytes>(
        &self,
        next: &mut u32,
        cq: &kernel_ext::rdma::Cq<RiwDevice>,
        complete: impl Fn(E) -> Completion,
    ) {
        for _ in 0..self.entries {
            let offset = self.offset(*next);
            if self.ring.load_u16_acquire(offset + self.flags).unwrap_or(0) & VALID == 0 {
                break;
            }
            let Some(entry) = self.ring.read::<E>(offset) else {
                break;
            };
            // Hand the slot back before the completion announces it.
            let _ = self.ring.store_u16_release(offset + self.flags, 0);
            *next = next.wrapping_add(1);
            if !RiwCq::deliver(cq, &complete(entry)) {
                break;
            }
        }
    }
}

/// A request's SGEs in the ring entry layout.
fn siw_sges(sges: &[Sge]) -> [uapi::siw_sge; uapi::SIW_MAX_SGE as usize] {
    let mut out = [uapi::siw_sge::default(); uapi::SIW_MAX_SGE as usize];
    for (dst, src) in out.iter_mut().zip(sges) {
        *dst = uapi::siw_sge {
            laddr: src.addr,
            length: src.length,
            lkey: src.lkey,
        };
    }
    out
}

/// Writes receive work requests into a ring of `siw_rqe`.
pub(crate) fn post_receives(
    ring: &RingCursor<'_>,
    put: &mut u32,
    max_sge: u32,
    wrs: &mut RecvChain<'_>,
) -> Result {
    let mut sges = [Sge::default(); uapi::SIW_MAX_SGE as usize];
    let max_sge = (max_sge as usize).min(sges.len());
    while let Some(next) = wrs.next_recv(&mut sges[..max_sge]) {
        let (wr_id, n) = next.map_err(|()| EINVAL)?;
        let rqe = uapi::siw_rqe {
            id: wr_id,
            num_sge: n as u8,
            sge: siw_sges(&sges[..n]),
            ..Default::default()
        };
        ring.produce(put, &rqe, VALID)?;
        wrs.advance();
    }
    Ok(())
}

/// The completion of a receive flushed from a QP in ERROR.
fn flushed_recv(rqe: &uapi::siw_rqe, qp_num: u32) -> Completion {
    let well_formed = u32::from(rqe.num_sge) <= uapi::SIW_MAX_SGE;
    Completion::flushed(rqe.id, uapi::siw_opcode_SIW_OP_RECEIVE, well_formed, qp_num)
}

/// The completion of a send work request flushed from a QP in ERROR. The opcode echoed is
/// always one the user library can map.
fn flushed_send(sqe: &uapi::siw_sqe, qp_num: u32) -> Completion {
    let opcode = send_completion_opcode(sqe.opcode);
    let inline = sqe.flags & uapi::siw_wqe_flags_SIW_WQE_INLINE as u16 != 0;
    let well_formed = opcode.is_some() && (inline || u32::from(sqe.num_sge) <= uapi::SIW_MAX_SGE);
    let opcode = opcode.unwrap_or(uapi::siw_opcode_SIW_OP_SEND);
    Completion::flushed(sqe.id, opcode, well_formed, qp_num)
}

/// The QP state transitions a consumer may ask of an iWARP RC QP: those of the verbs
/// specification, except that RTS is entered by the connection manager once the
/// connection is established, never by a plain `modify_qp` from RTR, that SQE (an
/// unreliable-transport state) is never entered, and that SQD, iWARP's Closing (what was
/// posted goes out, then the connection closes), is never left for RTS.
fn transition_allowed(from: QpState, to: QpState) -> bool {
    use QpState::*;
    matches!(
        (from, to),
        (_, Reset)
            | (_, Error)
            | (Reset, Init)
            | (Init, Init)
            | (Init, Rtr)
            | (Rtr, Rtr)
            | (Rts, Rts)
            | (Rts, Sqd)
            | (Sqd, Sqd)
    )
}
