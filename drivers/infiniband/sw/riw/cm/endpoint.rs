// SPDX-License-Identifier: GPL-2.0

//! Connection endpoints: the MPA exchange driven over the socket, the hand-over of the
//! socket to the connection, and the events iw_cm expects, in the order its rules allow.

use super::listener::Listener;
use super::mpa::{mpa_config, Handshake, Read, RESPONDER_RTR};
use crate::conn::{self, Connection, Ending, Host, Link, Parts, PeerName, Wake};
use crate::device::RiwDevice;
use crate::kernel_ext::defer::DeferKey;
use crate::kernel_ext::errno::{ECONNREFUSED, ECONNRESET, EMSGSIZE, ENETDOWN, ETIMEDOUT};
use crate::kernel_ext::params;
use crate::kernel_ext::rdma::{
    CmEvent, CmEventKind, CmId, CmIdView, ConnParam, Device, DeviceRef, QpRef,
};
use crate::kernel_ext::socket::{
    ratelimit, LockedSocket, SocketAddr, SocketEvent, SocketHandler, TcpState, TcpStream,
    ZeroCopyOwner,
};
use crate::kernel_ext::sync::{new_mutex, Mutex};
use crate::kernel_ext::trace::{self, MpaKind, MpaRecord};
use crate::kernel_ext::workqueue::{
    jiffies, msecs_to_jiffies, DelayedWork, DelayedWorkItem, PostPace,
};
use crate::limits::LIMITS;
use crate::proto::mpa::{MPA_ENHANCED_LEN, MPA_MAX_FRAME_LEN, MPA_MAX_PRIVATE_DATA};
use crate::proto::{FrameKind, MpaConfig, MpaFrame, Negotiated};
use crate::qp::{CloseMode, ConnectionEndpoint, ConnectionInfo, RiwQp};
use crate::rx::FirstFpdu;
use crate::stats::Stat;
use core::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use kernel::c_str;
use kernel::prelude::*;
use kernel::sync::Arc;

/// How long a peer may take to complete the TCP and MPA exchange.
const MPA_TIMEOUT_MS: u32 = 10_000;
/// How long a responder without peer-to-peer mode waits for the initiator's first FPDU
/// before it sends anyway. RFC 5044 has the responder wait, and an initiator may refuse
/// an FPDU read together with the MPA reply (siw does); but a ULP whose server sends
/// first would wait forever when the initiator offers no peer-to-peer mode (siw never
/// does). Past the grace period the reply has long been read.
const FIRST_FPDU_GRACE_MS: u32 = 200;
/// Endpoints whose sender has a small Read Response to send (see `Host::senders`).
static SENDERS: DeferKey<Endpoint> = DeferKey::new();
/// Private data the iw_cm event can carry (its length is a `u8`).
const MAX_EVENT_PRIVATE_DATA: usize = 255;
/// A kernel consumer's post that finds the engine busy or its work pending (an overlap)
/// adds this much to its count of overlaps, one that finds neither takes one off.
const OVERLAP_WEIGHT: u8 = 2;
/// A kernel consumer whose count of overlaps reaches this is streaming: its work goes to
/// the next CPU (see `posted`). One overlap makes it so for a post or two.
const STREAM_OVERLAPS: u8 = 2;
/// The highest count: a stream that ends turns back within a few posts.
const STREAM_MAX: u8 = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Connecting,
    AwaitReply,
    AwaitRequest,
    AwaitAccept,
    Established,
    Closed,
}

/// A connection endpoint.
#[pin_data]
pub(crate) struct Endpoint {
    dev: DeviceRef<RiwDevice>,
    /// The listener of a passive endpoint.
    listener: Option<Arc<Listener>>,
    id: AtomicU32,
    /// A `CloseMode` the QP asked for, 0 if none.
    close_request: AtomicU8,
    /// How many of a kernel consumer's recent posts found the engine busy or its work
    /// pending, up to `STREAM_MAX` (see `posted`).
    post_overlaps: AtomicU8,
    #[pin]
    work: DelayedWork<Endpoint>,
    /// The connection's part that its contexts reach without `inner`.
    #[pin]
    link: Link,
    #[pin]
    inner: Mutex<EpInner>,
}

struct EpInner {
    phase: Phase,
    /// The socket until the MPA exchange is over; the connection has it then.
    socket: Option<TcpStream<Endpoint>>,
    cm_id: Option<CmId>,
    qp: Option<QpRef<RiwDevice>>,
    /// When the MPA exchange must be done, in jiffies.
    deadline: u64,
    mpa: Handshake,
    conn: Option<Connection<Endpoint>>,
    local: Option<SocketAddr>,
    remote: Option<SocketAddr>,
    /// What iw_cm was told of the connection, and so what it is owed.
    told: Told,
}

/// What iw_cm was told of a connection that was accepted or reported up: its rules say
/// what may follow. An active endpoint that fails before it is up owes one ConnectReply
/// with the error instead (`connect_failed`), which ends it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Told {
    /// Nothing that asks for more.
    Nothing,
    /// Accepted in peer-to-peer mode, not reported up yet: iw_cm waits for Established
    /// (before any Close) even if the ready-to-receive message never comes.
    EstablishedOwed,
    /// Reported up (ConnectReply or Established): one Close is owed.
    Up,
    /// Up, and the peer's Disconnect was reported: only the Close is owed.
    Disconnected,
    /// The connection ended after it was up: nothing more.
    Closed,
}

