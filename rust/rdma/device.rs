// SPDX-License-Identifier: GPL-2.0

//! RDMA devices: the driver's operations table and the `struct ib_device` it backs.

use super::driver;
use super::iwcm::{self, CmId, ConnParam};
use super::mmap;
use super::mr::{self, Mr, MrKeys};
use super::qp::{self, Qp, QpAttr, QpCaps, QpInit, QpModify, Srq, SrqAttr, SrqModify};
use super::restrack::{self, CmIdView, DriverDetails};
use super::stats::{self, CounterDesc};
use super::ucontext::{self, UContext, UData};
use super::verbs::{self, Cq, CqAttr, CqNotify, Pd};
use super::wr::{RecvChain, SendChain, WorkCompletion};
use crate::kernel_ext::bindings;
use crate::kernel_ext::debugfs::SeqFile;
use crate::kernel_ext::net::{NetDevice, NetdevEvent};
use core::ffi::c_int;
use core::ops::Deref;
use kernel::error::from_result;
use kernel::prelude::*;
use kernel::types::{ARef, Opaque};

/// The driver id of the soft-iWARP user ABI (`RDMA_DRIVER_SIW`): rdma-core binds its
/// software iWARP provider to devices reporting it.
pub const DRIVER_ID_SIW: u32 = bindings::rdma_driver_id_RDMA_DRIVER_SIW;

/// `IB_DEVICE_MEM_MGT_EXTENSIONS`: fast registration and local invalidation.
pub const DEVICE_MEM_MGT_EXTENSIONS: u64 =
    bindings::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS as u64;

/// `IBK_ALLOW_USER_UNREG`: `rdma link delete` may remove the device.
pub const KERNEL_CAP_ALLOW_USER_UNREG: u64 =
    bindings::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG as u64;

/// A GID: for iWARP, the port's MAC address followed by zeroes.
pub type Gid = [u8; 16];

/// What a driver gives the RDMA core about a new device.
pub struct DeviceParams {
    /// The node GUID, in network byte order.
    pub node_guid: [u8; 8],
    /// The node description (at most 63 bytes are kept).
    pub node_desc: &'static CStr,
    /// Number of completion vectors.
    pub num_comp_vectors: u32,
}

/// Device attributes (`struct ib_device_attr`), read once by the core at registration.
#[derive(Clone, Copy, Debug, Default)]
pub struct DeviceAttr {
    pub fw_ver: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub device_cap_flags: u64,
    pub kernel_cap_flags: u64,
    pub max_qp: u32,
    pub max_qp_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_sge_rd: u32,
    pub max_cq: u32,
    pub max_cqe: u32,
    pub max_mr: u32,
    pub max_pd: u32,
    pub max_mw: u32,
    /// Inbound RDMA READ depth per QP (IRD).
    pub max_qp_rd_atom: u32,
    /// Outbound RDMA READ depth per QP (ORD).
    pub max_qp_init_rd_atom: u32,
    pub max_srq: u32,
    pub max_srq_wr: u32,
    pub max_srq_sge: u32,
    pub max_fast_reg_page_list_len: u32,
    pub max_pkeys: u16,
}

/// Logical port state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortState {
    /// No link: the netdev is down or has no carrier.
    Down,
    /// Link up, ready for traffic.
    Active,
}

/// An IB MTU value (`enum ib_mtu`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mtu {
    Mtu256 = 1,
    Mtu512 = 2,
    Mtu1024 = 3,
    Mtu2048 = 4,
    Mtu4096 = 5,
}

impl Mtu {
    /// The largest IB MTU not above `bytes` (256 if `bytes` is smaller).
    pub fn not_above(bytes: u32) -> Self {
        match bytes {
            4096.. => Self::Mtu4096,
            2048.. => Self::Mtu2048,
            1024.. => Self::Mtu1024,
            512.. => Self::Mtu512,
            _ => Self::Mtu256,
        }
    }
}

/// Port attributes (`struct ib_port_attr`); link speed and width come from the netdev.
#[derive(Clone, Copy, Debug)]
pub struct PortAttr {
    pub state: PortState,
    pub max_mtu: Mtu,
    pub active_mtu: Mtu,
    /// The netdev's MTU, in bytes.
    pub phys_mtu: u32,
    pub gid_tbl_len: u32,
    pub pkey_tbl_len: u16,
    pub max_msg_sz: u32,
}

/// An asynchronous port event for the RDMA core and its consumers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortEvent {
    /// The port became active.
    Active,
    /// The port went down.
    Error,
    /// The GID table changed (the netdev's address did).
    GidChange,
}

