// SPDX-License-Identifier: GPL-2.0

//! Host build of the riw protocol core.
//!
//! The kernel compiles `mod.rs` as `mod proto;` inside the riw crate; this
//! shim lets the same files build as an ordinary `no_std` library so they can
//! be unit-tested, property-tested and fuzzed with cargo.

#![no_std]

#[cfg(test)]
extern crate std;

#[path = "mod.rs"]
mod proto;

pub use proto::*;
