// SPDX-License-Identifier: GPL-2.0

//! What riw advertises and enforces: the device limits, the user ABI's reserved values and
//! the per-device object counts held within them. A leaf: it imports nothing of the driver.

use crate::kernel_ext::rdma::{DeviceAttr, DEVICE_MEM_MGT_EXTENSIONS, KERNEL_CAP_ALLOW_USER_UNREG};
use crate::uapi;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::prelude::*;

/// Vendor id reported to userspace: "riw" in ASCII. riw is not Chelsio silicon and does
/// not borrow its PCI identity.
pub(crate) const VENDOR_ID: u32 = 0x72_69_77;
/// Part id, also the `dev_id` handed to the user library.
pub(crate) const VENDOR_PART_ID: u32 = 1;

/// The limits riw advertises (Documentation/riw.rst explains each choice).
pub(crate) const LIMITS: DeviceAttr = DeviceAttr {
    fw_ver: 0x1_0000, // 0.1.0: major, minor, patch in 16-bit fields
    vendor_id: VENDOR_ID,
    vendor_part_id: VENDOR_PART_ID,
    hw_ver: 1,
    max_mr_size: 1 << 36,
    page_size_cap: kernel::page::PAGE_SIZE as u64,
    device_cap_flags: DEVICE_MEM_MGT_EXTENSIONS,
    kernel_cap_flags: KERNEL_CAP_ALLOW_USER_UNREG,
    max_qp: 16384,
    max_qp_wr: 16384,
    // The soft-iWARP ring entries carry up to SIW_MAX_SGE scatter/gather elements.
    max_send_sge: uapi::SIW_MAX_SGE,
    max_recv_sge: uapi::SIW_MAX_SGE,
    max_sge_rd: 1,
    max_cq: 16384,
    max_cqe: 1 << 20,
    max_mr: 65536,
    max_pd: 65536,
    max_mw: 0,
    max_qp_rd_atom: 32,
    max_qp_init_rd_atom: 32,
    max_srq: 16384,
    max_srq_wr: 16384,
    max_srq_sge: uapi::SIW_MAX_SGE,
    max_fast_reg_page_list_len: 256,
    max_pkeys: 1,
};

/// Lowest mmap key riw hands out. The soft-iWARP user library takes the key
/// `SIW_INVAL_UOBJ_KEY` for "no mapping" and fails the object: no ring may sit there.
pub(crate) const MMAP_KEY_MIN: u64 = uapi::SIW_INVAL_UOBJ_KEY as u64 + 1;

/// Largest message, in bytes.
pub(crate) const MAX_MSG_SIZE: u32 = 1 << 31;

/// A count of live objects of one kind, held within the device limit.
#[derive(Default)]
pub(crate) struct Counter(AtomicU32);

impl Counter {
    /// Counts one more object if that stays within `max`; the count goes back down when
    /// the returned guard drops, unless it is kept.
    pub(crate) fn take(&self, max: u32) -> Result<Quota<'_>> {
        self.0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < max).then(|| n + 1)
            })
            .map_err(|_| ENOMEM)?;
        Ok(Quota(Some(self)))
    }

    /// Counts one object less: it was destroyed.
    pub(crate) fn put(&self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One counted object, given back on drop unless [`Quota::keep`] hands it to the object.
pub(crate) struct Quota<'a>(Option<&'a Counter>);

impl Quota<'_> {
    /// The object now exists; it gives its count back when destroyed.
    pub(crate) fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for Quota<'_> {
    fn drop(&mut self) {
        if let Some(counter) = self.0 {
            counter.put();
        }
    }
}
