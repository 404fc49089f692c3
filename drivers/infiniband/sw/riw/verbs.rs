// SPDX-License-Identifier: GPL-2.0

//! The verbs: riw's `DeviceOps`, the entry points the RDMA core calls, each handing the
//! call to the object it concerns. The top of the driver: nothing imports this file.

use crate::cm::{Endpoint, Listener};
use crate::cq::RiwCq;
use crate::device::{RiwDevice, RiwUContext};
use crate::inspect;
use crate::kernel_ext::net::{NetDevice, NetdevEvent, ETH_ALEN};
use crate::kernel_ext::rdma::{
    CmId, CmIdView, ConnParam, CounterDesc, Cq, CqAttr, CqNotify, DebugfsFile, Device, DeviceAttr,
    DeviceOps, DeviceParams, DriverDetails, Gid, Mr, MrKeys, Mtu, Pd, PortAttr, PortState, Qp,
    QpAttr, QpCaps, QpInit, QpModify, RecvChain, SendChain, Srq, SrqAttr, SrqModify, UData,
    WorkCompletion, DRIVER_ID_SIW,
};
use crate::limits::{LIMITS, MAX_MSG_SIZE, VENDOR_PART_ID};
use crate::mr::RiwMr;
use crate::pd::RiwPd;
use crate::qp::RiwQp;
use crate::srq::RiwSrq;
use crate::stats::{Stat, PORT_COUNTERS};
use crate::uapi;
use kernel::c_str;
use kernel::prelude::*;

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

    const DEBUGFS_FILES: &'static [DebugfsFile<Self>] = inspect::DEBUGFS_FILES;

    fn newlink(netdev: &NetDevice) -> Result<(DeviceParams, impl PinInit<Self, Error>)> {
        RiwDevice::new(netdev)
    }

    fn netdev_event(dev: &Device<Self>, netdev: &NetDevice, event: NetdevEvent) {
        RiwDevice::netdev_event(dev, netdev, event);
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

    fn port_counters() -> &'static [CounterDesc] {
        &PORT_COUNTERS
    }

    fn read_port_counters(dev: &Device<Self>, values: &mut [u64]) {
        dev.stats.sum_into(values);
        if let Some(v) = values.get_mut(Stat::TcpRetransmits as usize) {
            *v += Endpoint::live_retransmits(dev);
        }
    }

    fn fill_res_qp(_dev: &Device<Self>, qp: &Qp<Self>, out: &mut DriverDetails<'_>) -> Result {
        inspect::fill_qp(qp, out)
    }

    fn fill_res_cq(_dev: &Device<Self>, cq: &Cq<Self>, out: &mut DriverDetails<'_>) -> Result {
        inspect::fill_cq(cq, out)
    }

    fn fill_res_mr(_dev: &Device<Self>, mr: &Mr<Self>, out: &mut DriverDetails<'_>) -> Result {
        inspect::fill_mr(mr, out)
    }

    fn fill_res_cm_id(
        dev: &Device<Self>,
        id: &CmIdView<'_>,
        out: &mut DriverDetails<'_>,
    ) -> Result {
        inspect::fill_cm_id(dev, id, out)
    }
}
