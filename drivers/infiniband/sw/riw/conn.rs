// SPDX-License-Identifier: GPL-2.0

//! An established connection: the socket, once the connection manager handed it over
//! after the MPA exchange, with the sender and receiver that drive it, the state they
//! share, and the scheduling of their turns (the work item, the socket's callback, the
//! doorbell).
//!
//! The connection does not know the endpoint that holds it: what it needs of it is the
//! `Host` trait, and what the endpoint must act on (report the connection up, end it)
//! comes back as return values.

use crate::device::RiwDevice;
use crate::kernel_ext::defer::DeferKey;
use crate::kernel_ext::errno::ECONNRESET;
use crate::kernel_ext::rdma::{Device, QpRef};
use crate::kernel_ext::socket::{
    ratelimit, LockedSocket, SocketAddr, SocketHandler, TcpStream, ZeroCopyOwner,
};
use crate::kernel_ext::sync::{new_spinlock_bh, SpinLockBh};
use crate::kernel_ext::trace::{self, RtrKind};
use crate::kernel_ext::workqueue::{msecs_to_jiffies, work_runs_elsewhere};
use crate::proto::Error as WireError;
use crate::proto::{Negotiated, RtrMode, TermCause, Terminate};
use crate::qp::RiwQp;
use crate::reads::Reads;
use crate::rx::{FirstFpdu, MpaInput, Receiver, RxEnd, Why};
pub(crate) use crate::tx::Wake;
use crate::tx::{Sender, Shared, TxContext, TxEnd};
use core::cell::Cell;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::c_str;
use kernel::prelude::*;
use kernel::sync::Arc;

/// FPDUs a connection handles per direction before it lets other work run.
const BUDGET: u32 = 64;
/// How soon a send that failed for want of memory, with nothing in flight, is tried
/// again.
const SEND_RETRY_MS: u32 = 20;
/// FPDUs the socket callback receives at a time, in softirq context; the work item takes
/// over beyond that.
const CALLBACK_BUDGET: u32 = 16;
/// Received bytes beyond which the callback leaves receiving to the work item: bulk data
/// then gets placed on another CPU than the softirq's (often the sender's, over veth).
const CALLBACK_MAX_BYTES: usize = 16 * 1024;
/// The largest Read Response a Read Request arriving in a doorbell's name gets answered
/// with from that doorbell's system call (see `Host::senders`): one that fits a segment.
/// Larger ones go faster from the work item.
const INLINE_RESPONSE_MAX: u32 = 1024;
/// Endpoints a doorbell runs for others before it leaves the rest to their work items.
const INLINE_RUNS: usize = 4;

/// What a connection needs of the endpoint that holds it.
pub(crate) trait Host: SocketHandler + ZeroCopyOwner + Sized {
    /// The key under which hosts whose sender has a small Read Response to send are
    /// handed to the doorbell whose own send made the Read Request arrive: over a local
    /// route (veth, loopback) the peer's segment is received in softirq on the sender's
    /// CPU, in its system call. The doorbell answers before it returns, saving the
    /// wake-up of a work item on another CPU, its IPI and its context switches on every
    /// Read (the requester's CPU spins on its CQ meanwhile).
    fn senders() -> &'static DeferKey<Self>;
    fn link(&self) -> &Link;
    fn dev(&self) -> &Device<RiwDevice>;
    /// Schedules the host's work item at once.
    fn kick(this: &Arc<Self>);
    /// Does the host's work here and now, as its work item does.
    fn run_engine(this: &Arc<Self>);
    /// Schedules the host's work after `jiffies`, unless it is scheduled already.
    fn kick_after(this: &Arc<Self>, jiffies: u64);
}

/// The part of a connection that the contexts running it reach without the endpoint's
/// lock.
#[pin_data]
pub(crate) struct Link {
    /// Taken before the endpoint's lock by the work item and the doorbell, so neither
    /// waits on the other (a mutex spins while its holder runs, on the CPU the other work
    /// needs).
    engine: Turn,
    /// Receive state, shared with the socket callback (see `Inbound`); taken after the
    /// endpoint's lock and the socket's, never while sending.
    #[pin]
    inbound: SpinLockBh<Inbound>,
}

