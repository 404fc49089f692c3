// SPDX-License-Identifier: GPL-2.0

//! Network devices as an RDMA driver sees them: a reference-counted `struct net_device`
//! and the netdevice notifier events that move its port.

use super::bindings;
use kernel::types::{ARef, AlwaysRefCounted, Opaque};

/// A network device (`struct net_device`).
///
/// # Invariants
///
/// A `&NetDevice` always points at a live `struct net_device`: either an [`ARef`] holds a
/// reference on it (`dev_hold`), or the context it was handed out in (RTNL held by a
/// notifier, a reference held by the RDMA core for a callback) keeps it alive.
#[repr(transparent)]
pub struct NetDevice(Opaque<bindings::net_device>);

// SAFETY: `struct net_device` is shared between threads by design; every accessor below
// reads fields the way the C code does for a device it does not lock (READ_ONCE or the
// netif_* helpers).
unsafe impl Send for NetDevice {}
// SAFETY: See `Send` above.
unsafe impl Sync for NetDevice {}

// SAFETY: `dev_hold` and `dev_put` are the reference counting of `struct net_device`; a
// device is not freed while its count is raised.
unsafe impl AlwaysRefCounted for NetDevice {
    fn inc_ref(&self) {
        // SAFETY: By the type invariant the device is alive.
        unsafe { bindings::riw_dev_hold(self.as_raw()) };
    }

    unsafe fn dec_ref(obj: core::ptr::NonNull<Self>) {
        // SAFETY: The caller gives up a reference it owns.
        unsafe { bindings::riw_dev_put(obj.as_ptr().cast()) };
    }
}

impl NetDevice {
    /// Borrows a `NetDevice` from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` points at a `struct net_device` that stays alive for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::net_device) -> &'a Self {
        // SAFETY: `NetDevice` is a transparent wrapper; the caller guarantees liveness.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// Takes over a reference the caller already holds (from `dev_hold` or a getter).
    ///
    /// # Safety
    ///
    /// `ptr` is non-null, points at a live `struct net_device`, and the caller owns one
    /// reference on it that the returned `ARef` will release.
    pub(crate) unsafe fn from_held(ptr: *mut bindings::net_device) -> ARef<Self> {
        // SAFETY: Per the function's safety requirements.
        unsafe { ARef::from_raw(core::ptr::NonNull::new_unchecked(ptr.cast())) }
    }

    pub(crate) fn as_raw(&self) -> *mut bindings::net_device {
        self.0.get()
    }

    /// The MTU, in bytes.
    pub fn mtu(&self) -> u32 {
        // SAFETY: The device is alive; `mtu` changes under RTNL and is read with READ_ONCE
        // semantics by lockless readers, which a volatile read provides.
        unsafe { core::ptr::addr_of!((*self.as_raw()).mtu).read_volatile() }
    }

    /// Whether the interface is administratively up (`netif_running`).
    pub fn is_running(&self) -> bool {
        // SAFETY: The device is alive.
        unsafe { bindings::riw_netif_running(self.as_raw()) }
    }

    /// Whether the link has carrier (`netif_carrier_ok`).
    pub fn carrier_ok(&self) -> bool {
        // SAFETY: The device is alive.
        unsafe { bindings::riw_netif_carrier_ok(self.as_raw()) }
    }

    /// Whether this is an Ethernet device (`ARPHRD_ETHER`) with a 6-byte hardware address.
    pub fn is_ethernet(&self) -> bool {
        let dev = self.as_raw();
        // SAFETY: The device is alive; `type` and `addr_len` are set before registration
        // and never change afterwards.
        let (ty, addr_len) = unsafe { ((*dev).type_, (*dev).addr_len) };
        u32::from(ty) == bindings::ARPHRD_ETHER && usize::from(addr_len) == ETH_ALEN
    }

    /// The device's Ethernet address (all zeroes if it is not an Ethernet device).
    pub fn mac_address(&self) -> [u8; ETH_ALEN] {
        let mut mac = [0u8; ETH_ALEN];
        if self.is_ethernet() {
            // SAFETY: The device is alive and, being Ethernet, `dev_addr` points at
            // `ETH_ALEN` bytes, which change only under RTNL (a racing change may be seen
            // torn, as in the C drivers; the netdev notifier reports it afterwards).
            unsafe {
                core::ptr::copy_nonoverlapping(
                    (*self.as_raw()).dev_addr,
                    mac.as_mut_ptr(),
                    ETH_ALEN,
                )
            };
        }
        mac
    }

    /// The interface name, as the NUL-padded bytes of `struct net_device::name`.
    pub fn name_bytes(&self) -> [u8; IFNAMSIZ] {
        let mut name = [0u8; IFNAMSIZ];
        // SAFETY: The device is alive and `name` is an array of `IFNAMSIZ` bytes. Renames
        // happen under RTNL; a racing one may be seen torn, which only affects reporting.
        let src = unsafe { core::ptr::addr_of!((*self.as_raw()).name) };
        // SAFETY: `src` is valid for `IFNAMSIZ` bytes, `name` is ours.
        unsafe { core::ptr::copy_nonoverlapping(src.cast::<u8>(), name.as_mut_ptr(), IFNAMSIZ) };
        name[IFNAMSIZ - 1] = 0;
        name
    }
}

/// Length of an Ethernet address.
pub const ETH_ALEN: usize = bindings::ETH_ALEN as usize;
/// Size of an interface name buffer, NUL included.
pub const IFNAMSIZ: usize = bindings::IFNAMSIZ as usize;

/// A netdevice notifier event, as far as an RDMA port cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetdevEvent {
    /// The interface was brought up.
    Up,
    /// The interface was brought down.
    Down,
    /// The carrier or another link property changed.
    Change,
    /// The MTU changed.
    ChangeMtu,
    /// The hardware address changed.
    ChangeAddr,
    /// The device is being unregistered.
    Unregister,
    /// Anything else.
    Other,
}

impl NetdevEvent {
    pub(crate) fn from_raw(event: core::ffi::c_ulong) -> Self {
        match u32::try_from(event) {
            Ok(bindings::netdev_cmd_NETDEV_UP) => Self::Up,
            Ok(bindings::netdev_cmd_NETDEV_DOWN) => Self::Down,
            Ok(bindings::netdev_cmd_NETDEV_CHANGE) => Self::Change,
            Ok(bindings::netdev_cmd_NETDEV_CHANGEMTU) => Self::ChangeMtu,
            Ok(bindings::netdev_cmd_NETDEV_CHANGEADDR) => Self::ChangeAddr,
            Ok(bindings::netdev_cmd_NETDEV_UNREGISTER) => Self::Unregister,
            _ => Self::Other,
        }
    }
}