impl Told {
    /// The connection was reported up.
    fn up(&mut self) {
        if *self != Told::Disconnected {
            *self = Told::Up;
        }
    }

    /// Whether a Disconnect may be reported now: once per connection; it is then.
    fn disconnect(&mut self) -> bool {
        let first = *self != Told::Disconnected;
        *self = Told::Disconnected;
        first
    }

    /// Whether a Close is owed; none is from now on.
    fn close(&mut self) -> bool {
        let owed = matches!(self, Told::Up | Told::Disconnected);
        if *self != Told::Nothing {
            *self = Told::Closed;
        }
        owed
    }
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Connecting => "CONNECTING",
            Phase::AwaitReply => "MPA_REPLY_WAIT",
            Phase::AwaitRequest => "MPA_REQUEST_WAIT",
            Phase::AwaitAccept => "ACCEPT_WAIT",
            Phase::Established => "ESTABLISHED",
            Phase::Closed => "CLOSED",
        }
    }
}

impl EpInner {
    /// Whether the deadline applies: the MPA exchange, or a responder waiting for the
    /// initiator's first FPDU.
    fn timed(&self) -> bool {
        match self.phase {
            Phase::Connecting | Phase::AwaitReply | Phase::AwaitRequest => true,
            Phase::Established => self.conn.as_ref().is_some_and(|c| c.tx_held),
            Phase::AwaitAccept | Phase::Closed => false,
        }
    }
}

impl SocketHandler for Endpoint {
    fn socket_event(this: &Arc<Self>, _event: SocketEvent) {
        this.kick();
    }

    fn data_ready(this: &Arc<Self>, sock: Option<(&LockedSocket<'_>, usize)>) {
        if !sock.is_some_and(|(sock, readable)| conn::receive_now(this, sock, readable)) {
            this.kick();
        }
    }
}

impl ZeroCopyOwner for Endpoint {
    fn released(this: Arc<Self>, token: u64, copied: bool) {
        if copied {
            this.dev.stats.inc(Stat::ZeroCopyFallbacks);
        }
        this.link.zero_copy_released(token, copied);
        // The sender may wait for this (a close drains it first). Should the work run and
        // end meanwhile, `this` is the last reference, dropped here in softirq: that is
        // only after the teardown, when nothing left in the endpoint sleeps to free.
        this.kick();
    }
}

impl DelayedWorkItem for Endpoint {
    fn delayed_work(&self) -> &DelayedWork<Self> {
        &self.work
    }

    fn run(this: Arc<Self>) {
        this.run_engine();
    }
}

impl Endpoint {
    fn new(
        dev: &Device<RiwDevice>,
        listener: Option<Arc<Listener>>,
        config: MpaConfig,
    ) -> Result<Arc<Self>> {
        let dev_ref = dev.try_ref().ok_or(ENODEV)?;
        let kind = if listener.is_some() {
            FrameKind::Request
        } else {
            FrameKind::Reply
        };
        let mpa = Handshake::new(config, kind)?;
        let ep = Arc::pin_init(
            try_pin_init!(Endpoint {
                dev: dev_ref,
                listener,
                id: AtomicU32::new(0),
                close_request: AtomicU8::new(0),
                post_overlaps: AtomicU8::new(0),
                work <- DelayedWork::new(),
                link <- Link::new(),
                inner <- new_mutex!(
                    EpInner {
                        phase: Phase::Closed,
                        socket: None,
                        cm_id: None,
                        qp: None,
                        deadline: jiffies() + msecs_to_jiffies(MPA_TIMEOUT_MS),
                        mpa,
                        conn: None,
                        local: None,
                        remote: None,
                        told: Told::Nothing,
                    },
                    "riw_endpoint"
                ),
            }),
            GFP_KERNEL,
        )?;
        // Not the lowest free number: iw_cm keeps a request's number in its id until the
        // consumer answers it, and a number reused meanwhile would name another request.
        let id = dev.endpoints.insert_cyclic(1, u32::MAX, ep.clone())?;
        ep.id.store(id, Ordering::Relaxed);
        Ok(ep)
    }

    /// Does the endpoint's work here and now, as its work item does.
    fn run_engine(self: &Arc<Self>) {
        conn::with_engine(self, || {
            let mut g = self.inner.lock();
            self.step(&mut g);
            if g.timed() {
                let now = jiffies();
                DelayedWork::run_after(self, &self.dev.queue, g.deadline.saturating_sub(now));
            }
            false
        });
    }

    /// The listener of a passive endpoint.
    pub(super) fn listener(&self) -> Option<&Arc<Listener>> {
        self.listener.as_ref()
    }

    /// Schedules the endpoint's work at once.
    pub(crate) fn kick(self: &Arc<Self>) {
        DelayedWork::run_now(self, &self.dev.queue);
    }

