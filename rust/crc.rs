// SPDX-License-Identifier: GPL-2.0

//! The kernel's CRC32c (`crc32c()`, accelerated where the CPU can).

use super::bindings;

/// Continues a CRC32c over `data` from the register value `crc`, with no pre- or
/// post-inversion, as the kernel's `crc32c()` does.
pub fn crc32c(mut crc: u32, data: &[u8]) -> u32 {
    // The C length is 32 bits wide.
    for chunk in data.chunks(u32::MAX as usize) {
        // SAFETY: `chunk` is valid for reads of its length, which fits in `u32`.
        crc = unsafe { bindings::crc32c(crc, chunk.as_ptr().cast(), chunk.len() as u32) };
    }
    crc
}
