// SPDX-License-Identifier: GPL-2.0

//! One riw RNIC: an RDMA device bound to an Ethernet netdev, with the limits riw
//! advertises and the port that follows the netdev.

use crate::cm::{Endpoint, Listener};
use crate::cq::RiwCq;
use crate::flush::Flusher;
use crate::kernel_ext::ida::IdAllocator;
use crate::kernel_ext::net::{NetDevice, NetdevEvent, ETH_ALEN};
use crate::kernel_ext::rdma::{
    CmId, ConnParam, Cq, CqAttr, CqNotify, Device, DeviceAttr, DeviceOps, DeviceParams, Gid, Mr,
    MrKeys, Mtu, Pd, PortAttr, PortEvent, PortState, Qp, QpAttr, QpCaps, QpInit, QpModify,
    RecvChain, SendChain, Srq, SrqAttr, SrqModify, UData, WorkCompletion,
    DEVICE_MEM_MGT_EXTENSIONS, DRIVER_ID_SIW, KERNEL_CAP_ALLOW_USER_UNREG,
};
use crate::kernel_ext::workqueue::Queue;
use crate::kernel_ext::xarray::ArcTable;
use crate::mr::{MemRegion, RiwMr};
use crate::pd::RiwPd;
use crate::qp::RiwQp;
use crate::srq::RiwSrq;
use crate::uapi;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::c_str;
use kernel::prelude::*;
use kernel::sync::Arc;

/// Vendor id reported to userspace: "riw" in ASCII. riw is not Chelsio silicon and does
/// not borrow its PCI identity.
const VENDOR_ID: u32 = 0x72_69_77;
/// Part id, also the `dev_id` handed to the user library.
const VENDOR_PART_ID: u32 = 1;

/// The limits riw advertises (Documentation/riw.rst explains each choice).
pub(crate) const LIMITS: DeviceAttr = DeviceAttr {
    fw_ver: 0x1_0000, // 0.1.0: major, minor, patch in 16-bit fields
    vendor_id: VENDOR_ID,
    vendor_part_id: VENDOR_PART_ID,
    hw_ver: 1,
    max_mr_size: 1 << 36,
    page_size_cap: kernel::page::PAGE_SIZE as u64,
    device_cap_flags: DEVICE_MEM_MGT_EXTENSIONS,
    kernel_cap_flags: KERNEL_CAP_ALLOW_USER_UNREG,
    max_qp: 16384,
    max_qp_wr: 16384,
    // The soft-iWARP ring entries carry up to SIW_MAX_SGE scatter/gather elements.
    max_send_sge: uapi::SIW_MAX_SGE,
    max_recv_sge: uapi::SIW_MAX_SGE,
    max_sge_rd: 1,
    max_cq: 16384,
    max_cqe: 1 << 20,
    max_mr: 65536,
    max_pd: 65536,
    max_mw: 0,
    max_qp_rd_atom: 32,
    max_qp_init_rd_atom: 32,
    max_srq: 16384,
    max_srq_wr: 16384,
    max_srq_sge: uapi::SIW_MAX_SGE,
    max_fast_reg_page_list_len: 256,
    max_pkeys: 1,
};

/// Lowest mmap key riw hands out. The soft-iWARP user library takes the key
/// `SIW_INVAL_UOBJ_KEY` for "no mapping" and fails the object: no ring may sit there.
pub(crate) const MMAP_KEY_MIN: u64 = uapi::SIW_INVAL_UOBJ_KEY as u64 + 1;

/// Largest message, in bytes.
pub(crate) const MAX_MSG_SIZE: u32 = 1 << 31;

