#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# What riw shows of itself (issue 33): its driver details in `rdma -dd resource show
# qp|cm_id|mr|cq` and its debugfs files /sys/kernel/debug/riw/DEVICE/{connections,stags},
# with a connection held open by the suite's librdmacm tool (cm serve and cm hold, see
# cm/cm.c) between a server device on veth1 (192.0.2.2) and a client device on veth0
# (192.0.2.1), in peer-to-peer mode with CRC, so that the negotiated values differ from
# the defaults:
#
#   - both devices get their debugfs directory, empty while nothing is open;
#   - with the connection up, each QP shows MPA revision 2, CRC on, peer-to-peer with a
#     zero-length Write, its queues (the client's 4 receives posted) and the 4-tuple TCP
#     has (ss); the cm_ids show the listener and both endpoints; the MRs their STag, rights
#     and length (64 KiB), the CQs their depth (128);
#   - debugfs lists the listener and the endpoints with the same 4-tuple and QP numbers,
#     and the client's region under the STag the core reports;
#   - all of it is read over and over while connections come and go (no splat);
#   - once the tools are gone both files are empty again; a renamed device keeps its
#     directory's name; rdma link delete removes a device's directory, unloading riw the
#     top one.
set -eu
. "$(dirname "$0")/lib.sh"

riw_pair_args riw riw
here=$(cd "$(dirname "$0")" && pwd)
dbg=/sys/kernel/debug/riw
port=7800

ktap_print_header
ktap_set_plan 14

riw_pair_devices rss0 rsc0
export RIW_TIMEOUT_SCALE

files_exist() {
	local d f
	for d in rss0 rsc0; do
		for f in connections stags; do
			[ -r "$dbg/$d/$f" ] || { echo "no $dbg/$d/$f"; return 1; }
		done
	done
}
riw_result "debugfs: $dbg/rss0 and $dbg/rsc0 hold connections and stags" files_exist

# Nothing of either device is open: each file is empty.
files_empty() {
	local d f out
	for d in rss0 rsc0; do
		for f in connections stags; do
			out=$(cat "$dbg/$d/$f") || return 1
			[ -z "$out" ] || { echo "$d/$f:"; echo "$out"; return 1; }
		done
	done
}
riw_check "debugfs: both files empty with nothing open" 10 files_empty || true

cm=$tmp/cm
if ! riw_build_prog cm/cm.c "$cm" 2>&1 | riw_diag; then
	cm=
fi

param=/sys/module/riw/parameters
riw_defer sh -c "echo $(cat $param/mpa_crc_required) >$param/mpa_crc_required"
riw_defer sh -c "echo $(cat $param/peer_to_peer) >$param/peer_to_peer"
echo 1 >$param/mpa_crc_required
echo 1 >$param/peer_to_peer

# cm serve in the server's namespace, cm hold connected to it from the client's; run in
# this shell (not by riw_check, whose subshell would keep SERVE and HOLD).
SERVE= HOLD=
connect_hold() {
	[ -n "$cm" ] || { echo "# cm/cm.c does not build"; return 1; }
	riw_bg ip netns exec "$RIW_NS1" "$cm" serve $SRV4 $port
	SERVE=$RIW_BG_PID SERVE_LOG=${__riw_bg_log[$RIW_BG_PID]}
	riw_poll 10 grep -q listening "$SERVE_LOG" || { riw_diag <"$SERVE_LOG"; return 1; }
	riw_bg ip netns exec "$RIW_NS0" "$cm" hold $SRV4 $port
	HOLD=$RIW_BG_PID HOLD_LOG=${__riw_bg_log[$RIW_BG_PID]}
	if ! riw_poll 10 grep -q ESTABLISHED "$HOLD_LOG"; then
		riw_diag <"$SERVE_LOG"
		riw_diag <"$HOLD_LOG"
		return 1
	fi
}
riw_result "a connection held open (cm serve, cm hold; peer-to-peer, CRC)" connect_hold
# The client's port, as TCP has it.
cport=$(in0 ss -Htn state established "dport = :$port" | awk '{ sub(/.*:/, "", $3); print $3 }')
echo "# client port ${cport:-none}"
srv_addr=$SRV4:$port
cli_addr=$RIW_ADDR0:$cport

# has TEXT WORD...: every WORD (a regex, "name value") is in TEXT. The rdma tool of
# iproute2 6.1 prints a driver's names with a "drv_" prefix.
has() {
	local text=$1 w
	shift
	for w in "$@"; do
		grep -qE -- "(^| )(drv_)?$w( |$)" <<<"$text" || { echo "missing: $w"; return 1; }
	done
}

# The QP of DEV whose local address is LADDR, as `rdma -dd resource show qp` prints it.
qp_line() { # DEV LADDR
	rdma -dd resource show qp link "$1/1" | grep -E "laddr $2 " || true
}

t_qp() { # DEV LADDR RADDR RQ_USED
	local line
	line=$(qp_line "$1" "$2")
	echo "$line"
	has "$line" "laddr $2" "raddr $3" "mpa_rev 2" "crc on" "p2p write" \
		"ep_state ESTABLISHED" "tcp_state ESTAB" "sq_depth 32" "rq_depth 32" \
		"rq_used $4" "ird [0-9]+" "ord [0-9]+" "mulpdu [1-9][0-9]*" "orq_used 0" \
		"irq_used 0" "tx_unacked [0-9]+"
}
riw_check "qp -dd at the server: MPA and the 4-tuple as negotiated" 10 \
	t_qp rss0 "$srv_addr" "$cli_addr" "[0-9]+" || true
riw_check "qp -dd at the client: the same, and its 4 receives posted" 10 \
	t_qp rsc0 "$cli_addr" "$srv_addr" 4 || true

