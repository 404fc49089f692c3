// SPDX-License-Identifier: GPL-2.0

//! The kernel RDMA core as an iWARP device driver sees it.
//!
//! A driver implements [`DeviceOps`] on its per-device data type and creates a
//! [`Driver`] in its module. The [`Driver`] registers an rdma link type, so that
//! `rdma link add NAME type T netdev DEV` creates a [`Device`] through
//! [`DeviceOps::newlink`], and watches network devices for [`DeviceOps::netdev_event`].
//!
//! The RDMA core owns every object it hands the driver: it allocates a device, a user
//! context, a queue pair... with the size the driver asked for, and the driver data lives
//! behind the embedded C object (`Device<T>` is a `struct ib_device` followed by `T`).
//! Drop runs when the core deallocates the object.

mod device;
mod driver;
mod iwcm;
mod mmap;
mod mr;
mod object;
mod qp;
mod restrack;
mod stats;
mod ucontext;
mod verbs;
mod wr;

pub use device::{
    DebugfsFile, Device, DeviceAttr, DeviceOps, DeviceParams, DeviceRef, Gid, Mtu, PortAttr,
    PortEvent, PortState, DEVICE_MEM_MGT_EXTENSIONS, DRIVER_ID_SIW, KERNEL_CAP_ALLOW_USER_UNREG,
};
pub use driver::Driver;
pub use iwcm::{CmEvent, CmEventKind, CmId, ConnParam};
pub use mmap::QueueMemory;
pub use mr::{access, DmaMemory, KernelPieces, Mr, MrKeys, UserMemory};
pub use object::{CoreObject, Object};
pub use qp::{Qp, QpAttr, QpCaps, QpInit, QpModify, QpRef, QpState, Srq, SrqAttr, SrqModify};
pub use restrack::{CmIdView, DriverDetails};
pub use stats::CounterDesc;
pub use ucontext::UData;
pub use verbs::{Cq, CqAttr, CqNotify, Pd};
pub use wr::{RecvChain, RegWr, SendChain, SendOp, Sge, WcOpcode, WcStatus, WorkCompletion};
