// SPDX-License-Identifier: GPL-2.0

//! Flushing of work that userspace posts to a QP in ERROR. The user library writes
//! receives into the shared ring without entering the kernel, so nothing would ever
//! complete them; a QP in ERROR whose rings userspace owns is therefore looked at
//! periodically, and whatever was posted since is completed as flushed.

use crate::device::RiwDevice;
use crate::kernel_ext::rdma::{Qp, QpRef};
use crate::kernel_ext::sync::{new_mutex, Mutex};
use crate::kernel_ext::workqueue::{msecs_to_jiffies, DelayedWork, DelayedWorkItem, Queue};
use crate::qp::RiwQp;
use kernel::prelude::*;
use kernel::sync::Arc;

/// How often QPs in ERROR are looked at.
const PERIOD_MS: u32 = 100;

/// The QPs in ERROR of one device whose rings userspace owns.
#[pin_data]
pub(crate) struct Flusher {
    queue: Arc<Queue>,
    #[pin]
    work: DelayedWork<Flusher>,
    #[pin]
    qps: Mutex<KVec<QpRef<RiwDevice>>>,
}

impl Flusher {
    pub(crate) fn new(queue: Arc<Queue>) -> Result<Arc<Self>> {
        Arc::pin_init(
            try_pin_init!(Flusher {
                queue,
                work <- DelayedWork::new(),
                qps <- new_mutex!(KVec::new(), "riw_flusher"),
            }),
            GFP_KERNEL,
        )
    }

    /// Watches `qp`, which just entered ERROR.
    pub(crate) fn watch(self: &Arc<Self>, qp: QpRef<RiwDevice>) {
        let mut qps = self.qps.lock();
        // By identity: a QP being destroyed may still be here with the number of a new one.
        if qps.iter().any(|q| same_qp(q, &qp)) {
            return;
        }
        if qps.push(qp, GFP_KERNEL).is_ok() {
            DelayedWork::run_after(self, &self.queue, msecs_to_jiffies(PERIOD_MS));
        }
    }

    /// Forgets `qp` (it is being destroyed). A connection ending at the same time may
    /// still ask to watch it afterwards: the next run lets go of it then.
    pub(crate) fn forget(&self, qp: &Qp<RiwDevice>) {
        let mut qps = self.qps.lock();
        Self::retain(&mut qps, |q| !same_qp(q, qp));
    }

    /// Stops for good (the device goes); nothing runs once this returns.
    pub(crate) fn stop(self: &Arc<Self>) {
        Self::retain(&mut self.qps.lock(), |_| false);
        DelayedWork::cancel_sync(self);
    }

    fn retain(qps: &mut KVec<QpRef<RiwDevice>>, mut keep: impl FnMut(&QpRef<RiwDevice>) -> bool) {
        let old = core::mem::replace(qps, KVec::new());
        for q in old {
            // Pushing within the old length never fails after the reservation.
            if keep(&q) && (qps.reserve(1, GFP_KERNEL).is_err() || qps.push(q, GFP_KERNEL).is_err())
            {
                break;
            }
        }
    }
}

fn same_qp(a: &Qp<RiwDevice>, b: &Qp<RiwDevice>) -> bool {
    core::ptr::eq(a, b)
}

impl DelayedWorkItem for Flusher {
    fn delayed_work(&self) -> &DelayedWork<Self> {
        &self.work
    }

    fn run(this: Arc<Self>) {
        let mut qps = this.qps.lock();
        Self::retain(&mut qps, |q| RiwQp::flush_if_error(q));
        if !qps.is_empty() {
            DelayedWork::run_after(&this, &this.queue, msecs_to_jiffies(PERIOD_MS));
        }
    }
}
