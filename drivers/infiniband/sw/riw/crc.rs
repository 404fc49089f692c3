// SPDX-License-Identifier: GPL-2.0

//! The kernel's CRC32c as the engine of the protocol core's MPA framing.

use crate::kernel_ext;
use crate::proto::crc::{crc32c, Crc32c, SoftCrc32c};
use kernel::prelude::*;

/// The kernel's `crc32c()`.
pub(crate) struct KernelCrc32c;

impl Crc32c for KernelCrc32c {
    fn update(crc: u32, data: &[u8]) -> u32 {
        kernel_ext::crc::crc32c(crc, data)
    }
}

/// Checks, once at load, that the kernel's CRC32c and the protocol core's portable one
/// (the one the host tests use) agree, on the iSCSI test vectors (RFC 3720 §B.4) and
/// split at an odd offset.
pub(crate) fn self_test() -> Result {
    let mut ascending = [0u8; 32];
    for (i, b) in ascending.iter_mut().enumerate() {
        *b = i as u8;
    }
    let vectors: [(&[u8], u32); 3] = [
        (&[0u8; 32], 0x8a91_36aa),
        (&[0xffu8; 32], 0x62a8_ab43),
        (&ascending, 0x46dd_794e),
    ];
    for (data, want) in vectors {
        let split = KernelCrc32c::update(KernelCrc32c::update(!0, &data[..7]), &data[7..]);
        if crc32c::<KernelCrc32c>(data) != want
            || crc32c::<SoftCrc32c>(data) != want
            || !split != want
        {
            pr_err!("crc32c disagrees with the protocol core on a test vector\n");
            return Err(EINVAL);
        }
    }
    Ok(())
}
