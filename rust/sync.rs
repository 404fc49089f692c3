// SPDX-License-Identifier: GPL-2.0

//! A spinlock that keeps softirqs off on its CPU while held (`spin_lock_bh`). Kernel
//! consumers post work requests and poll from softirq context (a CQ polled with
//! `IB_POLL_SOFTIRQ` whose handler posts again): state they reach there must not be held
//! by process context that a softirq can interrupt on the same CPU.

use super::bindings;
use kernel::sync::lock::{Backend, Lock};

/// A spinlock taken with softirqs disabled.
pub type SpinLockBh<T> = Lock<T, SpinLockBhBackend>;

/// Creates a [`SpinLockBh`] initialiser with the given name and a new lock class.
macro_rules! new_spinlock_bh {
    ($inner:expr, $name:literal $(,)?) => {
        $crate::kernel_ext::sync::SpinLockBh::new(
            $inner,
            kernel::c_str!($name),
            kernel::static_lock_class!(),
        )
    };
}
pub(crate) use new_spinlock_bh;

/// The `spinlock_t` backend of [`SpinLockBh`].
pub struct SpinLockBhBackend;

// SAFETY: A kernel `spinlock_t` gives mutual exclusion; lock and unlock are the `_bh` pair,
// so the guard's owner runs with softirqs off until it unlocks. `relock` uses the default,
// which locks the same way.
unsafe impl Backend for SpinLockBhBackend {
    type State = kernel::bindings::spinlock_t;
    type GuardState = ();

    unsafe fn init(
        ptr: *mut Self::State,
        name: *const kernel::ffi::c_char,
        key: *mut kernel::bindings::lock_class_key,
    ) {
        // SAFETY: The caller guarantees `ptr` is valid for writes and `name` and `key` for
        // reads for good.
        unsafe { kernel::bindings::__spin_lock_init(ptr, name, key) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: The caller guarantees `ptr` is an initialised spinlock.
        unsafe { bindings::riw_spin_lock_bh(ptr.cast()) }
    }

    unsafe fn unlock(ptr: *mut Self::State, _guard_state: &Self::GuardState) {
        // SAFETY: The caller owns the lock, taken by `lock` with softirqs off.
        unsafe { bindings::riw_spin_unlock_bh(ptr.cast()) }
    }
}
