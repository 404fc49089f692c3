// SPDX-License-Identifier: GPL-2.0

//! What riw shows of itself: its details of QPs, CQs, MRs and connection manager ids in
//! `rdma resource show ... -dd`, and the files of each device's debugfs directory
//! (`connections`, `stags`). Everything here reads snapshots; nothing changes state.

use crate::cm::{Endpoint, Listener};
use crate::cq::RiwCq;
use crate::device::RiwDevice;
use crate::kernel_ext::debugfs::SeqFile;
use crate::kernel_ext::rdma::{CmIdView, Cq, DebugfsFile, Device, DriverDetails, Mr, Qp};
use crate::mr::{RegionInfo, Rights};
use crate::proto::RtrMode;
use crate::qp::{ConnectionInfo, RiwQp};
use core::fmt::{self, Write};
use kernel::c_str;
use kernel::prelude::*;

/// The files of `/sys/kernel/debug/riw/DEVICE/`.
pub(crate) const DEBUGFS_FILES: &[DebugfsFile<RiwDevice>] = &[
    DebugfsFile {
        name: c_str!("connections"),
        show: show_connections,
    },
    DebugfsFile {
        name: c_str!("stags"),
        show: show_stags,
    },
];

/// Peer-to-peer mode and its ready-to-receive message, as shown.
fn p2p_name(rtr: Option<RtrMode>) -> &'static CStr {
    match rtr {
        None => c_str!("none"),
        Some(RtrMode::Write) => c_str!("write"),
        Some(RtrMode::Read) => c_str!("read"),
        Some(RtrMode::Send) => c_str!("send"),
    }
}

fn on_off(on: bool) -> &'static CStr {
    if on {
        c_str!("on")
    } else {
        c_str!("off")
    }
}

/// A socket address, or "-" if there is none.
struct Addr(Option<crate::kernel_ext::socket::SocketAddr>);

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(a) => write!(f, "{}", a),
            None => f.write_str("-"),
        }
    }
}

/// The details of a connection both QPs and cm_ids show.
fn put_connection(info: &ConnectionInfo, out: &mut DriverDetails<'_>) -> Result {
    out.put_fmt(c_str!("ep_state"), format_args!("{}", info.state))?;
    if let Some(tcp) = info.tcp_state {
        out.put_fmt(c_str!("tcp_state"), format_args!("{}", tcp))?;
    }
    out.put_fmt(c_str!("laddr"), format_args!("{}", Addr(info.local)))?;
    out.put_fmt(c_str!("raddr"), format_args!("{}", Addr(info.remote)))?;
    if let Some(mpa) = info.mpa {
        out.put_u32(c_str!("mpa_rev"), mpa.revision as u32)?;
        out.put_str(c_str!("crc"), on_off(mpa.crc))?;
        out.put_str(c_str!("p2p"), p2p_name(mpa.rtr))?;
        out.put_u32(c_str!("mpa_ird"), mpa.ird.into())?;
        out.put_u32(c_str!("mpa_ord"), mpa.ord.into())?;
    }
    if let Some(mulpdu) = info.mulpdu {
        out.put_u32(c_str!("mulpdu"), mulpdu)?;
        out.put_u32(c_str!("orq_used"), info.reads_out)?;
        out.put_u32(c_str!("irq_used"), info.reads_in)?;
    }
    if info.tcp_state.is_some() {
        out.put_u32(c_str!("tx_unacked"), info.unacked)?;
    }
    Ok(())
}

/// `rdma resource show qp -dd`: the queues' use, the Read depths, and the connection.
pub(crate) fn fill_qp(qp: &Qp<RiwDevice>, out: &mut DriverDetails<'_>) -> Result {
    let usage = RiwQp::usage(qp);
    out.put_u32(c_str!("sq_used"), usage.sq_posted)?;
    out.put_u32(c_str!("sq_depth"), usage.sq_depth)?;
    out.put_u32(c_str!("rq_used"), usage.rq_posted)?;
    out.put_u32(c_str!("rq_depth"), usage.rq_depth)?;
    out.put_u32(c_str!("ird"), usage.ird)?;
    out.put_u32(c_str!("ord"), usage.ord)?;
    match usage.connection {
        Some(ep) => put_connection(&ep.info(), out),
        None => Ok(()),
    }
}

/// `rdma resource show cq -dd`: its entries and those not yet polled.
pub(crate) fn fill_cq(cq: &Cq<RiwDevice>, out: &mut DriverDetails<'_>) -> Result {
    let cq: &RiwCq = cq;
    let (depth, used) = cq.usage();
    out.put_u32(c_str!("cq_depth"), depth)?;
    out.put_u32(c_str!("cq_used"), used)
}

