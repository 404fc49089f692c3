#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# What riw shows of its work (issue 33): the port counters of `rdma statistic` and sysfs
# hw_counters, and the trace events of /sys/kernel/tracing/events/riw/, each checked against
# a workload whose traffic is known, between a server device on veth1 (namespace 1,
# 192.0.2.2) and a client device on veth0 (namespace 0, 192.0.2.1):
#
#   rping -C N -S S   per iteration each side sends two Sends of 16 bytes (rping's buffer
#                     advertisements), the server reads S bytes from the client and writes
#                     S bytes back (S-1 characters and their NUL): the counters of both
#                     devices must say exactly that, and the error counters nothing
#   hostile.py        a raw TCP peer sends an FPDU with a bad CRC (the bad_crc case of
#                     riw_cm.sh): crc_errors and tx_terminates_mpa count it once
#   trace events      a connection (riw_mpa, riw_qp_state, riw_conn_close), work requests
#                     and completions (riw_post, riw_complete) and the Terminate
#                     (riw_crc_error, riw_terminate) appear with the right fields; an
#                     ib_write_bw fills the socket's send queue, which drains again
#                     (riw_sock_backpressure)
set -eu
. "$(dirname "$0")/lib.sh"

here=$(dirname "$0")
srv_drv=riw cli_drv=riw
N=20 S=5000
COUNTERS=(tx_fpdus rx_fpdus tx_payload_bytes rx_payload_bytes tx_sends rx_sends tx_writes
	rx_writes tx_read_requests rx_read_requests tx_read_responses rx_read_responses
	tx_terminates_rdmap tx_terminates_ddp tx_terminates_mpa rx_terminates_rdmap
	rx_terminates_ddp rx_terminates_mpa crc_errors mpa_requests_sent mpa_requests_received
	mpa_replies_sent mpa_replies_received mpa_rejects_sent mpa_rejects_received
	connections_established connections_refused connections_timed_out responder_sent_first
	zero_copy_sends zero_copy_fallbacks access_violations placement_errors cq_overruns tcp_retransmits)
ERRORS=(tx_terminates_rdmap tx_terminates_ddp tx_terminates_mpa rx_terminates_rdmap
	rx_terminates_ddp rx_terminates_mpa crc_errors mpa_rejects_sent mpa_rejects_received
	connections_refused connections_timed_out access_violations placement_errors cq_overruns)

ktap_print_header
ktap_set_plan 14

modprobe riw
echo 0 >/sys/module/riw/parameters/peer_to_peer
echo 0 >/sys/module/riw/parameters/mpa_crc_required
riw_pair_devices sts0 stc0

# A counter as sysfs shows it.
counter() { # DEV NAME
	cat "/sys/class/infiniband/$1/ports/1/hw_counters/$2"
}

