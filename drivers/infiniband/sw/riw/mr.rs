// SPDX-License-Identifier: GPL-2.0

//! Memory regions and their STags. An STag is a 24-bit index into the device's region
//! table and an 8-bit key the consumer chooses; the data path looks a region up by index,
//! then checks key, protection domain, rights, bounds and validity.

use crate::device::RiwDevice;
use crate::kernel_ext::errno::EOPNOTSUPP;
use crate::kernel_ext::rdma::{
    access, Device, DmaMemory, KernelPieces, Mr, MrKeys, Pd, RegWr, UData, UserMemory,
};
use crate::kernel_ext::sync::{new_spinlock_bh, SpinLockBh};
use crate::limits::LIMITS;
use crate::uapi;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;

/// Region table indices: 24 bits, 0 reserved (an STag of 0 must never be valid).
const STAG_INDEX_MAX: u32 = (1 << 24) - 1;

/// Rights a region may grant; riw has no atomics and no memory windows.
const MR_ACCESS: u32 = access::LOCAL_WRITE | access::REMOTE_WRITE | access::REMOTE_READ;

/// Rights a consumer may ask for that riw grants as nothing, as siw and iw_cxgb4 do:
/// remote atomics (an Atomic Request is refused on the wire all the same), binding memory
/// windows (riw creates none), and the huge-page hint.
const MR_ACCESS_IGNORED: u32 =
    access::REMOTE_ATOMIC | access::MW_BIND | access::ZERO_BASED | access::HUGETLB;

/// Why an access to a region was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Denied {
    /// No such region, wrong key, or invalidated.
    Stag,
    /// The region belongs to another protection domain.
    Domain,
    /// The region does not grant the access.
    Rights,
    /// The access leaves the region.
    Bounds,
}

impl Denied {
    /// The refusal, for the log.
    pub(crate) fn what(self) -> &'static str {
        match self {
            Self::Stag => "an STag that names no valid region",
            Self::Domain => "an STag of another protection domain",
            Self::Rights => "an access the region does not grant",
            Self::Bounds => "an access beyond the region",
        }
    }
}

/// What a region's STag refers to.
pub(crate) enum Backing {
    /// Pinned user memory, held pinned for the region's life.
    User(UserMemory),
    /// All of kernel memory, by address (a kernel consumer's DMA MR).
    Dma(DmaMemory),
    /// Pages a kernel consumer maps and binds with registration work requests.
    FastReg(Pin<KBox<SpinLockBh<FastReg>>>),
}

/// The key, rights and extent an STag grants, and for a fast registration the size of
/// its pages (0 otherwise).
#[derive(Clone, Copy, Default)]
struct Binding {
    key: u8,
    access: u32,
    iova: u64,
    length: u64,
    page_size: u64,
}

/// The rights of `access` a region gets: without its `OPTIONAL` hints and the rights riw
/// grants as nothing. EINVAL for remote write or atomics without local write (remote
/// access lands in memory, so the verbs require both), EOPNOTSUPP for rights nobody
/// could have granted (on-demand paging, flushes).
fn checked_access(access: u32) -> Result<u32> {
    let access = access & !access::OPTIONAL;
    if access & (access::REMOTE_WRITE | access::REMOTE_ATOMIC) != 0
        && access & access::LOCAL_WRITE == 0
    {
        return Err(EINVAL);
    }
    let access = access & !MR_ACCESS_IGNORED;
    if access & !MR_ACCESS != 0 {
        return Err(EOPNOTSUPP());
    }
    Ok(access)
}

/// A list of page addresses of fixed capacity, the first `count` of them in use.
struct PageList {
    pages: KVec<u64>,
    count: usize,
}

impl PageList {
    fn new(capacity: usize) -> Result<Self> {
        Ok(Self {
            pages: KVec::from_elem(0, capacity, GFP_KERNEL)?,
            count: 0,
        })
    }

    fn get(&self, index: usize) -> Option<u64> {
        self.pages
            .get(index)
            .filter(|_| index < self.count)
            .copied()
    }

