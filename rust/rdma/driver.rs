// SPDX-License-Identifier: GPL-2.0

//! A driver's presence in the RDMA core: its rdma link type, its netdevice notifier and
//! the set of devices it has registered, torn down in order when the module unloads.

use super::device::{Device, DeviceOps};
use crate::kernel_ext::bindings;
use crate::kernel_ext::net::{NetDevice, NetdevEvent};
use core::ffi::{c_char, c_int, c_ulong, c_void};
use core::marker::PhantomData;
use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::error::from_result;
use kernel::prelude::*;
use kernel::sync::{new_condvar, new_mutex, new_spinlock, CondVar, Mutex, SpinLock};
use kernel::types::Opaque;

/// The registered [`Driver`] of this module. The C callbacks of rdma link types and
/// netdevice notifiers carry no context pointer, so they find their driver here; there is
/// at most one per module.
static DRIVER: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());

/// A registered `struct ib_device`, tracked so that module unload can remove it.
#[derive(Clone, Copy, PartialEq, Eq)]
struct DevicePtr(*mut bindings::ib_device);

// SAFETY: Only an address; whoever dereferences it proves the device alive.
unsafe impl Send for DevicePtr {}

/// An RDMA driver: creates devices of type `T` on `rdma link add` and removes them all
/// when dropped.
///
/// # Invariants
///
/// While a `Driver<T>` exists, [`DRIVER`] points at it, its link type and notifier are
/// registered, and `devices` holds every device of `T` between its registration and its
/// `dealloc_driver`.
#[pin_data(PinnedDrop)]
pub struct Driver<T: DeviceOps> {
    #[pin]
    link_ops: Opaque<bindings::rdma_link_ops>,
    #[pin]
    netdev_notifier: Opaque<bindings::notifier_block>,
    /// A spinlock, not a mutex: unload frees it as soon as the last device is gone, and a
    /// mutex may still be touched by its unlocker after another thread acquired it.
    #[pin]
    devices: SpinLock<KVec<DevicePtr>>,
    #[pin]
    devices_gone: CondVar,
    /// Serialises `rdma link add`, so that two cannot bind the same netdev.
    #[pin]
    newlink_lock: Mutex<()>,
    module: &'static ThisModule,
    _ops: PhantomData<T>,
}

// SAFETY: The C structures inside are only touched by the RDMA and netdev cores under
// their own locks once registered; the rest is `Sync` (locks) or immutable.
unsafe impl<T: DeviceOps> Sync for Driver<T> {}
// SAFETY: As for `Sync`; nothing in the driver is tied to the thread that made it.
unsafe impl<T: DeviceOps> Send for Driver<T> {}

