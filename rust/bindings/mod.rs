// SPDX-License-Identifier: GPL-2.0

//! Raw bindings to the kernel C APIs riw uses, generated at build time by
//! `scripts/riw-bindgen.sh` with the kernel's own bindgen flags. Only `rust/` sees them.

#![allow(
    dead_code,
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    improper_ctypes,
    unreachable_pub,
    unsafe_op_in_unsafe_fn,
    unnecessary_transmutes,
    clippy::all
)]

// The kernel blocklists these in its own bindings and defines them as Rust types.
pub type __kernel_size_t = usize;
pub type __kernel_ssize_t = isize;
pub type __kernel_ptrdiff_t = isize;

include!("bindings_generated.rs");
