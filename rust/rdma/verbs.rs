// SPDX-License-Identifier: GPL-2.0

//! Protection domains and completion queues: the C trampolines of their ops.

use super::device::DeviceOps;
use super::object::Object;
use super::ucontext::UData;
use super::wr::WorkCompletion;
use crate::kernel_ext::bindings;
use core::ffi::c_int;
use kernel::error::from_result;

/// A protection domain of driver `T`.
pub type Pd<T> = Object<bindings::ib_pd, <T as DeviceOps>::Pd>;
/// A completion queue of driver `T`.
pub type Cq<T> = Object<bindings::ib_cq, <T as DeviceOps>::Cq>;

/// What a consumer asks of a new completion queue.
#[derive(Clone, Copy, Debug)]
pub struct CqAttr {
    /// Minimum number of entries.
    pub cqe: u32,
    /// Completion vector for its events.
    pub comp_vector: u32,
    /// `ib_uverbs_ex_create_cq_flags`; none is supported by iWARP devices.
    pub flags: u32,
}

/// How a kernel consumer arms a completion queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CqNotify {
    /// An event for the next solicited completion (or error completion).
    Solicited,
    /// An event for the next completion.
    NextCompletion,
}

impl<D> Object<bindings::ib_pd, D> {
    /// The PD's number in the core's resource tracking, as `rdma resource show pd` prints
    /// it (set once the PD is created).
    pub fn res_id(&self) -> u32 {
        // SAFETY: A live PD; the core sets its tracking id when it records the PD, right
        // after creating it, and never changes it.
        unsafe { (*self.as_raw()).res.id }
    }
}

impl<D> Object<bindings::ib_cq, D> {
    /// Calls the consumer's completion handler: the CQ was armed and got a completion.
    pub fn notify_completion(&self) {
        let cq = self.as_raw();
        // SAFETY: A live CQ; the core set the handler (possibly none) and its context at
        // creation.
        unsafe {
            if let Some(handler) = (*cq).comp_handler {
                handler(cq, (*cq).cq_context);
            }
        }
    }

    /// Reports an overrun to the consumer (`IB_EVENT_CQ_ERR`): completions were lost.
    pub fn report_overrun(&self) {
        let cq = self.as_raw();
        // SAFETY: A live CQ; the core set the handler (possibly none), its context and the
        // device at creation. The handler copies what it keeps of the event.
        unsafe {
            if let Some(handler) = (*cq).event_handler {
                let mut event = bindings::ib_event {
                    device: (*cq).device,
                    event: bindings::ib_event_type_IB_EVENT_CQ_ERR,
                    ..Default::default()
                };
                event.element.cq = cq;
                handler(&mut event, (*cq).cq_context);
            }
        }
    }
}

pub(super) unsafe extern "C" fn alloc_pd_callback<T: DeviceOps>(
    pd: *mut bindings::ib_pd,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: The core hands a zeroed PD of our size on a device of `T`; `udata` is
        // NULL or the command's.
        let (dev, mut udata) = unsafe { (Pd::<T>::device::<T>(pd), UData::from_nullable(udata)) };
        let init = T::alloc_pd(dev, udata.as_mut())?;
        // SAFETY: A fresh PD of `size_ib_pd` bytes.
        unsafe { Pd::<T>::init(pd, init)? };
        Ok(0)
    })
}

pub(super) unsafe extern "C" fn dealloc_pd_callback<T: DeviceOps>(
    pd: *mut bindings::ib_pd,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: A PD set up by `alloc_pd_callback`; the core has dropped every user of it.
    unsafe {
        T::dealloc_pd(Pd::<T>::device::<T>(pd), Pd::<T>::from_raw(pd));
        Pd::<T>::drop_data(pd);
    }
    0
}

pub(super) unsafe extern "C" fn create_cq_callback<T: DeviceOps>(
    cq: *mut bindings::ib_cq,
    attr: *const bindings::ib_cq_init_attr,
    attrs: *mut bindings::uverbs_attr_bundle,
) -> c_int {
    from_result(|| {
        // SAFETY: The core hands a zeroed CQ of our size on a device of `T` and its
        // attributes; a user command comes with its attribute bundle, a kernel one not.
        let (dev, attr, mut udata) = unsafe {
            let udata = if attrs.is_null() {
                None
            } else {
                Some(UData::from_raw(bindings::riw_attrs_udata(attrs)))
            };
            (Cq::<T>::device::<T>(cq), &*attr, udata)
        };
        let attr = CqAttr {
            cqe: attr.cqe,
            comp_vector: attr.comp_vector,
            flags: attr.flags,
        };
        let (cqe, init) = T::create_cq(dev, &attr, udata.as_mut())?;
        // SAFETY: A fresh CQ of `size_ib_cq` bytes; `cqe` is what the core reports back.
        unsafe {
            Cq::<T>::init(cq, init)?;
            (*cq).cqe = c_int::try_from(cqe).unwrap_or(c_int::MAX);
        }
        Ok(0)
    })
}

pub(super) unsafe extern "C" fn destroy_cq_callback<T: DeviceOps>(
    cq: *mut bindings::ib_cq,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: A CQ set up by `create_cq_callback`; the core checked that no QP uses it.
    unsafe {
        T::destroy_cq(Cq::<T>::device::<T>(cq), Cq::<T>::from_raw(cq));
        Cq::<T>::drop_data(cq);
    }
    0
}

pub(super) unsafe extern "C" fn poll_cq_callback<T: DeviceOps>(
    cq: *mut bindings::ib_cq,
    num_entries: c_int,
    wc: *mut bindings::ib_wc,
) -> c_int {
    // SAFETY: A live CQ of a device of `T`.
    let (dev, c) = unsafe { (Cq::<T>::device::<T>(cq), Cq::<T>::from_raw(cq)) };
    let wanted = usize::try_from(num_entries).unwrap_or(0);
    let mut done = 0;
    // In batches on the stack; each is written to the consumer's array as it comes.
    let mut batch = [WorkCompletion::EMPTY; 16];
    while done < wanted {
        let want = (wanted - done).min(batch.len());
        let got = T::poll_cq(dev, c, &mut batch[..want]).min(want);
        for w in &batch[..got] {
            // SAFETY: The consumer's array has `num_entries` entries; `done < wanted`.
            let slot = unsafe { &mut *wc.add(done) };
            w.write(slot, dev.qp_ptr(w.qp_num));
            done += 1;
        }
        if got < want {
            break;
        }
    }
    done as c_int
}

pub(super) unsafe extern "C" fn req_notify_cq_callback<T: DeviceOps>(
    cq: *mut bindings::ib_cq,
    flags: bindings::ib_cq_notify_flags,
) -> c_int {
    let notify = if flags & bindings::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK
        == bindings::ib_cq_notify_flags_IB_CQ_SOLICITED
    {
        CqNotify::Solicited
    } else {
        CqNotify::NextCompletion
    };
    let report_missed = flags & bindings::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS != 0;
    // SAFETY: A live CQ of a device of `T`.
    let missed =
        unsafe { T::req_notify_cq(Cq::<T>::device::<T>(cq), Cq::<T>::from_raw(cq), notify) };
    c_int::from(report_missed && missed)
}
