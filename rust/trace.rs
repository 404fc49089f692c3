// SPDX-License-Identifier: GPL-2.0

//! riw's trace events (`/sys/kernel/tracing/events/riw/`), defined in rust/riw_trace.h
//! and instantiated in rust/trace.c. Each function first reads its event's static key:
//! with the event disabled (or the kernel built without tracepoints) a call costs a load
//! and a branch, and builds nothing.

use super::bindings;
use super::rdma::{Device, DeviceOps, QpState};
use super::socket::SocketAddr;
use kernel::str::CStr;

/// Whether the tracepoint `$tp` is enabled: its static key's count, as
/// `static_key_enabled()` reads it.
macro_rules! enabled {
    ($tp:ident) => {{
        #[cfg(CONFIG_TRACEPOINTS)]
        // SAFETY: `$tp` is a tracepoint this module defines (rust/trace.c), alive as long
        // as the module's code runs; its key's count is an `atomic_t`, which the core
        // changes atomically and which is read here atomically.
        let on = unsafe {
            core::sync::atomic::AtomicI32::from_ptr(core::ptr::addr_of_mut!(
                bindings::$tp.key.enabled.counter
            ))
            .load(core::sync::atomic::Ordering::Relaxed)
                > 0
        };
        #[cfg(not(CONFIG_TRACEPOINTS))]
        let on = false;
        on
    }};
}

/// What a trace record belongs to: an RDMA device, or an object of one.
pub trait OnDevice {
    /// The `struct ib_device`, alive while `self` is.
    fn ib_device(&self) -> *mut bindings::ib_device;
}

impl<T: DeviceOps> OnDevice for Device<T> {
    fn ib_device(&self) -> *mut bindings::ib_device {
        self.as_raw()
    }
}

impl<C: super::rdma::CoreObject, D> OnDevice for super::rdma::Object<C, D> {
    fn ib_device(&self) -> *mut bindings::ib_device {
        // SAFETY: `self` is a live object.
        unsafe { C::device(self.as_raw()) }
    }
}

/// Which MPA frame.
#[derive(Clone, Copy, Debug)]
pub enum MpaKind {
    Request = 0,
    Reply = 1,
    Reject = 2,
}

/// An MPA frame sent or received, and the parameters it carries.
#[derive(Clone, Copy)]
pub struct MpaRecord {
    pub endpoint: u32,
    pub sent: bool,
    pub kind: MpaKind,
    pub revision: u8,
    pub crc: bool,
    pub markers: bool,
    pub peer_to_peer: bool,
    /// The ready-to-receive bits of the enhanced header (RFC 6581).
    pub rtr: u8,
    pub ird: u16,
    pub ord: u16,
    pub private_data_len: u16,
    pub peer: Option<SocketAddr>,
}

/// `riw_mpa`.
#[inline]
pub fn mpa(on: &impl OnDevice, r: &MpaRecord) {
    if !enabled!(__tracepoint_riw_mpa) {
        return;
    }
    let peer = r.peer.map(|a| a.to_storage()).unwrap_or_default();
    // SAFETY: The device is alive while `on` is borrowed; `peer` is a sockaddr_storage
    // on our stack, read during the call only.
    unsafe {
        bindings::riw_trace_mpa(
            on.ib_device(),
            r.endpoint,
            r.sent,
            r.kind as u8,
            r.revision,
            r.crc,
            r.markers,
            r.peer_to_peer,
            r.rtr,
            r.ird,
            r.ord,
            r.private_data_len,
            core::ptr::addr_of!(peer).cast(),
        )
    };
}

/// The ready-to-receive message's type (`riw_rtr`'s `mode`).
#[derive(Clone, Copy, Debug)]
pub enum RtrKind {
    Write = 0,
    Read = 1,
    Send = 2,
}

