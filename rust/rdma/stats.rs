// SPDX-License-Identifier: GPL-2.0

//! A device's port counters, as `rdma statistic show link DEV/1` and sysfs
//! `ports/1/hw_counters/` show them (the core's hw-stats ops).

use super::device::{Device, DeviceOps};
use crate::kernel_ext::bindings;
use core::ffi::c_int;
use kernel::prelude::*;

/// The name of one port counter, as the core keeps it: in a static table the driver
/// hands out for every port of every device (see [`DeviceOps::port_counters`]).
#[repr(transparent)]
pub struct CounterDesc(bindings::rdma_stat_desc);

// SAFETY: Immutable after construction; its name points at a static string.
unsafe impl Sync for CounterDesc {}

impl CounterDesc {
    /// A counter named `name`, shown on every read.
    pub const fn new(name: &'static CStr) -> Self {
        Self(bindings::rdma_stat_desc {
            name: name.as_char_ptr().cast(),
            flags: 0,
            priv_: core::ptr::null(),
        })
    }
}

/// `alloc_hw_port_stats`: the counter set of a port, named by the driver's table.
pub(super) unsafe extern "C" fn alloc_hw_port_stats_callback<T: DeviceOps>(
    _ib: *mut bindings::ib_device,
    _port: u32,
) -> *mut bindings::rdma_hw_stats {
    let descs = T::port_counters();
    let Ok(count) = c_int::try_from(descs.len()) else {
        return core::ptr::null_mut();
    };
    // SAFETY: `descs` is a static table of `count` descriptors with static names
    // (`CounterDesc` is a transparent `rdma_stat_desc`); the core frees what it returns.
    unsafe {
        bindings::rdma_alloc_hw_stats_struct(
            descs.as_ptr().cast(),
            count,
            bindings::RDMA_HW_STATS_DEFAULT_LIFESPAN as _,
        )
    }
}

/// `get_hw_stats`: fills every counter of `stats` (whichever `_index` was asked for)
/// and returns how many there are.
pub(super) unsafe extern "C" fn get_hw_stats_callback<T: DeviceOps>(
    ib: *mut bindings::ib_device,
    stats: *mut bindings::rdma_hw_stats,
    _port: u32,
    _index: c_int,
) -> c_int {
    // SAFETY: The core calls this on a registered device of `T`, with a counter set
    // `alloc_hw_port_stats_callback` made, whose lock it holds.
    let (dev, num) = unsafe { (Device::<T>::from_raw(ib), (*stats).num_counters) };
    let len = usize::try_from(num).unwrap_or(0);
    // SAFETY: `value` is the set's trailing array of `num_counters` entries, which we
    // may write under its lock.
    let values = unsafe {
        core::slice::from_raw_parts_mut(core::ptr::addr_of_mut!((*stats).value).cast::<u64>(), len)
    };
    values.fill(0);
    T::read_port_counters(dev, values);
    num
}
