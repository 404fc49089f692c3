// SPDX-License-Identifier: GPL-2.0
/*
 * Instantiates riw's trace events (riw_trace.h, where their contract is) and forwards
 * each to Rust: one line per event, as the helpers are.
 */

#define CREATE_TRACE_POINTS
#include "riw_trace.h"
#include "helpers.h"

void riw_trace_mpa(struct ib_device *dev, u32 ep, bool sent, u8 kind, u8 revision, bool crc,
		   bool markers, bool p2p, u8 rtr, u16 ird, u16 ord, u16 pd_len,
		   const struct __kernel_sockaddr_storage *peer)
{
	trace_riw_mpa(dev, ep, sent, kind, revision, crc, markers, p2p, rtr, ird, ord, pd_len,
		      peer);
}

void riw_trace_rtr(struct ib_device *dev, u32 qpn, bool sent, u8 mode)
{
	trace_riw_rtr(dev, qpn, sent, mode);
}

void riw_trace_qp_state(struct ib_device *dev, u32 qpn, u8 old, u8 new, const char *cause)
{
	trace_riw_qp_state(dev, qpn, old, new, cause);
}

void riw_trace_terminate(struct ib_device *dev, u32 qpn, bool sent, u8 layer, u8 etype,
			 u8 code)
{
	trace_riw_terminate(dev, qpn, sent, layer, etype, code);
}

void riw_trace_crc_error(struct ib_device *dev, u32 qpn, u32 computed, u32 received)
{
	trace_riw_crc_error(dev, qpn, computed, received);
}

void riw_trace_conn_close(struct ib_device *dev, u32 qpn, bool abort, int status,
			  const char *reason)
{
	trace_riw_conn_close(dev, qpn, abort, status, reason);
}

void riw_trace_sock_backpressure(struct ib_device *dev, u32 qpn, bool full)
{
	trace_riw_sock_backpressure(dev, qpn, full);
}

void riw_trace_post(struct ib_device *dev, u32 qpn, bool recv, u64 wr_id, u8 opcode,
		    u32 length)
{
	trace_riw_post(dev, qpn, recv, wr_id, opcode, length);
}

void riw_trace_complete(struct ib_device *dev, u32 qpn, u64 wr_id, u8 opcode, u32 length,
			u16 status)
{
	trace_riw_complete(dev, qpn, wr_id, opcode, length, status);
}
