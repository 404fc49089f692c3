// SPDX-License-Identifier: GPL-2.0

//! An established connection: what its sender and receiver share.

use crate::device::RiwDevice;
use crate::kernel_ext::rdma::{Device, QpRef};
use crate::kernel_ext::socket::LockedSocket;
use crate::kernel_ext::sync::SpinLockBh;
use crate::reads::Reads;
use crate::rx::{Receiver, RxEnd};
use crate::tx::Shared;

/// What receiving shares between the contexts that do it (the work item, the socket's
/// data-ready callback in softirq) and the sender, which takes `reads` briefly between
/// messages: kept under a spinlock that keeps softirqs off. Nothing here sleeps or
/// allocates.
pub(crate) struct Inbound {
    pub(crate) rx: Receiver,
    pub(crate) reads: Reads,
    /// The connection's QP, while FPDUs are received.
    pub(crate) qp: Option<QpRef<RiwDevice>>,
    /// What a receive in the callback stopped at, for the work item to act on.
    pub(crate) outcome: Option<RxEnd>,
    /// The route copied the pages of a zero-copy send anyway (delivery to a socket of
    /// this host): zero-copy only costs here, so the sender copies from then on.
    pub(crate) zero_copy_copied: bool,
}

impl Inbound {
    pub(crate) fn new() -> Self {
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
    pub(crate) fn receive(
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
