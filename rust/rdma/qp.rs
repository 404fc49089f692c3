// SPDX-License-Identifier: GPL-2.0

//! Queue pairs and shared receive queues: their attributes in Rust terms and the C
//! trampolines of their ops.

use super::device::{Device, DeviceOps, Mtu};
use super::object::Object;
use super::ucontext::UData;
use super::verbs::Cq;
use super::wr::{RecvChain, SendChain};
use crate::kernel_ext::bindings;
use crate::kernel_ext::errno::EOPNOTSUPP;
use crate::kernel_ext::workqueue::Completion;
use core::ffi::c_int;
use core::marker::PhantomData;
use core::ops::Deref;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicUsize, Ordering};
use kernel::error::from_result;
use kernel::prelude::*;

/// A queue pair of driver `T`.
pub type Qp<T> = Object<bindings::ib_qp, QpCell<<T as DeviceOps>::Qp>>;

/// A QP's driver data and the references held on the QP: the core's own, the iWARP
/// connection manager's (`iw_add_ref`) and the driver's [`QpRef`]s. Destroying a QP waits
/// until all but the core's are gone, so a reference keeps the QP's memory alive.
#[pin_data]
pub struct QpCell<D> {
    refs: AtomicUsize,
    #[pin]
    released: Completion,
    #[pin]
    data: D,
}

impl<D> Deref for QpCell<D> {
    type Target = D;

    fn deref(&self) -> &D {
        &self.data
    }
}

impl<D> QpCell<D> {
    fn new(data: impl PinInit<D, Error>) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            refs: AtomicUsize::new(1),
            released <- Completion::new(),
            data <- data,
        })
    }

    fn get(&self) {
        self.refs.fetch_add(1, Ordering::Relaxed);
    }

    fn put(&self) {
        if self.refs.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.released.complete();
        }
    }
}

/// A reference to a queue pair of driver `T`, which keeps it from being destroyed.
///
/// # Invariants
///
/// `qp` is a live QP of a device of `T` on which this object holds one reference
/// (`QpCell::refs`).
pub struct QpRef<T: DeviceOps> {
    qp: NonNull<bindings::ib_qp>,
    _qp: PhantomData<T>,
}

// SAFETY: The QP is shared with the core and other threads anyway; its driver data is
// `Send + Sync` (required by `DeviceOps`).
unsafe impl<T: DeviceOps> Send for QpRef<T> {}
// SAFETY: As above.
unsafe impl<T: DeviceOps> Sync for QpRef<T> {}

impl<T: DeviceOps> Deref for QpRef<T> {
    type Target = Qp<T>;

    fn deref(&self) -> &Qp<T> {
        // SAFETY: Live while we hold the reference (type invariant).
        unsafe { Qp::<T>::from_raw(self.qp.as_ptr()) }
    }
}

impl<T: DeviceOps> Clone for QpRef<T> {
    fn clone(&self) -> Self {
        self.deref().get_cell().get();
        Self {
            qp: self.qp,
            _qp: PhantomData,
        }
    }
}

impl<T: DeviceOps> Drop for QpRef<T> {
    fn drop(&mut self) {
        self.deref().get_cell().put();
    }
}

impl<D> Object<bindings::ib_qp, QpCell<D>> {
    fn get_cell(&self) -> &QpCell<D> {
        self
    }

    /// A new reference to this QP.
    pub fn new_ref<T: DeviceOps>(&self) -> QpRef<T>
    where
        Self: IsQpOf<T>,
    {
        self.get_cell().get();
        QpRef {
            // `repr(C)` with the C object first: the object's address is the `ib_qp`'s.
            qp: NonNull::from(self).cast(),
            _qp: PhantomData,
        }
    }
}

