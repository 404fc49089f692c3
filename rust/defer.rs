// SPDX-License-Identifier: GPL-2.0

//! Work handed to the task running on this CPU. A task that may sleep opens a scope of a
//! key; until it closes it, code that runs on its CPU in its name (a softirq its own send
//! raised, a socket backlog it processes) may hand it objects of the key's type instead of
//! waking a worker on another CPU, and the task runs them before it leaves the scope.
//! The per-CPU slots live in rust/defer.c; the safety below rests on the contract at its
//! top.

use super::bindings;
use core::ffi::c_void;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::sync::atomic::AtomicU8;
use kernel::sync::Arc;

/// A kind of deferred object. Objects handed in with a key go only to scopes of the same
/// key, so a scope holds only `T`s. Keys are statics: the address is the identity (the
/// atomic keeps it from being a promoted constant that could share its address).
pub struct DeferKey<T> {
    _id: AtomicU8,
    _items: PhantomData<fn(Arc<T>)>,
}

impl<T: Send + Sync> DeferKey<T> {
    pub const fn new() -> Self {
        Self {
            _id: AtomicU8::new(0),
            _items: PhantomData,
        }
    }

    fn id(&'static self) -> *const c_void {
        (self as *const Self).cast()
    }

    /// Hands a reference to `item` to the scope of this key that the task running here is
    /// in. False if it is in none, or the scope is full: the caller gets the work done
    /// some other way.
    pub fn defer(&'static self, item: &Arc<T>) -> bool {
        let ptr = Arc::into_raw(item.clone());
        // SAFETY: Callable from any context (rust/defer.c); it only stores the pointer, in
        // a scope of this key, whose owner turns it back into the `Arc<T>` it is (see
        // `scope`), or leaves it ours on false.
        if unsafe { bindings::riw_defer_add(self.id(), ptr.cast_mut().cast()) } {
            return true;
        }
        // SAFETY: From `into_raw` above and not stored.
        drop(unsafe { Arc::from_raw(ptr) });
        false
    }

    /// Runs `body` inside a scope of this key, then gives `run` what was handed to the
    /// scope, in order, the scope still open (what `run` does may hand it more), up to
    /// `max_runs` objects; what comes beyond goes to `overflow`. The scope takes nothing if
    /// another task holds this CPU's scope (one that sleeps or was preempted in its own).
    pub fn scope(
        &'static self,
        body: impl FnOnce(),
        max_runs: usize,
        mut run: impl FnMut(Arc<T>),
        mut overflow: impl FnMut(Arc<T>),
    ) {
        let mut scope = MaybeUninit::<bindings::riw_defer_scope>::uninit();
        let raw = scope.as_mut_ptr();
        // Nothing between the begin and the loop's end can return early: the kernel does
        // not unwind.
        // SAFETY: `raw` is valid for writes and stays in place until the loop below ends,
        // once a take found the scope empty and closed it, as rust/defer.c requires.
        unsafe { bindings::riw_defer_begin(raw, self.id()) };
        body();
        let take = || {
            // SAFETY: Initialised by `riw_defer_begin`, and this is its task; taking works
            // open or closed, and closes the scope once it finds it empty.
            let item = unsafe { bindings::riw_defer_take(raw) };
            // SAFETY: Items of this key's scopes are `Arc<T>` pointers from `defer`, whose
            // references the scope held and now passes on, each once (rust/defer.c).
            (!item.is_null()).then(|| unsafe { Arc::from_raw(item.cast::<T>().cast_const()) })
        };
        let mut runs = 0;
        // Ends with the scope closed: `take` closes it when it comes back empty.
        while let Some(item) = take() {
            if runs < max_runs {
                runs += 1;
                run(item);
            } else {
                // SAFETY: Begun above, by this task; closing twice is harmless, and what
                // came before is still taken (rust/defer.c).
                unsafe { bindings::riw_defer_end(raw) };
                overflow(item);
            }
        }
    }
}
