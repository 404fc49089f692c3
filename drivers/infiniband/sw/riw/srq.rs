// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues: a ring of `siw_rqe` entries that several QPs take receives from,
//! with a limit that raises an event when few receives remain.

use crate::device::RiwDevice;
use crate::kernel_ext::errno::EOPNOTSUPP;
use crate::kernel_ext::rdma::{Device, QueueMemory, RecvChain, Srq, SrqAttr, SrqModify, UData};
use crate::kernel_ext::sync::{new_spinlock_bh, SpinLockBh};
use crate::limits::{LIMITS, MMAP_KEY_MIN};
use crate::qp::{post_receives, ring_depth, RingCursor};
use crate::uapi;
use core::mem::size_of;
use kernel::prelude::*;

const RQE_SIZE: usize = size_of::<uapi::siw_rqe>();

/// A riw shared receive queue.
#[pin_data]
pub(crate) struct RiwSrq {
    ring: QueueMemory,
    num_rqe: u32,
    max_sge: u32,
    /// The armed limit (0: disarmed).
    #[pin]
    limit: SpinLockBh<u32>,
    /// Index of the next entry a kernel consumer posts.
    #[pin]
    producer: SpinLockBh<u32>,
    /// Index of the next entry a receive takes.
    #[pin]
    consumer: SpinLockBh<u32>,
}

impl RiwSrq {
    pub(crate) fn new(
        dev: &Device<RiwDevice>,
        attr: &SrqAttr,
        udata: Option<&mut UData<'_>>,
    ) -> Result<(SrqAttr, impl PinInit<Self, Error>)> {
        let num_rqe = ring_depth(attr.max_wr, LIMITS.max_srq_wr)?;
        if attr.max_sge > LIMITS.max_srq_sge || attr.srq_limit > num_rqe {
            return Err(EINVAL);
        }
        let quota = dev.srqs.take(LIMITS.max_srq)?;
        let len = num_rqe as usize * RQE_SIZE;
        let ring = match udata {
            Some(udata) => {
                let (ring, key) = QueueMemory::new_user(udata, len, MMAP_KEY_MIN)?;
                udata.respond(&uapi::siw_uresp_create_srq {
                    num_rqe,
                    pad: 0,
                    srq_key: key,
                })?;
                ring
            }
            None => QueueMemory::new_kernel(len)?,
        };
        quota.keep();
        let actual = SrqAttr {
            max_wr: num_rqe,
            max_sge: attr.max_sge,
            srq_limit: attr.srq_limit,
        };
        let (max_sge, limit) = (attr.max_sge, attr.srq_limit);
        let init = try_pin_init!(Self {
            ring,
            num_rqe,
            max_sge,
            limit <- new_spinlock_bh!(limit, "riw_srq_limit"),
            producer <- new_spinlock_bh!(0, "riw_srq_producer"),
            consumer <- new_spinlock_bh!(0, "riw_srq_consumer"),
        });
        Ok((actual, init))
    }

    pub(crate) fn destroy(&self, dev: &Device<RiwDevice>) {
        dev.srqs.put();
    }

    /// Arms the limit. The ring cannot be resized: a size it already has room for is no
    /// change, a larger one is not supported.
    pub(crate) fn modify(&self, m: &SrqModify) -> Result {
        if m.max_wr.is_some_and(|n| n > self.num_rqe) {
            return Err(EOPNOTSUPP());
        }
        if let Some(limit) = m.srq_limit {
            if limit > self.num_rqe {
                return Err(EINVAL);
            }
            *self.limit.lock() = limit;
        }
        Ok(())
    }

    /// Queues a kernel consumer's receive work requests.
    pub(crate) fn post(&self, wrs: &mut RecvChain<'_>) -> Result {
        let ring = RingCursor::rqes(&self.ring, self.num_rqe);
        post_receives(&ring, &mut self.producer.lock(), self.max_sge, wrs)
    }

    /// Takes the next receive for an incoming message into `rqe`; false if none is
    /// posted. If a limit is armed and fewer
    /// receives than it remain, raises the limit event once and disarms it.
    pub(crate) fn take(srq: &Srq<RiwDevice>, rqe: &mut uapi::siw_rqe) -> bool {
        let this: &Self = srq;
        let ring = RingCursor::rqes(&this.ring, this.num_rqe);
        let (taken, next) = {
            let mut next = this.consumer.lock();
            (ring.take(&mut next, rqe), *next)
        };
        let reached = {
            let mut limit = this.limit.lock();
            // Entries are posted in ring order: if the one `limit - 1` ahead is not posted,
            // fewer than `limit` remain.
            let reached = *limit != 0 && !ring.is_valid(next.wrapping_add(*limit - 1));
            if reached {
                *limit = 0;
            }
            reached
        };
        if reached {
            srq.report_limit_reached();
        }
        taken
    }

    pub(crate) fn query(&self) -> SrqAttr {
        SrqAttr {
            max_wr: self.num_rqe,
            max_sge: self.max_sge,
            srq_limit: *self.limit.lock(),
        }
    }
}