impl<D> Object<bindings::ib_qp, D> {
    /// Reports a fatal error of the QP to its consumer (`IB_EVENT_QP_FATAL`).
    pub fn report_fatal(&self) {
        let qp = self.as_raw();
        // SAFETY: A live QP; the core set the handler (possibly none), its context and the
        // device at creation. The handler copies what it keeps of the event.
        unsafe {
            if let Some(handler) = (*qp).event_handler {
                let mut event = bindings::ib_event {
                    device: (*qp).device,
                    event: bindings::ib_event_type_IB_EVENT_QP_FATAL,
                    ..Default::default()
                };
                event.element.qp = qp;
                handler(&mut event, (*qp).qp_context);
            }
        }
    }

    /// The shared receive queue the QP takes its receives from, if any.
    pub fn srq<T: DeviceOps>(&self) -> Option<&Srq<T>>
    where
        Self: IsQpOf<T>,
    {
        // SAFETY: Set by the core at creation; it holds the SRQ (its use count) until the
        // QP is destroyed, and it is an SRQ of the QP's device, of driver `T`.
        unsafe {
            let srq = (*self.as_raw()).srq;
            (!srq.is_null()).then(|| Srq::<T>::from_raw(srq))
        }
    }
}

impl<T: DeviceOps> Device<T> {
    /// A reference to the QP numbered `qp_num`, unless it is gone or being destroyed.
    pub fn qp_ref(&self, qp_num: u32) -> Option<QpRef<T>> {
        let qp = self.lookup_qp_locked(qp_num, |qp| {
            // SAFETY: Under the table lock a listed QP is not destroyed yet (destruction
            // unlists it first), so its data is alive and the core's reference held.
            unsafe { Qp::<T>::from_raw(qp) }.get_cell().get();
        })?;
        Some(QpRef {
            qp,
            _qp: PhantomData,
        })
    }
}

impl<D> Object<bindings::ib_srq, D> {
    /// Reports that fewer receives than the armed limit remain
    /// (`IB_EVENT_SRQ_LIMIT_REACHED`).
    pub fn report_limit_reached(&self) {
        let srq = self.as_raw();
        // SAFETY: A live SRQ; the core set the handler (possibly none), its context and the
        // device at creation. The handler copies what it keeps of the event.
        unsafe {
            if let Some(handler) = (*srq).event_handler {
                let mut event = bindings::ib_event {
                    device: (*srq).device,
                    event: bindings::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED,
                    ..Default::default()
                };
                event.element.srq = srq;
                handler(&mut event, (*srq).srq_context);
            }
        }
    }
}
/// A shared receive queue of driver `T`.
pub type Srq<T> = Object<bindings::ib_srq, <T as DeviceOps>::Srq>;

/// Work queue sizes (`struct ib_qp_cap`).
#[derive(Clone, Copy, Debug, Default)]
pub struct QpCaps {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// What a consumer asks of a new queue pair.
#[derive(Clone, Copy, Debug)]
pub struct QpInit {
    /// Reliable connected: the only type iWARP has.
    pub is_rc: bool,
    pub caps: QpCaps,
    /// Every send work request completes with a CQE (`IB_SIGNAL_ALL_WR`).
    pub sig_all: bool,
    /// Receives come from a shared receive queue.
    pub has_srq: bool,
    /// `ib_qp_create_flags`; none is supported.
    pub create_flags: u32,
}

/// A queue pair state (`enum ib_qp_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpState {
    Reset,
    Init,
    Rtr,
    Rts,
    Sqd,
    Sqe,
    Error,
}

impl QpState {
    fn from_raw(raw: bindings::ib_qp_state) -> Result<Self> {
        Ok(match raw {
            bindings::ib_qp_state_IB_QPS_RESET => Self::Reset,
            bindings::ib_qp_state_IB_QPS_INIT => Self::Init,
            bindings::ib_qp_state_IB_QPS_RTR => Self::Rtr,
            bindings::ib_qp_state_IB_QPS_RTS => Self::Rts,
            bindings::ib_qp_state_IB_QPS_SQD => Self::Sqd,
            bindings::ib_qp_state_IB_QPS_SQE => Self::Sqe,
            bindings::ib_qp_state_IB_QPS_ERR => Self::Error,
            _ => return Err(EINVAL),
        })
    }