/// One context at a time runs the engine; another that finds it taken leaves a note
/// and goes, and the holder has the work item run again once it is done.
struct Turn {
    taken: AtomicBool,
    again: AtomicBool,
}

impl Turn {
    /// Whether a context runs the engine now (a hint: it may be given back at once).
    fn is_taken(&self) -> bool {
        self.taken.load(Ordering::Relaxed)
    }

    const fn new() -> Self {
        Self {
            taken: AtomicBool::new(false),
            again: AtomicBool::new(false),
        }
    }

    /// Takes the turn, or leaves the note and returns false.
    fn take(&self) -> bool {
        loop {
            if !self.taken.swap(true, Ordering::SeqCst) {
                return true;
            }
            self.again.store(true, Ordering::SeqCst);
            // The holder may have looked for the note before it was left: once it has
            // given the turn back, it is ours to take.
            if self.taken.load(Ordering::SeqCst) {
                return false;
            }
        }
    }

    /// Gives the turn back; true if a note was left meanwhile.
    fn give_back(&self) -> bool {
        self.taken.store(false, Ordering::SeqCst);
        // Mostly none: a load is cheaper than taking it.
        self.again.load(Ordering::SeqCst) && self.again.swap(false, Ordering::SeqCst)
    }
}

/// How a connection must end, for its endpoint to carry out.
pub(crate) struct Ending {
    /// Reset rather than close in order.
    pub(crate) abort: bool,
    /// The errno the connection manager learns, 0 for none.
    pub(crate) status: i32,
    /// The QP's consumer gets a fatal error event.
    pub(crate) fatal: bool,
    /// Why, for the trace.
    pub(crate) reason: &'static CStr,
}

impl Ending {
    const fn new(abort: bool, status: i32, fatal: bool, reason: &'static CStr) -> Self {
        Self {
            abort,
            status,
            fatal,
            reason,
        }
    }

    /// A local or protocol error after which the peer got a Terminate.
    fn terminated(reason: &'static CStr) -> Self {
        Self::new(true, ECONNRESET().to_errno(), true, reason)
    }
}

/// Records a Terminate sent or received (`riw_terminate`).
fn trace_terminate(dev: &Device<RiwDevice>, qpn: u32, cause: TermCause, sent: bool) {
    trace::terminate(
        dev,
        qpn,
        sent,
        cause.layer_bits(),
        cause.etype(),
        cause.code(),
    );
}

/// The established data path, once the MPA exchange is over.
pub(crate) struct Connection<H: SocketHandler> {
    socket: Option<TcpStream<H>>,
    tx: Sender,
    pub(crate) negotiated: Negotiated,
    /// Responder: nothing may be sent before the initiator's first FPDU (peer-to-peer:
    /// its ready-to-receive message).
    pub(crate) tx_held: bool,
    /// The consumer asked for a graceful close: drain, then close.
    pub(crate) draining: bool,
    /// The QP's number, for the trace.
    qpn: u32,
    /// The socket's send queue was full at the sender's last turn.
    blocked: bool,
}

/// What a connection needs besides its socket, sized by the negotiated parameters: made
/// before the connection is reported up, so that a failure refuses it.
pub(crate) struct Parts {
    tx: Sender,
    reads: Reads,
    qpn: u32,
}

impl Parts {
    pub(crate) fn new(settled: &Negotiated, mss: u32, send_depth: u32, qpn: u32) -> Result<Self> {
        let (ord, ird) = (u32::from(settled.ord), u32::from(settled.ird));
        let tx = Sender::new(settled.crc, mss, ord, settled.large_fpdus)?;
        let reads = Reads::new(ord, ird, send_depth)?;
        Ok(Self { tx, reads, qpn })
    }
}