    /// New send work, from a context that may sleep (the user library's doorbell): sent
    /// here and now (see `conn::doorbell`).
    fn send_now(self: &Arc<Self>) {
        conn::doorbell(self, || {
            let mut guard = self.inner.lock();
            let g = &mut *guard;
            let established =
                g.phase == Phase::Established && self.close_request.load(Ordering::Acquire) == 0;
            if established {
                self.transmit(g, Wake::Doorbell);
            }
            !established
        });
    }

    /// The QP asks the connection to end.
    fn request_close(self: &Arc<Self>, mode: CloseMode) {
        self.close_request.fetch_max(mode as u8, Ordering::AcqRel);
        self.kick();
    }

    /// A connection the listener accepted: it waits for the MPA request.
    pub(super) fn new_passive(listener: &Arc<Listener>, stream: TcpStream<Endpoint>) -> Result {
        // Our ird/ord come with the accept; the request is judged then.
        let mut config = mpa_config(LIMITS.max_qp_rd_atom, LIMITS.max_qp_init_rd_atom, false);
        config.rtr = RESPONDER_RTR;
        let ep = Self::new(&listener.dev, Some(listener.clone()), config)?;
        let mut stream = stream;
        stream.attach(ep.clone());
        {
            let mut g = ep.inner.lock();
            g.local = stream.local_addr().ok();
            g.remote = stream.peer_addr().ok();
            g.socket = Some(stream);
            g.phase = Phase::AwaitRequest;
        }
        if ep.link_down() {
            ep.abort();
        } else {
            ep.kick();
        }
        Ok(())
    }

    /// Whether the device's netdev is down, so that no connection may start: over loopback
    /// (both ends on this device) TCP would still connect. Asked once the endpoint is in
    /// the table, which a link going down walks after it has stopped: either that walk
    /// ends the endpoint or this sees the link down.
    fn link_down(&self) -> bool {
        !self.dev.netdev().is_some_and(|n| n.is_running())
    }

    /// Starts an active connection (`iw_connect`).
    pub(crate) fn connect(dev: &Device<RiwDevice>, cm_id: CmId, param: &ConnParam<'_>) -> Result {
        if param.private_data.len() > MPA_MAX_PRIVATE_DATA - MPA_ENHANCED_LEN {
            return Err(EMSGSIZE());
        }
        let qp = dev.qp_ref(param.qpn).ok_or(EINVAL)?;
        let local = cm_id.local_addr()?;
        let remote = cm_id.remote_addr()?;
        let netdev = dev.netdev().ok_or(ENODEV)?;
        let config = mpa_config(param.ird, param.ord, params::peer_to_peer());
        let ep = Self::new(dev, None, config)?;
        let result = (|| {
            if ep.link_down() {
                return Err(ENETDOWN());
            }
            let mut g = ep.inner.lock();
            let mut frame = [0u8; MPA_MAX_FRAME_LEN];
            let request = config.request(param.private_data);
            let n = request.encode(&mut frame).map_err(|_| EINVAL)?;
            g.mpa.queue(&frame[..n])?;
            g.remote = Some(remote);
            ep.trace_mpa(&g, &request, true);
            g.phase = Phase::Connecting;
            // Resource tracking finds the endpoint of an active id by this, as iw_cm hands
            // a passive one's back; `discard` takes it back.
            cm_id.set_provider_data(ep.id.load(Ordering::Relaxed) as usize);
            g.cm_id = Some(cm_id);
            g.qp = Some(qp);
            // The socket's callbacks may run the work as soon as it exists: it waits
            // for our lock.
            g.socket = Some(TcpStream::connect(&netdev, &local, &remote, ep.clone())?);
            Ok(())
        })();
        if let Err(e) = result {
            ep.discard();
            return Err(e);
        }
        ep.kick();
        Ok(())
    }

    /// Accepts the request the endpoint reported (`iw_accept`).
    pub(crate) fn accept(dev: &Device<RiwDevice>, cm_id: CmId, param: &ConnParam<'_>) -> Result {
        let ep = dev
            .endpoints
            .get(cm_id.provider_data() as u32)
            .ok_or(ECONNRESET())?;
        if param.private_data.len() > MPA_MAX_PRIVATE_DATA - MPA_ENHANCED_LEN {
            return Err(EMSGSIZE());
        }
        let qp = dev.qp_ref(param.qpn).ok_or(EINVAL)?;
        let mut guard = ep.inner.lock();
        let g = &mut *guard;
        if g.phase != Phase::AwaitAccept {
            return Err(ECONNRESET());
        }
        let mut config = mpa_config(param.ird, param.ord, false);
        config.rtr = RESPONDER_RTR;
        let mut frame = [0u8; MPA_MAX_FRAME_LEN];
        let respond = {
            let request = g.mpa.frame().ok_or(EINVAL)?;
            config
                .respond(&request, param.private_data)
                .map(|(reply, settled)| {
                    ep.trace_mpa(g, &reply, true);
                    reply.encode(&mut frame).map(|n| (n, settled))
                })
        };
        let accepted = match respond {
            Ok(Ok((n, settled))) => ep
                .prepare(g, &settled, &qp)
                .map(|parts| (n, settled, parts)),
            // Parameters the request cannot meet (no matching ready-to-receive).
            _ => Err(ECONNREFUSED()),
        };
        let (n, settled, parts) = match accepted {
            Ok(a) => a,
            Err(e) => {
                let _ = ep.send_reject(g, &[]);
                ep.teardown(g, false, 0, c_str!("accept failed"));
                return Err(e);
            }
        };
        g.mpa.config = config;
        // Fits: the frame was encoded into a buffer of the same size.
        let _ = g.mpa.queue(&frame[..n]);
        dev.stats.inc(Stat::MpaRepliesSent);
        ep.flush_out(g);
        let first = settled.rtr.map_or(FirstFpdu::Any, FirstFpdu::Rtr);
        if let Err(e) = ep.hand_over(g, parts, &settled, Some(first)) {
            ep.teardown(g, false, 0, c_str!("accept failed"));
            return Err(e);
        }
        g.qp = Some(qp);
        g.cm_id = Some(cm_id);
        g.phase = Phase::Established;
        if settled.rtr.is_none() {
            dev.stats.inc(Stat::ConnectionsEstablished);
            ep.report_up(g, CmEventKind::Established, &[]);
            g.deadline = jiffies() + msecs_to_jiffies(FIRST_FPDU_GRACE_MS);
        } else {
            g.told = Told::EstablishedOwed;
            g.deadline = jiffies() + msecs_to_jiffies(MPA_TIMEOUT_MS);
        }
        drop(guard);
        ep.kick();
        Ok(())
    }