/// A riw RNIC.
#[pin_data(PinnedDrop)]
pub(crate) struct RiwDevice {
    pub(crate) pds: Counter,
    pub(crate) cqs: Counter,
    pub(crate) qps: Counter,
    pub(crate) srqs: Counter,
    pub(crate) mrs: Counter,
    cq_ids: AtomicU32,
    #[pin]
    pub(crate) qp_nums: IdAllocator,
    /// Memory regions by STag index.
    #[pin]
    pub(crate) mr_table: ArcTable<MemRegion>,
    /// Connection endpoints, by the id iw_cm hands back for a connection request.
    #[pin]
    pub(crate) endpoints: ArcTable<Endpoint>,
    /// Listeners, by the id kept in their iw_cm id.
    #[pin]
    pub(crate) listeners: ArcTable<Listener>,
    /// User QPs in ERROR, flushed as userspace posts to them.
    pub(crate) flusher: Arc<Flusher>,
    /// Where the device's listeners, endpoints and flusher run. Destroyed with the device:
    /// by then (the core unregistered the device, whose references endpoints hold, and
    /// the flusher is stopped) nothing runs there any more.
    pub(crate) queue: Arc<Queue>,
}

#[pinned_drop]
impl PinnedDrop for RiwDevice {
    fn drop(self: Pin<&mut Self>) {
        self.flusher.stop();
    }
}

impl RiwDevice {
    /// A CQ id for the user library (which only prints it).
    pub(crate) fn next_cq_id(&self) -> u32 {
        self.cq_ids.fetch_add(1, Ordering::Relaxed)
    }
}

/// A count of live objects of one kind, held within the device limit.
#[derive(Default)]
pub(crate) struct Counter(AtomicU32);

impl Counter {
    /// Counts one more object if that stays within `max`; the count goes back down when
    /// the returned guard drops, unless it is kept.
    pub(crate) fn take(&self, max: u32) -> Result<Quota<'_>> {
        self.0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < max).then(|| n + 1)
            })
            .map_err(|_| ENOMEM)?;
        Ok(Quota(Some(self)))
    }

    /// Counts one object less: it was destroyed.
    pub(crate) fn put(&self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One counted object, given back on drop unless [`Quota::keep`] hands it to the object.
pub(crate) struct Quota<'a>(Option<&'a Counter>);

impl Quota<'_> {
    /// The object now exists; it gives its count back when destroyed.
    pub(crate) fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for Quota<'_> {
    fn drop(&mut self) {
        if let Some(counter) = self.0 {
            counter.put();
        }
    }
}

/// A user context of a riw RNIC.
pub(crate) struct RiwUContext;

/// The modified EUI-64 node GUID of an Ethernet MAC address (RFC 4291, appendix A).
fn node_guid_from_mac(mac: [u8; ETH_ALEN]) -> [u8; 8] {
    [
        mac[0] ^ 0x02,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ]
}

#[vtable]
impl DeviceOps for RiwDevice {
    const LINK_TYPE: &'static CStr = c_str!("riw");
    const DRIVER_ID: u32 = DRIVER_ID_SIW;
    const UVERBS_ABI_VERSION: u32 = uapi::SIW_ABI_VERSION;

    type UContext = RiwUContext;
    type Pd = RiwPd;
    type Cq = RiwCq;
    type Qp = RiwQp;
    type Srq = RiwSrq;
    type Mr = RiwMr;

    fn newlink(netdev: &NetDevice) -> Result<(DeviceParams, impl PinInit<Self, Error>)> {
        if !netdev.is_ethernet() {
            return Err(EINVAL);
        }
        let params = DeviceParams {
            node_guid: node_guid_from_mac(netdev.mac_address()),
            node_desc: c_str!("riw iWARP RNIC"),
            num_comp_vectors: 1,
        };
        let queue = Arc::new(Queue::new(c_str!("riw"))?, GFP_KERNEL)?;
        let flusher = Flusher::new(queue.clone())?;
        let dev = try_pin_init!(RiwDevice {
            pds: Counter::default(),
            cqs: Counter::default(),
            qps: Counter::default(),
            srqs: Counter::default(),
            mrs: Counter::default(),
            cq_ids: AtomicU32::new(1),
            qp_nums <- IdAllocator::new(),
            mr_table <- ArcTable::new(),
            endpoints <- ArcTable::new(),
            listeners <- ArcTable::new(),
            flusher,
            queue,
        });
        Ok((params, dev))
    }

