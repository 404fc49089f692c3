// SPDX-License-Identifier: GPL-2.0
/*
 * riw's module parameters, in C because module_param() has no counterpart in the 6.12
 * kernel crate.
 *
 * Contract: each parameter is a word-sized variable that lives as long as the module and
 * that root may rewrite at any time through /sys/module/riw/parameters/ (a plain store of
 * the whole word). Readers call the riw_param_*() functions, from any context, and get a
 * value that was current at some moment of the call (READ_ONCE). riw_tx_zerocopy_min,
 * read on every message sent, is exported as the variable itself: a reader loads it with
 * one volatile word-sized load. Nothing here ever writes a parameter. rust/params.rs is
 * the only reader.
 */

#include "helpers.h"
#include <linux/moduleparam.h>

static bool mpa_crc_required;
module_param(mpa_crc_required, bool, 0644);
MODULE_PARM_DESC(mpa_crc_required, "Require CRC32c on every FPDU of new connections (default: only if the peer asks)");

static bool peer_to_peer;
module_param(peer_to_peer, bool, 0644);
MODULE_PARM_DESC(peer_to_peer, "As initiator, request MPA peer-to-peer mode (RFC 6581) for new connections");

static unsigned int fpdu_segments;
module_param(fpdu_segments, uint, 0644);
MODULE_PARM_DESC(fpdu_segments, "TCP segments (of the path's MSS) one sent FPDU may span toward any peer, 1 to 45; 0 (default): one, or 11 (about 16 KiB) toward a peer that agreed to larger FPDUs in the MPA exchange");

unsigned int riw_tx_zerocopy_min = 16384;
module_param_named(tx_zerocopy_min, riw_tx_zerocopy_min, uint, 0644);
MODULE_PARM_DESC(tx_zerocopy_min, "Smallest message (bytes) sent zero-copy from registered user memory (default 16384; 0: never)");

static bool tx_zerocopy_keep;
module_param(tx_zerocopy_keep, bool, 0644);
MODULE_PARM_DESC(tx_zerocopy_keep, "Keep sending zero-copy on connections whose route copies the pages anyway (veth, loopback), for testing");

bool riw_param_mpa_crc_required(void)
{
	return READ_ONCE(mpa_crc_required);
}

bool riw_param_peer_to_peer(void)
{
	return READ_ONCE(peer_to_peer);
}

unsigned int riw_param_fpdu_segments(void)
{
	return READ_ONCE(fpdu_segments);
}

bool riw_param_tx_zerocopy_keep(void)
{
	return READ_ONCE(tx_zerocopy_keep);
}
