// SPDX-License-Identifier: GPL-2.0

//! A table of reference-counted objects keyed by an allocated index (`struct xarray` in
//! allocating mode). Lookups take no lock: each entry sits in a slot that outlives its
//! removal by an RCU grace period, and the table's reference goes only after that, so a
//! reader inside its RCU read section can still take its own reference. Writers take the
//! xarray's lock with softirqs off.

use super::bindings;
use core::ffi::c_void;
use core::marker::PhantomData;
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::types::Opaque;

/// Objects of type `T`, each at an index the table allocated.
///
/// # Invariants
///
/// `xa` is initialised; every entry is a `riw_xa_slot` from `riw_xa_slot_new` that the
/// table owns, whose `entry` is a pointer from `Arc::<T>::into_raw` whose reference the
/// slot owns and whose `release` is `release_arc::<T>`.
#[pin_data(PinnedDrop)]
pub struct ArcTable<T> {
    #[pin]
    xa: Opaque<bindings::xarray>,
    _owns: PhantomData<Arc<T>>,
}

// SAFETY: The xarray locks internally; entries are `Arc<T>` of a `Send + Sync` `T`.
unsafe impl<T: Send + Sync> Send for ArcTable<T> {}
// SAFETY: As above.
unsafe impl<T: Send + Sync> Sync for ArcTable<T> {}

/// Drops a slot's reference.
///
/// # Safety
///
/// `entry` is from `Arc::<T>::into_raw`, and its reference is the caller's to give up.
unsafe extern "C" fn release_arc<T>(entry: *mut c_void) {
    // SAFETY: By the function's contract.
    drop(unsafe { Arc::from_raw(entry.cast::<T>()) });
}

/// A new reference to the object in `slot`.
///
/// # Safety
///
/// `slot` is a live slot of an `ArcTable<T>` whose reference cannot be released before
/// this returns.
unsafe fn clone_entry<T>(slot: *const bindings::riw_xa_slot) -> Arc<T> {
    // SAFETY: The slot's entry is from `Arc::<T>::into_raw` and, by the caller's
    // guarantee, still holds its reference; we borrow it only to take our own.
    let slot_ref =
        core::mem::ManuallyDrop::new(unsafe { Arc::from_raw((*slot).entry.cast::<T>()) });
    (*slot_ref).clone()
}