    /// Rejects the request the endpoint reported (`iw_reject`).
    pub(crate) fn reject(dev: &Device<RiwDevice>, cm_id: &CmId, private_data: &[u8]) -> Result {
        let ep = dev
            .endpoints
            .get(cm_id.provider_data() as u32)
            .ok_or(ECONNRESET())?;
        let mut guard = ep.inner.lock();
        let g = &mut *guard;
        if g.phase != Phase::AwaitAccept {
            return Err(ECONNRESET());
        }
        let sent = ep.send_reject(g, private_data);
        ep.teardown(g, false, 0, c_str!("rejected by the consumer"));
        sent
    }

    /// Drops an endpoint that never got going.
    fn discard(self: &Arc<Self>) {
        let mut g = self.inner.lock();
        // iw_connect fails: no event, and the QP stays as it was.
        if let Some(cm_id) = g.cm_id.take() {
            forget_endpoint(&cm_id);
        }
        g.qp = None;
        self.teardown(&mut g, true, 0, c_str!("connect failed"));
    }

    /// Sends what is left of the MPA frame; false if the socket is full.
    fn flush_out(&self, g: &mut EpInner) -> bool {
        g.mpa.flush(g.socket.as_ref())
    }

    fn step(self: &Arc<Self>, g: &mut EpInner) {
        if g.phase == Phase::Closed {
            return;
        }
        let request = self.close_request.swap(0, Ordering::AcqRel);
        if request == CloseMode::Abort as u8 {
            self.end(g, true, 0, None, c_str!("aborted by the consumer"));
            return;
        }
        if request == CloseMode::Graceful as u8 {
            match g.conn.as_mut() {
                Some(conn) if g.phase == Phase::Established => conn.draining = true,
                _ => {
                    self.end(g, true, 0, None, c_str!("closed by the consumer"));
                    return;
                }
            }
        }
        match g.phase {
            Phase::Connecting => self.connecting(g),
            Phase::AwaitReply | Phase::AwaitRequest => self.mpa(g),
            Phase::AwaitAccept => self.await_accept(g),
            Phase::Established => self.established(g),
            Phase::Closed => {}
        }
        if g.timed() && jiffies() >= g.deadline {
            let waiting_first = g.phase == Phase::Established
                && g.conn.as_ref().is_some_and(|c| c.negotiated.rtr.is_none());
            if waiting_first {
                if let Some(conn) = g.conn.as_mut() {
                    conn.release_tx();
                }
                self.dev.stats.inc(Stat::ResponderSentFirst);
                self.transmit(g, Wake::WorkItem);
            } else {
                self.dev.stats.inc(Stat::ConnectionsTimedOut);
                self.refuse(g, "no MPA exchange in time", ETIMEDOUT());
            }
        }
    }

    fn connecting(self: &Arc<Self>, g: &mut EpInner) {
        let Some(sock) = g.socket.as_ref() else {
            return;
        };
        match sock.state() {
            TcpState::Established => {
                g.local = sock.local_addr().ok();
                g.phase = Phase::AwaitReply;
                self.dev.stats.inc(Stat::MpaRequestsSent);
                self.flush_out(g);
                self.mpa(g);
            }
            TcpState::Connecting => {}
            _ => {
                let err = sock.take_error().unwrap_or(ECONNREFUSED());
                if err == ECONNREFUSED() {
                    self.dev.stats.inc(Stat::ConnectionsRefused);
                } else if err == ETIMEDOUT() {
                    self.dev.stats.inc(Stat::ConnectionsTimedOut);
                }
                self.connect_failed(g, err, &[]);
            }
        }
    }

