// SPDX-License-Identifier: GPL-2.0

//! Completion queues: a ring of `siw_cqe` entries followed by the `siw_cq_ctrl` word that
//! arms the queue, shared with userspace (or private to a kernel consumer). riw produces
//! entries; the consumer hands each back by clearing its flags.

use crate::device::RiwDevice;
use crate::kernel_ext::errno::EOPNOTSUPP;
use crate::kernel_ext::rdma::{
    Cq, CqAttr, CqNotify, Device, QueueMemory, UData, WcOpcode, WcStatus, WorkCompletion,
};
use crate::kernel_ext::sync::{new_spinlock_bh, SpinLockBh};
use crate::kernel_ext::trace;
use crate::kernel_ext::uapi::CqeExt;
use crate::limits::{LIMITS, MMAP_KEY_MIN};
use crate::stats::{DeviceStats, Stat};
use crate::uapi;
use core::mem::{offset_of, size_of};
use kernel::prelude::*;
use kernel::sync::Arc;

const CQE_SIZE: usize = size_of::<uapi::siw_cqe>();
const CQE_FLAGS: usize = offset_of!(uapi::siw_cqe, flags);
const VALID: u8 = uapi::siw_wqe_flags_SIW_WQE_VALID as u8;

/// A riw completion queue.
#[pin_data]
pub(crate) struct RiwCq {
    /// Number of entries, a power of two.
    num_cqe: u32,
    ring: QueueMemory,
    /// Index of the next entry to produce.
    #[pin]
    producer: SpinLockBh<u32>,
    /// Index of the next entry a kernel consumer polls.
    #[pin]
    consumer: SpinLockBh<u32>,
    /// The device's counters, for overruns.
    stats: Arc<DeviceStats>,
}

/// A completion, as the soft-iWARP ABI carries it.
pub(crate) struct Completion {
    pub(crate) wr_id: u64,
    pub(crate) opcode: u32,
    pub(crate) status: u32,
    pub(crate) bytes: u32,
    pub(crate) qp_num: u32,
    pub(crate) solicited: bool,
    /// The STag a received Send with Invalidate invalidated.
    pub(crate) invalidated: Option<u32>,
}

/// A kernel CQ's entry as the verbs report it.
fn work_completion(cqe: &uapi::siw_cqe) -> WorkCompletion {
    let status = match u32::from(cqe.status) {
        uapi::siw_wc_status_SIW_WC_SUCCESS => WcStatus::Success,
        uapi::siw_wc_status_SIW_WC_LOC_LEN_ERR => WcStatus::LocLenErr,
        uapi::siw_wc_status_SIW_WC_LOC_PROT_ERR => WcStatus::LocProtErr,
        uapi::siw_wc_status_SIW_WC_LOC_QP_OP_ERR => WcStatus::LocQpOpErr,
        uapi::siw_wc_status_SIW_WC_WR_FLUSH_ERR => WcStatus::WrFlushErr,
        uapi::siw_wc_status_SIW_WC_BAD_RESP_ERR => WcStatus::BadRespErr,
        uapi::siw_wc_status_SIW_WC_LOC_ACCESS_ERR => WcStatus::LocAccessErr,
        uapi::siw_wc_status_SIW_WC_REM_ACCESS_ERR => WcStatus::RemAccessErr,
        uapi::siw_wc_status_SIW_WC_REM_INV_REQ_ERR => WcStatus::RemInvReqErr,
        _ => WcStatus::GeneralErr,
    };
    let opcode = match u32::from(cqe.opcode) {
        uapi::siw_opcode_SIW_OP_WRITE => WcOpcode::RdmaWrite,
        uapi::siw_opcode_SIW_OP_READ | uapi::siw_opcode_SIW_OP_READ_LOCAL_INV => WcOpcode::RdmaRead,
        uapi::siw_opcode_SIW_OP_RECEIVE => WcOpcode::Recv,
        uapi::siw_opcode_SIW_OP_INVAL_STAG => WcOpcode::LocalInv,
        uapi::siw_opcode_SIW_OP_REG_MR => WcOpcode::RegMr,
        _ => WcOpcode::Send,
    };
    WorkCompletion {
        wr_id: cqe.id,
        status,
        opcode,
        byte_len: cqe.bytes,
        // riw writes the QP number in every entry it produces.
        qp_num: u32::try_from(cqe.qp_id()).unwrap_or(0),
        invalidated_rkey: (cqe.flags & uapi::siw_wqe_flags_SIW_WQE_REM_INVAL as u8 != 0)
            .then(|| cqe.inval_stag()),
    }
}