    pub(crate) fn to_raw(self) -> bindings::ib_qp_state {
        match self {
            Self::Reset => bindings::ib_qp_state_IB_QPS_RESET,
            Self::Init => bindings::ib_qp_state_IB_QPS_INIT,
            Self::Rtr => bindings::ib_qp_state_IB_QPS_RTR,
            Self::Rts => bindings::ib_qp_state_IB_QPS_RTS,
            Self::Sqd => bindings::ib_qp_state_IB_QPS_SQD,
            Self::Sqe => bindings::ib_qp_state_IB_QPS_SQE,
            Self::Error => bindings::ib_qp_state_IB_QPS_ERR,
        }
    }
}

/// A `modify_qp` request: the attributes present in its mask.
#[derive(Clone, Copy, Debug, Default)]
pub struct QpModify {
    pub state: Option<QpState>,
    /// The state the consumer believes the QP is in.
    pub cur_state: Option<QpState>,
    pub access_flags: Option<u32>,
    pub port: Option<u32>,
    pub pkey_index: Option<u16>,
    /// Outbound RDMA READ depth (ORD).
    pub max_rd_atomic: Option<u32>,
    /// Inbound RDMA READ depth (IRD).
    pub max_dest_rd_atomic: Option<u32>,
    /// New queue sizes (`IB_QP_CAP`).
    pub cap: Option<QpCaps>,
}

/// What `query_qp` reports.
#[derive(Clone, Copy, Debug)]
pub struct QpAttr {
    pub state: QpState,
    /// The send queue is draining (SQD entered, work still going out).
    pub sq_draining: bool,
    /// The path's MTU, from the netdev.
    pub path_mtu: Mtu,
    pub access_flags: u32,
    pub caps: QpCaps,
    pub max_rd_atomic: u32,
    pub max_dest_rd_atomic: u32,
    pub sig_all: bool,
}

/// Shared receive queue attributes (`struct ib_srq_attr`).
#[derive(Clone, Copy, Debug, Default)]
pub struct SrqAttr {
    pub max_wr: u32,
    pub max_sge: u32,
    /// Raise `IB_EVENT_SRQ_LIMIT_REACHED` when fewer receives remain; 0: disarmed.
    pub srq_limit: u32,
}

/// A `modify_srq` request.
#[derive(Clone, Copy, Debug, Default)]
pub struct SrqModify {
    /// Resize to this many entries (`IB_SRQ_MAX_WR`).
    pub max_wr: Option<u32>,
    /// Arm the limit event (`IB_SRQ_LIMIT`).
    pub srq_limit: Option<u32>,
}

fn caps_from_raw(cap: &bindings::ib_qp_cap) -> QpCaps {
    QpCaps {
        max_send_wr: cap.max_send_wr,
        max_recv_wr: cap.max_recv_wr,
        max_send_sge: cap.max_send_sge,
        max_recv_sge: cap.max_recv_sge,
        max_inline_data: cap.max_inline_data,
    }
}

fn caps_to_raw(caps: &QpCaps, cap: &mut bindings::ib_qp_cap) {
    cap.max_send_wr = caps.max_send_wr;
    cap.max_recv_wr = caps.max_recv_wr;
    cap.max_send_sge = caps.max_send_sge;
    cap.max_recv_sge = caps.max_recv_sge;
    cap.max_inline_data = caps.max_inline_data;
}

impl<D> Object<bindings::ib_qp, D> {
    /// The QP number.
    pub fn qp_num(&self) -> u32 {
        // SAFETY: Set at creation, never changed.
        unsafe { (*self.as_raw()).qp_num }
    }

