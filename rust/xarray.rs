// SPDX-License-Identifier: GPL-2.0

//! A table of reference-counted objects keyed by an allocated index (`struct xarray` in
//! allocating mode): lookups take their own reference under the table's lock, so an entry
//! removed concurrently stays alive for whoever still holds it. The lock is taken with
//! softirqs off: kernel consumers look entries up from softirq context.

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
/// `xa` is initialised; every entry is a pointer from `Arc::<T>::into_raw`, whose
/// reference the table owns.
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
        let mut index = 0u32;
        // SAFETY: Initialised by the invariant; the table takes over the reference.
        let ret = unsafe { bindings::riw_xa_alloc(self.xa.get(), &mut index, ptr, min, max) };
        if ret != 0 {
            // SAFETY: Not stored: the reference is still ours.
            drop(unsafe { Arc::from_raw(ptr.cast::<T>()) });
            return Err(Error::from_errno(ret));
        }
        Ok(index)
    }

    /// A new reference to the object at `index`, if any.
    pub fn get(&self, index: u32) -> Option<Arc<T>> {
        // SAFETY: Initialised by the invariant. Under the lock an entry cannot be removed,
        // so the table's reference keeps it alive while we take ours.
        unsafe {
            bindings::riw_xa_lock(self.xa.get());
            let ptr = bindings::xa_load(self.xa.get(), index.into()).cast::<T>();
            let found = (!ptr.is_null()).then(|| {
                let table_ref = core::mem::ManuallyDrop::new(Arc::from_raw(ptr));
                (*table_ref).clone()
            });
            bindings::riw_xa_unlock(self.xa.get());
            found
        }
    }

    /// Calls `f` on every object in the table, under the table's lock (so `f` must not
    /// sleep).
    pub fn for_each(&self, mut f: impl FnMut(&Arc<T>)) {
        let mut index: core::ffi::c_ulong = 0;
        // SAFETY: Initialised by the invariant. Under the lock no entry is removed, so the
        // table's references keep each object alive while `f` borrows it.
        unsafe {
            bindings::riw_xa_lock(self.xa.get());
            loop {
                let ptr = bindings::riw_xa_find(self.xa.get(), &mut index);
                if ptr.is_null() {
                    break;
                }
                let table_ref = core::mem::ManuallyDrop::new(Arc::from_raw(ptr.cast::<T>()));
                f(&table_ref);
                index += 1;
            }
            bindings::riw_xa_unlock(self.xa.get());
        }
    }

    /// Takes the object at `index` out of the table.
    pub fn remove(&self, index: u32) -> Option<Arc<T>> {
        // SAFETY: Initialised by the invariant; an entry's reference passes to us.
        unsafe {
            let ptr = bindings::riw_xa_erase(self.xa.get(), index.into()).cast::<T>();
            (!ptr.is_null()).then(|| Arc::from_raw(ptr))
        }
    }
}

#[pinned_drop]
impl<T> PinnedDrop for ArcTable<T> {
    fn drop(self: Pin<&mut Self>) {
        let xa = self.xa.get();
        let mut index: core::ffi::c_ulong = 0;
        loop {
            // SAFETY: Initialised by the invariant; finds the next present entry.
            let ptr = unsafe { bindings::riw_xa_find(xa, &mut index) };
            if ptr.is_null() {
                break;
            }
            // SAFETY: Erased from the table, its reference is ours to drop.
            unsafe {
                bindings::riw_xa_erase(xa, index);
                drop(Arc::from_raw(ptr.cast::<T>()));
            }
        }
        // SAFETY: Empty now, never used again.
        unsafe { bindings::xa_destroy(xa) };
    }
}
