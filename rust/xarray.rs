// SPDX-License-Identifier: GPL-2.0

//! A table of reference-counted objects keyed by an allocated index (`struct xarray` in
//! allocating mode). Lookups take no lock: each entry sits in a slot that outlives its
//! removal by an RCU grace period, and the table's reference goes only after that, so a
//! reader inside its RCU read section can still take its own reference. Writers take the
//! xarray's lock with softirqs off.

use super::bindings;
use super::workqueue::release;
use core::marker::PhantomData;
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::types::Opaque;

/// An entry of a table: a reference to its object, in a slot that outlives its removal by
/// an RCU grace period, so that lookups need no lock.
///
/// # Invariants
///
/// Allocated by [`Slot::new`]; `rwork` is initialised with `release_work::<T>`.
#[repr(C)]
struct Slot<T> {
    /// First: the work item's address is the slot's.
    rwork: Opaque<bindings::rcu_work>,
    entry: Arc<T>,
}

impl<T: Send + Sync> Slot<T> {
    /// A slot for `entry`, as a raw pointer the caller owns (`entry` goes if it fails).
    fn new(entry: Arc<T>) -> Result<*mut Self> {
        let slot = KBox::into_raw(KBox::new(
            Self {
                rwork: Opaque::uninit(),
                entry,
            },
            GFP_KERNEL,
        )?);
        // SAFETY: `rwork` of a fresh allocation, which does not move until it is freed.
        unsafe { bindings::riw_init_rcu_work((*slot).rwork.get(), Some(release_work::<T>)) };
        Ok(slot)
    }
}

impl<T> Slot<T> {
    /// Frees `slot` and drops its reference.
    ///
    /// # Safety
    ///
    /// `slot` is from [`Slot::new`], owned by the caller, and no reader can see it any more.
    unsafe fn release(slot: *mut Self) {
        // SAFETY: By the function's contract, a `KBox` allocation that is ours.
        drop(unsafe { KBox::from_raw(slot) });
    }

    /// Releases `slot` once no RCU reader can still see it.
    ///
    /// # Safety
    ///
    /// `slot` is from [`Slot::new`], owned by the caller (who gives it up), and out of its
    /// table; the release queue is up (the driver is registered).
    unsafe fn retire(slot: *mut Self) {
        // SAFETY: `rwork` is initialised (type invariant) and the slot, given up to the
        // work, stays until it runs.
        unsafe { release::queue_after_grace_period((*slot).rwork.get()) };
    }
}

/// The work of a retired slot.
///
/// # Safety
///
/// Called by the work queue for the `rwork` of a slot of `T` that [`Slot::retire`] queued.
unsafe extern "C" fn release_work<T: Send + Sync>(work: *mut bindings::work_struct) {
    // SAFETY: `work` is the first field of `rwork`, itself the first field of the
    // `repr(C)` slot; the retired slot is the work's to release, after the grace period.
    unsafe { Slot::<T>::release(work.cast::<Slot<T>>()) };
}

/// Objects of type `T`, each at an index the table allocated.
///
/// # Invariants
///
/// `xa` is initialised; every entry is a [`Slot<T>`] that the table owns. `next` is only
/// read and written by the xarray, under its lock.
#[pin_data(PinnedDrop)]
pub struct ArcTable<T> {
    #[pin]
    xa: Opaque<bindings::xarray>,
    /// Where [`ArcTable::insert_cyclic`] looks first.
    next: Opaque<u32>,
    _owns: PhantomData<Arc<T>>,
}

// SAFETY: The xarray locks internally; entries are `Arc<T>` of a `Send + Sync` `T`.
unsafe impl<T: Send + Sync> Send for ArcTable<T> {}
// SAFETY: As above.
unsafe impl<T: Send + Sync> Sync for ArcTable<T> {}

