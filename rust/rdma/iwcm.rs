// SPDX-License-Identifier: GPL-2.0

//! The iWARP connection manager (`iw_cm`) as a provider sees it: the connect, accept,
//! reject and listen hooks, the `struct iw_cm_id` they act on, and the events the provider
//! reports back.
//!
//! The connection manager's rules a provider keeps (drivers/infiniband/core/iwcm.c): a
//! listening id gets `ConnectRequest`s (status 0 always); an id the provider was asked to
//! connect gets exactly one `ConnectReply`, and, if that succeeded, one `Close` at the
//! end; an id whose connection the provider accepted gets `Established`, then `Close`; a
//! rejected one gets nothing. `Disconnect` may come between.

use super::device::{Device, DeviceOps};
use crate::kernel_ext::bindings;
use crate::kernel_ext::socket::SocketAddr;
use core::ffi::{c_int, c_void};
use core::ptr::NonNull;
use kernel::error::from_result;
use kernel::prelude::*;

/// A reference to a connection manager id (`cm_id->add_ref`), released on drop.
///
/// # Invariants
///
/// `id` is a live `struct iw_cm_id` on which this object holds one reference.
pub struct CmId {
    id: NonNull<bindings::iw_cm_id>,
}

// SAFETY: The connection manager takes its own lock around everything it does with an id;
// its event handler may be called from any context.
unsafe impl Send for CmId {}
// SAFETY: As above.
unsafe impl Sync for CmId {}

/// The kinds of event a provider reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmEventKind {
    ConnectRequest,
    ConnectReply,
    Established,
    Disconnect,
    Close,
}

/// An event for the connection manager.
pub struct CmEvent<'a> {
    pub kind: CmEventKind,
    /// 0 or a negative errno (`-ECONNREFUSED`, `-ECONNRESET`, `-ETIMEDOUT`...).
    pub status: i32,
    pub local: Option<SocketAddr>,
    pub remote: Option<SocketAddr>,
    /// At most 255 bytes; the connection manager copies them.
    pub private_data: &'a [u8],
    /// Handed back as [`CmId::provider_data`] of the id created for a `ConnectRequest`.
    pub provider_data: usize,
    pub ird: u8,
    pub ord: u8,
}

impl CmEvent<'_> {
    /// An event with no addresses, data or parameters.
    pub fn new(kind: CmEventKind, status: i32) -> Self {
        Self {
            kind,
            status,
            local: None,
            remote: None,
            private_data: &[],
            provider_data: 0,
            ird: 0,
            ord: 0,
        }
    }
}

/// Connection parameters of a connect or accept.
pub struct ConnParam<'a> {
    pub private_data: &'a [u8],
    pub ord: u32,
    pub ird: u32,
    pub qpn: u32,
}

impl CmId {
    /// Takes a reference to `id`.
    ///
    /// # Safety
    ///
    /// `id` is a live id the connection manager passed to a provider hook.
    unsafe fn from_hook(id: *mut bindings::iw_cm_id) -> Result<Self> {
        let id = NonNull::new(id).ok_or(EINVAL)?;
        // SAFETY: A live id; the connection manager always sets `add_ref` for providers.
        unsafe {
            let add_ref = (*id.as_ptr()).add_ref.ok_or(EINVAL)?;
            add_ref(id.as_ptr());
        }
        Ok(Self { id })
    }

    pub(super) fn raw(&self) -> *mut bindings::iw_cm_id {
        self.id.as_ptr()
    }

    /// The local address, as the provider uses it (`m_local_addr`).
    pub fn local_addr(&self) -> Result<SocketAddr> {
        // SAFETY: Live (type invariant); set before the hook was called, not changed after.
        SocketAddr::from_storage(unsafe { &(*self.raw()).m_local_addr })
    }

    /// The remote address, as the provider uses it (`m_remote_addr`).
    pub fn remote_addr(&self) -> Result<SocketAddr> {
        // SAFETY: As above.
        SocketAddr::from_storage(unsafe { &(*self.raw()).m_remote_addr })
    }

