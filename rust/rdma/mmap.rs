// SPDX-License-Identifier: GPL-2.0

//! Queue memory: the rings a queue shares with userspace through `mmap` of the uverbs file
//! (or keeps to itself, for kernel consumers), and the accessors the driver reads and
//! writes them with. Userspace may change shared memory at any time, so every access is
//! bounds-checked, entries are copied out with a single read, and the words both sides
//! hand over use atomic operations.

use super::ucontext::UData;
use crate::kernel_ext::bindings;
use core::ffi::c_int;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU16, AtomicU32, AtomicU8, Ordering};
use kernel::prelude::*;
use kernel::types::{AsBytes, FromBytes};

/// Zeroed memory holding a queue's ring.
///
/// # Invariants
///
/// `addr` points at `len` bytes of vmalloc memory, kept alive by this object: for user
/// memory, the mmap entry owns it and is only removed (and so freeable) by our drop.
pub struct QueueMemory {
    addr: NonNull<u8>,
    len: usize,
    entry: Option<NonNull<bindings::riw_mmap_entry>>,
}

// SAFETY: The memory is shared by design; all accesses go through the volatile and
// atomic accessors below.
unsafe impl Send for QueueMemory {}
// SAFETY: As above.
unsafe impl Sync for QueueMemory {}

impl QueueMemory {
    /// Allocates `len` zeroed bytes for a kernel consumer's queue.
    pub fn new_kernel(len: usize) -> Result<Self> {
        // SAFETY: Any size; NULL on failure.
        let addr = NonNull::new(unsafe { bindings::riw_vzalloc(len as _) }.cast()).ok_or(ENOMEM)?;
        Ok(Self {
            addr,
            len,
            entry: None,
        })
    }

    /// Allocates `len` zeroed bytes userspace can map through `udata`'s context at the
    /// returned key (an mmap offset), which is at least `min_key`.
    pub fn new_user(udata: &UData<'_>, len: usize, min_key: u64) -> Result<(Self, u64)> {
        let uctx = udata.ucontext();
        let min_pgoff =
            u32::try_from(min_key.div_ceil(kernel::page::PAGE_SIZE as u64)).map_err(|_| EINVAL)?;
        let map_len = len
            .checked_next_multiple_of(kernel::page::PAGE_SIZE)
            .ok_or(EINVAL)?;
        // SAFETY: Any size; the memory is zeroed and marked for mapping to userspace.
        let addr = NonNull::new(unsafe { bindings::riw_vmalloc_user(map_len as _) }.cast::<u8>())
            .ok_or(ENOMEM)?;
        let entry = match KBox::new(
            bindings::riw_mmap_entry {
                addr: addr.as_ptr().cast(),
                ..Default::default()
            },
            GFP_KERNEL,
        ) {
            Ok(e) => KBox::into_raw(e),
            Err(e) => {
                // SAFETY: Ours and never shared.
                unsafe { bindings::vfree(addr.as_ptr().cast()) };
                return Err(e.into());
            }
        };
        // SAFETY: `uctx` is live (the caller's command holds it) and `entry` is a fresh entry
        // that the core now tracks until `rdma_user_mmap_entry_remove`.
        let ret = unsafe {
            bindings::rdma_user_mmap_entry_insert_range(
                uctx,
                core::ptr::addr_of_mut!((*entry).base),
                map_len,
                min_pgoff,
                u32::MAX,
            )
        };
        if ret != 0 {
            // SAFETY: The insertion failed: both are still only ours.
            unsafe {
                bindings::vfree(addr.as_ptr().cast());
                drop(KBox::from_raw(entry));
            }
            return Err(Error::from_errno(ret));
        }
        // SAFETY: Inserted above, so `start_pgoff` is set (rdma_user_mmap_get_offset()).
        let key = unsafe { (*entry).base.start_pgoff } << kernel::page::PAGE_SHIFT;
        // SAFETY: `entry` is non-null (from a box).
        let entry = Some(unsafe { NonNull::new_unchecked(entry) });
        Ok((Self { addr, len, entry }, key))
    }

    /// Whether userspace maps the memory (rather than a kernel consumer owning it).
    pub fn is_user(&self) -> bool {
        self.entry.is_some()
    }

    /// A pointer to `size` bytes at `offset`, if they are inside and `align`-aligned.
    fn at(&self, offset: usize, size: usize, align: usize) -> Option<*mut u8> {
        let end = offset.checked_add(size)?;
        (end <= self.len && offset.is_multiple_of(align)).then(|| {
            // SAFETY: In bounds of the allocation, by the check above.
            unsafe { self.addr.as_ptr().add(offset) }
        })
    }

