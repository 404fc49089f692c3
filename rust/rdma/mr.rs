// SPDX-License-Identifier: GPL-2.0

//! Memory regions: pinned user memory (`struct ib_umem`), DMA and fast-registration
//! regions, and the C trampolines of their ops. Unlike the other verbs objects, the driver
//! allocates `struct ib_mr` itself.

use super::device::{Device, DeviceOps};
use super::object::Object;
use super::ucontext::UData;
use super::verbs::Pd;
use crate::kernel_ext::bindings;
use core::ffi::c_int;
use core::ptr::NonNull;
use kernel::prelude::*;

/// A memory region of driver `T`.
pub type Mr<T> = Object<bindings::ib_mr, <T as DeviceOps>::Mr>;

/// The keys and extent of a new memory region.
#[derive(Clone, Copy, Debug, Default)]
pub struct MrKeys {
    pub lkey: u32,
    pub rkey: u32,
    pub iova: u64,
    pub length: u64,
}

/// `IB_ACCESS_*` bits, as consumers pass them.
pub mod access {
    use crate::kernel_ext::bindings;
    pub const LOCAL_WRITE: u32 = bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE;
    pub const REMOTE_WRITE: u32 = bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE;
    pub const REMOTE_READ: u32 = bindings::ib_access_flags_IB_ACCESS_REMOTE_READ;
    pub const REMOTE_ATOMIC: u32 = bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;
    pub const MW_BIND: u32 = bindings::ib_access_flags_IB_ACCESS_MW_BIND;
    pub const ZERO_BASED: u32 = bindings::ib_access_flags_IB_ZERO_BASED;
    pub const HUGETLB: u32 = bindings::ib_access_flags_IB_ACCESS_HUGETLB;
    /// Hints a device may ignore (`IB_ACCESS_OPTIONAL`).
    pub const OPTIONAL: u32 = bindings::ib_access_flags_IB_ACCESS_OPTIONAL;
}

/// User memory pinned for a memory region (`struct ib_umem`). It may be dropped in any
/// context: where sleeping is not allowed, the release goes to a work item.
///
/// # Invariants
///
/// `mem` is a live umem from `riw_umem_get`, released on drop.
pub struct UserMemory {
    mem: NonNull<bindings::riw_umem>,
}

// SAFETY: A umem is plain pinned pages, usable from any thread.
unsafe impl Send for UserMemory {}
// SAFETY: As above; it is not modified after creation.
unsafe impl Sync for UserMemory {}

impl UserMemory {
    /// Pins `len` bytes of the calling process at `addr` for `dev`, with `access`.
    pub fn pin<T: DeviceOps>(dev: &Device<T>, addr: u64, len: u64, access: u32) -> Result<Self> {
        let (addr, len) = (usize::try_from(addr)?, usize::try_from(len)?);
        let mut err: c_int = 0;
        // SAFETY: A live device; the core validates the user range and access.
        let umem = unsafe {
            bindings::riw_umem_get(dev.as_raw(), addr as _, len, access as c_int, &mut err)
        };
        NonNull::new(umem)
            .map(|mem| Self { mem })
            .ok_or_else(|| Error::from_errno(err))
    }
}

impl UserMemory {
    /// Copies `dst.len()` bytes from `offset` of the region (from its start address).
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result {
        // SAFETY: A live umem (type invariant); the copy checks the range against its
        // length and goes through the pinned pages, never through the user mapping.
        let ret = unsafe {
            bindings::riw_umem_copy_from(
                dst.as_mut_ptr().cast(),
                self.mem.as_ptr(),
                offset,
                dst.len(),
            )
        };
        if ret != 0 {
            return Err(Error::from_errno(ret));
        }
        Ok(())
    }