/// The opcode a send queue completion reports for work of ring opcode `opcode`; `None` for
/// an opcode no send work request has.
pub(crate) fn send_completion_opcode(opcode: u8) -> Option<u32> {
    let opcode = u32::from(opcode);
    matches!(
        opcode,
        uapi::siw_opcode_SIW_OP_SEND
            | uapi::siw_opcode_SIW_OP_SEND_REMOTE_INV
            | uapi::siw_opcode_SIW_OP_WRITE
            | uapi::siw_opcode_SIW_OP_READ
            | uapi::siw_opcode_SIW_OP_READ_LOCAL_INV
            | uapi::siw_opcode_SIW_OP_INVAL_STAG
            | uapi::siw_opcode_SIW_OP_REG_MR
    )
    .then_some(opcode)
}

impl Completion {
    /// A work request flushed from a QP in ERROR: "flushed" if it was well-formed, "local
    /// QP operation error" if not.
    pub(crate) fn flushed(wr_id: u64, opcode: u32, well_formed: bool, qp_num: u32) -> Self {
        let status = if well_formed {
            uapi::siw_wc_status_SIW_WC_WR_FLUSH_ERR
        } else {
            uapi::siw_wc_status_SIW_WC_LOC_QP_OP_ERR
        };
        Self {
            wr_id,
            opcode,
            status,
            bytes: 0,
            qp_num,
            solicited: false,
            invalidated: None,
        }
    }
}