    /// Reads and judges the peer's MPA frame.
    fn mpa(self: &Arc<Self>, g: &mut EpInner) {
        if !self.flush_out(g) && g.mpa.sending() {
            // The socket is full or failed; its callbacks bring us back.
            if let Some(e) = g.socket.as_ref().and_then(|s| s.take_error()) {
                self.refuse(g, "connection lost in the MPA exchange", e);
            }
            return;
        }
        if g.phase == Phase::AwaitRequest
            && self
                .listener
                .as_ref()
                .is_some_and(|l| l.closed.load(Ordering::Acquire))
        {
            self.end(g, true, 0, None, c_str!("listener closed"));
            return;
        }
        let Some(sock) = g.socket.as_ref() else {
            return;
        };
        match g.mpa.read(sock) {
            Read::Complete => {}
            Read::More => return,
            Read::Closed => {
                return self.refuse(g, "peer closed in the MPA exchange", ECONNRESET());
            }
            Read::Lost(e) => return self.refuse(g, "connection lost in the MPA exchange", e),
            Read::Invalid(why) => {
                if ratelimit() {
                    pr_warn!("{} refused: {}\n", PeerName(g.remote), why);
                }
                return self.refuse_quietly(g, ECONNRESET());
            }
        }
        if g.phase == Phase::AwaitReply {
            self.reply_arrived(g);
        } else {
            self.request_arrived(g);
        }
    }

    /// Passive side: a complete MPA request.
    fn request_arrived(self: &Arc<Self>, g: &mut EpInner) {
        let Some(request) = g.mpa.frame() else {
            return;
        };
        self.dev.stats.inc(Stat::MpaRequestsReceived);
        self.trace_mpa(g, &request, false);
        // The request is answered at accept time; check now what makes it unanswerable.
        let check = g.mpa.config.respond(&request, &[]).map(|_| ());
        let pd_len = request.private_data.len();
        let (ird, ord) = request
            .enhanced
            .map_or((0, 0), |e| (e.ird.min(255) as u8, e.ord.min(255) as u8));
        let mut private_data = [0u8; MAX_EVENT_PRIVATE_DATA];
        let pd = match private_data.get_mut(..pd_len) {
            Some(pd) => {
                pd.copy_from_slice(request.private_data);
                &*pd
            }
            None => &[][..],
        };
        if let Err(why) = check {
            if ratelimit() {
                pr_warn!("{} refused: {}\n", PeerName(g.remote), why);
            }
            let _ = self.send_reject(g, &[]);
            return self.refuse_quietly(g, ECONNREFUSED());
        }
        if pd_len > MAX_EVENT_PRIVATE_DATA {
            if ratelimit() {
                pr_warn!(
                    "{} refused: {} bytes of private data, more than iw_cm takes\n",
                    PeerName(g.remote),
                    pd_len
                );
            }
            let _ = self.send_reject(g, &[]);
            return self.refuse_quietly(g, ECONNREFUSED());
        }
        let Some(listener) = self.listener.clone() else {
            return;
        };
        g.phase = Phase::AwaitAccept;
        let event = CmEvent {
            kind: CmEventKind::ConnectRequest,
            status: 0,
            local: g.local,
            remote: g.remote,
            private_data: pd,
            provider_data: self.id.load(Ordering::Relaxed) as usize,
            // The peer's: what it can take and what it wants to issue.
            ird,
            ord,
        };
        if listener.report_request(&event).is_err() {
            if ratelimit() {
                pr_warn!(
                    "{} refused: the listener takes no more requests\n",
                    PeerName(g.remote)
                );
            }
            let _ = self.send_reject(g, &[]);
            self.refuse_quietly(g, ECONNREFUSED());
        }
    }

    /// Answers the peer's request with a reject carrying `private_data`.
    fn send_reject(&self, g: &mut EpInner, private_data: &[u8]) -> Result {
        let mut frame = [0u8; MPA_MAX_FRAME_LEN];
        let request = g.mpa.frame().ok_or(EINVAL)?;
        let reject = g.mpa.config.reject(&request, private_data);
        self.trace_mpa(g, &reject, true);
        let n = reject.encode(&mut frame).map_err(|_| EINVAL)?;
        g.mpa.queue(&frame[..n])?;
        self.dev.stats.inc(Stat::MpaRejectsSent);
        self.flush_out(g);
        Ok(())
    }

    /// Active side: the peer's MPA reply.
    fn reply_arrived(self: &Arc<Self>, g: &mut EpInner) {
        let Some(reply) = g.mpa.frame() else {
            return;
        };
        self.trace_mpa(g, &reply, false);
        let mut private_data = [0u8; MAX_EVENT_PRIVATE_DATA];
        let pd_len = reply.private_data.len().min(MAX_EVENT_PRIVATE_DATA);
        private_data[..pd_len].copy_from_slice(&reply.private_data[..pd_len]);
        let pd = &private_data[..pd_len];
        if reply.reject {
            self.dev.stats.inc(Stat::MpaRejectsReceived);
            self.dev.stats.inc(Stat::ConnectionsRefused);
            return self.connect_failed(g, ECONNREFUSED(), pd);
        }
        self.dev.stats.inc(Stat::MpaRepliesReceived);
        let settled = match g.mpa.config.complete(&reply) {
            Ok(s) => s,
            Err(why) => {
                if ratelimit() {
                    pr_warn!("{} refused: {}\n", PeerName(g.remote), why);
                }
                return self.connect_failed(g, ECONNREFUSED(), pd);
            }
        };
        if settled.rtr_mismatch && ratelimit() {
            pr_notice!(
                "{} replied with another ready-to-receive type than offered: sending the one offered\n",
                PeerName(g.remote)
            );
        }
        let Some(qp) = g.qp.clone() else {
            return;
        };
        let handed_over = self
            .prepare(g, &settled, &qp)
            .and_then(|parts| self.hand_over(g, parts, &settled, None));
        if let Err(e) = handed_over {
            return self.connect_failed(g, e, pd);
        }
        if settled.rtr.is_some() {
            if let Some(conn) = g.conn.as_mut() {
                conn.ready_to_receive(&self.dev);
            }
        }
        g.phase = Phase::Established;
        self.dev.stats.inc(Stat::ConnectionsEstablished);
        self.report_up(g, CmEventKind::ConnectReply, pd);
        self.established(g);
    }

