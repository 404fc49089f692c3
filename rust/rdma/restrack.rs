// SPDX-License-Identifier: GPL-2.0

//! Driver details of resources, as `rdma resource show qp|cm_id|mr|cq -dd` prints them:
//! the RDMA core's resource tracking (restrack) asks the driver to add its own attributes
//! to an object's netlink message (`fill_res_*_entry`), a nest of name and value pairs.
//!
//! The core calls these with the object held in its resource table: a QP, CQ or MR is not
//! destroyed (its driver data not dropped) until the call has returned, and a cm_id's
//! `iw_cm_id` is destroyed only after the cm_id has left the table.

use super::device::{Device, DeviceOps};
use super::mr::Mr;
use super::qp::Qp;
use super::verbs::Cq;
use crate::kernel_ext::bindings;
use crate::kernel_ext::errno::EMSGSIZE;
use core::ffi::c_int;
use core::fmt::{self, Write};
use core::marker::PhantomData;
use core::ptr::NonNull;
use kernel::prelude::*;

/// The most bytes of a formatted value (`put_fmt`): an IPv6 address with its port fits.
const FMT_VALUE_MAX: usize = 64;

/// The driver's attributes of one object, written into the netlink message the core is
/// building. Each `put_*` fails with `EMSGSIZE` once the message is full; the core then
/// sends what it has and asks again for this object in the next message.
pub struct DriverDetails<'a> {
    msg: NonNull<bindings::sk_buff>,
    _msg: PhantomData<&'a mut bindings::sk_buff>,
}

fn put_result(ret: c_int) -> Result {
    if ret != 0 {
        return Err(EMSGSIZE());
    }
    Ok(())
}

impl DriverDetails<'_> {
    fn raw(&self) -> *mut bindings::sk_buff {
        self.msg.as_ptr()
    }

    /// A decimal `u32`.
    pub fn put_u32(&mut self, name: &CStr, value: u32) -> Result {
        // SAFETY: The message the core is filling; `name` is NUL-terminated and copied.
        put_result(unsafe {
            bindings::rdma_nl_put_driver_u32(self.raw(), name.as_char_ptr().cast(), value)
        })
    }

    /// A `u32` printed in hexadecimal.
    pub fn put_u32_hex(&mut self, name: &CStr, value: u32) -> Result {
        // SAFETY: As for `put_u32`.
        put_result(unsafe {
            bindings::rdma_nl_put_driver_u32_hex(self.raw(), name.as_char_ptr().cast(), value)
        })
    }

    /// A decimal `u64`.
    pub fn put_u64(&mut self, name: &CStr, value: u64) -> Result {
        // SAFETY: As for `put_u32`.
        put_result(unsafe {
            bindings::rdma_nl_put_driver_u64(self.raw(), name.as_char_ptr().cast(), value)
        })
    }

    /// A `u64` printed in hexadecimal.
    pub fn put_u64_hex(&mut self, name: &CStr, value: u64) -> Result {
        // SAFETY: As for `put_u32`.
        put_result(unsafe {
            bindings::rdma_nl_put_driver_u64_hex(self.raw(), name.as_char_ptr().cast(), value)
        })
    }

    /// A string.
    pub fn put_str(&mut self, name: &CStr, value: &CStr) -> Result {
        // SAFETY: As for `put_u32`; `value` is NUL-terminated and copied too.
        put_result(unsafe {
            bindings::rdma_nl_put_driver_string(
                self.raw(),
                name.as_char_ptr().cast(),
                value.as_char_ptr().cast(),
            )
        })
    }

    /// A string formatted from `args`, cut at 63 bytes.
    pub fn put_fmt(&mut self, name: &CStr, args: fmt::Arguments<'_>) -> Result {
        let mut buf = ValueBuf {
            bytes: [0; FMT_VALUE_MAX],
            len: 0,
        };
        // A value too long is cut: `write_str` keeps what fits.
        let _ = buf.write_fmt(args);
        let len = buf.len;
        // NUL-terminated: `len` stays below the buffer's size, and the rest is zero.
        let value = CStr::from_bytes_with_nul(&buf.bytes[..=len]).map_err(|_| EINVAL)?;
        self.put_str(name, value)
    }
}

/// A formatted value and its terminating NUL.
struct ValueBuf {
    bytes: [u8; FMT_VALUE_MAX],
    len: usize,
}

impl Write for ValueBuf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = FMT_VALUE_MAX - 1 - self.len;
        // No NUL inside the value: it would end it early.
        for (d, b) in self.bytes[self.len..]
            .iter_mut()
            .zip(s.bytes().filter(|&b| b != 0).take(room))
        {
            *d = b;
            self.len += 1;
        }
        if s.len() > room {
            return Err(fmt::Error);
        }
        Ok(())
    }
}

