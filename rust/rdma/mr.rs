// SPDX-License-Identifier: GPL-2.0

//! Memory regions: pinned user memory (`struct ib_umem`), DMA and fast-registration
//! regions, and the C trampolines of their ops. Unlike the other verbs objects, the driver
//! allocates `struct ib_mr` itself.

use super::device::{Device, DeviceOps};
use super::object::Object;
use super::ucontext::UData;
use super::verbs::Pd;
use crate::kernel_ext::bindings;
use crate::kernel_ext::workqueue::release;
use core::ffi::{c_int, c_uint};
use core::mem::MaybeUninit;
use core::ptr::NonNull;
use kernel::error::from_err_ptr;
use kernel::page::{PAGE_MASK, PAGE_SHIFT, PAGE_SIZE};
use kernel::prelude::*;
use kernel::types::Opaque;

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

/// User memory pinned for a memory region (`struct ib_umem`), with a table of its pages so
/// that the data path finds the page of an offset at once (a scatterlist walk from the
/// start costs per access, and with the region's size). It may be dropped in any context.
///
/// # Invariants
///
/// `mem` is from [`KBox::into_raw`], owned by this object: `umem` is a live umem from
/// `ib_umem_get()`, and `pages` holds each of its pages in order; `release` is initialised
/// with [`release_work`].
pub struct UserMemory {
    mem: NonNull<Pinned>,
}

/// What a [`UserMemory`] owns, in one allocation.
#[repr(C)]
struct Pinned {
    umem: *mut bindings::ib_umem,
    /// Each pinned page, in order; byte 0 of the region is at `first` in `pages[0]`.
    pages: KVVec<*mut bindings::page>,
    first: u32,
    /// `ib_umem_release()` may sleep, and the data path can drop the last reference to a
    /// region where it must not (in softirq, under a _bh spinlock): the release then goes
    /// to this work item, prepared with the region so that it cannot fail later.
    release: Opaque<bindings::work_struct>,
}

// SAFETY: A umem is plain pinned pages, usable from any thread.
unsafe impl Send for UserMemory {}
// SAFETY: As above; it is not modified after creation.
unsafe impl Sync for UserMemory {}

/// Releases a region.
///
/// # Safety
///
/// `mem` is the `Pinned` of a [`UserMemory`] that gave it up, in a context that may
/// sleep.
unsafe fn release_now(mem: *mut Pinned) {
    // SAFETY: By the function's contract, the allocation and its umem are ours.
    let mem = unsafe { KBox::from_raw(mem) };
    // SAFETY: A live umem, released once; the context may sleep.
    unsafe { bindings::ib_umem_release(mem.umem) };
}

/// The release of a region dropped where it could not sleep.
///
/// # Safety
///
/// Called by the work queue for the `release` item of a `Pinned` given up to it.
unsafe extern "C" fn release_work(work: *mut bindings::work_struct) {
    // SAFETY: `work` is the `release` field of a `Pinned` (`repr(C)`) that the work owns;
    // work items run in process context.
    unsafe { release_now(work.byte_sub(core::mem::offset_of!(Pinned, release)).cast()) };
}

/// Whether the current context may sleep. Without CONFIG_PREEMPT_COUNT a plain spinlock
/// does not show; riw holds regions in atomic context only in softirq or under _bh
/// spinlocks, which `in_softirq()` sees anyway.
fn may_sleep() -> bool {
    // SAFETY: Each reads the state of the current context.
    unsafe {
        bindings::riw_in_task()
            && !bindings::riw_in_softirq()
            && !bindings::riw_irqs_disabled()
            && (!cfg!(CONFIG_PREEMPT_COUNT) || bindings::riw_preemptible())
    }
}