impl<T: DeviceOps> Driver<T> {
    /// Registers the driver's rdma link type and netdevice notifier.
    pub fn register(module: &'static ThisModule) -> Result<Pin<KBox<Self>>> {
        let driver = KBox::pin_init(
            try_pin_init!(Self {
                link_ops <- Opaque::ffi_init(|ops: *mut bindings::rdma_link_ops| {
                    // SAFETY: `ops` is valid for writes; a zeroed list head is what
                    // `rdma_link_register` expects to initialise.
                    unsafe {
                        ops.write(bindings::rdma_link_ops {
                            type_: T::LINK_TYPE.as_char_ptr().cast(),
                            newlink: Some(Self::newlink_callback),
                            ..Default::default()
                        })
                    }
                }),
                netdev_notifier <- Opaque::ffi_init(|nb: *mut bindings::notifier_block| {
                    // SAFETY: `nb` is valid for writes.
                    unsafe {
                        nb.write(bindings::notifier_block {
                            notifier_call: Some(Self::netdev_event_callback),
                            ..Default::default()
                        })
                    }
                }),
                devices <- new_spinlock!(KVec::new(), "riw_devices"),
                devices_gone <- new_condvar!("riw_devices_gone"),
                newlink_lock <- new_mutex!((), "riw_newlink"),
                module,
                _ops: PhantomData,
            }),
            GFP_KERNEL,
        )?;

        let ptr = (&*driver as *const Self).cast_mut().cast::<c_void>();
        // Only one driver per module: the callbacks could not tell two apart. (The drop of
        // a driver that is not the registered one undoes nothing.)
        DRIVER
            .compare_exchange(
                core::ptr::null_mut(),
                ptr,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .map_err(|_| EBUSY)?;
        // SAFETY: Once, for the registered driver; its drop undoes it (as does a failure
        // below).
        if let Err(e) = unsafe { crate::kernel_ext::workqueue::release::init() } {
            DRIVER.store(core::ptr::null_mut(), Ordering::Release);
            return Err(e);
        }
        // SAFETY: The notifier block is pinned in `driver` and unregistered in its drop.
        let ret = unsafe { bindings::register_netdevice_notifier(driver.netdev_notifier.get()) };
        if ret != 0 {
            // SAFETY: Set up above; nothing used it yet.
            unsafe { crate::kernel_ext::workqueue::release::exit() };
            DRIVER.store(core::ptr::null_mut(), Ordering::Release);
            return Err(Error::from_errno(ret));
        }
        // SAFETY: `link_ops` is pinned in `driver` and unregistered in its drop; the type
        // string is 'static.
        unsafe { bindings::rdma_link_register(driver.link_ops.get()) };
        Ok(driver)
    }

    /// The registered driver.
    ///
    /// # Safety
    ///
    /// Called from a callback of this driver's link ops, notifier or devices, all of which
    /// the driver's drop disables before the driver goes away.
    unsafe fn get<'a>() -> &'a Self {
        // SAFETY: By the invariants, `DRIVER` points at the live `Driver<T>` that installed
        // the callback we are called from.
        unsafe { &*DRIVER.load(Ordering::Acquire).cast::<Self>() }
    }

    unsafe extern "C" fn newlink_callback(
        name: *const c_char,
        ndev: *mut bindings::net_device,
    ) -> c_int {
        from_result(|| {
            // SAFETY: A link-ops callback, see `get`.
            let driver = unsafe { Self::get() };
            // SAFETY: The netlink handler holds a reference on `ndev` during the call.
            let netdev = unsafe { NetDevice::from_raw(ndev) };
            let _guard = driver.newlink_lock.lock();
            // The core would refuse a taken name too, but with ENFILE.
            // SAFETY: `name` is the NUL-terminated name from netlink; a found device comes
            // with a reference.
            let same_name = unsafe {
                bindings::ib_device_get_by_name(name, bindings::rdma_driver_id_RDMA_DRIVER_UNKNOWN)
            };
            if !same_name.is_null() {
                // SAFETY: Releases the lookup's reference.
                unsafe { bindings::ib_device_put(same_name) };
                return Err(EEXIST);
            }
            // One soft-iWARP device per netdev, whichever driver made it: siw treats every
            // device with its driver id on a netdev as its own.
            // SAFETY: `ndev` is alive; a found device comes with a reference.
            let existing = unsafe { bindings::ib_device_get_by_netdev(ndev, T::DRIVER_ID) };
            if !existing.is_null() {
                // SAFETY: Releases the lookup's reference.
                unsafe { bindings::ib_device_put(existing) };
                return Err(EEXIST);
            }
            let (params, init) = T::newlink(netdev)?;
            Device::<T>::register(name, netdev, driver.module, params, init)?;
            Ok(0)
        })
    }

    unsafe extern "C" fn netdev_event_callback(
        _nb: *mut bindings::notifier_block,
        event: c_ulong,
        info: *mut c_void,
    ) -> c_int {
        // SAFETY: Netdevice notifiers are handed a `struct netdev_notifier_info`.
        let ndev = unsafe { bindings::riw_netdev_notifier_info_to_dev(info) };
        // SAFETY: A notifier callback, see `get`.
        let driver = unsafe { Self::get() };
        let event = NetdevEvent::from_raw(event);
        // SAFETY: The notifier runs under RTNL with the netdev alive.
        unsafe { Device::<T>::netdev_event(driver.module, NetDevice::from_raw(ndev), event) };
        bindings::NOTIFY_DONE as c_int
    }

    /// Removes every device of this driver, including those someone else is removing.
    fn unregister_all_devices(&self) {
        loop {
            // One at a time: the unregistration sleeps, the lock must not be held.
            let next = self.devices.lock().iter().copied().find(|dev| {
                // SAFETY: Tracked devices are alive until their `dealloc_driver`, which
                // untracks them under this lock. A device already being unregistered
                // has no references left to take.
                unsafe { bindings::riw_ib_device_try_get(dev.0) }
            });
            let Some(dev) = next else { break };
            // SAFETY: We hold a reference, which this call consumes; `dealloc_driver` is
            // set, as the function requires. The core fences concurrent unregistrations.
            unsafe { bindings::ib_unregister_device_and_put(dev.0) };
        }
        // The rest are being unregistered by someone else (siw's module exit, a queued
        // netdev removal): wait for their `dealloc_driver`.
        let mut devices = self.devices.lock();
        while !devices.is_empty() {
            self.devices_gone.wait(&mut devices);
        }
    }
}

#[pinned_drop]
impl<T: DeviceOps> PinnedDrop for Driver<T> {
    fn drop(self: Pin<&mut Self>) {
        let this = (&*self as *const Self).cast_mut().cast::<c_void>();
        if DRIVER.load(Ordering::Acquire) != this {
            return;
        }
        // No new devices, no more netdev events, then remove the devices themselves.
        // SAFETY: Registered in `register`; this waits for running `newlink` calls.
        unsafe { bindings::rdma_link_unregister(self.link_ops.get()) };
        // SAFETY: Registered in `register`; this waits for running notifier calls.
        unsafe { bindings::unregister_netdevice_notifier(self.netdev_notifier.get()) };
        self.unregister_all_devices();
        // SAFETY: Set up in `register`; with the devices gone, no region is left to drop,
        // and this runs the releases still queued.
        unsafe { crate::kernel_ext::workqueue::release::exit() };
        DRIVER.store(core::ptr::null_mut(), Ordering::Release);
    }
}

/// Records a device of `T` before its registration.
pub(super) fn track_device<T: DeviceOps>(ib: *mut bindings::ib_device) -> Result {
    // SAFETY: Called from `newlink_callback`, see `Driver::get`.
    let driver = unsafe { Driver::<T>::get() };
    driver.devices.lock().push(DevicePtr(ib), GFP_ATOMIC)?;
    Ok(())
}

/// Forgets a device of `T` in its `dealloc_driver`.
pub(super) fn untrack_device<T: DeviceOps>(ib: *mut bindings::ib_device) {
    // SAFETY: Called from a device's `dealloc_driver`; the driver's drop waits for every
    // tracked device to get there before the driver goes away.
    let driver = unsafe { Driver::<T>::get() };
    let mut devices = driver.devices.lock();
    let slice = devices.as_mut_slice();
    if let Some(i) = slice.iter().position(|&d| d == DevicePtr(ib)) {
        let last = slice.len() - 1;
        slice.swap(i, last);
        // SAFETY: Shrinks by one; the dropped slot holds a `Copy` pointer.
        unsafe { devices.set_len(last) };
    }
    if devices.is_empty() {
        driver.devices_gone.notify_all();
    }
}
