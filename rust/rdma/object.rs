// SPDX-License-Identifier: GPL-2.0

//! Objects the RDMA core allocates for a driver: user contexts, protection domains,
//! completion queues, queue pairs and shared receive queues. The core allocates each with
//! the size the driver declared (`INIT_RDMA_OBJ_SIZE`) and hands the driver the embedded
//! C object; the driver's data lives right behind it.

use super::device::{Device, DeviceOps};
use crate::kernel_ext::bindings;
use core::ops::Deref;
use kernel::prelude::*;
use kernel::types::Opaque;

/// A C object of the RDMA core that belongs to a device.
///
/// # Safety
///
/// `device` must return the `device` field of a live object.
pub unsafe trait CoreObject {
    /// The device the object belongs to.
    ///
    /// # Safety
    ///
    /// `obj` points at a live object.
    unsafe fn device(obj: *mut Self) -> *mut bindings::ib_device;
}

macro_rules! core_object {
    ($($c:ident),*) => {$(
        // SAFETY: Each of these C objects has a `device` field set by the core before any
        // driver op sees it.
        unsafe impl CoreObject for bindings::$c {
            unsafe fn device(obj: *mut Self) -> *mut bindings::ib_device {
                // SAFETY: The caller guarantees `obj` is live.
                unsafe { (*obj).device }
            }
        }
    )*};
}
core_object!(ib_ucontext, ib_pd, ib_cq, ib_qp, ib_srq, ib_mr);

/// A core object `C` with driver data `D` behind it.
///
/// # Invariants
///
/// `ib` is a live object allocated by the core (or by [`super::mr`]) with the size of
/// `Self`, and `data` is initialised, from the driver's create op to its destroy op.
#[repr(C)]
#[pin_data]
pub struct Object<C, D> {
    #[pin]
    ib: Opaque<C>,
    #[pin]
    data: D,
}

impl<C, D> Deref for Object<C, D> {
    type Target = D;

    fn deref(&self) -> &D {
        &self.data
    }
}

// SAFETY: The C part is synchronised by the RDMA core, the driver data is `Sync`.
unsafe impl<C, D: Sync> Sync for Object<C, D> {}
// SAFETY: As above.
unsafe impl<C, D: Send> Send for Object<C, D> {}

impl<C: CoreObject, D> Object<C, D> {
    /// Borrows the object behind `ib`.
    ///
    /// # Safety
    ///
    /// `ib` belongs to an `Object<C, D>` whose data is initialised, alive for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ib: *mut C) -> &'a Self {
        // SAFETY: `ib` is the first field of a `repr(C)` struct.
        unsafe { &*ib.cast::<Self>() }
    }

    pub(crate) fn as_raw(&self) -> *mut C {
        self.ib.get()
    }

    /// The device of the object, which belongs to driver `T`.
    ///
    /// # Safety
    ///
    /// The object's device is a device of `T`.
    pub(crate) unsafe fn device<'a, T: DeviceOps>(ib: *mut C) -> &'a Device<T> {
        // SAFETY: The caller guarantees `ib` is live and its device is a `Device<T>`.
        unsafe { Device::from_raw(C::device(ib)) }
    }

    /// Initialises the driver data of a fresh core object in place.
    ///
    /// # Safety
    ///
    /// `ib` starts a core allocation of `size_of::<Self>()` bytes whose data is not
    /// initialised; the core does not move it.
    pub(crate) unsafe fn init(ib: *mut C, init: impl PinInit<D, Error>) -> Result {
        // SAFETY: `data` is inside the allocation; the object is pinned in place.
        unsafe { init.__pinned_init(core::ptr::addr_of_mut!((*ib.cast::<Self>()).data)) }
    }

    /// Allocates a zeroed `C` with `D` behind it, for the objects the driver allocates
    /// itself (memory regions); the core gets the raw pointer.
    pub(crate) fn new_boxed(init: impl PinInit<D, Error>) -> Result<*mut C> {
        let obj = KBox::pin_init(
            try_pin_init!(Self {
                // SAFETY: `c` is valid for writes of a `C`; the core expects it zeroed.
                ib <- Opaque::ffi_init(|c: *mut C| unsafe { c.write_bytes(0, 1) }),
                data <- init,
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: The object stays pinned: only `free_boxed` turns it back into a box.
        let raw = KBox::into_raw(unsafe { Pin::into_inner_unchecked(obj) });
        Ok(raw.cast())
    }

    /// Frees an object from `new_boxed`, dropping its data.
    ///
    /// # Safety
    ///
    /// `ib` came from `new_boxed` and nobody uses it any more.
    pub(crate) unsafe fn free_boxed(ib: *mut C) {
        // SAFETY: Per the function's safety requirements.
        drop(unsafe { KBox::from_raw(ib.cast::<Self>()) });
    }

    /// Drops the driver data; the core frees the memory afterwards.
    ///
    /// # Safety
    ///
    /// The data is initialised and nobody uses the object any more.
    pub(crate) unsafe fn drop_data(ib: *mut C) {
        // SAFETY: Per the function's safety requirements.
        unsafe { core::ptr::drop_in_place(core::ptr::addr_of_mut!((*ib.cast::<Self>()).data)) };
    }
}