    /// Whether a listen on an IPv6 address leaves the IPv4 port free (`rdma_set_afonly()`,
    /// or the namespace's `bindv6only`), as an `IPV6_V6ONLY` socket does.
    pub fn af_only(&self) -> bool {
        // SAFETY: Live; the bit is set before the listen hook is called, not changed after.
        unsafe { (*self.raw()).afonly() }
    }

    /// What the provider stored in the id (or, for an id created for a connection request,
    /// the event's `provider_data`).
    pub fn provider_data(&self) -> usize {
        // SAFETY: Live; the provider's own field, written only by hooks of this id, which
        // the connection manager serialises. Read once: resource tracking reads it too.
        unsafe { core::ptr::addr_of!((*self.raw()).provider_data).read_volatile() as usize }
    }

    /// Stores `value` in the id for later hooks (and for resource tracking to find the
    /// provider's object by).
    pub fn set_provider_data(&self, value: usize) {
        // SAFETY: As above; written once, as resource tracking may read it meanwhile.
        unsafe {
            core::ptr::addr_of_mut!((*self.raw()).provider_data)
                .write_volatile(value as *mut c_void)
        };
    }

    /// Reports `event` (the connection manager queues it for its own work queue).
    pub fn report(&self, event: &CmEvent<'_>) -> Result {
        let len = u8::try_from(event.private_data.len()).map_err(|_| EINVAL)?;
        let mut ev = bindings::iw_cm_event {
            event: match event.kind {
                CmEventKind::ConnectRequest => {
                    bindings::iw_cm_event_type_IW_CM_EVENT_CONNECT_REQUEST
                }
                CmEventKind::ConnectReply => bindings::iw_cm_event_type_IW_CM_EVENT_CONNECT_REPLY,
                CmEventKind::Established => bindings::iw_cm_event_type_IW_CM_EVENT_ESTABLISHED,
                CmEventKind::Disconnect => bindings::iw_cm_event_type_IW_CM_EVENT_DISCONNECT,
                CmEventKind::Close => bindings::iw_cm_event_type_IW_CM_EVENT_CLOSE,
            },
            status: event.status,
            private_data: event.private_data.as_ptr().cast_mut().cast(),
            private_data_len: len,
            provider_data: event.provider_data as *mut c_void,
            ird: event.ird,
            ord: event.ord,
            ..Default::default()
        };
        if let Some(a) = event.local {
            ev.local_addr = a.to_storage();
        }
        if let Some(a) = event.remote {
            ev.remote_addr = a.to_storage();
        }
        // SAFETY: Live id; the handler is set by the connection manager before any hook and
        // copies the event and its private data before returning.
        let ret = unsafe {
            let handler = (*self.raw()).event_handler.ok_or(EINVAL)?;
            handler(self.raw(), &mut ev)
        };
        if ret != 0 {
            return Err(Error::from_errno(ret));
        }
        Ok(())
    }
}

impl Clone for CmId {
    fn clone(&self) -> Self {
        // SAFETY: Live; `add_ref` is set (checked when the first reference was taken).
        unsafe {
            if let Some(add_ref) = (*self.raw()).add_ref {
                add_ref(self.raw());
            }
        }
        Self { id: self.id }
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        // SAFETY: Releases our reference; the id may be freed right after.
        unsafe {
            if let Some(rem_ref) = (*self.raw()).rem_ref {
                rem_ref(self.raw());
            }
        }
    }
}

