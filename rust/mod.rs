// SPDX-License-Identifier: GPL-2.0

//! Safe abstractions over the kernel C APIs that riw needs and the `kernel` crate does not
//! offer yet: the RDMA core (devices, verbs objects, user contexts), rdma link types and
//! network devices. All of riw's `unsafe` code lives here; the driver above is safe Rust.

// Written as the library it would be in the kernel crate: its API is `pub`.
#![allow(unreachable_pub)]

mod bindings;
pub(crate) mod crc;
pub(crate) mod debugfs;
pub(crate) mod defer;
pub(crate) mod errno;
pub(crate) mod ida;
pub(crate) mod net;
pub(crate) mod params;
pub(crate) mod percpu;
pub(crate) mod rdma;
pub(crate) mod socket;
pub(crate) mod sync;
pub(crate) mod trace;
pub(crate) mod uapi;
pub(crate) mod workqueue;
pub(crate) mod xarray;