impl UserMemory {
    /// Pins `len` bytes of the calling process at `addr` for `dev`, with `access`.
    pub fn pin<T: DeviceOps>(dev: &Device<T>, addr: u64, len: u64, access: u32) -> Result<Self> {
        let (addr, len) = (usize::try_from(addr)?, usize::try_from(len)?);
        // SAFETY: A live device; the core validates the user range and access.
        let umem = from_err_ptr(unsafe {
            bindings::ib_umem_get(dev.as_raw(), addr as _, len, access as c_int)
        })?;
        let pinned = Self::table(umem).and_then(|(first, pages)| {
            let pinned = Pinned {
                umem,
                pages,
                first,
                release: Opaque::uninit(),
            };
            Ok(KBox::into_raw(KBox::new(pinned, GFP_KERNEL)?))
        });
        let mem = match pinned {
            Ok(mem) => mem,
            Err(e) => {
                // SAFETY: Ours, and never handed out; pinning may sleep, so may this.
                unsafe { bindings::ib_umem_release(umem) };
                return Err(e);
            }
        };
        // SAFETY: A fresh allocation, which does not move until it is freed.
        unsafe { bindings::riw_init_work((*mem).release.get(), Some(release_work)) };
        Ok(Self {
            // SAFETY: From `KBox::into_raw`, not NULL.
            mem: unsafe { NonNull::new_unchecked(mem) },
        })
    }

    /// The offset of byte 0 of `umem` in its first page, and each of its pages in order.
    fn table(umem: *mut bindings::ib_umem) -> Result<(c_uint, KVVec<*mut bindings::page>)> {
        // SAFETY: A live umem, just made.
        let (first, npages) = unsafe {
            (
                bindings::riw_ib_umem_offset(umem) as c_uint,
                bindings::riw_ib_umem_num_pages(umem),
            )
        };
        let mut pages = KVVec::with_capacity(npages, GFP_KERNEL)?;
        let mut iter = MaybeUninit::<kernel::bindings::sg_page_iter>::uninit();
        // SAFETY: `for_each_sgtable_page()` over the umem's table, which ib_umem_get()
        // filled; `iter` is ours (the same C type in both bindings) and started before
        // it is read.
        unsafe {
            let sgt = core::ptr::addr_of_mut!((*umem).sgt_append.sgt);
            kernel::bindings::__sg_page_iter_start(
                iter.as_mut_ptr(),
                (*sgt).sgl.cast(),
                (*sgt).orig_nents,
                0,
            );
            while pages.len() < npages && kernel::bindings::__sg_page_iter_next(iter.as_mut_ptr()) {
                pages.push(
                    bindings::riw_sg_page_iter_page(iter.as_mut_ptr().cast()),
                    GFP_KERNEL,
                )?;
            }
        }
        // ib_umem_get() pinned every page of the range: the table is whole.
        // SAFETY: Warns, once.
        if unsafe { bindings::riw_warn_on_once(pages.len() != npages) } {
            return Err(EFAULT);
        }
        Ok((first, pages))
    }

