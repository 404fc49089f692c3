// SPDX-License-Identifier: GPL-2.0

//! Byte-level traits of the user ABI structures in `uapi/`, so they can be copied to and
//! from userspace.

use crate::uapi;
use kernel::types::{AsBytes, FromBytes};

macro_rules! plain_abi_struct {
    ($($t:ty),* $(,)?) => {$(
        // SAFETY: A bindgen-generated `#[repr(C)]` struct of integer fields whose size and
        // field offsets `uapi/` checks at compile time (no padding, every bit pattern
        // valid), as the user ABI header defines it.
        unsafe impl AsBytes for $t {}
        // SAFETY: As above.
        unsafe impl FromBytes for $t {}
    )*};
}

plain_abi_struct!(
    uapi::siw_uresp_alloc_ctx,
    uapi::siw_uresp_create_cq,
    uapi::siw_uresp_create_qp,
    uapi::siw_uresp_create_srq,
    uapi::siw_uresp_reg_mr,
    uapi::siw_ureq_reg_mr,
    uapi::siw_sqe,
    uapi::siw_rqe,
    uapi::siw_cqe,
);

/// Reading the union fields of the ABI structures, which are plain integers.
pub trait CqeExt {
    /// The QP number of a completion.
    fn qp_id(&self) -> u64;
    /// The STag a completion reports invalidated.
    fn inval_stag(&self) -> u32;
}

impl CqeExt for uapi::siw_cqe {
    fn qp_id(&self) -> u64 {
        // SAFETY: Both members of the union are 64-bit plain data; any bits are a `u64`.
        unsafe { self.__bindgen_anon_2.qp_id }
    }

    fn inval_stag(&self) -> u32 {
        // SAFETY: Both members of the union are plain integers; any bits are a `u32`.
        unsafe { self.__bindgen_anon_1.inval_stag }
    }
}

/// Reading the unions of a send queue entry.
pub trait SqeExt {
    /// The scatter/gather elements (meaningless for inline data).
    fn sges(&self) -> &[uapi::siw_sge; uapi::SIW_MAX_SGE as usize];
    /// The bytes of the SGE slots after the first, where inline data lives.
    fn inline_area(&self) -> [u8; INLINE_AREA];
    /// The remote address of an RDMA Write or Read.
    fn raddr(&self) -> u64;
    /// The access rights of a registration (the word the SGE slots start with).
    fn access(&self) -> u64;
}

/// Size of the inline data area of a send queue entry.
pub const INLINE_AREA: usize =
    core::mem::size_of::<uapi::siw_sge>() * (uapi::SIW_MAX_SGE as usize - 1);

impl SqeExt for uapi::siw_sqe {
    fn sges(&self) -> &[uapi::siw_sge; uapi::SIW_MAX_SGE as usize] {
        // SAFETY: The union's members are plain data of the same size (an SGE array, or
        // a pointer-sized word in the first SGE); any bits are SGEs. A reference, not a
        // copy: the array is 96 bytes, and the data path reads the first SGE or two.
        unsafe { &self.__bindgen_anon_2.sge }
    }

    fn access(&self) -> u64 {
        // SAFETY: The union's members are plain integers; any bits are a `u64`.
        unsafe { self.__bindgen_anon_2.access }
    }

    fn raddr(&self) -> u64 {
        // SAFETY: Both members of the union are 64-bit plain data (an address, or a
        // region pointer as an integer); any bits are a `u64`.
        unsafe { self.__bindgen_anon_1.raddr }
    }

    fn inline_area(&self) -> [u8; INLINE_AREA] {
        let sges = self.sges();
        let mut out = [0u8; INLINE_AREA];
        // The user library copies inline data byte for byte over `sge[1..]`; SGEs are
        // plain `#[repr(C)]` integers without padding (checked in `uapi/`), so their
        // native-endian field bytes in order are those bytes.
        for (chunk, sge) in out
            .chunks_mut(core::mem::size_of::<uapi::siw_sge>())
            .zip(&sges[1..])
        {
            chunk[..8].copy_from_slice(&sge.laddr.to_ne_bytes());
            chunk[8..12].copy_from_slice(&sge.length.to_ne_bytes());
            chunk[12..16].copy_from_slice(&sge.lkey.to_ne_bytes());
        }
        out
    }
}
