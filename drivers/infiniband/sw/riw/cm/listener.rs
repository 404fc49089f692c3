// SPDX-License-Identifier: GPL-2.0

//! Listeners: a TCP socket listening on a `cm_id`'s address, whose accepted connections
//! become passive endpoints awaiting their MPA request.

use super::Endpoint;
use crate::device::RiwDevice;
use crate::kernel_ext::errno::ECONNREFUSED;
use crate::kernel_ext::rdma::{CmEvent, CmId, CmIdView, Device, DeviceRef};
use crate::kernel_ext::socket::SocketAddr;
use crate::kernel_ext::socket::{ratelimit, SocketEvent, SocketHandler, TcpListener};
use crate::kernel_ext::sync::{new_mutex, Mutex};
use crate::kernel_ext::workqueue::{DelayedWork, DelayedWorkItem};
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;

/// A listening endpoint.
#[pin_data]
pub(crate) struct Listener {
    pub(super) dev: DeviceRef<RiwDevice>,
    id: AtomicU32,
    /// Set once the listener stops: connections still in their MPA request go.
    pub(super) closed: AtomicBool,
    #[pin]
    work: DelayedWork<Listener>,
    #[pin]
    inner: Mutex<ListenerInner>,
}

struct ListenerInner {
    socket: Option<TcpListener<Listener>>,
    cm_id: Option<CmId>,
}

impl SocketHandler for Listener {
    fn socket_event(this: &Arc<Self>, _event: SocketEvent) {
        DelayedWork::run_now(this, &this.dev.queue);
    }
}

impl DelayedWorkItem for Listener {
    fn delayed_work(&self) -> &DelayedWork<Self> {
        &self.work
    }

    fn run(this: Arc<Self>) {
        // A bounded batch, so one busy listener does not hold the queue.
        for _ in 0..32 {
            // Not under the listener's lock: endpoints take it when they report.
            let accepted = match this.inner.lock().socket.as_ref() {
                Some(socket) => socket.accept::<Endpoint>(),
                None => return,
            };
            match accepted {
                Ok(stream) => {
                    if let Err(e) = Endpoint::new_passive(&this, stream) {
                        if ratelimit() {
                            pr_warn!("cannot take a connection: {:?}\n", e);
                        }
                    }
                }
                Err(_) => return,
            }
        }
        DelayedWork::run_now(&this, &this.dev.queue);
    }
}

impl Listener {
    /// Listens on `cm_id`'s local address.
    pub(crate) fn create(dev: &Device<RiwDevice>, cm_id: CmId, backlog: u32) -> Result {
        let addr = cm_id.local_addr()?;
        let netdev = dev.netdev().ok_or(ENODEV)?;
        let dev_ref = dev.try_ref().ok_or(ENODEV)?;
        let listener = Arc::pin_init(
            try_pin_init!(Listener {
                dev: dev_ref,
                id: AtomicU32::new(0),
                closed: AtomicBool::new(false),
                work <- DelayedWork::new(),
                inner <- new_mutex!(ListenerInner { socket: None, cm_id: None }, "riw_listener"),
            }),
            GFP_KERNEL,
        )?;
        // nfsd listens on the IPv4 and the IPv6 wildcard at the same port, each "AF only".
        let socket = TcpListener::listen(
            &netdev,
            &addr,
            backlog.max(1),
            cm_id.af_only(),
            listener.clone(),
        )?;
        let id = dev.listeners.insert(1, u32::MAX, listener.clone())?;
        listener.id.store(id, Ordering::Relaxed);
        cm_id.set_provider_data(id as usize);
        {
            let mut inner = listener.inner.lock();
            inner.socket = Some(socket);
            inner.cm_id = Some(cm_id);
        }
        // Connections that came before the socket was stored.
        DelayedWork::run_now(&listener, &listener.dev.queue);
        Ok(())
    }

    /// Stops listening for `cm_id`; connections not yet reported go too.
    pub(crate) fn destroy(dev: &Device<RiwDevice>, cm_id: &CmId) {
        let Some(listener) = dev.listeners.remove(cm_id.provider_data() as u32) else {
            return;
        };
        listener.close();
    }

    fn close(self: &Arc<Self>) {
        let (socket, cm_id) = {
            let mut inner = self.inner.lock();
            self.closed.store(true, Ordering::Release);
            (inner.socket.take(), inner.cm_id.take())
        };
        drop(socket);
        drop(cm_id);
        DelayedWork::cancel(self);
        // Connections still in their MPA request see the listener closed and go.
        self.dev.endpoints.for_each(|ep| {
            if ep.listener().is_some_and(|l| Arc::ptr_eq(l, self)) {
                ep.kick();
            }
        });
    }

    /// Whether the listener listens for `id`.
    pub(crate) fn serves(&self, id: &CmIdView<'_>) -> bool {
        self.inner
            .lock()
            .cm_id
            .as_ref()
            .is_some_and(|cm_id| id.is(cm_id))
    }

    /// The address it listens on, while it does.
    pub(crate) fn local_addr(&self) -> Option<SocketAddr> {
        let inner = self.inner.lock();
        inner.socket.as_ref()?;
        inner.cm_id.as_ref()?.local_addr().ok()
    }

    /// The listener's number in its device's table.
    pub(crate) fn id(&self) -> u32 {
        self.id.load(Ordering::Relaxed)
    }

    /// Reports a connection request, unless the listener was closed meanwhile.
    pub(super) fn report_request(&self, event: &CmEvent<'_>) -> Result {
        let inner = self.inner.lock();
        match inner.cm_id.as_ref() {
            Some(cm_id) if !self.closed.load(Ordering::Acquire) => cm_id.report(event),
            _ => Err(ECONNREFUSED()),
        }
    }
}
