// SPDX-License-Identifier: GPL-2.0

//! Protection domains: nothing but a counted name that memory and queue pairs share.

use crate::device::RiwDevice;
use crate::kernel_ext::rdma::Device;
use crate::limits::LIMITS;
use kernel::prelude::*;

/// A riw protection domain.
pub(crate) struct RiwPd;

impl RiwPd {
    pub(crate) fn new(dev: &Device<RiwDevice>) -> Result<Self> {
        dev.pds.take(LIMITS.max_pd)?.keep();
        Ok(Self)
    }

    pub(crate) fn destroy(&self, dev: &Device<RiwDevice>) {
        dev.pds.put();
    }
}
