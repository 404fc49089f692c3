// SPDX-License-Identifier: GPL-2.0

//! User contexts (`struct ib_ucontext`) and the driver-private data (`struct ib_udata`)
//! exchanged with userspace in each verbs command.

use super::device::DeviceOps;
use super::object::Object;
use crate::kernel_ext::bindings;
use core::ffi::c_int;
use kernel::error::from_result;
use kernel::prelude::*;
use kernel::types::{AsBytes, FromBytes};

/// A user context of driver `T`.
pub type UContext<T> = Object<bindings::ib_ucontext, <T as DeviceOps>::UContext>;

pub(super) unsafe extern "C" fn alloc_ucontext_callback<T: DeviceOps>(
    uctx: *mut bindings::ib_ucontext,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: The core hands a zeroed context of our size on a device of `T`.
        let dev = unsafe { UContext::<T>::device::<T>(uctx) };
        // SAFETY: A user context is always created from a uverbs command with udata.
        let mut udata = unsafe { UData::from_raw(udata) };
        let init = T::alloc_ucontext(dev, &mut udata)?;
        // SAFETY: A fresh context of `size_ib_ucontext` bytes.
        unsafe { UContext::<T>::init(uctx, init)? };
        Ok(0)
    })
}

pub(super) unsafe extern "C" fn dealloc_ucontext_callback<T: DeviceOps>(
    uctx: *mut bindings::ib_ucontext,
) {
    // SAFETY: Allocated by `alloc_ucontext_callback`; the core calls this once, after every
    // object of the context is gone.
    unsafe { UContext::<T>::drop_data(uctx) };
}

/// The `disassociate_ucontext` op. Its presence lets the core remove a device (link
/// delete, netdev removal, rmmod) while processes still hold it open: the core destroys
/// their objects and fails their later commands with EIO. Nothing is left to do here: the
/// rings they may still have mapped are plain pages that the mappings keep alive and that
/// riw no longer reads.
pub(super) unsafe extern "C" fn disassociate_ucontext_callback(_uctx: *mut bindings::ib_ucontext) {}

/// The driver-private input and output buffers of one verbs command (`struct ib_udata`),
/// present when the command comes from userspace.
///
/// # Invariants
///
/// Points at the command's live `ib_udata` for `'a`, embedded in its attribute bundle.
pub struct UData<'a> {
    raw: *mut bindings::ib_udata,
    _lifetime: core::marker::PhantomData<&'a mut bindings::ib_udata>,
}

impl UData<'_> {
    /// # Safety
    ///
    /// `raw` is a valid `ib_udata` for the returned lifetime.
    pub(crate) unsafe fn from_raw(raw: *mut bindings::ib_udata) -> Self {
        Self {
            raw,
            _lifetime: core::marker::PhantomData,
        }
    }

    /// A `UData` for `raw` if it is not NULL (NULL: a kernel consumer's command).
    ///
    /// # Safety
    ///
    /// `raw` is NULL or valid for the returned lifetime.
    pub(crate) unsafe fn from_nullable<'a>(raw: *mut bindings::ib_udata) -> Option<UData<'a>> {
        // SAFETY: Per the function's safety requirements.
        (!raw.is_null()).then(|| unsafe { UData::from_raw(raw) })
    }

    /// The user context the command runs in.
    pub(crate) fn ucontext(&self) -> *mut bindings::ib_ucontext {
        // SAFETY: Valid by the invariant; a user command always has a context.
        unsafe { bindings::riw_udata_to_ucontext(self.raw) }
    }

    /// Bytes userspace offered as input.
    fn in_len(&self) -> usize {
        // SAFETY: Valid by the invariant.
        unsafe { (*self.raw).inlen }
    }

    /// Whether the input userspace sent is all zeroes from `offset` on (or ends before).
    fn cleared_from(&self, offset: usize) -> bool {
        let len = self.in_len();
        // SAFETY: Valid by the invariant; the range is within the input the core
        // validated, and the check reads it from userspace.
        offset >= len
            || unsafe { bindings::riw_ib_is_udata_cleared(self.raw, offset, len - offset) }
    }

    /// Bytes userspace can take as output.
    pub fn out_len(&self) -> usize {
        // SAFETY: Valid by the invariant.
        unsafe { (*self.raw).outlen }
    }

    /// Reads the driver-specific request, zero-extended if userspace sent less (an older
    /// library); rejects a longer one whose extra bytes are not zero.
    pub fn request<R: FromBytes + AsBytes + Default>(&self) -> Result<R> {
        let mut req = R::default();
        let len = self.in_len().min(core::mem::size_of::<R>());
        // SAFETY: `req` is `len` writable bytes and any bytes make an `R` (`FromBytes`);
        // the core validated the user input buffer for `in_len` bytes.
        if unsafe { bindings::riw_copy_from_udata((&mut req as *mut R).cast(), self.raw, len) } != 0
        {
            return Err(EFAULT);
        }
        if !self.cleared_from(core::mem::size_of::<R>()) {
            return Err(crate::kernel_ext::errno::EOPNOTSUPP());
        }
        Ok(req)
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