    /// Reports the connection up (ConnectReply with status 0, or Established).
    fn report_up(&self, g: &mut EpInner, kind: CmEventKind, private_data: &[u8]) {
        let negotiated = g.conn.as_ref().map(|c| c.negotiated);
        let event = CmEvent {
            kind,
            status: 0,
            local: g.local,
            remote: g.remote,
            private_data,
            provider_data: 0,
            ird: negotiated.map_or(0, |n| n.ird.min(255) as u8),
            ord: negotiated.map_or(0, |n| n.ord.min(255) as u8),
        };
        if let Some(cm_id) = g.cm_id.as_ref() {
            let _ = cm_id.report(&event);
        }
        g.told.up();
    }

    /// Active side, before the connection is up: one ConnectReply with the error.
    fn connect_failed(self: &Arc<Self>, g: &mut EpInner, err: Error, private_data: &[u8]) {
        let mut event = CmEvent::new(CmEventKind::ConnectReply, err.to_errno());
        event.local = g.local;
        event.remote = g.remote;
        event.private_data = private_data;
        if let Some(cm_id) = g.cm_id.take() {
            forget_endpoint(&cm_id);
            let _ = cm_id.report(&event);
        }
        self.teardown(g, true, 0, c_str!("not connected"));
    }

    /// Ends a connection that is not up yet, with a log line about the peer.
    fn refuse(self: &Arc<Self>, g: &mut EpInner, why: &str, err: Error) {
        let outcome = match g.phase {
            Phase::AwaitRequest => Some("refused"),
            // The initiator's consumer learns only an errno (UNREACHABLE, -ETIMEDOUT).
            Phase::Connecting | Phase::AwaitReply => Some("not connected"),
            _ => None,
        };
        if let Some(outcome) = outcome.filter(|_| ratelimit()) {
            pr_warn!("{} {}: {}\n", PeerName(g.remote), outcome, why);
        }
        self.refuse_quietly(g, err);
    }

    fn refuse_quietly(self: &Arc<Self>, g: &mut EpInner, err: Error) {
        match g.phase {
            Phase::Connecting | Phase::AwaitReply => self.connect_failed(g, err, &[]),
            Phase::Established => self.end(g, true, err.to_errno(), None, c_str!("refused")),
            _ => self.teardown(g, true, 0, c_str!("refused")),
        }
    }

    /// Waiting for the consumer to accept or reject: a peer that gives up ends it.
    fn await_accept(self: &Arc<Self>, g: &mut EpInner) {
        let gone = g.socket.as_ref().map_or(true, |s| {
            matches!(s.state(), TcpState::Closed | TcpState::CloseWait)
        });
        if gone {
            self.teardown(g, true, 0, c_str!("peer gone before accept"));
        }
    }

    /// Makes what the connection needs for `settled` and has the QP enter RTS, bound to
    /// this endpoint.
    fn prepare(
        self: &Arc<Self>,
        g: &EpInner,
        settled: &Negotiated,
        qp: &QpRef<RiwDevice>,
    ) -> Result<Parts> {
        let mss = g.socket.as_ref().map_or(536, |s| s.mss());
        let parts = Parts::new(settled, mss, RiwQp::send_depth(qp), qp.qp_num())?;
        let (ord, ird) = (u32::from(settled.ord), u32::from(settled.ird));
        RiwQp::enter_rts(qp, self.clone(), ord, ird)?;
        Ok(parts)
    }

    /// The MPA exchange is over: the socket, and what came after the last MPA frame, go
    /// to the connection.
    fn hand_over(
        &self,
        g: &mut EpInner,
        parts: Parts,
        settled: &Negotiated,
        first: Option<FirstFpdu>,
    ) -> Result {
        let socket = g.socket.take().ok_or(ECONNRESET())?;
        let input = g.mpa.leftover();
        g.conn = Some(Connection::start(
            self, socket, parts, *settled, input, first,
        ));
        Ok(())
    }

    fn established(self: &Arc<Self>, g: &mut EpInner) {
        let Some(qp) = g.qp.clone() else {
            return;
        };
        let Some((rx_end, rtr)) = g.conn.as_mut().and_then(|c| c.receive(self, &qp)) else {
            return;
        };
        if rtr {
            self.dev.stats.inc(Stat::ConnectionsEstablished);
            self.report_up(g, CmEventKind::Established, &[]);
        }
        let remote = g.remote;
        let received = match g.conn.as_mut() {
            Some(conn) => conn.received(self, rx_end, remote),
            None => Ok(()),
        };
        if let Err(ending) = received {
            return self.ended(g, ending);
        }
        self.transmit(g, Wake::WorkItem);
    }