    /// The region's length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        // SAFETY: A live umem (type invariant).
        unsafe { (*self.mem.as_ref().umem).length }
    }

    /// The page holding byte `offset` of the region, the offset of that byte in it, and
    /// how many bytes of the region from there lie in that page (at most `len`); `None`
    /// if `offset` is past the region's pages.
    #[inline]
    pub(in crate::kernel_ext) fn page_piece(
        &self,
        offset: usize,
        len: usize,
    ) -> Option<(NonNull<bindings::page>, usize, usize)> {
        // SAFETY: Ours (type invariant), not modified after creation.
        let mem = unsafe { self.mem.as_ref() };
        let pos = offset.checked_add(mem.first as usize)?;
        let page = NonNull::new(*mem.pages.get(pos >> PAGE_SHIFT)?)?;
        let in_page = pos & !PAGE_MASK;
        Some((page, in_page, len.min(PAGE_SIZE - in_page)))
    }

    /// Calls `f` on each page's piece of `len` bytes at `offset` of the region, in order:
    /// its kernel address, its length and the bytes before it in the range. Each caller
    /// gets a loop of its own, with `f` inlined, for the data path.
    #[inline(always)]
    fn walk(&self, offset: usize, len: usize, mut f: impl FnMut(*mut u8, usize, usize)) -> Result {
        if offset > self.len() || len > self.len() - offset {
            return Err(EINVAL);
        }
        let mut done = 0;
        while done < len {
            let Some((page, in_page, n)) = self.page_piece(offset + done, len - done) else {
                // The range is inside the region, whose table is whole: a bug.
                // SAFETY: Warns, once.
                unsafe { bindings::riw_warn_on_once(true) };
                return Err(EFAULT);
            };
            // SAFETY: A page pinned while `self` lives, mapped for this piece and unmapped
            // below (the same C type in both bindings).
            let addr = unsafe { kernel::bindings::kmap_local_page(page.as_ptr().cast()) };
            // SAFETY: `in_page + n` is within the page mapped at `addr`.
            f(unsafe { addr.cast::<u8>().add(in_page) }, n, done);
            // SAFETY: Mapped above, the last mapping of this task.
            unsafe { kernel::bindings::kunmap_local(addr) };
            done += n;
        }
        Ok(())
    }

    /// Copies `dst.len()` bytes from `offset` of the region (from its start address).
    #[inline]
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result {
        let to = dst.as_mut_ptr();
        self.walk(offset, dst.len(), |piece, n, done| {
            // SAFETY: `piece` is `n` mapped bytes of the pinned pages (never the user
            // mapping) and `done + n <= dst.len()`.
            unsafe { core::ptr::copy_nonoverlapping(piece, to.add(done), n) }
        })
    }

    /// Continues the CRC32c register value `crc` over `len` bytes at `offset` of the
    /// region, read in place.
    #[inline]
    pub fn crc32c(&self, crc: u32, offset: usize, len: usize) -> Result<u32> {
        let mut crc = crc;
        self.walk(offset, len, |piece, n, _| {
            // SAFETY: `piece` is `n` mapped bytes, `n` at most a page.
            crc = unsafe { bindings::crc32c(crc, piece.cast(), n as c_uint) };
        })?;
        Ok(crc)
    }

    /// Copies `src` to `offset` of the region.
    #[inline]
    pub fn write(&self, offset: usize, src: &[u8]) -> Result {
        let from = src.as_ptr();
        self.walk(offset, src.len(), |piece, n, done| {
            // SAFETY: As in `read`, the other way.
            unsafe { core::ptr::copy_nonoverlapping(from.add(done), piece, n) }
        })
    }
}

