// SPDX-License-Identifier: GPL-2.0

//! An ID allocator (`struct ida`).

use super::bindings;
use kernel::prelude::*;
use kernel::types::Opaque;

/// Allocates unique integer IDs.
///
/// # Invariants
///
/// `ida` is initialised from construction until drop.
#[pin_data(PinnedDrop)]
pub struct IdAllocator {
    #[pin]
    ida: Opaque<bindings::ida>,
}

// SAFETY: `struct ida` serialises its users with its own lock.
unsafe impl Send for IdAllocator {}
// SAFETY: As above.
unsafe impl Sync for IdAllocator {}

impl IdAllocator {
    /// An empty allocator.
    pub fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `ptr` is valid for writes and pinned.
            ida <- Opaque::ffi_init(|ptr| unsafe { bindings::riw_ida_init(ptr) }),
        })
    }

    /// The lowest free ID in `min..=max` (may sleep).
    pub fn alloc(&self, min: u32, max: u32) -> Result<u32> {
        // SAFETY: Initialised by the invariant; the IDA locks internally.
        let id = unsafe { bindings::riw_ida_alloc_range(self.ida.get(), min, max) };
        if id < 0 {
            return Err(Error::from_errno(id));
        }
        Ok(id as u32)
    }

    /// Frees `id`, which `alloc` returned.
    pub fn free(&self, id: u32) {
        // SAFETY: Initialised by the invariant; freeing an allocated ID.
        unsafe { bindings::ida_free(self.ida.get(), id) };
    }
}

#[pinned_drop]
impl PinnedDrop for IdAllocator {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: Initialised by the invariant, never used again.
        unsafe { bindings::ida_destroy(self.ida.get()) };
    }
}