    /// The connection's sender takes its turn.
    fn transmit(self: &Arc<Self>, g: &mut EpInner, wake: Wake) {
        let (Some(conn), Some(qp)) = (g.conn.as_mut(), g.qp.as_ref()) else {
            return;
        };
        if let Err(ending) = conn.transmit(self, qp, wake) {
            self.ended(g, ending);
        }
    }

    /// The connection ends as it says.
    fn ended(self: &Arc<Self>, g: &mut EpInner, ending: Ending) {
        let fatal = if ending.fatal { g.qp.clone() } else { None };
        self.end(g, ending.abort, ending.status, fatal, ending.reason);
    }

    /// Ends an established (or never established) connection: Disconnect if the peer
    /// started it, the QP to ERROR, the socket closed, Close if owed.
    fn end(
        self: &Arc<Self>,
        g: &mut EpInner,
        abort: bool,
        status: i32,
        fatal: Option<QpRef<RiwDevice>>,
        reason: &'static CStr,
    ) {
        match g.phase {
            Phase::Established => {}
            Phase::Connecting | Phase::AwaitReply => {
                return self.connect_failed(
                    g,
                    if status != 0 {
                        Error::from_errno(status)
                    } else {
                        ECONNRESET()
                    },
                    &[],
                );
            }
            _ => return self.teardown(g, abort, 0, reason),
        }
        if g.told == Told::EstablishedOwed {
            self.report_up(g, CmEventKind::Established, &[]);
        }
        let peer_closed = !abort
            && self.close_request.load(Ordering::Acquire) == 0
            && !g.conn.as_ref().is_some_and(|c| c.draining);
        if (peer_closed || status != 0) && g.told.disconnect() {
            if let Some(cm_id) = g.cm_id.as_ref() {
                let _ = cm_id.report(&CmEvent::new(CmEventKind::Disconnect, status));
            }
        }
        if let Some(qp) = fatal {
            qp.report_fatal();
        }
        self.teardown(g, abort, status, reason);
    }

    /// Releases everything: socket, QP (into ERROR), Close if owed, the table entry.
    fn teardown(self: &Arc<Self>, g: &mut EpInner, abort: bool, status: i32, reason: &CStr) {
        let qpn = g.qp.as_ref().map_or(0, |qp| qp.qp_num());
        trace::conn_close(&*self.dev, qpn, abort, status, reason);
        let socket = match g.conn.as_mut() {
            Some(conn) => conn.take_socket(),
            None => g.socket.take(),
        };
        if let Some(sock) = socket {
            self.dev
                .stats
                .add(Stat::TcpRetransmits, sock.retransmits().into());
            if abort {
                sock.set_abort_on_close();
            }
            drop(sock);
        }
        if let Some(qp) = g.qp.take() {
            if RiwQp::is_bound_to(&qp, &**self) {
                self.flush_taken_from(g.conn.as_mut(), &qp);
            }
            self.link.reset();
            // Our own reference comes back from the QP; dropped here, it is not the last.
            drop(RiwQp::connection_lost(&self.dev, &qp, &**self));
        }
        if g.told == Told::EstablishedOwed {
            self.report_up(g, CmEventKind::Established, &[]);
        }
        let close_owed = g.told.close();
        if let Some(cm_id) = g.cm_id.take() {
            forget_endpoint(&cm_id);
            if close_owed {
                let mut event = CmEvent::new(CmEventKind::Close, status);
                event.local = g.local;
                event.remote = g.remote;
                let _ = cm_id.report(&event);
            }
        }
        g.conn = None;
        g.phase = Phase::Closed;
        DelayedWork::cancel(self);
        drop(self.dev.endpoints.remove(self.id.load(Ordering::Relaxed)));
    }

    /// Records an MPA frame sent or received (`riw_mpa`).
    fn trace_mpa(&self, g: &EpInner, frame: &MpaFrame<'_>, sent: bool) {
        let kind = match (frame.kind, frame.reject) {
            (_, true) => MpaKind::Reject,
            (FrameKind::Request, _) => MpaKind::Request,
            _ => MpaKind::Reply,
        };
        let e = frame.enhanced;
        let rtr = e.map_or(0, |e| {
            u8::from(e.rtr.write) | u8::from(e.rtr.read) << 1 | u8::from(e.rtr.send) << 2
        });
        let record = MpaRecord {
            endpoint: self.id.load(Ordering::Relaxed),
            sent,
            kind,
            revision: frame.revision as u8,
            crc: frame.crc,
            markers: frame.markers,
            peer_to_peer: e.is_some_and(|e| e.peer_to_peer),
            rtr,
            ird: e.map_or(0, |e| e.ird),
            ord: e.map_or(0, |e| e.ord),
            private_data_len: frame.private_data.len() as u16,
            peer: g.remote,
        };
        trace::mpa(&*self.dev, &record);
    }

