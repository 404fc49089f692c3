// SPDX-License-Identifier: GPL-2.0

//! Memory regions and their STags. An STag is a 24-bit index into the device's region
//! table and an 8-bit key the consumer chooses; the data path looks a region up by index,
//! then checks key, protection domain, rights, bounds and validity.

use crate::device::{RiwDevice, LIMITS};
use crate::kernel_ext::errno::EOPNOTSUPP;
use crate::kernel_ext::rdma::{access, Device, DmaMemory, Mr, MrKeys, Pd, UData, UserMemory};
use crate::uapi;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::prelude::*;
use kernel::sync::{new_spinlock, Arc, SpinLock};

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
    /// Pages bound by a fast registration, at most this many.
    FastReg { max_pages: u32 },
}

/// A registered region, as the data path checks it.
pub(crate) struct MemRegion {
    /// The protection domain, by identity.
    pd: usize,
    key: u8,
    access: u32,
    iova: u64,
    length: u64,
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
        let covered = match self.backing {
            Backing::Dma(_) => true,
            _ => {
                addr >= self.iova
                    && addr
                        .checked_add(len)
                        .is_some_and(|end| end <= self.iova.saturating_add(self.length))
            }
        };
        if stag as u8 != self.key || !self.valid.load(Ordering::Acquire) {
            Err(Denied::Stag)
        } else if self.pd != pd {
            Err(Denied::Domain)
        } else if self.access & rights != rights {
            Err(Denied::Rights)
        } else if !covered {
            Err(Denied::Bounds)
        } else {
            Ok(())
        }
    }

    /// Invalidates the region (local or remote invalidation).
    pub(crate) fn invalidate(&self) {
        self.valid.store(false, Ordering::Release);
    }

    /// Whether `stag` may invalidate this region from a connection of protection domain
    /// `pd`: its key, its domain, and not a kernel consumer's all-memory region.
    pub(crate) fn may_invalidate(&self, stag: u32, pd: usize) -> bool {
        stag as u8 == self.key && self.pd == pd && !matches!(self.backing, Backing::Dma(_))
    }

    /// Copies `dst.len()` bytes at address `addr` of the region (checked with `permits`).
    pub(crate) fn read(&self, addr: u64, dst: &mut [u8]) -> Result {
        match &self.backing {
            Backing::User(mem) => mem.read(usize::try_from(addr.wrapping_sub(self.iova))?, dst),
            Backing::Dma(mem) => mem.read(addr, dst),
            Backing::FastReg { .. } => Err(EFAULT),
        }
    }

    /// Copies `src` to address `addr` of the region (checked with `permits`).
    pub(crate) fn write(&self, addr: u64, src: &[u8]) -> Result {
        match &self.backing {
            Backing::User(mem) => mem.write(usize::try_from(addr.wrapping_sub(self.iova))?, src),
            Backing::Dma(mem) => mem.write(addr, src),
            Backing::FastReg { .. } => Err(EFAULT),
        }
    }
}

/// The pages a kernel consumer maps into a fast-registration region (`ib_map_mr_sg`),
/// which a registration work request binds.
struct PageList {
    /// As many slots as the region may map.
    addrs: KVec<u64>,
    count: usize,
}

/// A riw memory region: its table entry.
#[pin_data]
pub(crate) struct RiwMr {
    index: u32,
    #[pin]
    pages: SpinLock<PageList>,
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
    ) -> Result<(MrKeys, impl PinInit<Self, Error>)> {
        let region_pages = match backing {
            Backing::FastReg { max_pages } => max_pages as usize,
            _ => 0,
        };
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
        let valid = !matches!(backing, Backing::FastReg { .. });
        let region = Arc::new(
            MemRegion {
                pd: pd_id(pd),
                key,
                access,
                iova,
                length,
                backing,
                valid: AtomicBool::new(valid),
            },
            GFP_KERNEL,
        )?;
        let quota = dev.mrs.take(LIMITS.max_mr)?;
        let index = dev.mr_table.insert(1, STAG_INDEX_MAX, region)?;
        quota.keep();
        let stag = (index << 8) | u32::from(key);
        let page_slots = match region_pages {
            0 => KVec::new(),
            n => KVec::from_elem(0, n, GFP_KERNEL).inspect_err(|_| {
                Self::unregister(dev, index);
            })?,
        };
        let keys = MrKeys {
            lkey: stag,
            rkey: stag,
            iova,
            length,
        };
        let init = try_pin_init!(Self {
            index,
            pages <- new_spinlock!(PageList { addrs: page_slots, count: 0 }, "riw_mr_pages"),
        });
        Ok((keys, init))
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
        let mut pages = self.pages.lock();
        if pages.addrs.is_empty() {
            return Err(EINVAL);
        }
        pages.count = 0;
        Ok(())
    }

    /// Adds a page to the mapping; ENOMEM once the region's page list is full.
    pub(crate) fn map_page(&self, addr: u64) -> Result {
        let mut pages = self.pages.lock();
        let count = pages.count;
        let slot = pages.addrs.as_mut_slice().get_mut(count).ok_or(ENOMEM)?;
        *slot = addr;
        pages.count = count + 1;
        Ok(())
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
        // Rights and extent come with each registration work request.
        Self::register(
            dev,
            pd,
            MR_ACCESS,
            0,
            0,
            0,
            Backing::FastReg {
                max_pages: max_num_sg,
            },
        )
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
