// SPDX-License-Identifier: GPL-2.0

//! riw's module parameters. They are declared in rust/params.c (`module_param` is a macro
//! the `kernel` crate of this kernel has no counterpart for); here they are read, live,
//! since they are writable at run time through /sys/module/riw/parameters/. The safety of
//! each read rests on the contract at the top of rust/params.c: readable from any context,
//! for as long as the module is loaded.

use super::bindings;

/// `mpa_crc_required`: riw insists on CRC32c in every FPDU, in both roles.
pub fn mpa_crc_required() -> bool {
    // SAFETY: By the contract of rust/params.c, callable from any context.
    unsafe { bindings::riw_param_mpa_crc_required() }
}

/// `peer_to_peer`: as initiator, riw asks for MPA peer-to-peer mode and sends the
/// ready-to-receive message.
pub fn peer_to_peer() -> bool {
    // SAFETY: As above.
    unsafe { bindings::riw_param_peer_to_peer() }
}

/// `fpdu_segments`: the operator's choice of how many TCP segments of the path's MSS one
/// sent FPDU may span toward every peer, within 1 and 45 (the 16-bit ULPDU length); `None`
/// (the parameter is 0, its default) leaves it to the MPA exchange.
pub fn fpdu_segments() -> Option<u32> {
    // SAFETY: As above.
    let n = unsafe { bindings::riw_param_fpdu_segments() };
    (n != 0).then(|| n.min(45))
}

/// `tx_zerocopy_min`: the smallest message sent zero-copy from registered user memory;
/// 0 turns zero-copy transmission off.
pub fn tx_zerocopy_min() -> u32 {
    // SAFETY: By the contract of rust/params.c, the variable lives as long as the module
    // and is only ever stored whole: a volatile load of the word is READ_ONCE.
    unsafe { core::ptr::addr_of!(bindings::riw_tx_zerocopy_min).read_volatile() }
}

/// `tx_zerocopy_keep`: a connection whose route copied zero-copy pages keeps sending
/// zero-copy (for tests; by default it sends by copy from then on).
pub fn tx_zerocopy_keep() -> bool {
    // SAFETY: As for `mpa_crc_required`.
    unsafe { bindings::riw_param_tx_zerocopy_keep() }
}