impl Link {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Link {
            engine: Turn::new(),
            inbound <- new_spinlock_bh!(Inbound::new(), "riw_inbound"),
        })
    }

    /// Whether a context runs the engine now (a hint, see `Turn::is_taken`).
    pub(crate) fn engine_busy(&self) -> bool {
        self.engine.is_taken()
    }

    /// TCP released the pages of a zero-copy send.
    pub(crate) fn zero_copy_released(&self, token: u64, copied: bool) {
        let mut guard = self.inbound.lock();
        let inbound = &mut *guard;
        inbound.zero_copy_copied |= copied;
        if let Some(qp) = inbound.qp.as_ref() {
            inbound.reads.zero_copy_released(qp, token);
        }
    }

    /// Our Reads waiting for responses, and the peer's Read Requests not yet answered.
    pub(crate) fn read_queues(&self) -> (u32, u32) {
        self.inbound.lock().reads.occupancy()
    }

    /// The connection ended: a receive half placed completes as flushed.
    pub(crate) fn flush_rx(&self, qp: &QpRef<RiwDevice>) {
        self.inbound.lock().rx.flush(qp);
    }

    /// Receiving ends with the connection: all it held goes now, outside the lock, rather
    /// than with the endpoint's last reference (which may go in softirq).
    pub(crate) fn reset(&self) {
        let ended = core::mem::replace(&mut *self.inbound.lock(), Inbound::new());
        drop(ended);
    }
}

/// Runs `f` if the engine's turn is free, else leaves the note for its holder; once
/// done, schedules the work item if `f` asks for it or a note came meanwhile.
pub(crate) fn with_engine<H: Host>(host: &Arc<H>, f: impl FnOnce() -> bool) {
    let engine = &host.link().engine;
    if !engine.take() {
        return;
    }
    let wanted = f();
    if engine.give_back() || wanted {
        H::kick(host);
    }
}

/// New send work, from a context that may sleep (the user library's doorbell): `send`
/// sends it here and now, saving the work item's wake-up on every message. Small Read
/// Responses that our sending made due go out from here too (see `Host::senders`), once
/// our own locks are released.
pub(crate) fn doorbell<H: Host>(host: &Arc<H>, send: impl FnOnce() -> bool) {
    // Should the work item have the engine, it runs again after and sends this too.
    H::senders().scope(
        || with_engine(host, send),
        INLINE_RUNS,
        |h| H::run_engine(&h),
        |h| H::kick(&h),
    );
}

/// Data arrived, and this context may read the socket (its callback, in softirq, with
/// TCP holding the socket's lock): places it now, which saves the work item's wake-up
/// on every message. Returns false if the work item is wanted: FPDUs are not received
/// yet, the connection must end, more data waits, or the sender has something to do (a
/// Read to answer, work a Read held back, the ready-to-receive message came).
pub(crate) fn receive_now<H: Host>(
    host: &Arc<H>,
    sock: &LockedSocket<'_>,
    readable: usize,
) -> bool {
    if readable > CALLBACK_MAX_BYTES {
        return false;
    }
    let mut inbound = host.link().inbound.lock();
    if inbound.qp.is_none() || inbound.outcome.is_some() {
        return false;
    }
    // The work item starts on another CPU as soon as the sender has something to do (a
    // Read to answer), while this one receives the rest; a small response is left to the
    // doorbell in whose name this runs, if any.
    let (deferred, woken) = (Cell::new(false), Cell::new(false));
    let wake_sender = |bytes: u32| {
        if woken.get() || (deferred.get() && bytes <= INLINE_RESPONSE_MAX) {
            return;
        }
        if bytes <= INLINE_RESPONSE_MAX && H::senders().defer(host) {
            deferred.set(true);
        } else {
            woken.set(true);
            H::kick(host);
        }
    };
    match inbound.receive(sock, host.dev(), CALLBACK_BUDGET, &wake_sender) {
        RxEnd::Idle => {
            let wanted = inbound.reads.take_sender_wanted() || inbound.rx.first_pending();
            !wanted || woken.get() || deferred.get()
        }
        RxEnd::Budget => false,
        end => {
            inbound.outcome = Some(end);
            false
        }
    }
}

