// SPDX-License-Identifier: GPL-2.0

//! A driver's presence in the RDMA core: its rdma link type, its netdevice notifier and
//! the set of devices it has registered, torn down in order when the module unloads.

use super::device::{Device, DeviceOps};
use crate::kernel_ext::bindings;
use crate::kernel_ext::debugfs::{self, Dir, SeqFile};
use crate::kernel_ext::net::{NetDevice, NetdevEvent};
use core::ffi::{c_char, c_int, c_ulong, c_void};
use core::marker::PhantomData;
use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::error::from_result;
use kernel::prelude::*;
use kernel::sync::{new_mutex, new_spinlock, Mutex, SpinLock};
use kernel::types::Opaque;

/// The registered [`Driver`] of this module. The C callbacks of rdma link types and
/// netdevice notifiers carry no context pointer, so they find their driver here; there is
/// at most one per module.
static DRIVER: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());

/// A device of this driver, from just before its registration until the driver has
/// fenced its unregistration. The entry holds a reference on the device's
/// `struct device`, so the `ib_device` stays in memory while it is tracked.
struct Tracked {
    dev: *mut bindings::ib_device,
    /// Its `dealloc_driver` has run: only the fence is left.
    deallocated: bool,
    /// The device's debugfs directory, whose files read the device's data: removed
    /// before that data is dropped.
    debugfs: Option<Dir>,
}

// SAFETY: An address, a flag and a directory (`Send`); whoever dereferences the address
// proves the device alive.
unsafe impl Send for Tracked {}

/// An RDMA driver: creates devices of type `T` on `rdma link add` and removes them all
/// when dropped.
///
/// # Invariants
///
/// While a `Driver<T>` exists, [`DRIVER`] points at it, its link type and notifier are
/// registered, and `devices` holds every device of `T` from before its registration until
/// the driver has fenced its unregistration, with a reference on its `struct device`.
///
/// The fence is `ib_unregister_device()`: it takes the device's unregistration lock,
/// which the core holds around `dealloc_driver`. Once it returns, no thread is in this
/// module's code for that device any more, even one that was just leaving
/// `dealloc_driver`; so the module may go once every device is fenced.
#[pin_data(PinnedDrop)]
pub struct Driver<T: DeviceOps> {
    #[pin]
    link_ops: Opaque<bindings::rdma_link_ops>,
    #[pin]
    netdev_notifier: Opaque<bindings::notifier_block>,
    /// Held briefly, never across a sleep.
    #[pin]
    devices: SpinLock<KVec<Tracked>>,
    /// Serialises `rdma link add`, so that two cannot bind the same netdev.
    #[pin]
    newlink_lock: Mutex<()>,
    module: &'static ThisModule,
    /// `/sys/kernel/debug/LINK_TYPE/`, if debugfs is there: dropped after the devices,
    /// whose directories are in it.
    debugfs: Option<Dir>,
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
                newlink_lock <- new_mutex!((), "riw_newlink"),
                module,
                debugfs: Dir::new(T::LINK_TYPE).ok(),
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
            driver.fence_deallocated_devices();
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

    /// Takes a device out of the set: a deallocated one, or with `all`, any.
    fn take_device(&self, all: bool) -> Option<Tracked> {
        let mut devices = self.devices.lock();
        let i = devices.iter().position(|d| all || d.deallocated)?;
        let slice = devices.as_mut_slice();
        let last = slice.len() - 1;
        slice.swap(i, last);
        // SAFETY: The last entry is moved out and the length shrunk past it, so it is
        // neither dropped nor read again here.
        let taken = unsafe {
            let taken = core::ptr::read(devices.as_ptr().add(last));
            devices.set_len(last);
            taken
        };
        Some(taken)
    }

    /// Fences the unregistration of a device taken from the set and drops its reference.
    /// Unregisters the device first if no one has yet.
    fn fence_and_put(dev: *mut bindings::ib_device) {
        // `ib_unregister_device()` unregisters a registered device, waits for a running
        // unregistration, and does nothing more for a deallocated one.
        // SAFETY: The set's reference, ours now, keeps `dev` in memory; `dealloc_driver` is
        // set, as the call requires; we may sleep (unload and `rdma link add` can).
        unsafe {
            bindings::ib_unregister_device(dev);
            kernel::bindings::put_device(
                core::ptr::addr_of_mut!((*dev).__bindgen_anon_1.dev).cast(),
            );
        }
    }

    /// Drops the devices whose `dealloc_driver` has run, so that `rdma link add` and
    /// `rdma link delete` in a loop do not pile them up.
    fn fence_deallocated_devices(&self) {
        while let Some(taken) = self.take_device(false) {
            // Deallocated: its directory went with its data.
            drop(taken.debugfs);
            Self::fence_and_put(taken.dev);
        }
    }