    /// The completion queue of the send queue.
    pub fn send_cq<T: DeviceOps>(&self) -> &Cq<T>
    where
        Self: IsQpOf<T>,
    {
        // SAFETY: The core sets `send_cq` before creation and holds the CQ (its use count)
        // until the QP is destroyed; it is a CQ of the QP's device, of driver `T`.
        unsafe { Cq::<T>::from_raw((*self.as_raw()).send_cq) }
    }

    /// The protection domain of the QP.
    pub fn pd<T: DeviceOps>(&self) -> &super::verbs::Pd<T>
    where
        Self: IsQpOf<T>,
    {
        // SAFETY: The core sets `pd` before creation and holds the PD (its use count) until
        // the QP is destroyed; it is a PD of the QP's device, of driver `T`.
        unsafe { super::verbs::Pd::<T>::from_raw((*self.as_raw()).pd) }
    }

    /// The completion queue of the receive queue (or of the SRQ's receives).
    pub fn recv_cq<T: DeviceOps>(&self) -> &Cq<T>
    where
        Self: IsQpOf<T>,
    {
        // SAFETY: As for `send_cq`.
        unsafe { Cq::<T>::from_raw((*self.as_raw()).recv_cq) }
    }
}

/// The iWARP connection manager's references on a QP (`iw_add_ref`, `iw_rem_ref`).
pub(super) unsafe extern "C" fn iw_add_ref_callback<T: DeviceOps>(qp: *mut bindings::ib_qp) {
    // SAFETY: The connection manager passes a QP of a device of `T` it got from `iw_get_qp`
    // and that its consumer has not destroyed.
    unsafe { Qp::<T>::from_raw(qp) }.get_cell().get();
}

pub(super) unsafe extern "C" fn iw_rem_ref_callback<T: DeviceOps>(qp: *mut bindings::ib_qp) {
    // SAFETY: Drops a reference `iw_add_ref_callback` took; the QP lives until then.
    unsafe { Qp::<T>::from_raw(qp) }.get_cell().put();
}

pub(super) unsafe extern "C" fn iw_get_qp_callback<T: DeviceOps>(
    ib: *mut bindings::ib_device,
    qpn: c_int,
) -> *mut bindings::ib_qp {
    // SAFETY: The core calls device ops only on live devices of this driver.
    let dev = unsafe { Device::<T>::from_raw(ib) };
    u32::try_from(qpn).map_or(core::ptr::null_mut(), |qpn| dev.qp_ptr(qpn))
}

/// `Qp<T>` is the QP type of driver `T` (ties a QP's CQs to the same driver).
pub trait IsQpOf<T: DeviceOps> {}
impl<T: DeviceOps> IsQpOf<T> for Qp<T> {}

pub(super) unsafe extern "C" fn create_qp_callback<T: DeviceOps>(
    qp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_init_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: The core hands a zeroed QP of our size on a device of `T` (with `pd`,
        // CQs and SRQ already set) and the consumer's attributes, which it reads back.
        let (dev, attr, mut udata) = unsafe {
            (
                Qp::<T>::device::<T>(qp),
                &mut *attr,
                UData::from_nullable(udata),
            )
        };
        let init = QpInit {
            is_rc: attr.qp_type == bindings::ib_qp_type_IB_QPT_RC,
            caps: caps_from_raw(&attr.cap),
            sig_all: match attr.sq_sig_type {
                bindings::ib_sig_type_IB_SIGNAL_ALL_WR => true,
                bindings::ib_sig_type_IB_SIGNAL_REQ_WR => false,
                _ => return Err(EINVAL),
            },
            has_srq: !attr.srq.is_null(),
            create_flags: attr.create_flags,
        };
        let (qp_num, caps, data) = T::create_qp(dev, &init, udata.as_mut())?;
        // SAFETY: A fresh QP of `size_ib_qp` bytes.
        unsafe {
            Qp::<T>::init(qp, QpCell::new(data))?;
            (*qp).qp_num = qp_num;
        }
        if let Err(e) = dev.insert_qp(qp_num, qp) {
            // SAFETY: Initialised above, never published: undo it.
            unsafe {
                T::destroy_qp(dev, Qp::<T>::from_raw(qp));
                Qp::<T>::from_raw(qp).get_cell().put();
                Qp::<T>::drop_data(qp);
            }
            return Err(e);
        }
        caps_to_raw(&caps, &mut attr.cap);
        Ok(0)
    })
}