/// `riw_rtr`: a ready-to-receive message sent or received.
#[inline]
pub fn rtr(on: &impl OnDevice, qpn: u32, sent: bool, mode: RtrKind) {
    if enabled!(__tracepoint_riw_rtr) {
        // SAFETY: The device is alive while `on` is borrowed.
        unsafe { bindings::riw_trace_rtr(on.ib_device(), qpn, sent, mode as u8) };
    }
}

/// `riw_qp_state`: QP `qpn` went from `old` to `new` because of `cause`.
#[inline]
pub fn qp_state(on: &impl OnDevice, qpn: u32, old: QpState, new: QpState, cause: &CStr) {
    if enabled!(__tracepoint_riw_qp_state) {
        // SAFETY: The device is alive while `on` is borrowed; `cause` is NUL-terminated.
        unsafe {
            bindings::riw_trace_qp_state(
                on.ib_device(),
                qpn,
                old.to_raw() as u8,
                new.to_raw() as u8,
                cause.as_char_ptr().cast(),
            )
        };
    }
}

/// `riw_terminate`: a Terminate sent or received, with its cause's fields.
#[inline]
pub fn terminate(on: &impl OnDevice, qpn: u32, sent: bool, layer: u8, etype: u8, code: u8) {
    if enabled!(__tracepoint_riw_terminate) {
        // SAFETY: The device is alive while `on` is borrowed.
        unsafe { bindings::riw_trace_terminate(on.ib_device(), qpn, sent, layer, etype, code) };
    }
}

/// `riw_crc_error`: an FPDU whose CRC did not match.
#[inline]
pub fn crc_error(on: &impl OnDevice, qpn: u32, computed: u32, received: u32) {
    if enabled!(__tracepoint_riw_crc_error) {
        // SAFETY: The device is alive while `on` is borrowed.
        unsafe { bindings::riw_trace_crc_error(on.ib_device(), qpn, computed, received) };
    }
}

/// `riw_conn_close`: a connection ends (`abort`: with a reset), with its status and why.
#[inline]
pub fn conn_close(on: &impl OnDevice, qpn: u32, abort: bool, status: i32, reason: &CStr) {
    if enabled!(__tracepoint_riw_conn_close) {
        // SAFETY: The device is alive while `on` is borrowed; `reason` is NUL-terminated.
        unsafe {
            bindings::riw_trace_conn_close(
                on.ib_device(),
                qpn,
                abort,
                status,
                reason.as_char_ptr().cast(),
            )
        };
    }
}

/// `riw_sock_backpressure`: the socket's send queue filled up (`full`) or drained.
#[inline]
pub fn sock_backpressure(on: &impl OnDevice, qpn: u32, full: bool) {
    if enabled!(__tracepoint_riw_sock_backpressure) {
        // SAFETY: The device is alive while `on` is borrowed.
        unsafe { bindings::riw_trace_sock_backpressure(on.ib_device(), qpn, full) };
    }
}

/// Whether `riw_post` is enabled: its callers skip adding up lengths when not.
#[inline]
pub fn post_enabled() -> bool {
    enabled!(__tracepoint_riw_post)
}

/// `riw_post`: a work request riw takes from a queue (`recv`: the receive queue).
#[inline]
pub fn post(on: &impl OnDevice, qpn: u32, recv: bool, wr_id: u64, opcode: u8, length: u32) {
    if enabled!(__tracepoint_riw_post) {
        // SAFETY: The device is alive while `on` is borrowed.
        unsafe { bindings::riw_trace_post(on.ib_device(), qpn, recv, wr_id, opcode, length) };
    }
}

/// `riw_complete`: a completion written to a CQ.
#[inline]
pub fn complete(on: &impl OnDevice, qpn: u32, wr_id: u64, opcode: u8, length: u32, status: u16) {
    if enabled!(__tracepoint_riw_complete) {
        // SAFETY: The device is alive while `on` is borrowed.
        unsafe { bindings::riw_trace_complete(on.ib_device(), qpn, wr_id, opcode, length, status) };
    }
}