    /// Continues the CRC32c register value `crc` over `len` bytes at `offset` of the
    /// region, read in place.
    pub fn crc32c(&self, crc: u32, offset: usize, len: usize) -> Result<u32> {
        let mut crc = crc;
        // SAFETY: A live umem (type invariant); the walk checks the range against its
        // length and reads the pinned pages through kernel mappings.
        let ret = unsafe { bindings::riw_umem_crc32c(self.mem.as_ptr(), offset, len, &mut crc) };
        if ret != 0 {
            return Err(Error::from_errno(ret));
        }
        Ok(crc)
    }

    /// The umem, for the socket layer's zero-copy sends.
    pub(in crate::kernel_ext) fn as_raw(&self) -> *mut bindings::riw_umem {
        self.mem.as_ptr()
    }

    /// Copies `src` to `offset` of the region.
    #[inline]
    pub fn write(&self, offset: usize, src: &[u8]) -> Result {
        // SAFETY: As for `read`.
        let ret = unsafe {
            bindings::riw_umem_copy_to(self.mem.as_ptr(), offset, src.as_ptr().cast(), src.len())
        };
        if ret != 0 {
            return Err(Error::from_errno(ret));
        }
        Ok(())
    }
}

/// The memory a kernel consumer's DMA region (`get_dma_mr`) and its fast-registration
/// regions name. riw is a software device without a DMA device, so the RDMA core maps
/// buffers "virtually": a DMA address is the kernel virtual address of the buffer.
///
/// The driver copies only at addresses a kernel consumer handed it: SGEs of its DMA
/// region, which name buffers it mapped (`ib_dma_map_*`) and keeps until the work request
/// completes, after the copy; and pages it mapped into a fast-registration region, which
/// stay mapped until it invalidates the region, while the driver copies from them only as
/// long as the region is valid (invalidation waits for a copy in flight).
pub struct DmaMemory(());

impl DmaMemory {
    /// The kernel's memory, as the DMA regions of kernel consumers of `T` address it.
    pub fn of_kernel_consumers<T: DeviceOps>(_dev: &Device<T>) -> Self {
        Self(())
    }

    /// Copies `dst.len()` bytes from DMA address `addr`.
    pub fn read(&self, addr: u64, dst: &mut [u8]) -> Result {
        let src = usize::try_from(addr).map_err(|_| EFAULT)?;
        if src == 0 || src.checked_add(dst.len()).is_none() {
            return Err(EFAULT);
        }
        // SAFETY: `src` is a buffer a kernel consumer mapped and keeps for this copy (see
        // the type's documentation); `dst` is ours.
        unsafe { core::ptr::copy_nonoverlapping(src as *const u8, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    /// Copies `src` to DMA address `addr`.
    pub fn write(&self, addr: u64, src: &[u8]) -> Result {
        let dst = usize::try_from(addr).map_err(|_| EFAULT)?;
        if dst == 0 || dst.checked_add(src.len()).is_none() {
            return Err(EFAULT);
        }
        // SAFETY: As for `read`: a mapped receive (or target) buffer of the consumer.
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), dst as *mut u8, src.len()) };
        Ok(())
    }
}

impl Drop for UserMemory {
    fn drop(&mut self) {
        // SAFETY: From `riw_umem_get`, released once; `riw_umem_put` defers the release
        // when this context may not sleep.
        unsafe { bindings::riw_umem_put(self.mem.as_ptr()) };
    }
}

/// Publishes a new MR to the core: its keys, then the raw pointer (or the errno).
fn finish<T: DeviceOps>(
    made: Result<(MrKeys, impl PinInit<T::Mr, Error>)>,
) -> *mut bindings::ib_mr {
    let result = made.and_then(|(keys, init)| {
        let mr = Mr::<T>::new_boxed(init)?;
        // SAFETY: Fresh and ours until returned.
        unsafe {
            (*mr).lkey = keys.lkey;
            (*mr).rkey = keys.rkey;
            (*mr).iova = keys.iova;
            (*mr).length = keys.length;
        }
        Ok(mr)
    });
    match result {
        Ok(mr) => mr,
        // ERR_PTR(): the errno as a pointer, which the core checks with IS_ERR().
        Err(e) => e.to_errno() as isize as *mut bindings::ib_mr,
    }
}