impl RiwCq {
    /// Entries, and how many hold completions not yet polled.
    pub(crate) fn usage(&self) -> (u32, u32) {
        let used = (0..self.num_cqe)
            .filter(|&i| {
                let flags = self
                    .ring
                    .load_u8_acquire(i as usize * CQE_SIZE + CQE_FLAGS)
                    .unwrap_or(0);
                flags & VALID != 0
            })
            .count() as u32;
        (self.num_cqe, used)
    }

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
    ) -> Result<(u32, impl PinInit<Self, Error>)> {
        if attr.flags != 0 {
            return Err(EOPNOTSUPP());
        }
        if attr.cqe == 0 || attr.cqe > LIMITS.max_cqe || attr.comp_vector != 0 {
            return Err(EINVAL);
        }
        // The ring index wraps by masking: a power of two, as the user ABI expects.
        let num_cqe = attr
            .cqe
            .checked_next_power_of_two()
            .ok_or(EINVAL)?
            .min(LIMITS.max_cqe);
        let len = num_cqe as usize * CQE_SIZE + size_of::<uapi::siw_cq_ctrl>();
        let quota = dev.cqs.take(LIMITS.max_cq)?;
        let ring = match udata {
            Some(udata) => {
                let (ring, key) = QueueMemory::new_user(udata, len, MMAP_KEY_MIN)?;
                let cq_id = dev.next_cq_id();
                udata.respond(&uapi::siw_uresp_create_cq {
                    cq_id,
                    num_cqe,
                    cq_key: key,
                })?;
                ring
            }
            None => QueueMemory::new_kernel(len)?,
        };
        quota.keep();
        let stats = dev.stats.clone();
        let init = try_pin_init!(Self {
            num_cqe,
            ring,
            producer <- new_spinlock_bh!(0, "riw_cq_producer"),
            consumer <- new_spinlock_bh!(0, "riw_cq_consumer"),
            stats,
        });
        Ok((num_cqe, init))
    }

    /// Arms the CQ the way the user library does, in the same control word.
    pub(crate) fn arm(&self, notify: CqNotify) -> bool {
        let flags = match notify {
            CqNotify::Solicited => uapi::siw_notify_flags_SIW_NOTIFY_SOLICITED,
            CqNotify::NextCompletion => {
                uapi::siw_notify_flags_SIW_NOTIFY_SOLICITED
                    | uapi::siw_notify_flags_SIW_NOTIFY_NEXT_COMPLETION
            }
        };
        let _ = self.ring.swap_u32(self.ctrl_offset(), flags);
        let next = *self.consumer.lock();
        self.ring
            .load_u8_acquire(self.slot(next) + CQE_FLAGS)
            .map_or(false, |f| f & VALID != 0)
    }

    /// Takes completions for a kernel consumer, handing each slot back.
    pub(crate) fn poll(&self, out: &mut [WorkCompletion]) -> usize {
        let mut next = self.consumer.lock();
        let mut taken = 0;
        for wc in out.iter_mut() {
            let offset = self.slot(*next);
            if self.ring.load_u8_acquire(offset + CQE_FLAGS).unwrap_or(0) & VALID == 0 {
                break;
            }
            let Some(cqe) = self.ring.read::<uapi::siw_cqe>(offset) else {
                break;
            };
            *wc = work_completion(&cqe);
            let _ = self.ring.store_u8_release(offset + CQE_FLAGS, 0);
            *next = next.wrapping_add(1);
            taken += 1;
        }
        taken
    }

    fn slot(&self, index: u32) -> usize {
        (index & (self.num_cqe - 1)) as usize * CQE_SIZE
    }

    /// Adds a completion; fails with ENOSPC if the consumer has not freed the slot (CQ
    /// overrun). Raises the completion event if the CQ is armed for it.
    pub(crate) fn push(cq: &Cq<RiwDevice>, c: &Completion) -> Result {
        let this: &Self = cq;
        {
            let mut next = this.producer.lock();
            let offset = this.slot(*next);
            if this
                .ring
                .load_u8_acquire(offset + CQE_FLAGS)
                .ok_or(EINVAL)?
                & VALID
                != 0
            {
                return Err(ENOSPC);
            }
            let flags = if c.invalidated.is_some() {
                uapi::siw_wqe_flags_SIW_WQE_REM_INVAL as u8
            } else {
                0
            };
            // Written without VALID; the flags byte, VALID added, publishes the entry, and
            // is ordered before the arming word is read below.
            let mut cqe = uapi::siw_cqe {
                id: c.wr_id,
                flags,
                opcode: c.opcode as u8,
                status: c.status as u16,
                bytes: c.bytes,
                ..Default::default()
            };
            cqe.__bindgen_anon_2.qp_id = u64::from(c.qp_num);
            if let Some(stag) = c.invalidated {
                cqe.__bindgen_anon_1.inval_stag = stag;
            }
            this.ring.write(offset, &cqe)?;
            let (op, status) = (c.opcode as u8, c.status as u16);
            trace::complete(cq, c.qp_num, c.wr_id, op, c.bytes, status);
            this.ring.store_u8_mb(offset + CQE_FLAGS, flags | VALID)?;
            *next = next.wrapping_add(1);
        }
        let armed = this.ring.load_u32_acquire(this.ctrl_offset()).unwrap_or(0);
        let wanted = if c.solicited || c.status != uapi::siw_wc_status_SIW_WC_SUCCESS {
            uapi::siw_notify_flags_SIW_NOTIFY_SOLICITED
                | uapi::siw_notify_flags_SIW_NOTIFY_NEXT_COMPLETION
        } else {
            uapi::siw_notify_flags_SIW_NOTIFY_NEXT_COMPLETION
        };
        if armed & wanted != 0 {
            // Disarm first: one event per arming.
            let armed = this
                .ring
                .swap_u32(this.ctrl_offset(), uapi::siw_notify_flags_SIW_NOTIFY_NOT);
            if armed.map_or(false, |a| a & wanted != 0) {
                cq.notify_completion();
            }
        }
        Ok(())
    }

    /// As `push`, reporting an overrun to the CQ's consumer instead of failing; false if
    /// the completion was lost to it.
    pub(crate) fn deliver(cq: &Cq<RiwDevice>, c: &Completion) -> bool {
        let pushed = Self::push(cq, c).is_ok();
        if !pushed {
            cq.stats.inc(Stat::CqOverruns);
            cq.report_overrun();
        }
        pushed
    }

    pub(crate) fn destroy(&self, dev: &Device<RiwDevice>) {
        dev.cqs.put();
    }
}
