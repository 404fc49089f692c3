// SPDX-License-Identifier: GPL-2.0

//! Per-CPU arrays of `u64` counters: a writer adds to its own CPU's copy, with no atomic
//! instruction and no shared cache line; a reader sums the copies of every possible CPU.

use super::bindings;
use core::ffi::c_void;
use kernel::prelude::*;

/// `len` counters per CPU, zero at first.
///
/// # Invariants
///
/// `counters` is a per-CPU allocation of `len` `u64`s, owned by this value.
pub struct PerCpuCounters {
    counters: *mut c_void,
    len: u32,
}

// SAFETY: Each CPU's copy is only written through `this_cpu_add` on that CPU, which is
// safe against preemption and interrupts; reads of other CPUs' copies are plain 64-bit
// loads, and a count read while it moves is as good as one read a moment earlier.
unsafe impl Send for PerCpuCounters {}
// SAFETY: As for `Send`: every method takes `&self` and is safe from any CPU or context.
unsafe impl Sync for PerCpuCounters {}

impl PerCpuCounters {
    /// Allocates `len` zeroed counters per CPU.
    pub fn new(len: u32) -> Result<Self> {
        // SAFETY: Allocates and zeroes; may sleep, as `new`'s callers can.
        let counters = unsafe { bindings::riw_alloc_percpu_u64(len) };
        if counters.is_null() {
            return Err(ENOMEM);
        }
        Ok(Self { counters, len })
    }

    /// Adds `value` to counter `index` on this CPU; an index out of range adds nothing.
    #[inline]
    pub fn add(&self, index: u32, value: u64) {
        if index < self.len {
            // SAFETY: `counters` holds `len` counters per CPU (type invariant) and
            // `index` is below `len`.
            unsafe { bindings::riw_this_cpu_add_u64(self.counters, index, value) };
        }
    }

    /// Adds every counter's sum over all CPUs to the matching entry of `totals`.
    pub fn sum_into(&self, totals: &mut [u64]) {
        // SAFETY: No precondition.
        let nr_cpus = unsafe { bindings::riw_nr_cpu_ids() };
        // SAFETY: No precondition; the mask iteration starts at -1.
        let mut cpu = unsafe { bindings::riw_cpumask_next_possible(-1) };
        while cpu < nr_cpus {
            for (index, total) in (0..self.len).zip(totals.iter_mut()) {
                // SAFETY: `cpu` is a possible CPU, which every per-CPU allocation
                // covers, and `index` is below `len` (type invariant).
                let value =
                    unsafe { bindings::riw_per_cpu_read_u64(self.counters, index, cpu as i32) };
                *total = total.wrapping_add(value);
            }
            // SAFETY: No precondition; `cpu` is below `nr_cpu_ids`.
            cpu = unsafe { bindings::riw_cpumask_next_possible(cpu as i32) };
        }
    }
}

impl Drop for PerCpuCounters {
    fn drop(&mut self) {
        // SAFETY: Allocated in `new` and not used after this (type invariant).
        unsafe { bindings::riw_free_percpu(self.counters) };
    }
}
