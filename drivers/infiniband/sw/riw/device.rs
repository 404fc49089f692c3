// SPDX-License-Identifier: GPL-2.0

//! One riw RNIC's state: its object counts, tables and work queue, and how it follows
//! its netdev. The verbs that drive it are in `verbs.rs`; its limits in `limits.rs`.

use crate::cm::{Endpoint, Listener};
use crate::flush::Flusher;
use crate::kernel_ext::ida::IdAllocator;
use crate::kernel_ext::net::{NetDevice, NetdevEvent, ETH_ALEN};
use crate::kernel_ext::rdma::{Device, DeviceParams, PortEvent};
use crate::kernel_ext::workqueue::Queue;
use crate::kernel_ext::xarray::ArcTable;
use crate::limits::Counter;
use crate::mr::MemRegion;
use crate::stats::DeviceStats;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::c_str;
use kernel::prelude::*;
use kernel::sync::Arc;

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
    /// The port counters.
    pub(crate) stats: Arc<DeviceStats>,
}

#[pinned_drop]
impl PinnedDrop for RiwDevice {
    fn drop(self: Pin<&mut Self>) {
        self.flusher.stop();
    }
}

impl RiwDevice {
    /// The state of a new RNIC on `netdev`, and what the core registers it with.
    pub(crate) fn new(netdev: &NetDevice) -> Result<(DeviceParams, impl PinInit<Self, Error>)> {
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
            stats: Arc::new(DeviceStats::new()?, GFP_KERNEL)?,
        });
        Ok((params, dev))
    }

    /// Follows the netdev: the port's state, its address, and its connections, which
    /// end with the link.
    pub(crate) fn netdev_event(dev: &Device<Self>, netdev: &NetDevice, event: NetdevEvent) {
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

    /// A CQ id for the user library (which only prints it).
    pub(crate) fn next_cq_id(&self) -> u32 {
        self.cq_ids.fetch_add(1, Ordering::Relaxed)
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