pub(super) unsafe extern "C" fn destroy_qp_callback<T: DeviceOps>(
    qp: *mut bindings::ib_qp,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: A QP set up by `create_qp_callback`, destroyed once. Unlisted first, so no
    // new reference is taken; the driver's `destroy_qp` makes its holders let go, and the
    // data is dropped once the last reference is gone.
    unsafe {
        let dev = Qp::<T>::device::<T>(qp);
        dev.remove_qp((*qp).qp_num);
        let q = Qp::<T>::from_raw(qp);
        T::destroy_qp(dev, q);
        q.get_cell().put();
        q.get_cell().released.wait();
        Qp::<T>::drop_data(qp);
    }
    0
}

pub(super) unsafe extern "C" fn modify_qp_callback<T: DeviceOps>(
    qp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    mask: c_int,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: A live QP of a device of `T`; `attr` holds the fields in `mask`.
        let (dev, qp, attr, mut udata) = unsafe {
            (
                Qp::<T>::device::<T>(qp),
                Qp::<T>::from_raw(qp),
                &*attr,
                UData::from_nullable(udata),
            )
        };
        if let Some(udata) = udata.as_mut() {
            // No driver-specific input is defined for modify_qp.
            udata.request::<[u8; 0]>()?;
        }
        let mask = mask as u32;
        let has = |bit: u32| mask & bit != 0;
        // Attributes of the InfiniBand transport (address vectors, PSNs, timers, the
        // remote QP number, Q_Key, path migration) mean nothing on iWARP: ignored, as siw
        // and iw_cxgb4 ignore them. Bits beyond the standard ones are refused.
        if mask & !(bindings::ib_qp_attr_mask_IB_QP_ATTR_STANDARD_BITS as u32) != 0 {
            return Err(EOPNOTSUPP());
        }
        let modify = QpModify {
            state: has(bindings::ib_qp_attr_mask_IB_QP_STATE)
                .then(|| QpState::from_raw(attr.qp_state))
                .transpose()?,
            cur_state: has(bindings::ib_qp_attr_mask_IB_QP_CUR_STATE)
                .then(|| QpState::from_raw(attr.cur_qp_state))
                .transpose()?,
            access_flags: has(bindings::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS)
                .then_some(attr.qp_access_flags as u32),
            port: has(bindings::ib_qp_attr_mask_IB_QP_PORT).then_some(u32::from(attr.port_num)),
            pkey_index: has(bindings::ib_qp_attr_mask_IB_QP_PKEY_INDEX).then_some(attr.pkey_index),
            max_rd_atomic: has(bindings::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC)
                .then_some(u32::from(attr.max_rd_atomic)),
            max_dest_rd_atomic: has(bindings::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC)
                .then_some(u32::from(attr.max_dest_rd_atomic)),
            cap: has(bindings::ib_qp_attr_mask_IB_QP_CAP).then(|| caps_from_raw(&attr.cap)),
        };
        T::modify_qp(dev, qp, &modify)?;
        Ok(0)
    })
}