impl<T: Send + Sync> ArcTable<T> {
    /// An empty table.
    pub fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `xa` is valid for writes and pinned.
            xa <- Opaque::ffi_init(|xa| unsafe { bindings::riw_xa_init_alloc(xa) }),
            _owns: PhantomData,
        })
    }

    /// Stores `value` at a free index in `min..=max` and returns the index (may sleep).
    pub fn insert(&self, min: u32, max: u32, value: Arc<T>) -> Result<u32> {
        let ptr = Arc::into_raw(value).cast_mut().cast::<c_void>();
        // SAFETY: Plain allocation; the slot takes over the reference.
        let slot = unsafe { bindings::riw_xa_slot_new(ptr, Some(release_arc::<T>)) };
        if slot.is_null() {
            // SAFETY: Not stored: the reference is still ours.
            unsafe { release_arc::<T>(ptr) };
            return Err(ENOMEM);
        }
        let mut index = 0u32;
        // SAFETY: Initialised by the invariant; the table takes over the slot.
        let ret =
            unsafe { bindings::riw_xa_alloc(self.xa.get(), &mut index, slot.cast(), min, max) };
        if ret != 0 {
            // SAFETY: Not stored: the slot is still ours, and no reader saw it.
            unsafe { bindings::riw_xa_slot_release_now(slot) };
            return Err(Error::from_errno(ret));
        }
        Ok(index)
    }

    /// Runs `f` on the slot at `index` (null if none) inside an RCU read section.
    #[inline(always)]
    fn with_slot<R>(&self, index: u32, f: impl FnOnce(*const bindings::riw_xa_slot) -> R) -> R {
        // One shim call enters the section and looks up: lookups are on the data path.
        // SAFETY: Initialised by the invariant; the section is left below, after `f`.
        let slot = unsafe { bindings::riw_xa_load_rcu(self.xa.get(), index.into()) };
        let result = f(slot.cast());
        // SAFETY: Leaves the section entered above.
        unsafe { bindings::riw_rcu_read_unlock() };
        result
    }

    /// A new reference to the object at `index`, if any (takes no lock).
    pub fn get(&self, index: u32) -> Option<Arc<T>> {
        self.with_slot(index, |slot| {
            // SAFETY: A slot found inside the section is released, with its reference,
            // only after a grace period that the section holds back.
            (!slot.is_null()).then(|| unsafe { clone_entry::<T>(slot) })
        })
    }

    /// Runs `f` on the object at `index`, if any, borrowed inside an RCU read section:
    /// no reference is taken, so `f` must not sleep (the object may go once the section
    /// ends, which a sleep would let happen).
    pub fn with<R>(&self, index: u32, f: impl FnOnce(Option<&T>) -> R) -> R {
        self.with_slot(index, |slot| {
            // SAFETY: As in `get`, the slot's reference keeps the object alive until the
            // section ends, after `f`, which cannot keep the borrow.
            f((!slot.is_null()).then(|| unsafe { &*(*slot).entry.cast::<T>().cast_const() }))
        })
    }

    /// Calls `f` on every object in the table, under the table's lock (so `f` must not
    /// sleep).
    pub fn for_each(&self, mut f: impl FnMut(&Arc<T>)) {
        let mut index: core::ffi::c_ulong = 0;
        // SAFETY: Initialised by the invariant. Under the lock no slot is removed, so the
        // slots' references keep each object alive while `f` borrows it.
        unsafe {
            bindings::riw_xa_lock(self.xa.get());
            loop {
                let slot = bindings::riw_xa_find(self.xa.get(), &mut index)
                    .cast::<bindings::riw_xa_slot>();
                if slot.is_null() {
                    break;
                }
                let slot_ref =
                    core::mem::ManuallyDrop::new(Arc::<T>::from_raw((*slot).entry.cast::<T>()));
                f(&slot_ref);
                index += 1;
            }
            bindings::riw_xa_unlock(self.xa.get());
        }
    }

    /// Takes the object at `index` out of the table; lookups that found it before may
    /// still return it until an RCU grace period has passed.
    pub fn remove(&self, index: u32) -> Option<Arc<T>> {
        // SAFETY: Initialised by the invariant. The erased slot is ours; it still holds its
        // reference while we take ours, then goes with it after a grace period.
        unsafe {
            let slot =
                bindings::riw_xa_erase(self.xa.get(), index.into()).cast::<bindings::riw_xa_slot>();
            if slot.is_null() {
                return None;
            }
            let found = clone_entry::<T>(slot);
            bindings::riw_xa_slot_retire(slot);
            Some(found)
        }
    }
}

#[pinned_drop]
impl<T> PinnedDrop for ArcTable<T> {
    fn drop(self: Pin<&mut Self>) {
        let xa = self.xa.get();
        let mut index: core::ffi::c_ulong = 0;
        loop {
            // SAFETY: Initialised by the invariant; finds the next present slot.
            let slot = unsafe { bindings::riw_xa_find(xa, &mut index) };
            if slot.is_null() {
                break;
            }
            // SAFETY: Erased from the table, the slot is ours; a reader of the table being
            // dropped cannot exist, so it goes now.
            unsafe {
                bindings::riw_xa_erase(xa, index);
                bindings::riw_xa_slot_release_now(slot.cast());
            }
        }
        // SAFETY: Empty now, never used again. Slots removed before are on their way to
        // release and may hold the last reference to an object that needs the device this
        // table belongs to: wait for them.
        unsafe {
            bindings::xa_destroy(xa);
            bindings::riw_release_flush();
        }
    }
}