    fn netdev_event(dev: &Device<Self>, netdev: &NetDevice, event: NetdevEvent) {
        match event {
            NetdevEvent::Up | NetdevEvent::Down | NetdevEvent::Change => {
                let up = netdev.is_running() && netdev.carrier_ok();
                dev.dispatch_port_event(if up {
                    PortEvent::Active
                } else {
                    PortEvent::Error
                });
                if !netdev.is_running() {
                    // The link is gone: so are its connections.
                    dev.endpoints.for_each(|ep| ep.abort());
                }
            }
            NetdevEvent::ChangeAddr => dev.dispatch_port_event(PortEvent::GidChange),
            NetdevEvent::Unregister => {
                dev.endpoints.for_each(|ep| ep.abort());
                dev.unregister_queued();
            }
            // The port reads the MTU live from the netdev.
            NetdevEvent::ChangeMtu | NetdevEvent::Other => {}
        }
    }

    fn query_device(_dev: &Device<Self>) -> DeviceAttr {
        LIMITS
    }

    fn query_port(dev: &Device<Self>, _port: u32) -> Result<PortAttr> {
        let netdev = dev.netdev();
        let (up, mtu) = match &netdev {
            Some(nd) => (nd.is_running() && nd.carrier_ok(), nd.mtu()),
            None => (false, 0),
        };
        Ok(PortAttr {
            state: if up {
                PortState::Active
            } else {
                PortState::Down
            },
            max_mtu: Mtu::Mtu4096,
            active_mtu: Mtu::not_above(mtu),
            phys_mtu: mtu,
            gid_tbl_len: 1,
            pkey_tbl_len: 1,
            max_msg_sz: MAX_MSG_SIZE,
        })
    }

    fn query_gid(dev: &Device<Self>, _port: u32, index: u32) -> Result<Gid> {
        if index != 0 {
            return Err(EINVAL);
        }
        let mac = dev.netdev().ok_or(ENODEV)?.mac_address();
        let mut gid = [0u8; 16];
        gid[..ETH_ALEN].copy_from_slice(&mac);
        Ok(gid)
    }

    fn alloc_ucontext(_dev: &Device<Self>, udata: &mut UData<'_>) -> Result<RiwUContext> {
        let resp = uapi::siw_uresp_alloc_ctx {
            dev_id: VENDOR_PART_ID,
            ..Default::default()
        };
        udata.respond(&resp)?;
        Ok(RiwUContext)
    }

    fn alloc_pd(dev: &Device<Self>, _udata: Option<&mut UData<'_>>) -> Result<RiwPd> {
        RiwPd::new(dev)
    }

    fn dealloc_pd(dev: &Device<Self>, pd: &Pd<Self>) {
        pd.destroy(dev);
    }

    fn create_cq(
        dev: &Device<Self>,
        attr: &CqAttr,
        udata: Option<&mut UData<'_>>,
    ) -> Result<(u32, impl PinInit<RiwCq, Error>)> {
        RiwCq::new(dev, attr, udata)
    }

    fn destroy_cq(dev: &Device<Self>, cq: &Cq<Self>) {
        cq.destroy(dev);
    }

    fn req_notify_cq(_dev: &Device<Self>, cq: &Cq<Self>, notify: CqNotify) -> bool {
        cq.arm(notify)
    }

    fn create_qp(
        dev: &Device<Self>,
        init: &QpInit,
        udata: Option<&mut UData<'_>>,
    ) -> Result<(u32, QpCaps, impl PinInit<RiwQp, Error>)> {
        RiwQp::new(dev, init, udata)
    }

    fn destroy_qp(dev: &Device<Self>, qp: &Qp<Self>) {
        RiwQp::destroy(qp, dev);
    }

    fn modify_qp(dev: &Device<Self>, qp: &Qp<Self>, modify: &QpModify) -> Result {
        RiwQp::modify(dev, qp, modify)
    }