    /// Removes every device of this driver and waits for those someone else is removing
    /// (siw's module exit, a queued netdev removal, `rdma link delete`).
    fn unregister_all_devices(&self) {
        while let Some(taken) = self.take_device(true) {
            // Removed before the unregistration drops the data its files read.
            drop(taken.debugfs);
            Self::fence_and_put(taken.dev);
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
    driver.devices.lock().push(
        Tracked {
            dev: ib,
            deallocated: false,
            debugfs: None,
        },
        GFP_ATOMIC,
    )?;
    // SAFETY: `ib` is allocated (its `struct device` initialised) and not yet released:
    // its allocator still holds the first reference. The set's reference is dropped by
    // `Driver::fence_and_put`.
    unsafe {
        kernel::bindings::get_device(core::ptr::addr_of_mut!((*ib).__bindgen_anon_1.dev).cast())
    };
    Ok(())
}

/// A device's debugfs file: the device and what the file shows of it.
///
/// # Invariants
///
/// `dev` is a device of `T` whose data stays initialised while the file exists: the
/// file's directory is removed before the data is dropped (`take_debugfs`).
struct DeviceFile<T: DeviceOps> {
    dev: core::ptr::NonNull<Device<T>>,
    show: fn(&Device<T>, &mut SeqFile<'_>) -> core::fmt::Result,
}

// SAFETY: A device is shared by every context (`Device<T>: Sync`); `show` is a function.
unsafe impl<T: DeviceOps> Send for DeviceFile<T> {}
// SAFETY: As above.
unsafe impl<T: DeviceOps> Sync for DeviceFile<T> {}

impl<T: DeviceOps> debugfs::Show for DeviceFile<T> {
    fn show(&self, out: &mut SeqFile<'_>) -> core::fmt::Result {
        // SAFETY: The device's data lives while the file does (type invariant).
        (self.show)(unsafe { self.dev.as_ref() }, out)
    }
}

/// Gives a device that was just registered its debugfs directory, named as the device
/// was then (a rename later does not follow), with the files `T::DEBUGFS_FILES`. A device
/// without one (no debugfs, a name taken there, no memory) works all the same.
pub(super) fn add_debugfs<T: DeviceOps>(ib: *mut bindings::ib_device) {
    // SAFETY: Called from `newlink_callback`, see `Driver::get`.
    let driver = unsafe { Driver::<T>::get() };
    let Some(root) = driver.debugfs.as_ref() else {
        return;
    };
    // Unregistration, and so `dealloc_driver`, waits for this reference: it cannot take
    // the directory out before it is stored. A device already being removed gets none.
    // SAFETY: The caller's entry in the set keeps `ib` in memory.
    if !unsafe { bindings::riw_ib_device_try_get(ib) } {
        return;
    }
    // SAFETY: Registered and held: its data is initialised and stays so until the put.
    let dev = unsafe { Device::<T>::from_raw(ib) };
    let dir = device_dir(root, dev);
    if let Some(dir) = dir {
        let mut devices = driver.devices.lock();
        let dir = match devices.iter_mut().find(|d| d.dev == ib) {
            Some(d) => d.debugfs.replace(dir),
            None => Some(dir),
        };
        drop(devices);
        // Not tracked (cannot be while `newlink` runs): removed here, outside the lock.
        drop(dir);
    }
    // SAFETY: Releases the reference taken above.
    unsafe { bindings::ib_device_put(ib) };
}

/// The directory of `dev` in `root`, with its files.
fn device_dir<T: DeviceOps>(root: &Dir, dev: &Device<T>) -> Option<Dir> {
    let mut name = [0u8; bindings::IB_DEVICE_NAME_MAX as usize];
    // SAFETY: The device is alive; its name is a NUL-terminated array.
    let raw_name = unsafe { &(*dev.as_raw()).name };
    let len = raw_name
        .iter()
        .take(name.len() - 1)
        .position(|&c| c == 0)
        .unwrap_or(name.len() - 1);
    for (d, s) in name.iter_mut().zip(&raw_name[..len]) {
        *d = *s as u8;
    }
    let name = CStr::from_bytes_with_nul(&name[..=len]).ok()?;
    // SAFETY: The device's directory is dropped before the root: the root goes with the
    // driver, after every device is unregistered and its entry taken out of the set.
    let mut dir = unsafe { root.subdir(name) }.ok()?;
    for file in T::DEBUGFS_FILES {
        // INVARIANT: The directory is stored in the device's entry and taken out and
        // dropped before the device's data is (`take_debugfs`, `take_device`).
        let _ = dir.file(
            file.name,
            DeviceFile {
                dev: core::ptr::NonNull::from(dev),
                show: file.show,
            },
        );
    }
    Some(dir)
}

/// Takes out the debugfs directory of a device whose data is about to be dropped, for the
/// caller to remove first.
pub(super) fn take_debugfs<T: DeviceOps>(ib: *mut bindings::ib_device) -> Option<Dir> {
    // SAFETY: Called from a device's `dealloc_driver`, see `device_deallocated`.
    let driver = unsafe { Driver::<T>::get() };
    let mut devices = driver.devices.lock();
    devices
        .iter_mut()
        .find(|d| d.dev == ib)
        .and_then(|d| d.debugfs.take())
}

/// Notes in a device's `dealloc_driver` that it is done with this module's code but for
/// the return, which the driver fences before it goes.
pub(super) fn device_deallocated<T: DeviceOps>(ib: *mut bindings::ib_device) {
    // SAFETY: Called from a device's `dealloc_driver`; the driver fences every tracked
    // device before it goes away.
    let driver = unsafe { Driver::<T>::get() };
    if let Some(d) = driver.devices.lock().iter_mut().find(|d| d.dev == ib) {
        d.deallocated = true;
    }
}
