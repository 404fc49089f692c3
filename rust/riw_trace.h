/* SPDX-License-Identifier: GPL-2.0 */
/*
 * riw's trace events (/sys/kernel/tracing/events/riw/), defined in C because the 6.12
 * kernel crate cannot define tracepoints. rust/trace.c instantiates them and forwards
 * each to Rust (rust/trace.rs), which reads the event's static key before it calls, so a
 * disabled event costs one load and a branch.
 *
 * Contract: the forwards take the device a record belongs to (`struct ib_device`, alive
 * during the call) and plain values; string arguments are NUL-terminated and only read
 * during the call; address arguments point at a sockaddr_storage alive during the call.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM riw

#if !defined(RIW_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define RIW_TRACE_H

#include <linux/tracepoint.h>
#include <linux/socket.h>
#include <rdma/ib_verbs.h>
#include <rdma/siw-abi.h>

#define RIW_SOCKADDR_SIZE sizeof(struct sockaddr_in6)

#define riw_show_opcode(op)						\
	__print_symbolic(op, { SIW_OP_WRITE, "WRITE" }, { SIW_OP_READ, "READ" },	\
			 { SIW_OP_READ_LOCAL_INV, "READ_LOCAL_INV" },		\
			 { SIW_OP_SEND, "SEND" }, { SIW_OP_SEND_WITH_IMM, "SEND_WITH_IMM" }, \
			 { SIW_OP_SEND_REMOTE_INV, "SEND_REMOTE_INV" },		\
			 { SIW_OP_FETCH_AND_ADD, "FETCH_AND_ADD" },		\
			 { SIW_OP_COMP_AND_SWAP, "COMP_AND_SWAP" },		\
			 { SIW_OP_RECEIVE, "RECEIVE" },				\
			 { SIW_OP_READ_RESPONSE, "READ_RESPONSE" },		\
			 { SIW_OP_INVAL_STAG, "INVAL_STAG" }, { SIW_OP_REG_MR, "REG_MR" })

TRACE_EVENT(riw_mpa,
	TP_PROTO(struct ib_device *dev, u32 ep, bool sent, u8 kind, u8 revision, bool crc,
		 bool markers, bool p2p, u8 rtr, u16 ird, u16 ord, u16 pd_len,
		 const struct __kernel_sockaddr_storage *peer),
	TP_ARGS(dev, ep, sent, kind, revision, crc, markers, p2p, rtr, ird, ord, pd_len, peer),
	TP_STRUCT__entry(
		__string(dev, dev_name(&dev->dev))
		__field(u32, ep)
		__field(bool, sent)
		__field(u8, kind)
		__field(u8, revision)
		__field(bool, crc)
		__field(bool, markers)
		__field(bool, p2p)
		__field(u8, rtr)
		__field(u16, ird)
		__field(u16, ord)
		__field(u16, pd_len)
		__array(u8, peer, RIW_SOCKADDR_SIZE)
	),
	TP_fast_assign(
		__assign_str(dev);
		__entry->ep = ep;
		__entry->sent = sent;
		__entry->kind = kind;
		__entry->revision = revision;
		__entry->crc = crc;
		__entry->markers = markers;
		__entry->p2p = p2p;
		__entry->rtr = rtr;
		__entry->ird = ird;
		__entry->ord = ord;
		__entry->pd_len = pd_len;
		memcpy(__entry->peer, peer, RIW_SOCKADDR_SIZE);
	),
	TP_printk("%s ep=%u %s %s peer=%pISpc rev=%u crc=%u markers=%u p2p=%u rtr=%#x ird=%u ord=%u private_data=%u",
		  __get_str(dev), __entry->ep, __entry->sent ? "sent" : "received",
		  __print_symbolic(__entry->kind, { 0, "request" }, { 1, "reply" },
				   { 2, "reject" }),
		  __entry->peer, __entry->revision, __entry->crc, __entry->markers,
		  __entry->p2p, __entry->rtr, __entry->ird, __entry->ord, __entry->pd_len)
);

TRACE_EVENT(riw_rtr,
	TP_PROTO(struct ib_device *dev, u32 qpn, bool sent, u8 mode),
	TP_ARGS(dev, qpn, sent, mode),
	TP_STRUCT__entry(
		__string(dev, dev_name(&dev->dev))
		__field(u32, qpn)
		__field(bool, sent)
		__field(u8, mode)
	),
	TP_fast_assign(
		__assign_str(dev);
		__entry->qpn = qpn;
		__entry->sent = sent;
		__entry->mode = mode;
	),
	TP_printk("%s qp=%u ready-to-receive %s: %s", __get_str(dev), __entry->qpn,
		  __entry->sent ? "sent" : "received",
		  __print_symbolic(__entry->mode, { 0, "write" }, { 1, "read" }, { 2, "send" }))
);

TRACE_EVENT(riw_qp_state,
	TP_PROTO(struct ib_device *dev, u32 qpn, u8 old, u8 new, const char *cause),
	TP_ARGS(dev, qpn, old, new, cause),
	TP_STRUCT__entry(
		__string(dev, dev_name(&dev->dev))
		__field(u32, qpn)
		__field(u8, old)
		__field(u8, new)
		__string(cause, cause)
	),
	TP_fast_assign(
		__assign_str(dev);
		__entry->qpn = qpn;
		__entry->old = old;
		__entry->new = new;
		__assign_str(cause);
	),
	TP_printk("%s qp=%u %s -> %s: %s", __get_str(dev), __entry->qpn,
		  __print_symbolic(__entry->old, { IB_QPS_RESET, "RESET" }, { IB_QPS_INIT, "INIT" },
				   { IB_QPS_RTR, "RTR" }, { IB_QPS_RTS, "RTS" },
				   { IB_QPS_SQD, "SQD" }, { IB_QPS_SQE, "SQE" },
				   { IB_QPS_ERR, "ERROR" }),
		  __print_symbolic(__entry->new, { IB_QPS_RESET, "RESET" }, { IB_QPS_INIT, "INIT" },
				   { IB_QPS_RTR, "RTR" }, { IB_QPS_RTS, "RTS" },
				   { IB_QPS_SQD, "SQD" }, { IB_QPS_SQE, "SQE" },
				   { IB_QPS_ERR, "ERROR" }),
		  __get_str(cause))
);

TRACE_EVENT(riw_terminate,
	TP_PROTO(struct ib_device *dev, u32 qpn, bool sent, u8 layer, u8 etype, u8 code),
	TP_ARGS(dev, qpn, sent, layer, etype, code),
	TP_STRUCT__entry(
		__string(dev, dev_name(&dev->dev))
		__field(u32, qpn)
		__field(bool, sent)
		__field(u8, layer)
		__field(u8, etype)
		__field(u8, code)
	),
	TP_fast_assign(
		__assign_str(dev);
		__entry->qpn = qpn;
		__entry->sent = sent;
		__entry->layer = layer;
		__entry->etype = etype;
		__entry->code = code;
	),
	TP_printk("%s qp=%u terminate %s layer=%s type=%u code=%#x", __get_str(dev),
		  __entry->qpn, __entry->sent ? "sent" : "received",
		  __print_symbolic(__entry->layer, { 0, "rdmap" }, { 1, "ddp" }, { 2, "mpa" }),
		  __entry->etype, __entry->code)
);

TRACE_EVENT(riw_crc_error,
	TP_PROTO(struct ib_device *dev, u32 qpn, u32 computed, u32 received),
	TP_ARGS(dev, qpn, computed, received),
	TP_STRUCT__entry(
		__string(dev, dev_name(&dev->dev))
		__field(u32, qpn)
		__field(u32, computed)
		__field(u32, received)
	),
	TP_fast_assign(
		__assign_str(dev);
		__entry->qpn = qpn;
		__entry->computed = computed;
		__entry->received = received;
	),
	TP_printk("%s qp=%u crc computed=%#010x received=%#010x", __get_str(dev),
		  __entry->qpn, __entry->computed, __entry->received)
);

TRACE_EVENT(riw_conn_close,
	TP_PROTO(struct ib_device *dev, u32 qpn, bool abort, int status, const char *reason),
	TP_ARGS(dev, qpn, abort, status, reason),
	TP_STRUCT__entry(
		__string(dev, dev_name(&dev->dev))
		__field(u32, qpn)
		__field(bool, abort)
		__field(int, status)
		__string(reason, reason)
	),
	TP_fast_assign(
		__assign_str(dev);
		__entry->qpn = qpn;
		__entry->abort = abort;
		__entry->status = status;
		__assign_str(reason);
	),
	TP_printk("%s qp=%u %s status=%d: %s", __get_str(dev), __entry->qpn,
		  __entry->abort ? "abort" : "close", __entry->status, __get_str(reason))
);

TRACE_EVENT(riw_sock_backpressure,
	TP_PROTO(struct ib_device *dev, u32 qpn, bool full),
	TP_ARGS(dev, qpn, full),
	TP_STRUCT__entry(
		__string(dev, dev_name(&dev->dev))
		__field(u32, qpn)
		__field(bool, full)
	),
	TP_fast_assign(
		__assign_str(dev);
		__entry->qpn = qpn;
		__entry->full = full;
	),
	TP_printk("%s qp=%u socket send queue %s", __get_str(dev), __entry->qpn,
		  __entry->full ? "full" : "drained")
);

TRACE_EVENT(riw_post,
	TP_PROTO(struct ib_device *dev, u32 qpn, bool recv, u64 wr_id, u8 opcode, u32 length),
	TP_ARGS(dev, qpn, recv, wr_id, opcode, length),
	TP_STRUCT__entry(
		__string(dev, dev_name(&dev->dev))
		__field(u32, qpn)
		__field(bool, recv)
		__field(u64, wr_id)
		__field(u8, opcode)
		__field(u32, length)
	),
	TP_fast_assign(
		__assign_str(dev);
		__entry->qpn = qpn;
		__entry->recv = recv;
		__entry->wr_id = wr_id;
		__entry->opcode = opcode;
		__entry->length = length;
	),
	TP_printk("%s qp=%u %s wr_id=%#llx opcode=%s length=%u", __get_str(dev), __entry->qpn,
		  __entry->recv ? "rq" : "sq", __entry->wr_id, riw_show_opcode(__entry->opcode),
		  __entry->length)
);

TRACE_EVENT(riw_complete,
	TP_PROTO(struct ib_device *dev, u32 qpn, u64 wr_id, u8 opcode, u32 length, u16 status),
	TP_ARGS(dev, qpn, wr_id, opcode, length, status),
	TP_STRUCT__entry(
		__string(dev, dev_name(&dev->dev))
		__field(u32, qpn)
		__field(u64, wr_id)
		__field(u8, opcode)
		__field(u32, length)
		__field(u16, status)
	),
	TP_fast_assign(
		__assign_str(dev);
		__entry->qpn = qpn;
		__entry->wr_id = wr_id;
		__entry->opcode = opcode;
		__entry->length = length;
		__entry->status = status;
	),
	TP_printk("%s qp=%u wr_id=%#llx opcode=%s length=%u status=%u", __get_str(dev),
		  __entry->qpn, __entry->wr_id, riw_show_opcode(__entry->opcode), __entry->length,
		  __entry->status)
);

#endif /* RIW_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE riw_trace
#include <trace/define_trace.h>