impl<T: Send + Sync> ArcTable<T> {
    /// An empty table.
    pub fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `xa` is valid for writes and pinned.
            xa <- Opaque::ffi_init(|xa| unsafe { bindings::riw_xa_init_alloc(xa) }),
            next: Opaque::new(0),
            _owns: PhantomData,
        })
    }

    /// Stores `value` at a free index in `min..=max` and returns the index (may sleep).
    pub fn insert(&self, min: u32, max: u32, value: Arc<T>) -> Result<u32> {
        let slot = Slot::new(value)?;
        let mut index = 0u32;
        // SAFETY: Initialised by the invariant; the table takes over the slot.
        let ret =
            unsafe { bindings::riw_xa_alloc(self.xa.get(), &mut index, slot.cast(), min, max) };
        if ret != 0 {
            // SAFETY: Not stored: the slot is still ours, and no reader saw it.
            unsafe { Slot::release(slot) };
            return Err(Error::from_errno(ret));
        }
        Ok(index)
    }

    /// As [`ArcTable::insert`], but at the first free index after the last one handed out,
    /// wrapping at `max`: an index freed now is not reused until the rest of the range
    /// has been, so a stale index held elsewhere finds nothing rather than a newcomer.
    pub fn insert_cyclic(&self, min: u32, max: u32, value: Arc<T>) -> Result<u32> {
        let slot = Slot::new(value)?;
        let mut index = 0u32;
        // SAFETY: Initialised by the invariant; the table takes over the slot; `next` is
        // ours and only touched by the xarray under its lock.
        let ret = unsafe {
            bindings::riw_xa_alloc_cyclic(
                self.xa.get(),
                &mut index,
                slot.cast(),
                min,
                max,
                self.next.get(),
            )
        };
        if ret < 0 {
            // SAFETY: Not stored: the slot is still ours, and no reader saw it.
            unsafe { Slot::release(slot) };
            return Err(Error::from_errno(ret));
        }
        Ok(index)
    }

    /// Runs `f` on the slot at `index` (null if none) inside an RCU read section.
    #[inline(always)]
    fn with_slot<R>(&self, index: u32, f: impl FnOnce(*const Slot<T>) -> R) -> R {
        // SAFETY: Enters a section, left below, after `f`.
        unsafe { bindings::riw_rcu_read_lock() };
        // SAFETY: Initialised by the invariant.
        let slot = unsafe { bindings::xa_load(self.xa.get(), index.into()) };
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
            (!slot.is_null()).then(|| unsafe { (*slot).entry.clone() })
        })
    }

    /// Runs `f` on the object at `index`, if any, borrowed inside an RCU read section:
    /// no reference is taken, so `f` must not sleep (the object may go once the section
    /// ends, which a sleep would let happen).
    pub fn with<R>(&self, index: u32, f: impl FnOnce(Option<&T>) -> R) -> R {
        self.with_slot(index, |slot| {
            // SAFETY: As in `get`, the slot's reference keeps the object alive until the
            // section ends, after `f`, which cannot keep the borrow.
            f((!slot.is_null()).then(|| unsafe { &*(*slot).entry }))
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
                let slot = bindings::riw_xa_find(self.xa.get(), &mut index).cast::<Slot<T>>();
                if slot.is_null() {
                    break;
                }
                f(&(*slot).entry);
                index += 1;
            }
            bindings::riw_xa_unlock(self.xa.get());
        }
    }

    /// The first object at an index of at least `from`, with its index and a new
    /// reference (takes no lock): a walk over the table that may sleep between steps.
    pub fn next_from(&self, from: u32) -> Option<(u32, Arc<T>)> {
        let mut index: core::ffi::c_ulong = from.into();
        // SAFETY: Enters a section, left below.
        unsafe { bindings::riw_rcu_read_lock() };
        // SAFETY: Initialised by the invariant; `xa_find` takes its own RCU read lock.
        let slot = unsafe { bindings::riw_xa_find(self.xa.get(), &mut index) }.cast::<Slot<T>>();
        // SAFETY: As in `get`: the slot found in the section outlives it.
        let found = (!slot.is_null()).then(|| unsafe { (*slot).entry.clone() });
        // SAFETY: Leaves the section entered above.
        unsafe { bindings::riw_rcu_read_unlock() };
        Some((u32::try_from(index).ok()?, found?))
    }

    /// Takes the object at `index` out of the table; lookups that found it before may
    /// still return it until an RCU grace period has passed.
    pub fn remove(&self, index: u32) -> Option<Arc<T>> {
        // SAFETY: Initialised by the invariant. The erased slot is ours; it still holds its
        // reference while we take ours, then goes with it after a grace period.
        unsafe {
            let slot = bindings::riw_xa_erase(self.xa.get(), index.into()).cast::<Slot<T>>();
            if slot.is_null() {
                return None;
            }
            let found = (*slot).entry.clone();
            Slot::retire(slot);
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
                Slot::<T>::release(slot.cast());
            }
        }
        // SAFETY: Empty now, never used again. Slots removed before are on their way to
        // release and may hold the last reference to an object that needs the device this
        // table belongs to: wait for them (tables live while the driver is registered).
        unsafe {
            bindings::xa_destroy(xa);
            release::flush();
        }
    }
}