pub(super) unsafe extern "C" fn reg_user_mr_callback<T: DeviceOps>(
    pd: *mut bindings::ib_pd,
    start: u64,
    length: u64,
    iova: u64,
    access: c_int,
    udata: *mut bindings::ib_udata,
) -> *mut bindings::ib_mr {
    // SAFETY: A live PD of a device of `T`; a user command with udata.
    let (dev, pd, mut udata) = unsafe {
        (
            Pd::<T>::device::<T>(pd),
            Pd::<T>::from_raw(pd),
            UData::from_raw(udata),
        )
    };
    finish::<T>(T::reg_user_mr(
        dev,
        pd,
        start,
        length,
        iova,
        access as u32,
        &mut udata,
    ))
}

pub(super) unsafe extern "C" fn get_dma_mr_callback<T: DeviceOps>(
    pd: *mut bindings::ib_pd,
    access: c_int,
) -> *mut bindings::ib_mr {
    // SAFETY: A live PD of a device of `T`.
    let (dev, pd) = unsafe { (Pd::<T>::device::<T>(pd), Pd::<T>::from_raw(pd)) };
    finish::<T>(T::get_dma_mr(dev, pd, access as u32))
}

pub(super) unsafe extern "C" fn alloc_mr_callback<T: DeviceOps>(
    pd: *mut bindings::ib_pd,
    mr_type: bindings::ib_mr_type,
    max_num_sg: u32,
) -> *mut bindings::ib_mr {
    // SAFETY: A live PD of a device of `T`.
    let (dev, pd) = unsafe { (Pd::<T>::device::<T>(pd), Pd::<T>::from_raw(pd)) };
    if mr_type != bindings::ib_mr_type_IB_MR_TYPE_MEM_REG {
        return EINVAL.to_errno() as isize as *mut bindings::ib_mr;
    }
    finish::<T>(T::alloc_mr(dev, pd, max_num_sg))
}

pub(super) unsafe extern "C" fn map_mr_sg_callback<T: DeviceOps>(
    mr: *mut bindings::ib_mr,
    sg: *mut bindings::scatterlist,
    sg_nents: c_int,
    sg_offset: *mut core::ffi::c_uint,
) -> c_int {
    // SAFETY: An MR of a device of `T`, in use by its consumer.
    let (dev, m) = unsafe { (Mr::<T>::device::<T>(mr), Mr::<T>::from_raw(mr)) };
    if let Err(e) = T::map_mr_begin(dev, m) {
        return e.to_errno();
    }
    // SAFETY: The consumer's DMA-mapped list of `sg_nents` entries; the core splits it
    // into pages of `mr->page_size`, hands each to `set_page_callback` and sets the MR's
    // iova and length.
    unsafe { bindings::ib_sg_to_pages(mr, sg, sg_nents, sg_offset, Some(set_page_callback::<T>)) }
}

unsafe extern "C" fn set_page_callback<T: DeviceOps>(mr: *mut bindings::ib_mr, addr: u64) -> c_int {
    // SAFETY: Called by `ib_sg_to_pages` for the MR `map_mr_sg_callback` passed.
    let (dev, m) = unsafe { (Mr::<T>::device::<T>(mr), Mr::<T>::from_raw(mr)) };
    match T::map_mr_page(dev, m, addr) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

pub(super) unsafe extern "C" fn dereg_mr_callback<T: DeviceOps>(
    mr: *mut bindings::ib_mr,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: An MR made by `finish`, whose device (set by the core) is a device of `T`;
    // the core is done with it.
    unsafe {
        T::dereg_mr(Mr::<T>::device::<T>(mr), Mr::<T>::from_raw(mr));
        Mr::<T>::free_boxed(mr);
    }
    0
}