/// Reads the connection parameters of a hook.
///
/// # Safety
///
/// `param` is valid for the call, its private data too.
unsafe fn conn_param<'a>(param: *const bindings::iw_cm_conn_param) -> Result<ConnParam<'a>> {
    // SAFETY: Per the function's safety requirements.
    let p = unsafe { param.as_ref() }.ok_or(EINVAL)?;
    let len = usize::from(p.private_data_len);
    let private_data = if len == 0 || p.private_data.is_null() {
        &[][..]
    } else {
        // SAFETY: The consumer's buffer of `private_data_len` bytes.
        unsafe { core::slice::from_raw_parts(p.private_data.cast::<u8>(), len) }
    };
    Ok(ConnParam {
        private_data,
        ord: p.ord,
        ird: p.ird,
        qpn: p.qpn,
    })
}

/// The device of an id a hook got.
///
/// # Safety
///
/// `id` is live and belongs to a device of `T`.
unsafe fn device<'a, T: DeviceOps>(id: *mut bindings::iw_cm_id) -> &'a Device<T> {
    // SAFETY: Per the function's safety requirements.
    unsafe { Device::from_raw((*id).device) }
}

/// A connect or accept hook: the id, its device and the connection parameters.
///
/// # Safety
///
/// The connection manager calls the hook with a live id of a device of `T` and
/// parameters valid for the call.
unsafe fn conn_hook<T: DeviceOps>(
    id: *mut bindings::iw_cm_id,
    param: *mut bindings::iw_cm_conn_param,
    hook: fn(&Device<T>, CmId, &ConnParam<'_>) -> Result,
) -> c_int {
    from_result(|| {
        // SAFETY: Per the function's safety requirements.
        let (dev, param, id) =
            unsafe { (device::<T>(id), conn_param(param)?, CmId::from_hook(id)?) };
        hook(dev, id, &param)?;
        Ok(0)
    })
}

pub(super) unsafe extern "C" fn iw_connect_callback<T: DeviceOps>(
    id: *mut bindings::iw_cm_id,
    param: *mut bindings::iw_cm_conn_param,
) -> c_int {
    // SAFETY: Called by the connection manager, as `conn_hook` requires.
    unsafe { conn_hook::<T>(id, param, T::iw_connect) }
}

pub(super) unsafe extern "C" fn iw_accept_callback<T: DeviceOps>(
    id: *mut bindings::iw_cm_id,
    param: *mut bindings::iw_cm_conn_param,
) -> c_int {
    // SAFETY: Called by the connection manager, as `conn_hook` requires.
    unsafe { conn_hook::<T>(id, param, T::iw_accept) }
}

pub(super) unsafe extern "C" fn iw_reject_callback<T: DeviceOps>(
    id: *mut bindings::iw_cm_id,
    pdata: *const c_void,
    len: u8,
) -> c_int {
    from_result(|| {
        let private_data = if pdata.is_null() {
            &[][..]
        } else {
            // SAFETY: The consumer's buffer of `len` bytes, valid for the call.
            unsafe { core::slice::from_raw_parts(pdata.cast::<u8>(), usize::from(len)) }
        };
        // SAFETY: As for `iw_connect_callback`.
        let (dev, id) = unsafe { (device::<T>(id), CmId::from_hook(id)?) };
        T::iw_reject(dev, &id, private_data)?;
        Ok(0)
    })
}

pub(super) unsafe extern "C" fn iw_create_listen_callback<T: DeviceOps>(
    id: *mut bindings::iw_cm_id,
    backlog: c_int,
) -> c_int {
    from_result(|| {
        // SAFETY: As for `iw_connect_callback`.
        let (dev, id) = unsafe { (device::<T>(id), CmId::from_hook(id)?) };
        T::iw_create_listen(dev, id, u32::try_from(backlog).unwrap_or(0))?;
        Ok(0)
    })
}

pub(super) unsafe extern "C" fn iw_destroy_listen_callback<T: DeviceOps>(
    id: *mut bindings::iw_cm_id,
) -> c_int {
    from_result(|| {
        // SAFETY: As for `iw_connect_callback`.
        let (dev, id) = unsafe { (device::<T>(id), CmId::from_hook(id)?) };
        T::iw_destroy_listen(dev, &id);
        Ok(0)
    })
}