pub(super) unsafe extern "C" fn query_qp_callback<T: DeviceOps>(
    qp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    _mask: c_int,
    init_attr: *mut bindings::ib_qp_init_attr,
) -> c_int {
    // SAFETY: A live QP of a device of `T`; both outputs are the core's to fill.
    let (q, attr, init_attr) = unsafe {
        let q = T::query_qp(Qp::<T>::device::<T>(qp), Qp::<T>::from_raw(qp));
        (q, &mut *attr, &mut *init_attr)
    };
    // The core does not clear them (uverbs allocates them, netlink has them on its
    // stack): what iWARP does not define reads as zero, not as stale memory.
    *attr = bindings::ib_qp_attr::default();
    *init_attr = bindings::ib_qp_init_attr::default();
    attr.qp_state = q.state.to_raw();
    attr.cur_qp_state = q.state.to_raw();
    attr.sq_draining = u8::from(q.sq_draining);
    attr.path_mtu = q.path_mtu as _;
    attr.pkey_index = 0;
    attr.qp_access_flags = q.access_flags as c_int;
    attr.max_rd_atomic = q.max_rd_atomic.try_into().unwrap_or(u8::MAX);
    attr.max_dest_rd_atomic = q.max_dest_rd_atomic.try_into().unwrap_or(u8::MAX);
    attr.port_num = 1;
    caps_to_raw(&q.caps, &mut attr.cap);
    // SAFETY: The QP's C fields, set by the core at creation.
    unsafe {
        init_attr.send_cq = (*qp).send_cq;
        init_attr.recv_cq = (*qp).recv_cq;
        init_attr.srq = (*qp).srq;
        init_attr.qp_type = (*qp).qp_type;
    }
    init_attr.sq_sig_type = if q.sig_all {
        bindings::ib_sig_type_IB_SIGNAL_ALL_WR
    } else {
        bindings::ib_sig_type_IB_SIGNAL_REQ_WR
    };
    caps_to_raw(&q.caps, &mut init_attr.cap);
    0
}

pub(super) unsafe extern "C" fn post_send_callback<T: DeviceOps>(
    qp: *mut bindings::ib_qp,
    wr: *const bindings::ib_send_wr,
    bad_wr: *mut *const bindings::ib_send_wr,
) -> c_int {
    // SAFETY: A live QP of a device of `T`.
    let (dev, q) = unsafe { (Qp::<T>::device::<T>(qp), Qp::<T>::from_raw(qp)) };
    if wr.is_null() {
        // The user library's doorbell: work requests are in the shared send queue.
        return match T::doorbell(dev, q) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        };
    }
    // SAFETY: A kernel consumer's chain, unchanged during the call.
    let mut chain = unsafe { SendChain::new(wr) };
    match T::post_send(dev, q, &mut chain) {
        Ok(()) => 0,
        Err(e) => {
            // SAFETY: The core passes a valid pointer for the first failed request.
            unsafe { *bad_wr = chain.current() };
            e.to_errno()
        }
    }
}

pub(super) unsafe extern "C" fn post_recv_callback<T: DeviceOps>(
    qp: *mut bindings::ib_qp,
    wr: *const bindings::ib_recv_wr,
    bad_wr: *mut *const bindings::ib_recv_wr,
) -> c_int {
    // SAFETY: A live QP of a device of `T`; a kernel consumer's chain, unchanged during
    // the call (userspace posts receives into the shared ring, never through here).
    let (dev, q, mut chain) = unsafe {
        (
            Qp::<T>::device::<T>(qp),
            Qp::<T>::from_raw(qp),
            RecvChain::new(wr),
        )
    };
    match T::post_recv(dev, q, &mut chain) {
        Ok(()) => 0,
        Err(e) => {
            // SAFETY: The core passes a valid pointer for the first failed request.
            unsafe { *bad_wr = chain.current() };
            e.to_errno()
        }
    }
}