/// `rdma resource show mr -dd`: the STag and what it grants now.
pub(crate) fn fill_mr(mr: &Mr<RiwDevice>, out: &mut DriverDetails<'_>) -> Result {
    let info: RegionInfo = mr.info();
    out.put_u32_hex(c_str!("stag"), info.stag)?;
    out.put_fmt(c_str!("kind"), format_args!("{}", info.kind))?;
    out.put_fmt(c_str!("access"), format_args!("{}", Rights(info.access)))?;
    out.put_u64_hex(c_str!("iova"), info.iova)?;
    out.put_u64(c_str!("length"), info.length)?;
    out.put_str(
        c_str!("stag_state"),
        if info.valid {
            c_str!("valid")
        } else {
            c_str!("invalid")
        },
    )
}

/// `rdma resource show cm_id -dd`: the listener or the endpoint behind the id, found by
/// the number its provider data holds (the listener's or the endpoint's).
pub(crate) fn fill_cm_id(
    dev: &Device<RiwDevice>,
    id: &CmIdView<'_>,
    out: &mut DriverDetails<'_>,
) -> Result {
    let Ok(key) = u32::try_from(id.provider_data()) else {
        return Ok(());
    };
    if let Some(listener) = dev.listeners.get(key).filter(|l| l.serves(id)) {
        out.put_str(c_str!("ep_state"), c_str!("LISTEN"))?;
        return out.put_fmt(
            c_str!("laddr"),
            format_args!("{}", Addr(listener.local_addr())),
        );
    }
    match dev.endpoints.get(key).filter(|ep| ep.serves(id)) {
        Some(ep) => put_connection(&ep.info(), out),
        None => Ok(()),
    }
}

/// `connections`: every listener and endpoint of the device, one a line.
fn show_connections(dev: &Device<RiwDevice>, out: &mut SeqFile<'_>) -> fmt::Result {
    let mut next = 0;
    while let Some((index, listener)) = dev.listeners.next_from(next) {
        show_listener(&listener, out)?;
        next = index.saturating_add(1);
        if index == u32::MAX {
            break;
        }
    }
    let mut next = 0;
    while let Some((index, ep)) = dev.endpoints.next_from(next) {
        show_endpoint(&ep, out)?;
        next = index.saturating_add(1);
        if index == u32::MAX {
            break;
        }
    }
    Ok(())
}

fn show_listener(listener: &Listener, out: &mut SeqFile<'_>) -> fmt::Result {
    writeln!(
        out,
        "listener {} state LISTEN local {}",
        listener.id(),
        Addr(listener.local_addr())
    )
}

fn show_endpoint(ep: &Endpoint, out: &mut SeqFile<'_>) -> fmt::Result {
    let info = ep.info();
    write!(
        out,
        "endpoint {} state {} tcp {} local {} remote {}",
        ep.id(),
        info.state,
        info.tcp_state.unwrap_or("-"),
        Addr(info.local),
        Addr(info.remote)
    )?;
    match info.qp_num {
        Some(qp_num) => write!(out, " qp {}", qp_num)?,
        None => out.write_str(" qp -")?,
    }
    if let Some(mpa) = info.mpa {
        write!(
            out,
            " mpa_rev {} crc {} p2p {} ird {} ord {}",
            mpa.revision as u32,
            on_off(mpa.crc),
            p2p_name(mpa.rtr),
            mpa.ird,
            mpa.ord
        )?;
    }
    if let Some(mulpdu) = info.mulpdu {
        write!(
            out,
            " mulpdu {} orq_used {} irq_used {}",
            mulpdu, info.reads_out, info.reads_in
        )?;
    }
    writeln!(out, " tx_unacked {}", info.unacked)
}

/// `stags`: the STag table, one region a line.
fn show_stags(dev: &Device<RiwDevice>, out: &mut SeqFile<'_>) -> fmt::Result {
    let mut next = 0;
    while let Some((index, region)) = dev.mr_table.next_from(next) {
        let info = region.info(index);
        writeln!(
            out,
            "stag {:#010x} kind {} pd {} access {} iova {:#x} length {} state {}",
            info.stag,
            info.kind,
            info.pd,
            Rights(info.access),
            info.iova,
            info.length,
            if info.valid { "valid" } else { "invalid" }
        )?;
        next = index.saturating_add(1);
        if index == u32::MAX {
            break;
        }
    }
    Ok(())
}