    /// Appends a page; ENOMEM once the list is full.
    fn push(&mut self, addr: u64) -> Result {
        *self
            .pages
            .as_mut_slice()
            .get_mut(self.count)
            .ok_or(ENOMEM)? = addr;
        self.count += 1;
        Ok(())
    }

    /// Takes over `other`'s pages (both lists have the region's capacity).
    fn copy_from(&mut self, other: &PageList) {
        let count = other.count.min(self.pages.len());
        for (to, from) in self.pages.iter_mut().zip(other.pages.iter().take(count)) {
            *to = *from;
        }
        self.count = count;
    }
}

/// A fast-registration region's page lists. Held across each copy, so an invalidation
/// waits for an access in flight and none starts after it.
pub(crate) struct FastReg {
    mem: DmaMemory,
    /// The pages `ib_map_mr_sg` mapped last.
    mapped: PageList,
    /// The extent of that mapping, as the registration request was posted with it.
    posted: Binding,
    /// The pages the last registration bound, and what it granted.
    bound: PageList,
    binding: Binding,
}

impl FastReg {
    /// Copies `len` bytes at region address `addr` (within the binding), a run of bytes
    /// within one page at a time: `copy(memory, kernel address, offset into the access,
    /// length)`.
    fn each_page(
        &self,
        addr: u64,
        len: usize,
        mut copy: impl FnMut(&DmaMemory, u64, usize, usize) -> Result,
    ) -> Result {
        // Checked arithmetic throughout: a bad binding fails the access, never panics.
        let page_size = self.binding.page_size;
        if page_size == 0 {
            return Err(EFAULT);
        }
        let first_offset = self.binding.iova % page_size;
        let mut at = addr
            .checked_sub(self.binding.iova)
            .and_then(|a| a.checked_add(first_offset))
            .ok_or(EFAULT)?;
        let mut done = 0;
        while done < len {
            let page = usize::try_from(at / page_size)?;
            let in_page = at % page_size;
            let base = self.bound.get(page).ok_or(EFAULT)?;
            let n = ((page_size - in_page) as usize).min(len - done);
            copy(&self.mem, base.checked_add(in_page).ok_or(EFAULT)?, done, n)?;
            done += n;
            at = at.checked_add(n as u64).ok_or(EFAULT)?;
        }
        Ok(())
    }
}

/// What a region is, for those who inspect it.
pub(crate) struct RegionInfo {
    pub(crate) stag: u32,
    pub(crate) kind: &'static str,
    /// The protection domain's number, as `rdma resource show pd` prints it.
    pub(crate) pd: u32,
    pub(crate) access: u32,
    pub(crate) iova: u64,
    pub(crate) length: u64,
    pub(crate) valid: bool,
}

/// Access rights, by name, for people.
pub(crate) struct Rights(pub(crate) u32);

