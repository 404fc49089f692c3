// SPDX-License-Identifier: GPL-2.0

//! The user ABI riw speaks: the types of `include/uapi/rdma/siw-abi.h` (and the uverbs
//! structures they travel in), generated from the kernel's own header at build time so
//! they are never retyped. riw answers to rdma-core's software iWARP provider; every byte
//! riw shares with userspace has its type here.
//!
//! bindgen's compile-time layout checks are kept on for this module; the assertions below
//! pin the facts the provider relies on.

#![allow(
    dead_code,
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    unreachable_pub,
    clippy::all
)]

include!("uapi_generated.rs");

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(SIW_ABI_VERSION == 1);
    assert!(size_of::<siw_uresp_alloc_ctx>() == 8);
    assert!(size_of::<siw_sge>() == 16);
    assert!(offset_of!(siw_sqe, id) == 0);
    assert!(size_of::<siw_sqe>() == 120);
    assert!(size_of::<siw_rqe>() == 112);
};
