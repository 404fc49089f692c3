// SPDX-License-Identifier: GPL-2.0

//! Memory regions and their STags. An STag is a 24-bit index into the device's region
//! table and an 8-bit key the consumer chooses; the data path looks a region up by index,
//! then checks key, protection domain, rights, bounds and validity.

use crate::device::{RiwDevice, LIMITS};
use crate::kernel_ext::errno::EOPNOTSUPP;
use crate::kernel_ext::rdma::{
    access, Device, DmaMemory, Mr, MrKeys, Pd, RegWr, UData, UserMemory,
};
use crate::kernel_ext::sync::{new_spinlock_bh, SpinLockBh};
use crate::uapi;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;

/// Region table indices: 24 bits, 0 reserved (an STag of 0 must never be valid).
const STAG_INDEX_MAX: u32 = (1 << 24) - 1;

/// Rights a region may grant; riw has no atomics and no memory windows.
const MR_ACCESS: u32 = access::LOCAL_WRITE | access::REMOTE_WRITE | access::REMOTE_READ;

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

/// The key, rights and extent an STag grants.
#[derive(Clone, Copy, Default)]
struct Binding {
    key: u8,
    access: u32,
    iova: u64,
    length: u64,
}

/// A fast-registration region's page lists. Held across each copy, so an invalidation
/// waits for an access in flight and none starts after it.
pub(crate) struct FastReg {
    mem: DmaMemory,
    /// The pages `ib_map_mr_sg` mapped last (`mapped` of them).
    mapped: KVec<u64>,
    mapped_count: usize,
    /// The extent of that mapping, as the registration request was posted with it.
    posted: Binding,
    posted_page_size: u64,
    /// The pages the last registration bound, and what it granted.
    bound: KVec<u64>,
    bound_count: usize,
    binding: Binding,
    page_size: u64,
}

impl FastReg {
    /// Copies `len` bytes at region address `addr` (within the binding), a run of bytes
    /// within one page at a time: `copy(kernel address, offset into the access, length)`.
    fn each_page(
        &self,
        addr: u64,
        len: usize,
        mut copy: impl FnMut(u64, usize, usize) -> Result,
    ) -> Result {
        let page_size = self.page_size;
        let first_offset = self.binding.iova % page_size;
        let mut at = addr.checked_sub(self.binding.iova).ok_or(EFAULT)? + first_offset;
        let mut done = 0;
        while done < len {
            let page = usize::try_from(at / page_size)?;
            let in_page = at % page_size;
            let base = *self
                .bound
                .get(page)
                .filter(|_| page < self.bound_count)
                .ok_or(EFAULT)?;
            let n = ((page_size - in_page) as usize).min(len - done);
            copy(base + in_page, done, n)?;
            done += n;
            at += n as u64;
        }
        Ok(())
    }
}

/// A registered region, as the data path checks it.
pub(crate) struct MemRegion {
    /// The protection domain, by identity.
    pd: usize,
    /// What the STag grants; a fast-registration region keeps its own, under its lock.
    fixed: Binding,
    backing: Backing,
    /// Cleared by invalidation (and until a fast registration binds pages).
    valid: AtomicBool,
}

impl MemRegion {
    /// Whether `stag` names this region (its key), the region is valid and belongs to `pd`,
    /// grants `rights`, and covers `len` bytes at `addr`.
    pub(crate) fn permits(&self, stag: u32, pd: usize, rights: u32, addr: u64, len: u64) -> bool {
        self.check(stag, pd, rights, addr, len).is_ok()
    }

    /// As `permits`, saying which check failed first, for the Terminate a peer is owed.
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

    /// Invalidates the region (local or remote invalidation), once no access is in flight.
    pub(crate) fn invalidate(&self) {
        match &self.backing {
            Backing::FastReg(fast) => {
                let _fast = fast.lock();
                self.valid.store(false, Ordering::Release);
            }
            _ => self.valid.store(false, Ordering::Release),
        }
    }

    /// Whether `stag` may invalidate this region from a connection of protection domain
    /// `pd`: its key, its domain, and not a kernel consumer's all-memory region.
    pub(crate) fn may_invalidate(&self, stag: u32, pd: usize) -> bool {
        let key = match &self.backing {
            Backing::Dma(_) => return false,
            Backing::FastReg(fast) => fast.lock().binding.key,
            Backing::User(_) => self.fixed.key,
        };
        stag as u8 == key && self.pd == pd
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
        let mut fast = fast.lock();
        fast.posted = Binding {
            key: 0,
            access: 0,
            iova: reg.iova,
            length: reg.length,
        };
        fast.posted_page_size = reg.page_size;
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
        let access = access & !access::OPTIONAL;
        if access & !MR_ACCESS != 0
            || (access & access::REMOTE_WRITE != 0 && access & access::LOCAL_WRITE == 0)
        {
            return Err(OP_ERR);
        }
        let mut guard = fast.lock();
        let fast = &mut *guard;
        // A valid region must be invalidated before it is registered again.
        if self.valid.load(Ordering::Acquire) {
            return Err(OP_ERR);
        }
        let page_size = fast.posted_page_size;
        let posted = fast.posted;
        let mapped_bytes = (fast.mapped_count as u64).saturating_mul(page_size);
        let needed = (posted.iova % page_size.max(1)).checked_add(posted.length);
        if page_size == 0 || posted.length == 0 || needed.map_or(true, |n| n > mapped_bytes) {
            return Err(OP_ERR);
        }
        let count = fast.mapped_count;
        for (to, from) in fast.bound.iter_mut().zip(fast.mapped.iter().take(count)) {
            *to = *from;
        }
        fast.bound_count = count;
        fast.page_size = page_size;
        fast.binding = Binding {
            key: stag as u8,
            access,
            ..posted
        };
        self.valid.store(true, Ordering::Release);
        Ok(())
    }