/// A connection manager id the core asks about, borrowed for the call: no reference is
/// taken.
pub struct CmIdView<'a> {
    id: NonNull<bindings::iw_cm_id>,
    _id: PhantomData<&'a bindings::iw_cm_id>,
}

impl CmIdView<'_> {
    /// What the provider stored in the id (see [`super::CmId::provider_data`]).
    pub fn provider_data(&self) -> usize {
        // SAFETY: The id is live for the borrow; the field is the provider's, read once as
        // a provider hook may write it meanwhile.
        unsafe { core::ptr::addr_of!((*self.id.as_ptr()).provider_data).read_volatile() as usize }
    }

    /// Whether `id` refers to this very id.
    pub fn is(&self, id: &super::CmId) -> bool {
        id.raw() == self.id.as_ptr()
    }
}

/// Runs `fill` on the driver-attribute nest of `msg`, which is cancelled if `fill` fails.
///
/// # Safety
///
/// `msg` is the message the core asked a `fill_res_*_entry` op to fill.
unsafe fn with_nest(
    msg: *mut bindings::sk_buff,
    fill: impl FnOnce(&mut DriverDetails<'_>) -> Result,
) -> c_int {
    let Some(msg) = NonNull::new(msg) else {
        return EINVAL.to_errno();
    };
    // SAFETY: The message the core is filling (the function's safety requirements).
    let nest = unsafe {
        bindings::riw_nla_nest_start_noflag(
            msg.as_ptr(),
            bindings::rdma_nldev_attr_RDMA_NLDEV_ATTR_DRIVER as c_int,
        )
    };
    if nest.is_null() {
        return EMSGSIZE().to_errno();
    }
    let mut details = DriverDetails {
        msg,
        _msg: PhantomData,
    };
    match fill(&mut details) {
        Ok(()) => {
            // SAFETY: `nest` was opened above in this message, and is closed once.
            unsafe { bindings::riw_nla_nest_end(msg.as_ptr(), nest) };
            0
        }
        Err(e) => {
            // SAFETY: As above: drops the nest and what was put in it.
            unsafe { bindings::riw_nla_nest_cancel(msg.as_ptr(), nest) };
            e.to_errno()
        }
    }
}

pub(super) unsafe extern "C" fn fill_res_qp_callback<T: DeviceOps>(
    msg: *mut bindings::sk_buff,
    qp: *mut bindings::ib_qp,
) -> c_int {
    // SAFETY: The core holds the QP in its resource table during the call (see the module
    // documentation): a QP of a device of `T` set up by `create_qp`, not yet destroyed.
    let (dev, qp) = unsafe { (Qp::<T>::device::<T>(qp), Qp::<T>::from_raw(qp)) };
    // SAFETY: The core's message for this op.
    unsafe { with_nest(msg, |out| T::fill_res_qp(dev, qp, out)) }
}

pub(super) unsafe extern "C" fn fill_res_cq_callback<T: DeviceOps>(
    msg: *mut bindings::sk_buff,
    cq: *mut bindings::ib_cq,
) -> c_int {
    // SAFETY: As for QPs: a CQ of a device of `T`, not destroyed during the call.
    let (dev, cq) = unsafe { (Cq::<T>::device::<T>(cq), Cq::<T>::from_raw(cq)) };
    // SAFETY: The core's message for this op.
    unsafe { with_nest(msg, |out| T::fill_res_cq(dev, cq, out)) }
}

pub(super) unsafe extern "C" fn fill_res_mr_callback<T: DeviceOps>(
    msg: *mut bindings::sk_buff,
    mr: *mut bindings::ib_mr,
) -> c_int {
    // SAFETY: An MR the driver made, of a device of `T`; the core takes it out of its table
    // before it deregisters it, which waits for this call.
    let (dev, mr) = unsafe { (Mr::<T>::device::<T>(mr), Mr::<T>::from_raw(mr)) };
    // SAFETY: The core's message for this op.
    unsafe { with_nest(msg, |out| T::fill_res_mr(dev, mr, out)) }
}

pub(super) unsafe extern "C" fn fill_res_cm_id_callback<T: DeviceOps>(
    msg: *mut bindings::sk_buff,
    cm_id: *mut bindings::rdma_cm_id,
) -> c_int {
    // SAFETY: A cm_id the core holds in its resource table, on a device of `T`; its
    // iw_cm_id, if it has one, is destroyed only after the cm_id left the table.
    let iw = unsafe { bindings::rdma_iw_cm_id(cm_id) };
    let Some(id) = NonNull::new(iw) else {
        return 0;
    };
    // SAFETY: The iw_cm_id is live (above) and belongs to the cm_id's device, ours.
    let dev = unsafe { Device::<T>::from_raw((*id.as_ptr()).device) };
    let view = CmIdView {
        id,
        _id: PhantomData,
    };
    // SAFETY: The core's message for this op.
    unsafe { with_nest(msg, |out| T::fill_res_cm_id(dev, &view, out)) }
}
