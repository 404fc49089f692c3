// SPDX-License-Identifier: GPL-2.0

//! Completion queues: a ring of `siw_cqe` entries followed by the `siw_cq_ctrl` word that
//! arms the queue, shared with userspace (or private to a kernel consumer).

use crate::device::RiwDevice;
use crate::kernel_ext::rdma::{CqAttr, CqNotify, Device, QueueMemory, UData};
use crate::uapi;
use kernel::prelude::*;

const CQE_SIZE: usize = core::mem::size_of::<uapi::siw_cqe>();

/// A riw completion queue.
pub(crate) struct RiwCq {
    /// Number of entries, a power of two.
    num_cqe: u32,
    ring: QueueMemory,
}

impl RiwCq {
    /// Offset of the arming word, behind the entries.
    fn ctrl_offset(&self) -> usize {
        self.num_cqe as usize * CQE_SIZE
    }

    /// Creates a CQ of at least `attr.cqe` entries; for userspace, answers with its id,
    /// size and mmap key.
    pub(crate) fn new(
        dev: &Device<RiwDevice>,
        attr: &CqAttr,
        udata: Option<&mut UData<'_>>,
    ) -> Result<(u32, Self)> {
        let limits = &crate::device::LIMITS;
        if attr.flags != 0 || attr.cqe == 0 || attr.cqe > limits.max_cqe || attr.comp_vector != 0 {
            return Err(EINVAL);
        }
        // The ring index wraps by masking: a power of two, as the user ABI expects.
        let num_cqe = attr.cqe.checked_next_power_of_two().ok_or(EINVAL)?.min(limits.max_cqe);
        let len = num_cqe as usize * CQE_SIZE + core::mem::size_of::<uapi::siw_cq_ctrl>();
        let quota = dev.cqs.take(limits.max_cq)?;
        let cq = match udata {
            Some(udata) => {
                let (ring, key) = QueueMemory::new_user(udata.ucontext(), len)?;
                let id = dev.next_cq_id();
                udata.respond(&uapi::siw_uresp_create_cq { cq_id: id, num_cqe, cq_key: key })?;
                Self { num_cqe, ring }
            }
            None => Self { num_cqe, ring: QueueMemory::new_kernel(len)? },
        };
        quota.keep();
        Ok((num_cqe, cq))
    }

    /// Arms the CQ the way the user library does, in the same control word.
    pub(crate) fn arm(&self, notify: CqNotify) -> bool {
        let flags = match notify {
            CqNotify::Solicited => uapi::siw_notify_flags_SIW_NOTIFY_SOLICITED,
            CqNotify::NextCompletion => {
                uapi::siw_notify_flags_SIW_NOTIFY_SOLICITED | uapi::siw_notify_flags_SIW_NOTIFY_NEXT_COMPLETION
            }
        };
        let _ = self.ring.swap_u32(self.ctrl_offset(), flags);
        // No completion can be waiting before the engine produces any.
        false
    }

    pub(crate) fn destroy(&self, dev: &Device<RiwDevice>) {
        dev.cqs.put();
    }
}