impl<H: Host> Connection<H> {
    /// Takes the socket over from the connection manager once the MPA exchange is over:
    /// the receiver takes FPDUs, `input` (what came with the last MPA frame) first. The
    /// work item receives first (`receive`); the socket callback only after it (and so
    /// after the connection was reported up).
    pub(crate) fn start(
        host: &H,
        socket: TcpStream<H>,
        parts: Parts,
        negotiated: Negotiated,
        input: MpaInput,
        first: Option<FirstFpdu>,
    ) -> Self {
        let Parts { tx, reads, qpn } = parts;
        {
            let mut inbound = host.link().inbound.lock();
            inbound.reads = reads;
            inbound.outcome = None;
            inbound.rx.start_fpdus(negotiated.crc, first, input);
        }
        Self {
            socket: Some(socket),
            tx,
            negotiated,
            tx_held: first.is_some(),
            draining: false,
            qpn,
            blocked: false,
        }
    }

    /// The socket, until it is given back.
    pub(crate) fn socket(&self) -> Option<&TcpStream<H>> {
        self.socket.as_ref()
    }

    /// The largest ULPDU an FPDU carries (MULPDU).
    pub(crate) fn mulpdu(&self) -> u32 {
        self.tx.max_ulpdu()
    }

    /// Responder without peer-to-peer mode: the initiator sent nothing in the grace
    /// period, so the sender goes ahead (`FIRST_FPDU_GRACE_MS`).
    pub(crate) fn release_tx(&mut self) {
        self.tx_held = false;
    }

    /// Gives the socket back, to be closed.
    pub(crate) fn take_socket(&mut self) -> Option<TcpStream<H>> {
        self.socket.take()
    }

    /// Peer-to-peer initiator: sends the ready-to-receive message, best effort.
    pub(crate) fn ready_to_receive(&mut self, dev: &Device<RiwDevice>) {
        if let Some(sock) = self.socket.as_ref() {
            if self.tx.ready_to_receive(sock).is_ok() {
                dev.stats.ready_to_receive_sent();
                trace::rtr(dev, self.qpn, true, RtrKind::Write);
            }
        }
    }

    /// Sends a Terminate, best effort.
    pub(crate) fn terminate(&mut self, dev: &Device<RiwDevice>, terminate: Terminate) {
        if let Some(sock) = self.socket.as_ref() {
            dev.stats.terminate(terminate.cause, true);
            trace_terminate(dev, self.qpn, terminate.cause, true);
            self.tx.terminate(sock, terminate);
        }
    }

    /// The connection ended: work the sender took from the queues completes as flushed.
    pub(crate) fn flush_tx(&mut self, host: &H, qp: &QpRef<RiwDevice>) {
        self.tx.flush(qp, &host.link().inbound);
    }

    /// The work item's receive turn, up to the budget. Returns how it ended, and whether
    /// the peer's ready-to-receive message came: the endpoint reports the connection up
    /// before it acts on the rest (`received`). The initiator's first FPDU, whatever it
    /// is, releases a responder's sender.
    pub(crate) fn receive(
        &mut self,
        host: &Arc<H>,
        qp: &QpRef<RiwDevice>,
    ) -> Option<(RxEnd, bool)> {
        let sock = self.socket.as_ref()?;
        let inbound = &host.link().inbound;
        // Woken only for the sender (a Read Request to answer, held work released): the
        // receiver has nothing to do, and the socket's lock and a read would only delay
        // the response. Data arriving after this look wakes the work item again.
        let sender_only = sock
            .nothing_to_read()
            .then(|| {
                let mut inbound = inbound.lock();
                (inbound.qp.is_some() && inbound.outcome.is_none()).then(|| {
                    inbound.reads.take_sender_wanted();
                    (RxEnd::Idle, inbound.rx.take_first())
                })
            })
            .flatten();
        let (rx_end, first) = match sender_only {
            Some(step) => step,
            None => sock.with_lock(|sock| {
                let mut inbound = inbound.lock();
                let end = match inbound.outcome.take() {
                    Some(end) => end,
                    None => {
                        if inbound.qp.is_none() {
                            inbound.qp = Some(qp.clone());
                        }
                        // The work item sends right after receiving.
                        inbound.receive(sock, host.dev(), BUDGET, &|_| {})
                    }
                };
                inbound.reads.take_sender_wanted();
                (end, inbound.rx.take_first())
            }),
        };
        if first {
            self.tx_held = false;
        }
        let rtr = first && self.negotiated.rtr.is_some();
        if rtr {
            let mode = match self.negotiated.rtr {
                Some(RtrMode::Read) => RtrKind::Read,
                Some(RtrMode::Send) => RtrKind::Send,
                _ => RtrKind::Write,
            };
            trace::rtr(host.dev(), self.qpn, false, mode);
        }
        Some((rx_end, rtr))
    }