impl core::fmt::Display for Rights {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let names = [
            (access::LOCAL_WRITE, "local_write"),
            (access::REMOTE_WRITE, "remote_write"),
            (access::REMOTE_READ, "remote_read"),
        ];
        let mut first = true;
        for (bit, name) in names {
            if self.0 & bit != 0 {
                if !first {
                    f.write_str(",")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        if first {
            f.write_str("none")?;
        }
        Ok(())
    }
}

/// A registered region, as the data path checks it.
pub(crate) struct MemRegion {
    /// The protection domain, by identity.
    pd: usize,
    /// The protection domain's tracking number, to show.
    pd_number: u32,
    /// What the STag grants; a fast-registration region keeps its own, under its lock.
    fixed: Binding,
    backing: Backing,
    /// Cleared by invalidation (and until a fast registration binds pages).
    valid: AtomicBool,
}

impl MemRegion {
    /// Whether `stag` names this region (its key), the region is valid and belongs to `pd`,
    /// grants `rights`, and covers `len` bytes at `addr`.
    #[inline(always)]
    pub(crate) fn permits(&self, stag: u32, pd: usize, rights: u32, addr: u64, len: u64) -> bool {
        self.check(stag, pd, rights, addr, len).is_ok()
    }

    /// As `permits`, saying which check failed first, for the Terminate a peer is owed.
    #[inline]
    pub(crate) fn check(
        &self,
        stag: u32,
        pd: usize,
        rights: u32,
        addr: u64,
        len: u64,
    ) -> core::result::Result<(), Denied> {
        match &self.backing {
            Backing::FastReg(fast) => {
                let fast = fast.lock();
                self.judge(&fast.binding, stag, pd, rights, addr, len)
            }
            _ => self.judge(&self.fixed, stag, pd, rights, addr, len),
        }
    }

    fn judge(
        &self,
        b: &Binding,
        stag: u32,
        pd: usize,
        rights: u32,
        addr: u64,
        len: u64,
    ) -> core::result::Result<(), Denied> {
        let covered = match self.backing {
            Backing::Dma(_) => true,
            _ => {
                addr >= b.iova
                    && addr
                        .checked_add(len)
                        .is_some_and(|end| end <= b.iova.saturating_add(b.length))
            }
        };
        if stag as u8 != b.key || !self.valid.load(Ordering::Acquire) {
            Err(Denied::Stag)
        } else if self.pd != pd {
            Err(Denied::Domain)
        } else if b.access & rights != rights {
            Err(Denied::Rights)
        } else if !covered {
            Err(Denied::Bounds)
        } else {
            Ok(())
        }
    }

    /// Invalidates the region, once no access is in flight.
    fn invalidate(&self) {
        match &self.backing {
            Backing::FastReg(fast) => {
                let _fast = fast.lock();
                self.valid.store(false, Ordering::Release);
            }
            _ => self.valid.store(false, Ordering::Release),
        }
    }

    /// Invalidates the region for `stag` from a QP of protection domain `pd` (local or
    /// remote invalidation), if that may: its key, its domain, and not a kernel consumer's
    /// all-memory region. Checked and done under one lock, so no registration comes between.
    pub(crate) fn invalidate_for(&self, stag: u32, pd: usize) -> bool {
        let invalidate_if_key = |key: u8| {
            let permitted = stag as u8 == key && self.pd == pd;
            if permitted {
                self.valid.store(false, Ordering::Release);
            }
            permitted
        };
        match &self.backing {
            Backing::Dma(_) => false,
            Backing::FastReg(fast) => {
                let fast = fast.lock();
                invalidate_if_key(fast.binding.key)
            }
            Backing::User(_) => invalidate_if_key(self.fixed.key),
        }
    }

    /// Records the extent a registration request was posted with; EINVAL unless this is
    /// a fast-registration region of `pd`.
    pub(crate) fn post_registration(&self, pd: usize, reg: &RegWr) -> Result {
        let Backing::FastReg(fast) = &self.backing else {
            return Err(EINVAL);
        };
        if self.pd != pd || !reg.page_size.is_power_of_two() {
            return Err(EINVAL);
        }
        fast.lock().posted = Binding {
            key: 0,
            access: 0,
            iova: reg.iova,
            length: reg.length,
            page_size: reg.page_size,
        };
        Ok(())
    }

    /// Binds the pages mapped last, with key and rights `access` of STag `stag`, as a
    /// registration work request of a QP of `pd` does. Err is the completion status.
    pub(crate) fn register(
        &self,
        stag: u32,
        pd: usize,
        access: u32,
    ) -> core::result::Result<(), u32> {
        const PROT_ERR: u32 = uapi::siw_wc_status_SIW_WC_LOC_PROT_ERR;
        const OP_ERR: u32 = uapi::siw_wc_status_SIW_WC_LOC_QP_OP_ERR;
        let Backing::FastReg(fast) = &self.backing else {
            return Err(PROT_ERR);
        };
        if self.pd != pd {
            return Err(PROT_ERR);
        }
        let access = checked_access(access).map_err(|_| OP_ERR)?;
        let mut guard = fast.lock();
        let fast = &mut *guard;
        // A valid region must be invalidated before it is registered again.
        if self.valid.load(Ordering::Acquire) {
            return Err(OP_ERR);
        }
        let posted = fast.posted;
        let page_size = posted.page_size;
        let mapped_bytes = (fast.mapped.count as u64).saturating_mul(page_size);
        let needed = (posted.iova % page_size.max(1)).checked_add(posted.length);
        if page_size == 0 || posted.length == 0 || needed.map_or(true, |n| n > mapped_bytes) {
            return Err(OP_ERR);
        }
        fast.bound.copy_from(&fast.mapped);
        fast.binding = Binding {
            key: stag as u8,
            access,
            ..posted
        };
        self.valid.store(true, Ordering::Release);
        Ok(())
    }

    /// Copies `dst.len()` bytes at address `addr` of the region (checked with `permits`).
    #[inline(always)]
    pub(crate) fn read(&self, addr: u64, dst: &mut [u8]) -> Result {
        match &self.backing {
            Backing::User(mem) => {
                mem.read(usize::try_from(addr.wrapping_sub(self.fixed.iova))?, dst)
            }
            Backing::Dma(mem) => mem.read(addr, dst),
            Backing::FastReg(fast) => {
                self.each_bound_page(fast, addr, dst.len(), |mem, at, done, n| {
                    mem.read(at, &mut dst[done..done + n])
                })
            }
        }
    }

    /// Address `addr` of a user memory region (checked with `permits`), as that memory
    /// and the offset in it; `None` for kernel memory.
    pub(crate) fn user_memory(&self, addr: u64) -> Option<(&UserMemory, usize)> {
        match &self.backing {
            Backing::User(mem) => Some((
                mem,
                usize::try_from(addr.wrapping_sub(self.fixed.iova)).ok()?,
            )),
            _ => None,
        }
    }

    /// Whether the region names kernel memory (a kernel consumer's DMA or
    /// fast-registration region).
    pub(crate) fn is_kernel(&self) -> bool {
        !matches!(self.backing, Backing::User(_))
    }

    /// Continues the CRC32c register `crc` over `len` bytes at address `addr` of a
    /// kernel memory region (checked with `permits`), read in place.
    pub(crate) fn kernel_crc32c(&self, crc: u32, addr: u64, len: usize) -> Result<u32> {
        match &self.backing {
            Backing::User(_) => Err(EINVAL),
            Backing::Dma(mem) => mem.crc32c(crc, addr, len),
            Backing::FastReg(fast) => {
                let mut crc = crc;
                self.each_bound_page(fast, addr, len, |mem, at, _, n| {
                    crc = mem.crc32c(crc, at, n)?;
                    Ok(())
                })?;
                Ok(crc)
            }
        }
    }

    /// Appends the pieces of `len` bytes at address `addr` of a kernel memory region
    /// (checked with `permits`) to `out`, a page at a time, while it has room; each holds
    /// a reference on its page, taken while a fast registration is valid (under its lock,
    /// so that an invalidation cannot let the consumer free a page before TCP has its own
    /// reference).
    pub(crate) fn kernel_pieces(&self, addr: u64, len: usize, out: &mut KernelPieces) -> Result {
        let mut take = |mem: &DmaMemory, mut at: u64, mut n: usize| -> Result {
            while n != 0 && !out.is_full() {
                let piece = mem.piece(at, n).ok_or(EFAULT)?;
                // A piece is at most `n` bytes long, within the address space.
                at = at.wrapping_add(piece.len() as u64);
                n = n.saturating_sub(piece.len());
                out.push(piece)?;
            }
            Ok(())
        };
        match &self.backing {
            Backing::User(_) => Err(EINVAL),
            Backing::Dma(mem) => take(mem, addr, len),
            Backing::FastReg(fast) => {
                self.each_bound_page(fast, addr, len, |mem, at, _, n| take(mem, at, n))
            }
        }
    }

    /// Copies `src` to address `addr` of the region (checked with `permits`).
    #[inline(always)]
    pub(crate) fn write(&self, addr: u64, src: &[u8]) -> Result {
        match &self.backing {
            Backing::User(mem) => {
                mem.write(usize::try_from(addr.wrapping_sub(self.fixed.iova))?, src)
            }
            Backing::Dma(mem) => mem.write(addr, src),
            Backing::FastReg(fast) => {
                self.each_bound_page(fast, addr, src.len(), |mem, at, done, n| {
                    mem.write(at, &src[done..done + n])
                })
            }
        }
    }

    /// Copies `len` bytes at `addr` of a fast-registration region a page at a time (see
    /// `FastReg::each_page`), under its lock and only while it is valid.
    fn each_bound_page(
        &self,
        fast: &SpinLockBh<FastReg>,
        addr: u64,
        len: usize,
        copy: impl FnMut(&DmaMemory, u64, usize, usize) -> Result,
    ) -> Result {
        let fast = fast.lock();
        if !self.valid.load(Ordering::Acquire) {
            return Err(EFAULT);
        }
        fast.each_page(addr, len, copy)
    }

    /// What the region at table index `index` is now.
    pub(crate) fn info(&self, index: u32) -> RegionInfo {
        let (kind, binding) = match &self.backing {
            Backing::User(_) => ("user", self.fixed),
            Backing::Dma(_) => ("dma", self.fixed),
            Backing::FastReg(fast) => ("fast_reg", fast.lock().binding),
        };
        RegionInfo {
            stag: (index << 8) | u32::from(binding.key),
            kind,
            pd: self.pd_number,
            access: binding.access,
            iova: binding.iova,
            length: binding.length,
            valid: self.valid.load(Ordering::Acquire),
        }
    }

    /// Starts a new page mapping (`ib_map_mr_sg`) of a fast-registration region.
    fn map_begin(&self) -> Result {
        let Backing::FastReg(fast) = &self.backing else {
            return Err(EINVAL);
        };
        fast.lock().mapped.count = 0;
        Ok(())
    }

    /// Adds a page to the mapping; ENOMEM once the region's page list is full.
    fn map_page(&self, addr: u64) -> Result {
        let Backing::FastReg(fast) = &self.backing else {
            return Err(EINVAL);
        };
        fast.lock().mapped.push(addr)
    }
}

/// A riw memory region: its table entry.
pub(crate) struct RiwMr {
    index: u32,
    region: Arc<MemRegion>,
}

/// A protection domain's identity, as regions and QPs compare it.
pub(crate) fn pd_id(pd: &Pd<RiwDevice>) -> usize {
    pd as *const Pd<RiwDevice> as usize
}

impl RiwMr {
    /// Checks `access` and records a region with key `key` in the device table.
    fn register(
        dev: &Device<RiwDevice>,
        pd: &Pd<RiwDevice>,
        access: u32,
        key: u8,
        iova: u64,
        length: u64,
        backing: Backing,
    ) -> Result<(MrKeys, Self)> {
        let access = checked_access(access)?;
        let valid = !matches!(backing, Backing::FastReg(_));
        let region = Arc::new(
            MemRegion {
                pd: pd_id(pd),
                pd_number: pd.res_id(),
                fixed: Binding {
                    key,
                    access,
                    iova,
                    length,
                    page_size: 0,
                },
                backing,
                valid: AtomicBool::new(valid),
            },
            GFP_KERNEL,
        )?;
        let quota = dev.mrs.take(LIMITS.max_mr)?;
        let index = dev.mr_table.insert(1, STAG_INDEX_MAX, region.clone())?;
        quota.keep();
        let stag = (index << 8) | u32::from(key);
        let keys = MrKeys {
            lkey: stag,
            rkey: stag,
            iova,
            length,
        };
        Ok((keys, Self { index, region }))
    }

    /// Undoes `register`'s table entry.
    fn unregister(dev: &Device<RiwDevice>, index: u32) {
        if let Some(region) = dev.mr_table.remove(index) {
            region.invalidate();
        }
        dev.mrs.put();
    }

    /// What the region is now.
    pub(crate) fn info(&self) -> RegionInfo {
        self.region.info(self.index)
    }

    /// Starts a new page mapping of a fast-registration region.
    pub(crate) fn map_begin(&self) -> Result {
        self.region.map_begin()
    }

    /// Adds a page to the mapping; ENOMEM once the region's page list is full.
    pub(crate) fn map_page(&self, addr: u64) -> Result {
        self.region.map_page(addr)
    }

    pub(crate) fn new_user(
        dev: &Device<RiwDevice>,
        pd: &Pd<RiwDevice>,
        start: u64,
        length: u64,
        iova: u64,
        access: u32,
        udata: &mut UData<'_>,
    ) -> Result<(MrKeys, impl PinInit<Self, Error>)> {
        if length == 0 || length > LIMITS.max_mr_size || iova.checked_add(length).is_none() {
            return Err(EINVAL);
        }
        let req: uapi::siw_ureq_reg_mr = udata.request()?;
        let mem = UserMemory::pin(dev, start, length, access)?;
        let (keys, mr) = Self::register(
            dev,
            pd,
            access,
            req.stag_key,
            iova,
            length,
            Backing::User(mem),
        )?;
        udata.respond(&uapi::siw_uresp_reg_mr {
            stag: keys.lkey,
            pad: 0,
        })?;
        Ok((keys, mr))
    }

    pub(crate) fn new_dma(
        dev: &Device<RiwDevice>,
        pd: &Pd<RiwDevice>,
        access: u32,
    ) -> Result<(MrKeys, impl PinInit<Self, Error>)> {
        let mem = DmaMemory::of_kernel_consumers(dev);
        Self::register(dev, pd, access, 0, 0, u64::MAX, Backing::Dma(mem))
    }

    pub(crate) fn new_fast_reg(
        dev: &Device<RiwDevice>,
        pd: &Pd<RiwDevice>,
        max_num_sg: u32,
    ) -> Result<(MrKeys, impl PinInit<Self, Error>)> {
        if max_num_sg == 0 || max_num_sg > LIMITS.max_fast_reg_page_list_len {
            return Err(EINVAL);
        }
        let pages = max_num_sg as usize;
        let lists = FastReg {
            mem: DmaMemory::of_kernel_consumers(dev),
            mapped: PageList::new(pages)?,
            posted: Binding::default(),
            bound: PageList::new(pages)?,
            binding: Binding::default(),
        };
        let fast = KBox::pin_init(new_spinlock_bh!(lists, "riw_mr_fast_reg"), GFP_KERNEL)?;
        // Key, rights and extent come with each registration work request.
        Self::register(dev, pd, MR_ACCESS, 0, 0, 0, Backing::FastReg(fast))
    }

    /// Invalidates the region `stag` names for a QP of protection domain `pd` (a local
    /// invalidation, or a remote one from its peer); false if there is none it may
    /// invalidate.
    pub(crate) fn invalidate(dev: &Device<RiwDevice>, stag: u32, pd: usize) -> bool {
        Self::lookup(dev, stag).is_some_and(|r| r.invalidate_for(stag, pd))
    }

    /// The region an STag names, if it is registered (its key still to check).
    pub(crate) fn lookup(dev: &Device<RiwDevice>, stag: u32) -> Option<Arc<MemRegion>> {
        dev.mr_table.get(stag >> 8)
    }

    /// Runs `f` on the region an STag names, if registered, borrowed without a
    /// reference; `f` must not sleep.
    #[inline(always)]
    pub(crate) fn with_region<R>(
        dev: &Device<RiwDevice>,
        stag: u32,
        f: impl FnOnce(Option<&MemRegion>) -> R,
    ) -> R {
        dev.mr_table.with(stag >> 8, f)
    }

    pub(crate) fn destroy(mr: &Mr<RiwDevice>, dev: &Device<RiwDevice>) {
        // The data path may still hold the region for an access in flight; it goes when
        // that finishes.
        Self::unregister(dev, mr.index);
    }
}