    fn query_qp(dev: &Device<Self>, qp: &Qp<Self>) -> QpAttr {
        qp.query(dev)
    }

    #[inline(always)]
    fn doorbell(_dev: &Device<Self>, qp: &Qp<Self>) -> Result {
        RiwQp::doorbell(qp)
    }

    fn post_send(dev: &Device<Self>, qp: &Qp<Self>, wrs: &mut SendChain<'_>) -> Result {
        RiwQp::post_send(dev, qp, wrs)
    }

    fn post_recv(_dev: &Device<Self>, qp: &Qp<Self>, wrs: &mut RecvChain<'_>) -> Result {
        RiwQp::post_recv(qp, wrs)
    }

    fn post_srq_recv(_dev: &Device<Self>, srq: &Srq<Self>, wrs: &mut RecvChain<'_>) -> Result {
        srq.post(wrs)
    }

    fn poll_cq(_dev: &Device<Self>, cq: &Cq<Self>, wc: &mut [WorkCompletion]) -> usize {
        cq.poll(wc)
    }

    fn create_srq(
        dev: &Device<Self>,
        attr: &SrqAttr,
        udata: Option<&mut UData<'_>>,
    ) -> Result<(SrqAttr, impl PinInit<RiwSrq, Error>)> {
        RiwSrq::new(dev, attr, udata)
    }

    fn destroy_srq(dev: &Device<Self>, srq: &Srq<Self>) {
        srq.destroy(dev);
    }

    fn modify_srq(_dev: &Device<Self>, srq: &Srq<Self>, modify: &SrqModify) -> Result {
        srq.modify(modify)
    }

    fn query_srq(_dev: &Device<Self>, srq: &Srq<Self>) -> SrqAttr {
        srq.query()
    }

    fn reg_user_mr(
        dev: &Device<Self>,
        pd: &Pd<Self>,
        start: u64,
        length: u64,
        iova: u64,
        access: u32,
        udata: &mut UData<'_>,
    ) -> Result<(MrKeys, impl PinInit<RiwMr, Error>)> {
        RiwMr::new_user(dev, pd, start, length, iova, access, udata)
    }

    fn get_dma_mr(
        dev: &Device<Self>,
        pd: &Pd<Self>,
        access: u32,
    ) -> Result<(MrKeys, impl PinInit<RiwMr, Error>)> {
        RiwMr::new_dma(dev, pd, access)
    }

    fn alloc_mr(
        dev: &Device<Self>,
        pd: &Pd<Self>,
        max_num_sg: u32,
    ) -> Result<(MrKeys, impl PinInit<RiwMr, Error>)> {
        RiwMr::new_fast_reg(dev, pd, max_num_sg)
    }

    fn dereg_mr(dev: &Device<Self>, mr: &Mr<Self>) {
        RiwMr::destroy(mr, dev);
    }

    fn map_mr_begin(_dev: &Device<Self>, mr: &Mr<Self>) -> Result {
        mr.map_begin()
    }

    fn map_mr_page(_dev: &Device<Self>, mr: &Mr<Self>, addr: u64) -> Result {
        mr.map_page(addr)
    }

    fn iw_connect(dev: &Device<Self>, id: CmId, param: &ConnParam<'_>) -> Result {
        Endpoint::connect(dev, id, param)
    }

    fn iw_accept(dev: &Device<Self>, id: CmId, param: &ConnParam<'_>) -> Result {
        Endpoint::accept(dev, id, param)
    }

    fn iw_reject(dev: &Device<Self>, id: &CmId, private_data: &[u8]) -> Result {
        Endpoint::reject(dev, id, private_data)
    }

    fn iw_create_listen(dev: &Device<Self>, id: CmId, backlog: u32) -> Result {
        Listener::create(dev, id, backlog)
    }

    fn iw_destroy_listen(dev: &Device<Self>, id: &CmId) {
        Listener::destroy(dev, id);
    }
}
