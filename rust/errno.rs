// SPDX-License-Identifier: GPL-2.0

//! Error codes of networking and RDMA that `kernel::error::code` does not declare yet.

use super::bindings;
use kernel::error::Error;

macro_rules! errnos {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {$(
        $(#[$doc])*
        #[allow(non_snake_case)]
        pub fn $name() -> Error {
            Error::from_errno(-(bindings::$name as i32))
        }
    )*};
}

errnos!(
    /// Operation not supported.
    EOPNOTSUPP,
    /// Transport endpoint is not connected.
    ENOTCONN,
    /// Address family not supported.
    EAFNOSUPPORT,
    /// Connection refused.
    ECONNREFUSED,
    /// Connection reset by peer.
    ECONNRESET,
    /// Connection timed out.
    ETIMEDOUT,
    /// Message too long.
    EMSGSIZE,
    /// Network is down.
    ENETDOWN,
);