# Every counter of DEV must hold the value given, NAME=VALUE...; prints the ones that do not.
counters_are() { # DEV NAME=VALUE...
	local dev=$1 kv name want got bad=0
	shift
	for kv in "$@"; do
		name=${kv%%=*} want=${kv#*=}
		got=$(counter "$dev" "$name")
		if [ "$got" != "$want" ]; then
			echo "# $dev $name: $got, expected $want"
			bad=1
		fi
	done
	return $bad
}

all_listed() { # DEV
	local out name
	out=$(rdma statistic show link "$1/1")
	echo "# $out" | cut -c1-200
	for name in "${COUNTERS[@]}"; do
		grep -qw "$name" <<<"$out" || { echo "# $name missing"; return 1; }
	done
}
riw_result "rdma statistic show link lists riw's ${#COUNTERS[@]} counters" all_listed stc0

zero_errors() { # DEV
	local name kv=()
	for name in "${ERRORS[@]}"; do kv+=("$name=0"); done
	counters_are "$1" "${kv[@]}"
}

port=7470
riw_check "rping -V: $N iterations of $S bytes" 120 \
	riw_pair_run $port rping -s -a "$SRV4" -p $port -C $N -S $S -- \
	rping -c -a "$SRV4" -p $port -C $N -S $S -V

rdma statistic show link stc0/1 | sed 's/^/# /'
bytes=$((2 * N * 16 + N * S))
riw_result "client: $((2 * N)) Sends each way, $N Read Requests in, $N Writes in, $bytes bytes each way" \
	counters_are stc0 tx_sends=$((2 * N)) rx_sends=$((2 * N)) rx_read_requests=$N \
	tx_read_responses=$N rx_writes=$N tx_writes=0 tx_read_requests=0 rx_read_responses=0 \
	tx_payload_bytes=$bytes rx_payload_bytes=$bytes
riw_result "server: $((2 * N)) Sends each way, $N Read Requests out, $N Writes out, $bytes bytes each way" \
	counters_are sts0 tx_sends=$((2 * N)) rx_sends=$((2 * N)) tx_read_requests=$N \
	rx_read_responses=$N tx_writes=$N rx_writes=0 rx_read_requests=0 tx_read_responses=0 \
	tx_payload_bytes=$bytes rx_payload_bytes=$bytes
riw_result "one connection each, its MPA request and reply counted on both sides" \
	eval 'counters_are stc0 connections_established=1 mpa_requests_sent=1 \
		mpa_replies_received=1 mpa_requests_received=0 mpa_replies_sent=0 &&
	counters_are sts0 connections_established=1 mpa_requests_received=1 \
		mpa_replies_sent=1 mpa_requests_sent=0 mpa_replies_received=0'
riw_result "no error counted on either side" eval 'zero_errors stc0 && zero_errors sts0'
fpdus_cover() { # DEV: at least one FPDU per message each way
	local tx rx
	tx=$(($(counter "$1" tx_sends) + $(counter "$1" tx_writes) + $(counter "$1" tx_read_requests) +
		$(counter "$1" tx_read_responses)))
	rx=$(($(counter "$1" rx_sends) + $(counter "$1" rx_writes) + $(counter "$1" rx_read_requests) +
		$(counter "$1" rx_read_responses)))
	[ "$(counter "$1" tx_fpdus)" -ge $tx ] && [ "$(counter "$1" rx_fpdus)" -ge $rx ]
}
same_in_netlink() { # DEV NAME
	local out
	out=$(rdma statistic show link "$1/1")
	grep -qw "$2 $(counter "$1" "$2")" <<<"$out"
}
riw_result "FPDUs cover the messages; rdma statistic and sysfs agree" \
	eval 'fpdus_cover stc0 && fpdus_cover sts0 && same_in_netlink stc0 tx_payload_bytes &&
		same_in_netlink sts0 rx_sends'

# ---- trace events ----

tracing=/sys/kernel/tracing
[ -d $tracing/events ] || mount -t tracefs tracefs $tracing 2>/dev/null || true
trace_ok=
[ -d $tracing/events/riw ] && trace_ok=1
tmp_trace=$tmp/trace

trace_run() { # CMD...: runs CMD with riw's events on, their records in $tmp_trace
	echo 0 >$tracing/tracing_on
	echo >$tracing/trace
	echo 1 >$tracing/events/riw/enable
	echo 1 >$tracing/tracing_on
	local rc=0
	"$@" || rc=$?
	echo 0 >$tracing/events/riw/enable
	cat $tracing/trace >"$tmp_trace"
	return $rc
}

has() { # REGEX: a record of the last trace_run matches
	grep -qE "$1" "$tmp_trace" || { echo "# no trace record matches: $1"; return 1; }
}

if [ -n "$trace_ok" ]; then
	port=7471
	riw_check "rping -V with riw's trace events on" 60 \
		trace_run riw_pair_run $port rping -s -a "$SRV4" -p $port -C 2 -S 100 -- \
		rping -c -a "$SRV4" -p $port -C 2 -S 100 -V
	grep -E 'riw_(mpa|qp_state|conn_close)' "$tmp_trace" | head -n 8 | sed 's/^/# /'
	riw_result "a connection: MPA request and reply with their parameters, QPs to RTS, the close" \
		eval 'has "riw_mpa: stc0 ep=[0-9]+ sent request peer=$SRV4:$port rev=2 crc=0 markers=0" &&
		has "riw_mpa: sts0 ep=[0-9]+ received request peer=192.0.2.1:[0-9]+ rev=2" &&
		has "riw_mpa: sts0 ep=[0-9]+ sent reply .* rev=2 crc=0" &&
		has "riw_mpa: stc0 ep=[0-9]+ received reply" &&
		has "riw_qp_state: stc0 qp=[0-9]+ (INIT|RTR) -> RTS: connected" &&
		has "riw_qp_state: sts0 qp=[0-9]+ (INIT|RTR) -> RTS: connected" &&
		has "riw_conn_close: st[cs]0 qp=[0-9]+ (close|abort) status=-?[0-9]+: "'
	grep -E 'riw_(post|complete)' "$tmp_trace" | head -n 6 | sed 's/^/# /'
	riw_result "work requests and completions: wr_id, opcode, length, status" \
		eval 'has "riw_post: stc0 qp=[0-9]+ sq wr_id=0x[0-9a-f]+ opcode=SEND length=16" &&
		has "riw_post: sts0 qp=[0-9]+ sq wr_id=0x[0-9a-f]+ opcode=READ length=100" &&
		has "riw_post: sts0 qp=[0-9]+ rq wr_id=0x[0-9a-f]+ opcode=RECEIVE length=16" &&
		has "riw_complete: stc0 qp=[0-9]+ wr_id=0x[0-9a-f]+ opcode=SEND length=16 status=0" &&
		has "riw_complete: sts0 qp=[0-9]+ wr_id=0x[0-9a-f]+ opcode=RECEIVE length=16 status=0" &&
		has "riw_complete: sts0 qp=[0-9]+ wr_id=0x[0-9a-f]+ opcode=READ length=100 status=0"'
	# A stream of large Writes (128 in flight) fills the socket's send queue: the sender
	# stops, and goes on when TCP reports room again (the write-space callback). TCP's
	# send buffers are held to 8 KiB meanwhile, less than one FPDU, so that every FPDU
	# fills its buffer however fast the other side acknowledges.
	wmem=$(in0 sysctl -n net.ipv4.tcp_wmem)
	set_wmem() { # "MIN DEFAULT MAX" in both namespaces
		in0 sysctl -qw net.ipv4.tcp_wmem="$1" && in1 sysctl -qw net.ipv4.tcp_wmem="$1"
	}
	set_wmem "4096 8192 8192"
	port=$((port + 1))
	riw_check "ib_write_bw of 64 KiB with riw's trace events on" 60 \
		trace_run riw_pair_run $port ib_write_bw -d sts0 -R -p $port -s 65536 -n 200 -- \
		ib_write_bw -d stc0 -R -p $port -s 65536 -n 200 "$SRV4"
	set_wmem "$wmem"
	grep -E 'riw_sock_backpressure' "$tmp_trace" | head -n 4 | sed 's/^/# /'
	riw_result "a full socket send queue: the sender stops and goes on once it drains" \
		eval 'has "riw_sock_backpressure: st[cs]0 qp=[0-9]+ socket send queue full" &&
		has "riw_sock_backpressure: st[cs]0 qp=[0-9]+ socket send queue drained"'
else
	ktap_test_skip "rping with trace events: no tracefs events (CONFIG_EVENT_TRACING)"
	ktap_test_skip "connection trace records: no tracefs events"
	ktap_test_skip "completion trace records: no tracefs events"
	ktap_test_skip "ib_write_bw with trace events: no tracefs events"
	ktap_test_skip "send queue trace records: no tracefs events"
fi

# ---- a Terminate ----

cm=$tmp/cm
if riw_build_prog cm/cm.c "$cm" >/dev/null 2>&1; then
	before_crc=$(counter sts0 crc_errors)
	before_term=$(counter sts0 tx_terminates_mpa)
	bad_crc() {
		ip netns exec "$RIW_NS0" python3 "$here/cm/hostile.py" run "$cm" "$RIW_NS1" riw 7472 \
			bad_crc | tee "$tmp/hostile.log" | sed 's/^/# /'
		grep -q '^RESULT pass bad_crc' "$tmp/hostile.log"
	}
	if [ -n "$trace_ok" ]; then
		trace_run bad_crc || true
		grep -E 'riw_(crc_error|terminate)' "$tmp_trace" | head -n 4 | sed 's/^/# /'
	else
		bad_crc || true
	fi
	riw_result "a bad CRC: crc_errors and tx_terminates_mpa count it once" \
		counters_are sts0 crc_errors=$((before_crc + 1)) tx_terminates_mpa=$((before_term + 1))
	if [ -n "$trace_ok" ]; then
		riw_result "a bad CRC: riw_crc_error and riw_terminate (sent, MPA layer, code 0x2)" \
			eval 'has "riw_crc_error: sts0 qp=[0-9]+ crc computed=0x[0-9a-f]{8} received=0x[0-9a-f]{8}" &&
			has "riw_terminate: sts0 qp=[0-9]+ terminate sent layer=mpa type=0 code=0x2"'
	else
		ktap_test_skip "Terminate trace records: no tracefs events"
	fi
else
	ktap_test_skip "bad CRC counters: cm.c does not build here"
	ktap_test_skip "bad CRC trace records: cm.c does not build here"
fi

ktap_finished