/// The operations of an RDMA device driver, implemented on its per-device data type.
#[vtable]
pub trait DeviceOps: Sized + Send + Sync + 'static {
    /// The rdma link type: `rdma link add NAME type LINK_TYPE netdev DEV`.
    const LINK_TYPE: &'static CStr;
    /// The driver id reported to userspace, which selects the rdma-core provider.
    const DRIVER_ID: u32;
    /// The uverbs ABI version of that provider.
    const UVERBS_ABI_VERSION: u32;

    /// Per user-context driver data.
    type UContext: Send + Sync;
    /// Per protection-domain driver data.
    type Pd: Send + Sync;
    /// Per completion-queue driver data.
    type Cq: Send + Sync;
    /// Per queue-pair driver data.
    type Qp: Send + Sync;
    /// Per shared-receive-queue driver data.
    type Srq: Send + Sync;
    /// Per memory-region driver data.
    type Mr: Send + Sync;

    /// Checks that `netdev` can carry a new device and returns how to build it.
    fn newlink(netdev: &NetDevice) -> Result<(DeviceParams, impl PinInit<Self, Error>)>;

    /// Reacts to an event of the device's netdev (called with RTNL held).
    fn netdev_event(dev: &Device<Self>, netdev: &NetDevice, event: NetdevEvent);

    /// The device attributes.
    fn query_device(dev: &Device<Self>) -> DeviceAttr;

    /// The attributes of `port` (1-based; the core has checked the range).
    fn query_port(dev: &Device<Self>, port: u32) -> Result<PortAttr>;

    /// The GID at `index` of `port`.
    fn query_gid(dev: &Device<Self>, port: u32, index: u32) -> Result<Gid>;

    /// Creates the driver data of a new user context and answers userspace through `udata`.
    fn alloc_ucontext(dev: &Device<Self>, udata: &mut UData<'_>) -> Result<Self::UContext>;

    /// Creates a protection domain (`udata`: present for a user command).
    fn alloc_pd(dev: &Device<Self>, udata: Option<&mut UData<'_>>) -> Result<Self::Pd>;

    /// Releases a protection domain; the core has destroyed everything in it.
    fn dealloc_pd(dev: &Device<Self>, pd: &Pd<Self>);

    /// Creates a completion queue; returns its real number of entries.
    fn create_cq(
        dev: &Device<Self>,
        attr: &CqAttr,
        udata: Option<&mut UData<'_>>,
    ) -> Result<(u32, impl PinInit<Self::Cq, Error>)>;

    /// Releases a completion queue no queue pair uses any more.
    fn destroy_cq(dev: &Device<Self>, cq: &Cq<Self>);

    /// Arms a kernel consumer's completion queue; returns whether completions are already
    /// waiting (for `IB_CQ_REPORT_MISSED_EVENTS`).
    fn req_notify_cq(dev: &Device<Self>, cq: &Cq<Self>, notify: CqNotify) -> bool;

    /// Creates a queue pair; returns its number and real queue sizes.
    fn create_qp(
        dev: &Device<Self>,
        init: &QpInit,
        udata: Option<&mut UData<'_>>,
    ) -> Result<(u32, QpCaps, impl PinInit<Self::Qp, Error>)>;

    /// Releases a queue pair.
    fn destroy_qp(dev: &Device<Self>, qp: &Qp<Self>);

    /// Changes state and attributes of a queue pair.
    fn modify_qp(dev: &Device<Self>, qp: &Qp<Self>, modify: &QpModify) -> Result;

    /// Reports the attributes of a queue pair.
    fn query_qp(dev: &Device<Self>, qp: &Qp<Self>) -> QpAttr;

    /// The user library rang the doorbell: new work is in the shared send queue. Called in
    /// the process context of the `post_send` system call: it may sleep.
    fn doorbell(dev: &Device<Self>, qp: &Qp<Self>) -> Result;

    /// Queues a kernel consumer's send work requests; on error, `wrs` is left at the
    /// first request not queued.
    fn post_send(dev: &Device<Self>, qp: &Qp<Self>, wrs: &mut SendChain<'_>) -> Result;

    /// Queues a kernel consumer's receive work requests, like `post_send`.
    fn post_recv(dev: &Device<Self>, qp: &Qp<Self>, wrs: &mut RecvChain<'_>) -> Result;

    /// Queues a kernel consumer's receive work requests on a shared receive queue.
    fn post_srq_recv(dev: &Device<Self>, srq: &Srq<Self>, wrs: &mut RecvChain<'_>) -> Result;

    /// Takes up to `wc.len()` completions of a kernel consumer's CQ; returns how many.
    fn poll_cq(dev: &Device<Self>, cq: &Cq<Self>, wc: &mut [WorkCompletion]) -> usize;

    /// Creates a shared receive queue; returns its real attributes.
    fn create_srq(
        dev: &Device<Self>,
        attr: &SrqAttr,
        udata: Option<&mut UData<'_>>,
    ) -> Result<(SrqAttr, impl PinInit<Self::Srq, Error>)>;

    /// Releases a shared receive queue no queue pair uses any more.
    fn destroy_srq(dev: &Device<Self>, srq: &Srq<Self>);

    /// Changes the attributes of a shared receive queue.
    fn modify_srq(dev: &Device<Self>, srq: &Srq<Self>, modify: &SrqModify) -> Result;

    /// Reports the attributes of a shared receive queue.
    fn query_srq(dev: &Device<Self>, srq: &Srq<Self>) -> SrqAttr;

    /// Registers `length` bytes of user memory at `start`, addressed from `iova`.
    fn reg_user_mr(
        dev: &Device<Self>,
        pd: &Pd<Self>,
        start: u64,
        length: u64,
        iova: u64,
        access: u32,
        udata: &mut UData<'_>,
    ) -> Result<(MrKeys, impl PinInit<Self::Mr, Error>)>;

    /// A kernel consumer's region covering all memory.
    fn get_dma_mr(
        dev: &Device<Self>,
        pd: &Pd<Self>,
        access: u32,
    ) -> Result<(MrKeys, impl PinInit<Self::Mr, Error>)>;

    /// A kernel consumer's fast-registration region of up to `max_num_sg` pages.
    fn alloc_mr(
        dev: &Device<Self>,
        pd: &Pd<Self>,
        max_num_sg: u32,
    ) -> Result<(MrKeys, impl PinInit<Self::Mr, Error>)>;

    /// Releases a memory region.
    fn dereg_mr(dev: &Device<Self>, mr: &Mr<Self>);

    /// Starts mapping pages into a fast-registration region (`ib_map_mr_sg`).
    fn map_mr_begin(dev: &Device<Self>, mr: &Mr<Self>) -> Result;

    /// Adds the page at DMA address `addr` to the mapping; an error ends it there.
    fn map_mr_page(dev: &Device<Self>, mr: &Mr<Self>, addr: u64) -> Result;

    /// Connects the QP numbered `param.qpn` to `id`'s remote address; the outcome is
    /// reported to `id` as one `ConnectReply` (an error here precludes it).
    fn iw_connect(dev: &Device<Self>, id: CmId, param: &ConnParam<'_>) -> Result;

    /// Accepts the connection request `id` was created for (its provider data is the
    /// event's) on the QP numbered `param.qpn`; reported as `Established`.
    fn iw_accept(dev: &Device<Self>, id: CmId, param: &ConnParam<'_>) -> Result;

    /// Rejects the connection request `id` was created for, with `private_data`.
    fn iw_reject(dev: &Device<Self>, id: &CmId, private_data: &[u8]) -> Result;

    /// Listens on `id`'s local address; requests are reported to `id`.
    fn iw_create_listen(dev: &Device<Self>, id: CmId, backlog: u32) -> Result;

    /// Stops listening for `id`.
    fn iw_destroy_listen(dev: &Device<Self>, id: &CmId);

    /// The names of the port counters, in the order `read_port_counters` fills them.
    fn port_counters() -> &'static [CounterDesc];

    /// Adds the port counters' values to `values`, which starts at zero.
    fn read_port_counters(dev: &Device<Self>, values: &mut [u64]);
    /// Adds the driver's details of a QP to `rdma resource show qp -dd`.
    fn fill_res_qp(dev: &Device<Self>, qp: &Qp<Self>, out: &mut DriverDetails<'_>) -> Result;

    /// Adds the driver's details of a CQ to `rdma resource show cq -dd`.
    fn fill_res_cq(dev: &Device<Self>, cq: &Cq<Self>, out: &mut DriverDetails<'_>) -> Result;

    /// Adds the driver's details of an MR to `rdma resource show mr -dd`.
    fn fill_res_mr(dev: &Device<Self>, mr: &Mr<Self>, out: &mut DriverDetails<'_>) -> Result;

    /// Adds the driver's details of the iWARP connection manager id behind an rdma_cm id
    /// to `rdma resource show cm_id -dd`.
    fn fill_res_cm_id(dev: &Device<Self>, id: &CmIdView<'_>, out: &mut DriverDetails<'_>)
        -> Result;

    /// The files of each device's debugfs directory: a name and what it shows.
    const DEBUGFS_FILES: &'static [DebugfsFile<Self>] = &[];
}

/// A file of a device's debugfs directory (`/sys/kernel/debug/LINK_TYPE/DEVICE/`).
pub struct DebugfsFile<T: DeviceOps> {
    pub name: &'static CStr,
    /// Writes the file's contents; an error means the output is full (see
    /// [`crate::kernel_ext::debugfs::Show`]).
    pub show: fn(&Device<T>, &mut SeqFile<'_>) -> core::fmt::Result,
}

/// An RDMA device of driver `T`: the RDMA core's `struct ib_device`, then `T`.
///
/// # Invariants
///
/// `ib` was allocated by `_ib_alloc_device` with the size of `Self`, `data` is initialised,
/// and the device's ops are `T`'s, until the core calls `dealloc_driver`.
// `repr(C)` with `ib` first: the core finds the driver object at offset 0 of the device.
#[repr(C)]
pub struct Device<T: DeviceOps> {
    ib: Opaque<bindings::ib_device>,
    /// The device's QPs by number, for completions of kernel consumers (and the CM).
    qps: Opaque<bindings::xarray>,
    data: T,
}

impl<T: DeviceOps> Deref for Device<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.data
    }
}

impl<T: DeviceOps> Device<T> {
    /// Borrows the device behind a `struct ib_device` of driver `T`.
    ///
    /// # Safety
    ///
    /// `ib` is a live device whose ops are `T`'s (so it is embedded in a `Device<T>`) and
    /// stays alive for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ib: *mut bindings::ib_device) -> &'a Self {
        // SAFETY: `ib` sits at offset 0 of `Device<T>` (see the assertion above).
        unsafe { &*ib.cast::<Self>() }
    }

    pub(crate) fn as_raw(&self) -> *mut bindings::ib_device {
        self.ib.get()
    }

    /// The netdev bound to port 1, if it is still bound.
    pub fn netdev(&self) -> Option<ARef<NetDevice>> {
        // SAFETY: The device is alive; the getter returns a held reference or NULL.
        let ndev = unsafe { bindings::ib_device_get_netdev(self.as_raw(), 1) };
        // SAFETY: A non-NULL result carries a reference we now own.
        (!ndev.is_null()).then(|| unsafe { NetDevice::from_held(ndev) })
    }

    /// Reports an asynchronous event on port 1 to the RDMA core and its consumers.
    pub fn dispatch_port_event(&self, event: PortEvent) {
        let event_type = match event {
            PortEvent::Active => bindings::ib_event_type_IB_EVENT_PORT_ACTIVE,
            PortEvent::Error => bindings::ib_event_type_IB_EVENT_PORT_ERR,
            PortEvent::GidChange => bindings::ib_event_type_IB_EVENT_GID_CHANGE,
        };
        let mut ev = bindings::ib_event {
            device: self.as_raw(),
            event: event_type,
            ..Default::default()
        };
        ev.element.port_num = 1;
        // SAFETY: `ev` is a complete event on a live device; the core copies what it keeps.
        unsafe { bindings::ib_dispatch_event(&ev) };
    }

    /// Unregisters the device from a workqueue, as needed under RTNL (netdev notifier).
    pub fn unregister_queued(&self) {
        // SAFETY: The device is registered (its ops are `T`'s, which set `dealloc_driver`)
        // and the caller's borrow keeps its reference count raised.
        unsafe { bindings::ib_unregister_device_queued(self.as_raw()) };
    }

    /// Allocates, initialises and registers a device named `name` on port 1 of `netdev`.
    ///
    /// On success the RDMA core owns the device: it is freed (and `T` dropped, in
    /// `dealloc_driver`) when anyone unregisters it.
    pub(crate) fn register(
        name: *const core::ffi::c_char,
        netdev: &NetDevice,
        module: &'static ThisModule,
        params: DeviceParams,
        init: impl PinInit<T, Error>,
    ) -> Result {
        let size = core::mem::size_of::<Self>();
        // SAFETY: Any size of at least `struct ib_device` is valid; the memory is zeroed.
        let ib = unsafe { bindings::_ib_alloc_device(size) };
        if ib.is_null() {
            return Err(ENOMEM);
        }
        let this = ib.cast::<Self>();
        // SAFETY: `this` is a fresh, exclusively owned allocation of `size` bytes; `ib` is
        // embedded and the core never moves it, so `qps` and `data` are pinned in place.
        let data = unsafe {
            bindings::riw_xa_init_alloc(Opaque::raw_get(core::ptr::addr_of!((*this).qps)));
            core::ptr::addr_of_mut!((*this).data)
        };
        // SAFETY: `data` is valid for writes of `T`; on error it is left uninitialised.
        if let Err(e) = unsafe { init.__pinned_init(data) } {
            // SAFETY: No ops are set yet, so nothing touches the uninitialised data.
            unsafe { bindings::ib_dealloc_device(ib) };
            return Err(e);
        }

        // SAFETY: We own `ib` exclusively until registration; plain field writes.
        unsafe {
            (*ib).node_type = bindings::RDMA_NODE_RNIC as _;
            (*ib).node_guid = u64::from_ne_bytes(params.node_guid);
            (*ib).phys_port_cnt = 1;
            (*ib).num_comp_vectors = params.num_comp_vectors.try_into().unwrap_or(1);
            (*ib).uverbs_cmd_mask |=
                1u64 << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND;
            // Soft iWARP uses the host's TCP port space: no port mapper.
            (*ib).iw_driver_flags = bindings::iw_flags_IW_F_NO_PORT_MAP as _;
            copy_c_string(&mut (*ib).node_desc, params.node_desc.as_bytes());
            copy_c_string(&mut (*ib).iw_ifname, &netdev.name_bytes());
        }

        let ops = Self::ops(module);
        // SAFETY: `ops` is complete; the core copies it. From here on, `ib_dealloc_device`
        // runs `dealloc_driver`, which drops the initialised `data`.
        unsafe { bindings::ib_set_device_ops(ib, &ops) };

        // SAFETY: `ib` is ours and unregistered; `netdev` is alive (the caller holds it).
        let ret = unsafe { bindings::ib_device_set_netdev(ib, netdev.as_raw(), 1) };
        if ret != 0 {
            // SAFETY: Registration never happened; this frees the device.
            unsafe { bindings::ib_dealloc_device(ib) };
            return Err(Error::from_errno(ret));
        }

        // Tracked before registration: an unregistration may race right after it.
        if let Err(e) = driver::track_device::<T>(ib) {
            // SAFETY: As above.
            unsafe { bindings::ib_dealloc_device(ib) };
            return Err(e);
        }

        // SAFETY: `ib` is fully set up; `name` is the NUL-terminated name from netlink.
        // No DMA device: the core uses virtual DMA for software devices.
        let ret = unsafe {
            // ib_mark_name_assigned_by_user(): the name came from `rdma link add`.
            (*ib).name_assign_type =
                bindings::rdma_nl_name_assign_type_RDMA_NAME_ASSIGN_TYPE_USER as _;
            bindings::ib_register_device(ib, name, core::ptr::null_mut())
        };
        if ret != 0 {
            // SAFETY: A failed registration leaves the device to its allocator.
            unsafe { bindings::ib_dealloc_device(ib) };
            return Err(Error::from_errno(ret));
        }
        // The set's reference keeps the device in memory even if it is unregistered
        // already; `add_debugfs` takes its own before it touches the data.
        driver::add_debugfs::<T>(ib);
        Ok(())
    }

    /// The ops table of driver `T`.
    fn ops(module: &'static ThisModule) -> bindings::ib_device_ops {
        bindings::ib_device_ops {
            owner: module.as_ptr().cast(),
            driver_id: T::DRIVER_ID,
            uverbs_abi_ver: T::UVERBS_ABI_VERSION,
            dealloc_driver: Some(Self::dealloc_driver_callback),
            query_device: Some(Self::query_device_callback),
            query_port: Some(Self::query_port_callback),
            query_gid: Some(Self::query_gid_callback),
            query_pkey: Some(Self::query_pkey_callback),
            get_port_immutable: Some(Self::get_port_immutable_callback),
            alloc_ucontext: Some(ucontext::alloc_ucontext_callback::<T>),
            dealloc_ucontext: Some(ucontext::dealloc_ucontext_callback::<T>),
            disassociate_ucontext: Some(ucontext::disassociate_ucontext_callback),
            mmap: Some(mmap::mmap_callback),
            mmap_free: Some(mmap::mmap_free_callback),
            alloc_pd: Some(verbs::alloc_pd_callback::<T>),
            dealloc_pd: Some(verbs::dealloc_pd_callback::<T>),
            create_cq: Some(verbs::create_cq_callback::<T>),
            destroy_cq: Some(verbs::destroy_cq_callback::<T>),
            req_notify_cq: Some(verbs::req_notify_cq_callback::<T>),
            poll_cq: Some(verbs::poll_cq_callback::<T>),
            post_srq_recv: Some(qp::post_srq_recv_callback::<T>),
            size_ib_ucontext: core::mem::size_of::<UContext<T>>(),
            create_qp: Some(qp::create_qp_callback::<T>),
            destroy_qp: Some(qp::destroy_qp_callback::<T>),
            modify_qp: Some(qp::modify_qp_callback::<T>),
            query_qp: Some(qp::query_qp_callback::<T>),
            post_send: Some(qp::post_send_callback::<T>),
            post_recv: Some(qp::post_recv_callback::<T>),
            create_srq: Some(qp::create_srq_callback::<T>),
            destroy_srq: Some(qp::destroy_srq_callback::<T>),
            modify_srq: Some(qp::modify_srq_callback::<T>),
            query_srq: Some(qp::query_srq_callback::<T>),
            reg_user_mr: Some(mr::reg_user_mr_callback::<T>),
            get_dma_mr: Some(mr::get_dma_mr_callback::<T>),
            alloc_mr: Some(mr::alloc_mr_callback::<T>),
            dereg_mr: Some(mr::dereg_mr_callback::<T>),
            map_mr_sg: Some(mr::map_mr_sg_callback::<T>),
            iw_connect: Some(iwcm::iw_connect_callback::<T>),
            iw_accept: Some(iwcm::iw_accept_callback::<T>),
            iw_reject: Some(iwcm::iw_reject_callback::<T>),
            iw_create_listen: Some(iwcm::iw_create_listen_callback::<T>),
            iw_destroy_listen: Some(iwcm::iw_destroy_listen_callback::<T>),
            iw_add_ref: Some(qp::iw_add_ref_callback::<T>),
            iw_rem_ref: Some(qp::iw_rem_ref_callback::<T>),
            iw_get_qp: Some(qp::iw_get_qp_callback::<T>),
            alloc_hw_port_stats: Some(stats::alloc_hw_port_stats_callback::<T>),
            get_hw_stats: Some(stats::get_hw_stats_callback::<T>),
            fill_res_qp_entry: Some(restrack::fill_res_qp_callback::<T>),
            fill_res_cq_entry: Some(restrack::fill_res_cq_callback::<T>),
            fill_res_mr_entry: Some(restrack::fill_res_mr_callback::<T>),
            fill_res_cm_id_entry: Some(restrack::fill_res_cm_id_callback::<T>),
            size_ib_qp: core::mem::size_of::<Qp<T>>(),
            size_ib_srq: core::mem::size_of::<Srq<T>>(),
            size_ib_pd: core::mem::size_of::<Pd<T>>(),
            size_ib_cq: core::mem::size_of::<Cq<T>>(),
            ..Default::default()
        }
    }

    /// Hands a netdev event to the driver if `netdev` carries a device of `T`.
    ///
    /// # Safety
    ///
    /// Called from the netdevice notifier of the driver of `module`, with RTNL held and
    /// `netdev` alive.
    pub(crate) unsafe fn netdev_event(module: &ThisModule, netdev: &NetDevice, event: NetdevEvent) {
        // SAFETY: `netdev` is alive; a found device comes with a reference.
        let ib = unsafe { bindings::ib_device_get_by_netdev(netdev.as_raw(), T::DRIVER_ID) };
        if ib.is_null() {
            return;
        }
        // Another module (siw) may share `T::DRIVER_ID`; the owner tells the devices apart,
        // and a module has a single driver, whose devices are all `Device<T>`.
        // SAFETY: `ib` is alive while we hold the reference; `ops` is fixed at registration.
        if unsafe { (*ib).ops.owner } == module.as_ptr().cast() {
            // SAFETY: Ours, and referenced until the put below.
            T::netdev_event(unsafe { Self::from_raw(ib) }, netdev, event);
        }
        // SAFETY: Releases the lookup's reference.
        unsafe { bindings::ib_device_put(ib) };
    }

    unsafe extern "C" fn dealloc_driver_callback(ib: *mut bindings::ib_device) {
        // The directory's files read the data: removed first (waiting for their reads).
        drop(driver::take_debugfs::<T>(ib));
        // SAFETY: The core calls this once, last, for a device set up by `register`, whose
        // `data` was initialised before the ops (and so this callback) were installed. Its
        // QPs are all destroyed, so the table is empty.
        unsafe {
            core::ptr::drop_in_place(core::ptr::addr_of_mut!((*ib.cast::<Self>()).data));
            bindings::xa_destroy((*ib.cast::<Self>()).qps.get());
        }
        // Last: the driver may unload once all its devices are marked and fenced.
        driver::device_deallocated::<T>(ib);
    }

    /// Records `qp` under its number.
    pub(crate) fn insert_qp(&self, qp_num: u32, qp: *mut bindings::ib_qp) -> Result {
        // SAFETY: The table is initialised (type invariant); it stores the pointer only.
        let ret = unsafe { bindings::riw_xa_insert(self.qps.get(), qp_num.into(), qp.cast()) };
        if ret != 0 {
            return Err(Error::from_errno(ret));
        }
        Ok(())
    }

    /// Forgets the QP numbered `qp_num`.
    pub(crate) fn remove_qp(&self, qp_num: u32) {
        // SAFETY: The table is initialised (type invariant).
        unsafe { bindings::riw_xa_erase(self.qps.get(), qp_num.into()) };
    }

    /// Calls `get` on the QP numbered `qp_num`, if listed, under the table's lock (which
    /// `remove_qp` also takes).
    pub(crate) fn lookup_qp_locked(
        &self,
        qp_num: u32,
        get: impl FnOnce(*mut bindings::ib_qp),
    ) -> Option<core::ptr::NonNull<bindings::ib_qp>> {
        // SAFETY: The table is initialised (type invariant); `xa_load` under the lock.
        unsafe {
            bindings::riw_xa_lock(self.qps.get());
            let qp =
                core::ptr::NonNull::new(bindings::xa_load(self.qps.get(), qp_num.into()).cast());
            if let Some(qp) = qp {
                get(qp.as_ptr());
            }
            bindings::riw_xa_unlock(self.qps.get());
            qp
        }
    }

    /// A counted reference to the device, unless it is being unregistered.
    pub fn try_ref(&self) -> Option<DeviceRef<T>> {
        // SAFETY: The device is alive (we are borrowed from it).
        unsafe { bindings::riw_ib_device_try_get(self.as_raw()) }.then(|| DeviceRef {
            dev: core::ptr::NonNull::from(self),
        })
    }

    /// The QP numbered `qp_num`, or NULL: an address for a completion, never dereferenced
    /// here.
    pub(crate) fn qp_ptr(&self, qp_num: u32) -> *mut bindings::ib_qp {
        // SAFETY: The table is initialised (type invariant); `xa_load` locks internally.
        unsafe { bindings::xa_load(self.qps.get(), qp_num.into()).cast() }
    }

    unsafe extern "C" fn query_device_callback(
        ib: *mut bindings::ib_device,
        attr: *mut bindings::ib_device_attr,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: The core calls device ops only on live devices of this driver.
        let a = T::query_device(unsafe { Self::from_raw(ib) });
        let int = |v: u32| c_int::try_from(v).unwrap_or(c_int::MAX);
        // SAFETY: `attr` is the core's to fill, zeroed by it.
        let attr = unsafe { &mut *attr };
        attr.fw_ver = a.fw_ver;
        attr.sys_image_guid = {
            // SAFETY: Read-only access to a field set before registration.
            unsafe { (*ib).node_guid }
        };
        attr.vendor_id = a.vendor_id;
        attr.vendor_part_id = a.vendor_part_id;
        attr.hw_ver = a.hw_ver;
        attr.max_mr_size = a.max_mr_size;
        attr.page_size_cap = a.page_size_cap;
        attr.device_cap_flags = a.device_cap_flags;
        attr.kernel_cap_flags = a.kernel_cap_flags;
        attr.max_qp = int(a.max_qp);
        attr.max_qp_wr = int(a.max_qp_wr);
        attr.max_send_sge = int(a.max_send_sge);
        attr.max_recv_sge = int(a.max_recv_sge);
        attr.max_sge_rd = int(a.max_sge_rd);
        attr.max_cq = int(a.max_cq);
        attr.max_cqe = int(a.max_cqe);
        attr.max_mr = int(a.max_mr);
        attr.max_pd = int(a.max_pd);
        attr.max_mw = int(a.max_mw);
        attr.max_qp_rd_atom = int(a.max_qp_rd_atom);
        attr.max_qp_init_rd_atom = int(a.max_qp_init_rd_atom);
        attr.max_res_rd_atom = int(a.max_qp.saturating_mul(a.max_qp_rd_atom));
        attr.max_srq = int(a.max_srq);
        attr.max_srq_wr = int(a.max_srq_wr);
        attr.max_srq_sge = int(a.max_srq_sge);
        attr.max_fast_reg_page_list_len = a.max_fast_reg_page_list_len;
        attr.max_pkeys = a.max_pkeys;
        0
    }

    unsafe extern "C" fn query_port_callback(
        ib: *mut bindings::ib_device,
        port: u32,
        attr: *mut bindings::ib_port_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: The core calls device ops only on live devices of this driver.
            let dev = unsafe { Self::from_raw(ib) };
            let a = T::query_port(dev, port)?;
            let (mut speed, mut width) = (0u16, 0u8);
            // SAFETY: Live device; the core validated `port`. On failure (no netdev, no
            // ethtool speed) it leaves a safe default in both outputs.
            unsafe { bindings::ib_get_eth_speed(ib, port, &mut speed, &mut width) };
            // SAFETY: `attr` is the core's to fill, zeroed by it.
            let attr = unsafe { &mut *attr };
            let active = a.state == PortState::Active;
            attr.state = if active {
                bindings::ib_port_state_IB_PORT_ACTIVE
            } else {
                bindings::ib_port_state_IB_PORT_DOWN
            };
            attr.phys_state = if active {
                bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP as u8
            } else {
                bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED as u8
            };
            attr.max_mtu = a.max_mtu as _;
            attr.active_mtu = a.active_mtu as _;
            attr.phys_mtu = a.phys_mtu;
            attr.gid_tbl_len = c_int::try_from(a.gid_tbl_len).unwrap_or(c_int::MAX);
            attr.pkey_tbl_len = a.pkey_tbl_len;
            attr.max_msg_sz = a.max_msg_sz;
            attr.port_cap_flags = bindings::ib_port_capability_mask_bits_IB_PORT_CM_SUP
                | bindings::ib_port_capability_mask_bits_IB_PORT_DEVICE_MGMT_SUP;
            attr.active_speed = speed;
            attr.active_width = width;
            Ok(0)
        })
    }

    unsafe extern "C" fn query_gid_callback(
        ib: *mut bindings::ib_device,
        port: u32,
        index: c_int,
        gid: *mut bindings::ib_gid,
    ) -> c_int {
        from_result(|| {
            let index = u32::try_from(index).map_err(|_| EINVAL)?;
            // SAFETY: The core calls device ops only on live devices of this driver.
            let raw = T::query_gid(unsafe { Self::from_raw(ib) }, port, index)?;
            // SAFETY: `gid` is the core's to fill; `raw` is a plain 16-byte array.
            unsafe { (*gid).raw = raw };
            Ok(0)
        })
    }

    unsafe extern "C" fn query_pkey_callback(
        _ib: *mut bindings::ib_device,
        _port: u32,
        index: u16,
        pkey: *mut u16,
    ) -> c_int {
        if index != 0 {
            return EINVAL.to_errno();
        }
        // iWARP has no partitions; report the default full-membership key.
        // SAFETY: `pkey` is the core's to fill.
        unsafe { *pkey = 0xffff };
        0
    }

    unsafe extern "C" fn get_port_immutable_callback(
        ib: *mut bindings::ib_device,
        port: u32,
        immutable: *mut bindings::ib_port_immutable,
    ) -> c_int {
        from_result(|| {
            // SAFETY: The core calls device ops only on live devices of this driver.
            let a = T::query_port(unsafe { Self::from_raw(ib) }, port)?;
            // SAFETY: `immutable` is the core's to fill.
            let immutable = unsafe { &mut *immutable };
            immutable.core_cap_flags = bindings::RDMA_CORE_PORT_IWARP;
            immutable.gid_tbl_len = c_int::try_from(a.gid_tbl_len).map_err(|_| EINVAL)?;
            immutable.pkey_tbl_len = c_int::from(a.pkey_tbl_len);
            Ok(0)
        })
    }
}

/// Copies `src` into the C string buffer `dst`, truncating, always NUL-terminated.
fn copy_c_string(dst: &mut [core::ffi::c_char], src: &[u8]) {
    let n = src.len().min(dst.len().saturating_sub(1));
    for (d, s) in dst.iter_mut().zip(&src[..n]) {
        *d = *s as core::ffi::c_char;
    }
    if let Some(end) = dst.get_mut(n) {
        *end = 0;
    }
}

/// A counted reference to a registered device (`ib_device_try_get`): unregistration waits
/// until it is dropped.
///
/// # Invariants
///
/// `dev` is a device of `T` on which this object holds one reference.
pub struct DeviceRef<T: DeviceOps> {
    dev: core::ptr::NonNull<Device<T>>,
}

impl<T: DeviceOps> Deref for DeviceRef<T> {
    type Target = Device<T>;

    fn deref(&self) -> &Device<T> {
        // SAFETY: Alive while referenced (type invariant).
        unsafe { self.dev.as_ref() }
    }
}

impl<T: DeviceOps> Drop for DeviceRef<T> {
    fn drop(&mut self) {
        // SAFETY: Releases the reference `try_ref` took.
        unsafe { bindings::ib_device_put(self.dev.as_ptr().cast()) };
    }
}

// SAFETY: A device is usable from any thread (see `Device`).
unsafe impl<T: DeviceOps> Send for DeviceRef<T> {}
// SAFETY: As above.
unsafe impl<T: DeviceOps> Sync for DeviceRef<T> {}

// Devices are shared by every context the core calls ops from.
// SAFETY: The `ib_device` part is synchronised by the RDMA core; `T: Sync + Send`.
unsafe impl<T: DeviceOps> Sync for Device<T> {}
// SAFETY: See `Sync`.
unsafe impl<T: DeviceOps> Send for Device<T> {}