    /// Segments TCP retransmitted so far on the sockets of `dev`'s live endpoints (a
    /// socket's count joins the device's counters when it closes).
    pub(crate) fn live_retransmits(dev: &Device<RiwDevice>) -> u64 {
        // A walk that takes no lock between steps: each endpoint's lock is a mutex.
        let (mut total, mut next) = (0, 0);
        while let Some((index, ep)) = dev.endpoints.next_from(next) {
            let g = ep.inner.lock();
            let sock = g
                .conn
                .as_ref()
                .and_then(|c| c.socket())
                .or(g.socket.as_ref());
            total += sock.map_or(0, |s| u64::from(s.retransmits()));
            if index == u32::MAX {
                break;
            }
            next = index + 1;
        }
        total
    }

    /// The endpoint's number in its device's table.
    pub(crate) fn id(&self) -> u32 {
        self.id.load(Ordering::Relaxed)
    }

    /// Whether the endpoint is the one of `id`, whose provider data named it: the id it
    /// holds, or, for a request not accepted yet, the id iw_cm made for it.
    pub(crate) fn serves(&self, id: &CmIdView<'_>) -> bool {
        let g = self.inner.lock();
        match g.cm_id.as_ref() {
            Some(cm_id) => id.is(cm_id),
            None => g.phase == Phase::AwaitAccept,
        }
    }

    /// A snapshot of the endpoint and its connection.
    pub(crate) fn info(&self) -> ConnectionInfo {
        let g = self.inner.lock();
        let conn = g.conn.as_ref();
        let socket = g.socket.as_ref().or_else(|| conn.and_then(|c| c.socket()));
        let (reads_out, reads_in) = match conn {
            Some(_) => self.link.read_queues(),
            None => (0, 0),
        };
        ConnectionInfo {
            state: g.phase.name(),
            tcp_state: socket.map(|s| s.state_name()),
            local: g.local,
            remote: g.remote,
            qp_num: g.qp.as_ref().map(|qp| qp.qp_num()),
            mpa: conn.map(|c| c.negotiated),
            mulpdu: conn.map(|c| c.mulpdu()),
            reads_out,
            reads_in,
            unacked: socket.map_or(0, |s| s.unacked_bytes()),
        }
    }

    /// Work the connection took from `qp`'s queues (sends in flight, Reads awaiting
    /// responses, a receive held for the next message) completes as flushed: before what
    /// is left in the queues.
    fn flush_taken_from(&self, conn: Option<&mut Connection<Endpoint>>, qp: &QpRef<RiwDevice>) {
        if let Some(conn) = conn {
            conn.flush_tx(self, qp);
        }
        self.link.flush_rx(qp);
    }

    /// Aborts the endpoint (the device is going away).
    pub(crate) fn abort(self: &Arc<Self>) {
        self.request_close(CloseMode::Abort);
    }
}

/// The endpoint lets go of `cm_id`: its number, which a new endpoint may get, no longer
/// names it there (resource tracking looks it up by that number).
fn forget_endpoint(cm_id: &CmId) {
    cm_id.set_provider_data(0);
}

impl Host for Endpoint {
    fn senders() -> &'static DeferKey<Self> {
        &SENDERS
    }

    fn link(&self) -> &Link {
        &self.link
    }

    fn dev(&self) -> &Device<RiwDevice> {
        &self.dev
    }

    fn kick(this: &Arc<Self>) {
        this.kick();
    }

    fn run_engine(this: &Arc<Self>) {
        this.run_engine();
    }

    fn kick_after(this: &Arc<Self>, jiffies: u64) {
        DelayedWork::run_after(this, &this.dev.queue, jiffies);
    }
}

impl ConnectionEndpoint for Endpoint {
    fn doorbell(self: Arc<Self>) {
        self.send_now();
    }

    fn posted(self: Arc<Self>) {
        // A kernel consumer's work requests: sent by the work item. When the consumer
        // posts from its own completion handling (a target answering a command), on this
        // CPU while its posts come one at a time: the answer goes out right after, no
        // other CPU woken. Once its posts keep finding the engine still busy with earlier
        // ones (many requests in flight), on the next CPU, which sends while the consumer
        // goes on handling completions. From a task, on this CPU only while none of its
        // recent posts overlapped (see `caller_work_cpu`).
        let overlaps = self.post_overlaps.load(Ordering::Relaxed);
        let pace = match overlaps {
            0 => PostPace::Quiet,
            n if n < STREAM_OVERLAPS => PostPace::Occasional,
            _ => PostPace::Streaming,
        };
        let busy = self.link.engine_busy();
        let pending = DelayedWork::run_now_for_caller(&self, &self.dev.queue, pace);
        let overlaps = if busy || pending {
            overlaps.saturating_add(OVERLAP_WEIGHT).min(STREAM_MAX)
        } else {
            overlaps.saturating_sub(1)
        };
        self.post_overlaps.store(overlaps, Ordering::Relaxed);
    }

    fn close(self: Arc<Self>, mode: CloseMode) {
        self.request_close(mode);
    }

    fn flush_taken(&self) {
        let mut guard = self.inner.lock();
        let g = &mut *guard;
        if let Some(qp) = g.qp.as_ref() {
            self.flush_taken_from(g.conn.as_mut(), qp);
        }
    }

    fn info(&self) -> ConnectionInfo {
        Endpoint::info(self)
    }
}
