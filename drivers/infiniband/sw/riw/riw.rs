// SPDX-License-Identifier: GPL-2.0

//! riw: a Chelsio-class iWARP RNIC whose engine runs in the kernel over TCP sockets.
//!
//! `rdma link add NAME type riw netdev DEV` creates an RDMA device on an Ethernet netdev;
//! userspace drives it through rdma-core's software iWARP provider, whose ABI riw speaks.
//! See Documentation/riw.rst.
//!
//! Everything in this directory is safe Rust; the abstractions it stands on are in
//! `rust/` (module `kernel_ext`) and the user ABI types in `uapi/`.

use kernel::prelude::*;

#[path = "../../../../rust/mod.rs"]
mod kernel_ext;
#[path = "../../../../uapi/mod.rs"]
mod uapi;

#[forbid(unsafe_code)]
mod cm;
#[forbid(unsafe_code)]
mod conn;
#[forbid(unsafe_code)]
mod cq;
#[forbid(unsafe_code)]
mod crc;
#[forbid(unsafe_code)]
mod device;
#[forbid(unsafe_code)]
mod flush;
#[forbid(unsafe_code)]
mod inspect;
#[forbid(unsafe_code)]
mod limits;
#[forbid(unsafe_code)]
mod mr;
#[forbid(unsafe_code)]
mod pd;
#[forbid(unsafe_code)]
mod proto;
#[forbid(unsafe_code)]
mod qp;
#[forbid(unsafe_code)]
mod reads;
#[forbid(unsafe_code)]
mod rx;
#[forbid(unsafe_code)]
mod srq;
#[forbid(unsafe_code)]
mod stats;
#[forbid(unsafe_code)]
mod tx;
#[forbid(unsafe_code)]
mod verbs;

use kernel_ext::rdma::Driver;

module! {
    type: RiwModule,
    name: "riw",
    author: "The riw developers",
    description: "Chelsio-class iWARP RNIC over kernel TCP sockets",
    license: "GPL",
    alias: ["rdma-link-riw"],
}

struct RiwModule {
    _driver: Pin<KBox<Driver<device::RiwDevice>>>,
}

impl kernel::Module for RiwModule {
    fn init(module: &'static ThisModule) -> Result<Self> {
        crc::self_test()?;
        let driver = Driver::register(module)?;
        pr_info!("iWARP RNIC driver loaded\n");
        Ok(Self { _driver: driver })
    }
}