t_cm_id() {
	local out
	out=$(rdma -dd resource show cm_id link rss0/1)
	echo "$out"
	has "$(grep -E 'ep_state LISTEN' <<<"$out")" "laddr $srv_addr" || return 1
	has "$(grep -E 'ep_state ESTABLISHED' <<<"$out")" "laddr $srv_addr" "raddr $cli_addr" \
		"mpa_rev 2" "crc on" "p2p write" || return 1
	out=$(rdma -dd resource show cm_id link rsc0/1)
	echo "$out"
	has "$(grep -E 'ep_state ESTABLISHED' <<<"$out")" "laddr $cli_addr" "raddr $srv_addr" \
		"mpa_rev 2" "crc on" "p2p write"
}
riw_check "cm_id -dd: the listener and both endpoints" 10 t_cm_id || true

t_mr_cq() {
	local out
	out=$(rdma -dd resource show mr dev rsc0)
	echo "$out"
	has "$out" "stag 0x[0-9a-f]+" "kind user" "access local_write,remote_write,remote_read" \
		"length 65536" "stag_state valid" || return 1
	out=$(rdma -dd resource show cq dev rsc0)
	echo "$out"
	has "$out" "cq_depth 128" "cq_used [0-9]+"
}
riw_check "mr -dd and cq -dd: STag, rights, 64 KiB; CQ depth 128" 10 t_mr_cq || true

# The QP number of DEV's QP at LADDR.
lqpn() { # DEV LADDR
	qp_line "$1" "$2" | grep -oE 'lqpn [0-9]+' | cut -d' ' -f2
}

t_connections() {
	local out qpn
	out=$(cat $dbg/rss0/connections)
	echo "$out"
	has "$(grep '^listener' <<<"$out")" "state LISTEN" "local $srv_addr" || return 1
	qpn=$(lqpn rss0 "$srv_addr")
	has "$(grep '^endpoint' <<<"$out")" "state ESTABLISHED" "tcp ESTAB" "local $srv_addr" \
		"remote $cli_addr" "qp $qpn" "mpa_rev 2" "crc on" "p2p write" || return 1
	out=$(cat $dbg/rsc0/connections)
	echo "$out"
	qpn=$(lqpn rsc0 "$cli_addr")
	has "$(grep '^endpoint' <<<"$out")" "state ESTABLISHED" "tcp ESTAB" "local $cli_addr" \
		"remote $srv_addr" "qp $qpn" "mpa_rev 2" "crc on" "p2p write"
}
riw_check "debugfs connections: the listener, each endpoint ESTABLISHED, same 4-tuple" 10 \
	t_connections || true

t_stags() {
	local out stag line
	out=$(cat $dbg/rsc0/stags)
	echo "$out"
	stag=$(rdma -dd resource show mr dev rsc0 | grep -oE 'stag 0x[0-9a-f]+' | head -1 |
		cut -d' ' -f2)
	line=$(grep -E "^stag $(printf '0x%08x' "$stag") " <<<"$out") ||
		{ echo "no STag $stag"; return 1; }
	has "$line" "kind user" "access local_write,remote_write,remote_read" \
		"length 65536" "state valid" "pd [0-9]+"
}
riw_check "debugfs stags: the client's region under the STag the core reports" 10 t_stags || true

# Everything read over and over while connections come and go.
read_all() {
	while :; do
		cat $dbg/*/connections $dbg/*/stags >/dev/null 2>&1
		for r in qp cm_id mr cq; do
			rdma -dd resource show $r >/dev/null 2>&1
		done
	done
}
t_churn() {
	local reader rc=0
	read_all &
	reader=$!
	in0 "$cm" ping $SRV4 $port 2 || rc=$?
	kill "$reader"
	wait "$reader" 2>/dev/null || true
	return $rc
}
riw_check "all of it read while 2 more connections come and go" 60 t_churn || true

# The tools end (here, so that the shell that started them reaps them quietly): their
# connection, listener and regions go, and so do the lines.
if [ -n "$HOLD" ]; then
	kill -KILL -- -"$HOLD" 2>/dev/null || true
	wait "$HOLD" 2>/dev/null || true
fi
if [ -n "$SERVE" ]; then
	kill -TERM -- -"$SERVE" 2>/dev/null || true
	riw_wait "$SERVE" 10 >/dev/null || kill -KILL -- -"$SERVE" 2>/dev/null || true
fi
riw_check "debugfs: both files empty once the tools are gone" 40 riw_poll 20 files_empty || true

t_rename() {
	rdma dev set rss0 name rssr || return 1
	# Still under the name it was made with, and readable.
	[ -r $dbg/rss0/connections ] && cat $dbg/rss0/connections >/dev/null || return 1
	[ ! -e $dbg/rssr ] || { echo "$dbg/rssr exists"; return 1; }
	rdma link delete rssr || return 1
	[ ! -e $dbg/rss0 ] || { echo "$dbg/rss0 stays"; return 1; }
}
riw_check "a renamed device keeps its directory, which its deletion removes" 20 t_rename || true

t_delete() {
	rdma link delete rsc0 || return 1
	[ ! -e $dbg/rsc0 ] || { echo "$dbg/rsc0 stays"; return 1; }
	[ -d $dbg ] || { echo "$dbg is gone"; return 1; }
}
riw_check "rdma link delete removes the device's directory" 20 t_delete || true

t_rmmod() {
	riw_ns_kill "$RIW_NS0"
	riw_ns_kill "$RIW_NS1"
	modprobe -r riw || return 1
	[ ! -e $dbg ] || { echo "$dbg stays"; return 1; }
}
riw_check "unloading riw removes $dbg" 30 t_rmmod || true

ktap_finished
