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
}

impl CqeExt for uapi::siw_cqe {
    fn qp_id(&self) -> u64 {
        // SAFETY: Both members of the union are 64-bit plain data; any bits are a `u64`.
        unsafe { self.__bindgen_anon_2.qp_id }
    }
}