    /// Acts on how the receive turn ended; `Err` if the connection must end.
    pub(crate) fn received(
        &mut self,
        host: &Arc<H>,
        rx_end: RxEnd,
        peer: Option<SocketAddr>,
    ) -> Result<(), Ending> {
        match rx_end {
            RxEnd::Idle => Ok(()),
            RxEnd::Budget => {
                H::kick(host);
                Ok(())
            }
            // The peer closed: report it, then close our side.
            RxEnd::Eof => Err(Ending::new(false, 0, false, c_str!("closed by the peer"))),
            RxEnd::SocketError(e) => Err(Ending::new(
                true,
                e.to_errno(),
                false,
                c_str!("socket error"),
            )),
            RxEnd::Violation { cause, why } => {
                host.dev().stats.violation(cause);
                if let Why::Wire(WireError::CrcMismatch { computed, received }) = why {
                    trace::crc_error(host.dev(), self.qpn, computed, received);
                }
                if ratelimit() {
                    pr_warn!("{} terminated: {}\n", PeerName(peer), why);
                }
                self.terminate_for(host, cause);
                Err(Ending::terminated(c_str!(
                    "peer broke the protocol: Terminate sent"
                )))
            }
            RxEnd::LocalError { cause } => {
                self.terminate_for(host, cause);
                Err(Ending::terminated(c_str!("local error: Terminate sent")))
            }
            RxEnd::Terminated(cause) => {
                host.dev().stats.terminate(cause, false);
                trace_terminate(host.dev(), self.qpn, cause, false);
                if ratelimit() {
                    pr_info!(
                        "{} terminated the connection (layer {}, type {}, code {:#x})\n",
                        PeerName(peer),
                        cause.layer_bits(),
                        cause.etype(),
                        cause.code()
                    );
                }
                Err(Ending::terminated(c_str!("Terminate received")))
            }
        }
    }

    /// Sends the Terminate the receiver owes the peer for `cause`.
    fn terminate_for(&mut self, host: &H, cause: TermCause) {
        let terminate = host.link().inbound.lock().rx.take_terminate(cause);
        self.terminate(host.dev(), terminate);
    }

