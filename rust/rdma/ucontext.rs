// SPDX-License-Identifier: GPL-2.0

//! User contexts (`struct ib_ucontext`) and the driver-private data (`struct ib_udata`)
//! exchanged with userspace in each verbs command.

use super::device::{Device, DeviceOps};
use crate::kernel_ext::bindings;
use core::ffi::c_int;
use core::ops::Deref;
use kernel::error::from_result;
use kernel::prelude::*;
use kernel::types::{AsBytes, Opaque};

/// A user context of driver `T`: the core's `struct ib_ucontext`, then `T::UContext`.
///
/// # Invariants
///
/// Allocated by the RDMA core with `size_ib_ucontext`; `data` is initialised between
/// `alloc_ucontext` and `dealloc_ucontext`.
#[repr(C)]
pub struct UContext<T: DeviceOps> {
    ib: Opaque<bindings::ib_ucontext>,
    data: T::UContext,
}

impl<T: DeviceOps> Deref for UContext<T> {
    type Target = T::UContext;

    fn deref(&self) -> &T::UContext {
        &self.data
    }
}

impl<T: DeviceOps> UContext<T> {
    pub(super) unsafe extern "C" fn alloc_callback(
        uctx: *mut bindings::ib_ucontext,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: The core hands a zeroed context of our size whose `device` is a live
            // device of this driver.
            let dev = unsafe { Device::<T>::from_raw((*uctx).device) };
            // SAFETY: A user context is always created from a uverbs command with udata.
            let mut udata = unsafe { UData::from_raw(udata) };
            let data = T::alloc_ucontext(dev, &mut udata)?;
            // SAFETY: `uctx` is the start of an allocation of `Self`; `data` is uninitialised.
            unsafe { core::ptr::addr_of_mut!((*uctx.cast::<Self>()).data).write(data) };
            Ok(0)
        })
    }

    pub(super) unsafe extern "C" fn dealloc_callback(uctx: *mut bindings::ib_ucontext) {
        // SAFETY: `alloc_callback` succeeded for this context, so `data` is initialised,
        // and the core calls this once, after every object of the context is gone.
        unsafe { core::ptr::drop_in_place(core::ptr::addr_of_mut!((*uctx.cast::<Self>()).data)) };
    }
}

/// The driver-private input and output buffers of one verbs command (`struct ib_udata`).
///
/// # Invariants
///
/// Points at the command's live `ib_udata` for `'a`.
pub struct UData<'a> {
    raw: *mut bindings::ib_udata,
    _lifetime: core::marker::PhantomData<&'a mut bindings::ib_udata>,
}

impl UData<'_> {
    /// # Safety
    ///
    /// `raw` is a valid `ib_udata` for the returned lifetime.
    unsafe fn from_raw(raw: *mut bindings::ib_udata) -> Self {
        Self { raw, _lifetime: core::marker::PhantomData }
    }

    /// Bytes userspace can take as output.
    pub fn out_len(&self) -> usize {
        // SAFETY: Valid by the invariant.
        unsafe { (*self.raw).outlen }
    }

    /// Copies `resp` to userspace, truncated to what userspace has room for (an older
    /// library may know a shorter response).
    pub fn respond<R: AsBytes>(&mut self, resp: &R) -> Result {
        let len = core::mem::size_of::<R>().min(self.out_len());
        // SAFETY: `resp` is `len` readable bytes with no padding (`AsBytes`); the helper
        // copies them to the user buffer the core validated for `out_len` bytes.
        let ret = unsafe { bindings::riw_copy_to_udata(self.raw, (resp as *const R).cast(), len) };
        if ret != 0 {
            return Err(EFAULT);
        }
        Ok(())
    }
}
