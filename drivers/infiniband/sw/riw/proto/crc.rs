// SPDX-License-Identifier: GPL-2.0

//! CRC32c (Castagnoli), the MPA FPDU checksum (RFC 5044 §4.4, computed as in
//! RFC 3720 §B.4).
//!
//! The framing code is generic over [`Crc32c`] so the kernel build can plug in
//! the kernel's accelerated `crc32c()`; [`SoftCrc32c`] is the portable
//! table-driven fallback used on the host.

/// A CRC32c engine.
///
/// `update` continues a computation over `data` from the running register
/// value `crc` and returns the new register value, with no pre- or
/// post-inversion: start from [`CRC32C_INIT`] and finish with
/// [`crc32c_finish`]. This is exactly the contract of the kernel's
/// `crc32c(u32 crc, const void *p, unsigned int len)`.
pub trait Crc32c {
    /// Feeds `data` into the running register value `crc`.
    fn update(crc: u32, data: &[u8]) -> u32;
}

/// Initial register value of a CRC32c computation.
pub const CRC32C_INIT: u32 = !0;

/// Turns a running register value into the CRC32c of the data fed so far.
pub const fn crc32c_finish(crc: u32) -> u32 {
    !crc
}

/// The CRC32c of `data`, computed with engine `C`.
pub fn crc32c<C: Crc32c>(data: &[u8]) -> u32 {
    crc32c_finish(C::update(CRC32C_INIT, data))
}

/// Wire form of a finished CRC32c: MPA (like iSCSI) transmits the value
/// least significant byte first.
pub const fn crc32c_to_wire(crc: u32) -> [u8; 4] {
    crc.to_le_bytes()
}

/// Reads a CRC32c value in its wire byte order.
pub const fn crc32c_from_wire(bytes: [u8; 4]) -> u32 {
    u32::from_le_bytes(bytes)
}

/// Reflected Castagnoli polynomial 0x1EDC6F41.
const POLY: u32 = 0x82F6_3B78;

const fn make_tables() -> [[u32; 256]; 4] {
    let mut t = [[0u32; 256]; 4];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
            bit += 1;
        }
        t[0][i] = crc;
        i += 1;
    }
    // t[k][b]: effect of byte b followed by k zero bytes, for slicing-by-4.
    let mut k = 1;
    while k < 4 {
        let mut b = 0;
        while b < 256 {
            let prev = t[k - 1][b];
            t[k][b] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            b += 1;
        }
        k += 1;
    }
    t
}

static TABLES: [[u32; 256]; 4] = make_tables();

fn table(k: usize, index: u32) -> u32 {
    // `index` is masked to a byte and `k < 4` at every call site; `get` keeps
    // this path free of panics regardless.
    TABLES
        .get(k)
        .and_then(|t| t.get((index & 0xff) as usize))
        .copied()
        .unwrap_or(0)
}

/// Portable slicing-by-4 CRC32c.
#[derive(Clone, Copy, Debug, Default)]
pub struct SoftCrc32c;

impl Crc32c for SoftCrc32c {
    fn update(mut crc: u32, data: &[u8]) -> u32 {
        let (words, tail) = data.as_chunks::<4>();
        for word in words {
            crc ^= u32::from_le_bytes(*word);
            crc = table(3, crc) ^ table(2, crc >> 8) ^ table(1, crc >> 16) ^ table(0, crc >> 24);
        }
        for &byte in tail {
            crc = (crc >> 8) ^ table(0, crc ^ u32::from(byte));
        }
        crc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn soft(data: &[u8]) -> [u8; 4] {
        crc32c_to_wire(crc32c::<SoftCrc32c>(data))
    }

    // RFC 3720 §B.4 test vectors, CRC bytes as listed there (wire order).
    #[test]
    fn rfc3720_vectors() {
        assert_eq!(soft(&[0u8; 32]), [0xaa, 0x36, 0x91, 0x8a]);
        assert_eq!(soft(&[0xffu8; 32]), [0x43, 0xab, 0xa8, 0x62]);
        let inc: [u8; 32] = core::array::from_fn(|i| i as u8);
        assert_eq!(soft(&inc), [0x4e, 0x79, 0xdd, 0x46]);
        let dec: [u8; 32] = core::array::from_fn(|i| 31 - i as u8);
        assert_eq!(soft(&dec), [0x5c, 0xdb, 0x3f, 0x11]);
        let iscsi_read: [u8; 48] = [
            0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14,
            0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        ];
        assert_eq!(soft(&iscsi_read), [0x56, 0x3a, 0x96, 0xd9]);
    }

    #[test]
    fn check_value() {
        assert_eq!(crc32c::<SoftCrc32c>(b"123456789"), 0xe306_9283);
    }

    #[test]
    fn incremental_equals_oneshot() {
        let data: [u8; 77] = core::array::from_fn(|i| (i * 7 + 3) as u8);
        for split in 0..data.len() {
            let (a, b) = data.split_at(split);
            let crc = SoftCrc32c::update(SoftCrc32c::update(CRC32C_INIT, a), b);
            assert_eq!(crc32c_finish(crc), crc32c::<SoftCrc32c>(&data));
        }
    }
}