    /// The sender's turn: Read responses and the send queue, up to the budget; `Err` if
    /// the connection must end (drained after a graceful close, or failed).
    pub(crate) fn transmit(
        &mut self,
        host: &Arc<H>,
        qp: &QpRef<RiwDevice>,
        wake: Wake,
    ) -> Result<(), Ending> {
        let Some(sock) = self.socket.as_ref() else {
            return Ok(());
        };
        if self.tx_held {
            return Ok(());
        }
        let inbound = &host.link().inbound;
        let cx = TxContext {
            sock,
            owner: host,
            dev: host.dev(),
            qp,
            shared: inbound,
            wake,
        };
        let end = self.tx.run(&cx, BUDGET);
        let blocked = matches!(end, TxEnd::Blocked);
        if blocked != self.blocked {
            self.blocked = blocked;
            trace::sock_backpressure(host.dev(), self.qpn, blocked);
        }
        match end {
            TxEnd::Idle => {
                // The doorbell leaves a kept send queue slot to the work item, which hands
                // it back (see `RiwQp::keeps_slot`) while the program posts on. With no
                // other CPU to run the work item, the program could not post meanwhile:
                // the doorbell hands the slot back itself, saving two context switches.
                let hand_back = wake != Wake::Doorbell || !work_runs_elsewhere();
                if RiwQp::idle_needs_run(qp, hand_back, self.tx.is_idle()) {
                    H::kick(host);
                }
                if self.draining && self.tx.is_idle() && inbound.lock().reads.idle_or_wake_sender()
                {
                    return Err(Ending::new(false, 0, false, c_str!("graceful close")));
                }
                Ok(())
            }
            TxEnd::Blocked => {
                // A full socket wakes us when acknowledgements free room; one that
                // refused bytes while holding none of ours (an allocation failed) never
                // will: try again shortly, as a blocking sender would.
                if sock.send_queue_empty() {
                    H::kick_after(host, msecs_to_jiffies(SEND_RETRY_MS));
                }
                Ok(())
            }
            TxEnd::Budget => {
                H::kick(host);
                Ok(())
            }
            TxEnd::LocalError => {
                self.terminate(
                    host.dev(),
                    Terminate::new(TermCause::RDMAP_LOCAL_CATASTROPHIC),
                );
                Err(Ending::terminated(c_str!("local error: Terminate sent")))
            }
            TxEnd::SocketError(e) => Err(Ending::new(
                true,
                e.to_errno(),
                false,
                c_str!("socket error"),
            )),
        }
    }
}

/// A peer's address in log lines.
pub(crate) struct PeerName(pub(crate) Option<SocketAddr>);

impl core::fmt::Display for PeerName {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match &self.0 {
            Some(a) => write!(f, "peer {}", a),
            None => f.write_str("peer (unknown)"),
        }
    }
}

/// What receiving shares between the contexts that do it (the work item, the socket's
/// data-ready callback in softirq) and the sender, which takes `reads` briefly between
/// messages: kept under a spinlock that keeps softirqs off. Nothing here sleeps or
/// allocates.
struct Inbound {
    rx: Receiver,
    reads: Reads,
    /// The connection's QP, while FPDUs are received.
    qp: Option<QpRef<RiwDevice>>,
    /// What a receive in the callback stopped at, for the work item to act on.
    outcome: Option<RxEnd>,
    /// The route copied the pages of a zero-copy send anyway (delivery to a socket of
    /// this host): zero-copy only costs here, so the sender copies from then on.
    zero_copy_copied: bool,
}

impl Inbound {
    fn new() -> Self {
        Self {
            rx: Receiver::new(),
            reads: Reads::none(),
            qp: None,
            outcome: None,
            zero_copy_copied: false,
        }
    }

    /// Receives and places what the socket holds, up to `budget` FPDUs; `Idle` if
    /// FPDUs are not received (yet, or any more). `wake_sender` runs as soon as the
    /// sender has something to do (a Read Request to answer, work a Read held back), so
    /// that it starts while the rest is received; it gets the bytes to send (a Read
    /// Response's), `u32::MAX` if not known.
    #[inline(always)]
    fn receive(
        &mut self,
        sock: &LockedSocket<'_>,
        dev: &Device<RiwDevice>,
        budget: u32,
        wake_sender: &dyn Fn(u32),
    ) -> RxEnd {
        let Self { rx, reads, qp, .. } = self;
        match qp.as_ref() {
            Some(qp) => rx.run(sock, dev, qp, reads, budget, wake_sender),
            None => RxEnd::Idle,
        }
    }
}

impl Shared for SpinLockBh<Inbound> {
    #[inline(always)]
    fn with_reads<R>(&self, f: impl FnOnce(&mut Reads) -> R) -> R {
        f(&mut self.lock().reads)
    }

    fn zero_copy_copied(&self) -> bool {
        self.lock().zero_copy_copied
    }
}