    /// Copies the `E` at `offset` out of the memory in one read: a kernel copy that the
    /// other side can no longer change, to validate before use.
    pub fn read<E: FromBytes>(&self, offset: usize) -> Option<E> {
        let p = self.at(offset, core::mem::size_of::<E>(), 1)?;
        // SAFETY: `p` is valid for reads of `E`; any bit pattern is an `E` (`FromBytes`).
        // Volatile: userspace may be writing it concurrently; a torn value is still an `E`
        // that the caller validates.
        Some(unsafe { p.cast::<E>().read_volatile() })
    }

    /// As [`Self::read`], into `out`: the entry is copied once, a word at a time, with no
    /// further copy of it on its way to the caller. False if it is not inside the memory.
    pub fn read_into<E: FromBytes>(&self, offset: usize, out: &mut E) -> bool {
        const WORD: usize = core::mem::size_of::<u64>();
        let size = core::mem::size_of::<E>();
        if !size.is_multiple_of(WORD) || core::mem::align_of::<E>() < WORD {
            return match self.read::<E>(offset) {
                Some(e) => {
                    *out = e;
                    true
                }
                None => false,
            };
        }
        self.read_words_into(offset, out, 0..size / WORD)
    }

    /// Copies the 64-bit words `words` of the `E` at `offset` (`E` seen as an array of
    /// words) into the same words of `out`, once each, leaving its other words as they
    /// were: an entry whose header tells how much of the rest is used is read in two
    /// steps. False if the words are not inside `E` or the memory, or `E` is not made of
    /// aligned words.
    pub fn read_words_into<E: FromBytes>(
        &self,
        offset: usize,
        out: &mut E,
        words: core::ops::Range<usize>,
    ) -> bool {
        const WORD: usize = core::mem::size_of::<u64>();
        let size = core::mem::size_of::<E>();
        if !size.is_multiple_of(WORD)
            || core::mem::align_of::<E>() < WORD
            || words.start > words.end
            || words.end > size / WORD
        {
            return false;
        }
        let Some(p) = self.at(offset, size, WORD) else {
            return false;
        };
        let src = p.cast::<u64>();
        let dst = core::ptr::from_mut(out).cast::<u64>();
        for i in words {
            // Volatile: userspace may write the entry meanwhile; each word is read exactly
            // once, and a torn entry is still an `E` that the caller validates.
            // SAFETY: `p` is valid for reads of `size` bytes and word-aligned (checked by
            // `at`); `out` is an `E`, word-aligned and `size` bytes long (checked above),
            // of which any bit pattern is valid (`FromBytes`); word `i` is inside both.
            unsafe { dst.add(i).write(src.add(i).read_volatile()) };
        }
        true
    }

    /// Writes `value` at `offset`.
    pub fn write<E: AsBytes>(&self, offset: usize, value: &E) -> Result {
        const WORD: usize = core::mem::size_of::<u64>();
        let size = core::mem::size_of::<E>();
        let p = self.at(offset, size, 1).ok_or(EINVAL)?;
        if size.is_multiple_of(WORD)
            && core::mem::align_of::<E>() >= WORD
            && offset.is_multiple_of(WORD)
        {
            let src = core::ptr::from_ref(value).cast::<u64>();
            for i in 0..size / WORD {
                // SAFETY: `value` is `size` bytes without padding (`AsBytes`) and
                // word-aligned, `p` is valid for writes of `size` bytes and word-aligned
                // (the checks above): word `i` of both is in bounds.
                unsafe { p.cast::<u64>().add(i).write_volatile(src.add(i).read()) };
            }
            return Ok(());
        }
        // SAFETY: `p` is valid for writes of `E`, which has no padding (`AsBytes`).
        unsafe { p.cast::<E>().write_volatile(core::ptr::read(value)) };
        Ok(())
    }

    fn atomic_u8(&self, offset: usize) -> Option<&AtomicU8> {
        let p = self.at(offset, 1, 1)?;
        // SAFETY: In bounds; both sides access this byte atomically only.
        Some(unsafe { AtomicU8::from_ptr(p) })
    }

    /// Loads the byte at `offset` with acquire ordering.
    pub fn load_u8_acquire(&self, offset: usize) -> Option<u8> {
        Some(self.atomic_u8(offset)?.load(Ordering::Acquire))
    }

    /// Stores the byte at `offset` with release ordering (a completion's flags, last).
    pub fn store_u8_release(&self, offset: usize, value: u8) -> Result {
        self.atomic_u8(offset)
            .ok_or(EINVAL)?
            .store(value, Ordering::Release);
        Ok(())
    }

    /// Stores the byte at `offset` and orders the store before every later load
    /// (`smp_store_mb()`): a producer that then reads the consumer's arming word cannot
    /// miss both the entry and the arming, when the consumer arms, then polls.
    pub fn store_u8_mb(&self, offset: usize, value: u8) -> Result {
        self.atomic_u8(offset)
            .ok_or(EINVAL)?
            .swap(value, Ordering::SeqCst);
        Ok(())
    }