    /// Copies `dst.len()` bytes at address `addr` of the region (checked with `permits`).
    pub(crate) fn read(&self, addr: u64, dst: &mut [u8]) -> Result {
        match &self.backing {
            Backing::User(mem) => {
                mem.read(usize::try_from(addr.wrapping_sub(self.fixed.iova))?, dst)
            }
            Backing::Dma(mem) => mem.read(addr, dst),
            Backing::FastReg(fast) => {
                let fast = fast.lock();
                if !self.valid.load(Ordering::Acquire) {
                    return Err(EFAULT);
                }
                let len = dst.len();
                fast.each_page(addr, len, |at, done, n| {
                    fast.mem.read(at, &mut dst[done..done + n])
                })
            }
        }
    }

    /// Copies `src` to address `addr` of the region (checked with `permits`).
    pub(crate) fn write(&self, addr: u64, src: &[u8]) -> Result {
        match &self.backing {
            Backing::User(mem) => {
                mem.write(usize::try_from(addr.wrapping_sub(self.fixed.iova))?, src)
            }
            Backing::Dma(mem) => mem.write(addr, src),
            Backing::FastReg(fast) => {
                let fast = fast.lock();
                if !self.valid.load(Ordering::Acquire) {
                    return Err(EFAULT);
                }
                fast.each_page(addr, src.len(), |at, done, n| {
                    fast.mem.write(at, &src[done..done + n])
                })
            }
        }
    }

    /// Starts a new page mapping (`ib_map_mr_sg`) of a fast-registration region.
    fn map_begin(&self) -> Result {
        let Backing::FastReg(fast) = &self.backing else {
            return Err(EINVAL);
        };
        fast.lock().mapped_count = 0;
        Ok(())
    }

    /// Adds a page to the mapping; ENOMEM once the region's page list is full.
    fn map_page(&self, addr: u64) -> Result {
        let Backing::FastReg(fast) = &self.backing else {
            return Err(EINVAL);
        };
        let mut fast = fast.lock();
        let count = fast.mapped_count;
        let slot = fast.mapped.as_mut_slice().get_mut(count).ok_or(ENOMEM)?;
        *slot = addr;
        fast.mapped_count = count + 1;
        Ok(())
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
        let access = access & !access::OPTIONAL;
        if access & !MR_ACCESS != 0 {
            return Err(if access & access::REMOTE_ATOMIC != 0 {
                EINVAL
            } else {
                EOPNOTSUPP()
            });
        }
        // Remote writes land in memory: the verbs require local write rights with them.
        if access & access::REMOTE_WRITE != 0 && access & access::LOCAL_WRITE == 0 {
            return Err(EINVAL);
        }
        let valid = !matches!(backing, Backing::FastReg(_));
        let region = Arc::new(
            MemRegion {
                pd: pd_id(pd),
                fixed: Binding {
                    key,
                    access,
                    iova,
                    length,
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
            mapped: KVec::from_elem(0, pages, GFP_KERNEL)?,
            mapped_count: 0,
            posted: Binding::default(),
            posted_page_size: 0,
            bound: KVec::from_elem(0, pages, GFP_KERNEL)?,
            bound_count: 0,
            binding: Binding::default(),
            page_size: 0,
        };
        let fast = KBox::pin_init(new_spinlock_bh!(lists, "riw_mr_fast_reg"), GFP_KERNEL)?;
        // Key, rights and extent come with each registration work request.
        Self::register(dev, pd, MR_ACCESS, 0, 0, 0, Backing::FastReg(fast))
    }

    /// The region an STag names, if it is registered (its key still to check).
    pub(crate) fn lookup(dev: &Device<RiwDevice>, stag: u32) -> Option<Arc<MemRegion>> {
        dev.mr_table.get(stag >> 8)
    }

    pub(crate) fn destroy(mr: &Mr<RiwDevice>, dev: &Device<RiwDevice>) {
        // The data path may still hold the region for an access in flight; it goes when
        // that finishes.
        Self::unregister(dev, mr.index);
    }
}
