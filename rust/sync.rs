// SPDX-License-Identifier: GPL-2.0

//! A spinlock that keeps softirqs off on its CPU while held (`spin_lock_bh`). Kernel
//! consumers post work requests and poll from softirq context (a CQ polled with
//! `IB_POLL_SOFTIRQ` whose handler posts again): state they reach there must not be held
//! by process context that a softirq can interrupt on the same CPU.
//!
//! And the kernel's mutex, locked from here: the kernel crate's backend functions are not
//! inlined into a module, so each lock and unlock through them is one more call and return
//! (the doorbell takes the connection's mutex for every message).

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
        // SAFETY: The caller guarantees `ptr` is an initialised spinlock, which (see
        // `raw_lock`) is what `spin_lock_bh()` takes.
        unsafe { raw_lock(ptr) }
    }

    unsafe fn unlock(ptr: *mut Self::State, _guard_state: &Self::GuardState) {
        // SAFETY: The caller owns the lock, taken by `lock` with softirqs off.
        unsafe { raw_unlock(ptr) }
    }
}

// Where `spin_lock_bh()` is an out-of-line `_raw_spin_lock_bh()` on the `raw_spinlock_t` a
// `spinlock_t` begins with (not PREEMPT_RT, not inlined), the backend calls it directly:
// the data path takes these locks several times per message, and through the C shim each
// is a second call and return.

/// `spin_lock_bh(ptr)`.
///
/// # Safety
///
/// `ptr` is an initialised spinlock.
#[cfg(not(any(CONFIG_PREEMPT_RT, CONFIG_INLINE_SPIN_LOCK_BH)))]
unsafe fn raw_lock(ptr: *mut kernel::bindings::spinlock_t) {
    // SAFETY: Without PREEMPT_RT a `spinlock_t` is a union whose first member, at offset
    // 0, is the `raw_spinlock_t` that `spin_lock_bh()` passes on; the caller guarantees it
    // is initialised.
    unsafe { kernel::bindings::_raw_spin_lock_bh(ptr.cast()) }
}

/// `spin_unlock_bh(ptr)`.
///
/// # Safety
///
/// The caller holds `ptr`, taken by [`raw_lock`].
#[cfg(not(any(CONFIG_PREEMPT_RT, CONFIG_INLINE_SPIN_UNLOCK_BH)))]
unsafe fn raw_unlock(ptr: *mut kernel::bindings::spinlock_t) {
    // SAFETY: As in `raw_lock`; the caller holds the lock, with softirqs off.
    unsafe { kernel::bindings::_raw_spin_unlock_bh(ptr.cast()) }
}

/// `spin_lock_bh(ptr)`, through the shim.
///
/// # Safety
///
/// `ptr` is an initialised spinlock.
#[cfg(any(CONFIG_PREEMPT_RT, CONFIG_INLINE_SPIN_LOCK_BH))]
unsafe fn raw_lock(ptr: *mut kernel::bindings::spinlock_t) {
    // SAFETY: The caller guarantees `ptr` is an initialised spinlock.
    unsafe { super::bindings::riw_spin_lock_bh(ptr.cast()) }
}

/// `spin_unlock_bh(ptr)`, through the shim.
///
/// # Safety
///
/// The caller holds `ptr`, taken by [`raw_lock`].
#[cfg(any(CONFIG_PREEMPT_RT, CONFIG_INLINE_SPIN_UNLOCK_BH))]
unsafe fn raw_unlock(ptr: *mut kernel::bindings::spinlock_t) {
    // SAFETY: The caller holds the lock, taken with softirqs off.
    unsafe { super::bindings::riw_spin_unlock_bh(ptr.cast()) }
}

/// A mutex (`struct mutex`), as [`kernel::sync::Mutex`].
pub type Mutex<T> = Lock<T, MutexBackend>;

/// Creates a [`Mutex`] initialiser with the given name and a new lock class.
macro_rules! new_mutex {
    ($inner:expr, $name:literal $(,)?) => {
        $crate::kernel_ext::sync::Mutex::new(
            $inner,
            kernel::c_str!($name),
            kernel::static_lock_class!(),
        )
    };
}
pub(crate) use new_mutex;

/// The `struct mutex` backend of [`Mutex`].
pub struct MutexBackend;

// SAFETY: A kernel `struct mutex` gives mutual exclusion, to the task that locked it until
// it unlocks; `relock` uses the default, which locks the same way.
unsafe impl Backend for MutexBackend {
    type State = kernel::bindings::mutex;
    type GuardState = ();

    unsafe fn init(
        ptr: *mut Self::State,
        name: *const kernel::ffi::c_char,
        key: *mut kernel::bindings::lock_class_key,
    ) {
        // SAFETY: The caller guarantees `ptr` is valid for writes and `name` and `key` for
        // reads for good.
        unsafe { kernel::bindings::__mutex_init(ptr, name, key) }
    }

    #[inline]
    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: The caller guarantees `ptr` is an initialised mutex, and that this task
        // may sleep.
        unsafe { kernel::bindings::mutex_lock(ptr) }
    }

    #[inline]
    unsafe fn unlock(ptr: *mut Self::State, _guard_state: &Self::GuardState) {
        // SAFETY: The caller owns the mutex, locked by `lock`.
        unsafe { kernel::bindings::mutex_unlock(ptr) }
    }
}