    fn atomic_u16(&self, offset: usize) -> Option<&AtomicU16> {
        let p = self.at(offset, 2, 2)?;
        // SAFETY: In bounds and aligned; both sides access this word atomically only.
        Some(unsafe { AtomicU16::from_ptr(p.cast()) })
    }

    fn atomic_u32(&self, offset: usize) -> Option<&AtomicU32> {
        let p = self.at(offset, 4, 4)?;
        // SAFETY: In bounds and aligned; both sides access this word atomically only.
        Some(unsafe { AtomicU32::from_ptr(p.cast()) })
    }

    /// Loads the 16-bit word at `offset` with acquire ordering (an entry's flags word,
    /// which the other side stores last).
    pub fn load_u16_acquire(&self, offset: usize) -> Option<u16> {
        Some(self.atomic_u16(offset)?.load(Ordering::Acquire))
    }

    /// Stores the 16-bit word at `offset` with release ordering.
    pub fn store_u16_release(&self, offset: usize, value: u16) -> Result {
        self.atomic_u16(offset)
            .ok_or(EINVAL)?
            .store(value, Ordering::Release);
        Ok(())
    }

    /// Stores the 16-bit word at `offset` and orders the store before every later load
    /// (`smp_store_mb()`), like [`Self::store_u8_mb`].
    pub fn store_u16_mb(&self, offset: usize, value: u16) -> Result {
        self.atomic_u16(offset)
            .ok_or(EINVAL)?
            .swap(value, Ordering::SeqCst);
        Ok(())
    }

    /// Loads the 32-bit word at `offset` with acquire ordering.
    pub fn load_u32_acquire(&self, offset: usize) -> Option<u32> {
        Some(self.atomic_u32(offset)?.load(Ordering::Acquire))
    }

    /// Swaps the 32-bit word at `offset`, returning the old value.
    pub fn swap_u32(&self, offset: usize, value: u32) -> Option<u32> {
        Some(self.atomic_u32(offset)?.swap(value, Ordering::AcqRel))
    }
}

impl Drop for QueueMemory {
    fn drop(&mut self) {
        match self.entry {
            // Userspace may still have it mapped: the core frees it through `mmap_free`
            // once the last mapping is gone.
            // SAFETY: Inserted in `new_user`; removed once, here.
            Some(entry) => unsafe {
                bindings::rdma_user_mmap_entry_remove(core::ptr::addr_of_mut!(
                    (*entry.as_ptr()).base
                ))
            },
            // SAFETY: Kernel-only memory from `new_kernel`.
            None => unsafe { bindings::vfree(self.addr.as_ptr().cast()) },
        }
    }
}

/// The `mmap` op: maps the queue memory of a key the driver handed out, with its exact
/// size, never executable.
pub(crate) unsafe extern "C" fn mmap_callback(
    uctx: *mut bindings::ib_ucontext,
    vma: *mut bindings::vm_area_struct,
) -> c_int {
    // SAFETY: The core passes the live context and the vma being set up.
    if unsafe { bindings::riw_vma_flags(vma) } & bindings::VM_EXEC as core::ffi::c_ulong != 0 {
        return EPERM.to_errno();
    }
    // Nor later, through mprotect().
    // SAFETY: As above; the core holds the mmap lock for writing while setting up the vma.
    unsafe { bindings::riw_vma_forbid_exec(vma) };
    // SAFETY: As above; the lookup checks the offset and that the size is the entry's.
    let entry = unsafe { bindings::rdma_user_mmap_entry_get(uctx, vma) };
    if entry.is_null() {
        return EINVAL.to_errno();
    }
    // SAFETY: All riw entries are `riw_mmap_entry`s (`new_user`), referenced by the lookup.
    let ret = unsafe {
        let addr = (*entry.cast::<bindings::riw_mmap_entry>()).addr;
        let ret = bindings::remap_vmalloc_range(vma, addr, 0);
        bindings::rdma_user_mmap_entry_put(entry);
        ret
    };
    ret
}

/// The `mmap_free` op: the last reference to an entry is gone.
pub(crate) unsafe extern "C" fn mmap_free_callback(entry: *mut bindings::rdma_user_mmap_entry) {
    let entry = entry.cast::<bindings::riw_mmap_entry>();
    // SAFETY: A `riw_mmap_entry` boxed in `new_user`, unreachable now; the pages stay
    // alive for any mapping that remains, which holds its own page references.
    unsafe {
        bindings::vfree((*entry).addr);
        drop(KBox::from_raw(entry));
    }
}