impl Drop for UserMemory {
    fn drop(&mut self) {
        let mem = self.mem.as_ptr();
        if may_sleep() {
            // SAFETY: Ours (type invariant), given up here; this context may sleep.
            unsafe { release_now(mem) };
        } else {
            // SAFETY: The work item is initialised (type invariant) and the allocation,
            // given up to it, stays until it runs. Regions exist only while the driver is
            // registered, which keeps the release queue up.
            unsafe { release::queue((*mem).release.get()) };
        }
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

    /// DMA address `addr` as a kernel address with `len` bytes after it in the address
    /// space; EFAULT for the null address or a range that wraps.
    fn address(addr: u64, len: usize) -> Result<usize> {
        let at = usize::try_from(addr).map_err(|_| EFAULT)?;
        if at == 0 || at.checked_add(len).is_none() {
            return Err(EFAULT);
        }
        Ok(at)
    }

    /// Copies `dst.len()` bytes from DMA address `addr`.
    pub fn read(&self, addr: u64, dst: &mut [u8]) -> Result {
        let src = Self::address(addr, dst.len())?;
        // SAFETY: `src` is a buffer a kernel consumer mapped and keeps for this copy (see
        // the type's documentation); `dst` is ours.
        unsafe { core::ptr::copy_nonoverlapping(src as *const u8, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    /// Continues the CRC32c register value `crc` over `len` bytes at DMA address `addr`,
    /// read in place.
    pub fn crc32c(&self, crc: u32, addr: u64, len: usize) -> Result<u32> {
        let src = Self::address(addr, len)?;
        // SAFETY: As for `read`: a buffer the consumer mapped and keeps for this read.
        let bytes = unsafe { core::slice::from_raw_parts(src as *const u8, len) };
        Ok(crate::kernel_ext::crc::crc32c(crc, bytes))
    }

    /// The piece of at most `len` bytes at DMA address `addr` that lies in one page, with
    /// a reference on that page, which keeps it allocated while the piece lives; `None` for
    /// an address outside the kernel's direct map. The same rule as for `read` holds:
    /// only at an address the consumer keeps mapped for the call.
    pub fn piece(&self, addr: u64, len: usize) -> Option<KernelPiece> {
        if len == 0 {
            return None;
        }
        let va = Self::address(addr, len).ok()?;
        let ptr = va as *const core::ffi::c_void;
        // SAFETY: Only tests the address, which is not accessed.
        if !unsafe { bindings::riw_virt_addr_valid(ptr) } {
            return None;
        }
        // SAFETY: An address of the direct map, which has a `struct page` for each of its
        // pages.
        let page = NonNull::new(unsafe { bindings::riw_virt_to_page(ptr) })?;
        // SAFETY: The page holds a buffer the consumer keeps (see the type's documentation),
        // so it is allocated and its count is not zero while we take one more.
        unsafe { bindings::riw_get_page(page.as_ptr()) };
        let offset = va & !PAGE_MASK;
        // INVARIANT: The reference taken above; the piece ends within the page.
        Some(KernelPiece {
            page,
            offset: offset as u32,
            len: len.min(PAGE_SIZE - offset) as u32,
        })
    }

    /// Copies `src` to DMA address `addr`.
    pub fn write(&self, addr: u64, src: &[u8]) -> Result {
        let dst = Self::address(addr, src.len())?;
        // SAFETY: As for `read`: a mapped receive (or target) buffer of the consumer.
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), dst as *mut u8, src.len()) };
        Ok(())
    }
}

/// A piece of kernel memory within one page, with a reference on that page.
///
/// # Invariants
///
/// `page` is a page of which this object holds one reference, dropped with it;
/// `offset + len <= PAGE_SIZE`.
pub struct KernelPiece {
    page: NonNull<bindings::page>,
    offset: u32,
    len: u32,
}

impl KernelPiece {
    /// The piece's length in bytes.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// The page, the piece's offset in it and its length.
    pub(in crate::kernel_ext) fn page(&self) -> (NonNull<bindings::page>, u32, u32) {
        (self.page, self.offset, self.len)
    }
}

impl Drop for KernelPiece {
    fn drop(&mut self) {
        // SAFETY: Our reference (type invariant), dropped once.
        unsafe { bindings::riw_put_page(self.page.as_ptr()) };
    }
}

/// Up to `KernelPieces::CAPACITY` pieces of kernel memory, in order, each with its page
/// reference.
pub struct KernelPieces {
    items: [Option<KernelPiece>; KernelPieces::CAPACITY],
    len: usize,
}

impl KernelPieces {
    /// The most pieces held at once: an FPDU's payload rarely spans more pages.
    pub const CAPACITY: usize = 16;

    /// No pieces.
    pub fn new() -> Self {
        Self {
            items: [const { None }; Self::CAPACITY],
            len: 0,
        }
    }

    /// Whether another piece would not fit.
    pub fn is_full(&self) -> bool {
        self.len == Self::CAPACITY
    }

    /// Appends `piece`; EINVAL when full.
    pub fn push(&mut self, piece: KernelPiece) -> Result {
        *self.items.get_mut(self.len).ok_or(EINVAL)? = Some(piece);
        self.len += 1;
        Ok(())
    }

    /// The pieces, in order.
    pub fn iter(&self) -> impl Iterator<Item = &KernelPiece> {
        self.items.iter().take(self.len).flatten()
    }
}

impl Default for KernelPieces {
    fn default() -> Self {
        Self::new()
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