pub(super) unsafe extern "C" fn post_srq_recv_callback<T: DeviceOps>(
    srq: *mut bindings::ib_srq,
    wr: *const bindings::ib_recv_wr,
    bad_wr: *mut *const bindings::ib_recv_wr,
) -> c_int {
    // SAFETY: A live SRQ of a device of `T`; a kernel consumer's chain, unchanged during
    // the call.
    let (dev, s, mut chain) = unsafe {
        (
            Srq::<T>::device::<T>(srq),
            Srq::<T>::from_raw(srq),
            RecvChain::new(wr),
        )
    };
    match T::post_srq_recv(dev, s, &mut chain) {
        Ok(()) => 0,
        Err(e) => {
            // SAFETY: The core passes a valid pointer for the first failed request.
            unsafe { *bad_wr = chain.current() };
            e.to_errno()
        }
    }
}

pub(super) unsafe extern "C" fn create_srq_callback<T: DeviceOps>(
    srq: *mut bindings::ib_srq,
    attr: *mut bindings::ib_srq_init_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: The core hands a zeroed SRQ of our size on a device of `T` and the
        // consumer's attributes, which it reads back.
        let (dev, attr, mut udata) = unsafe {
            (
                Srq::<T>::device::<T>(srq),
                &mut *attr,
                UData::from_nullable(udata),
            )
        };
        if attr.srq_type != bindings::ib_srq_type_IB_SRQT_BASIC {
            return Err(EOPNOTSUPP());
        }
        let wanted = SrqAttr {
            max_wr: attr.attr.max_wr,
            max_sge: attr.attr.max_sge,
            srq_limit: attr.attr.srq_limit,
        };
        let (actual, data) = T::create_srq(dev, &wanted, udata.as_mut())?;
        // SAFETY: A fresh SRQ of `size_ib_srq` bytes.
        unsafe { Srq::<T>::init(srq, data)? };
        attr.attr.max_wr = actual.max_wr;
        attr.attr.max_sge = actual.max_sge;
        Ok(0)
    })
}

pub(super) unsafe extern "C" fn destroy_srq_callback<T: DeviceOps>(
    srq: *mut bindings::ib_srq,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: An SRQ set up by `create_srq_callback`; the core checked no QP uses it.
    unsafe {
        T::destroy_srq(Srq::<T>::device::<T>(srq), Srq::<T>::from_raw(srq));
        Srq::<T>::drop_data(srq);
    }
    0
}

pub(super) unsafe extern "C" fn modify_srq_callback<T: DeviceOps>(
    srq: *mut bindings::ib_srq,
    attr: *mut bindings::ib_srq_attr,
    mask: bindings::ib_srq_attr_mask,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: A live SRQ of a device of `T`; `attr` holds the fields in `mask`.
        let (dev, s, attr) =
            unsafe { (Srq::<T>::device::<T>(srq), Srq::<T>::from_raw(srq), &*attr) };
        let has = |bit: u32| mask & bit != 0;
        if mask
            & !(bindings::ib_srq_attr_mask_IB_SRQ_MAX_WR | bindings::ib_srq_attr_mask_IB_SRQ_LIMIT)
            != 0
        {
            return Err(EINVAL);
        }
        let modify = SrqModify {
            max_wr: has(bindings::ib_srq_attr_mask_IB_SRQ_MAX_WR).then_some(attr.max_wr),
            srq_limit: has(bindings::ib_srq_attr_mask_IB_SRQ_LIMIT).then_some(attr.srq_limit),
        };
        T::modify_srq(dev, s, &modify)?;
        Ok(0)
    })
}

pub(super) unsafe extern "C" fn query_srq_callback<T: DeviceOps>(
    srq: *mut bindings::ib_srq,
    attr: *mut bindings::ib_srq_attr,
) -> c_int {
    // SAFETY: A live SRQ of a device of `T`; `attr` is the core's to fill.
    unsafe {
        let a = T::query_srq(Srq::<T>::device::<T>(srq), Srq::<T>::from_raw(srq));
        (*attr).max_wr = a.max_wr;
        (*attr).max_sge = a.max_sge;
        (*attr).srq_limit = a.srq_limit;
    }
    0
}
