#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Teardown racing traffic, riw at both ends: each teardown below happens while several QPs
# carry data, rping -V clients against one persistent rping server and ib_write_bw over
# rdma_cm, between a server device in namespace 1 and a client device in namespace 0:
#
#   link_delete     rdma link delete of the client device
#   link_flap       the server's netdev down, then up again
#   rmmod           every consumer SIGKILLed, then rmmod riw at once
#   kill_server     the serving processes SIGKILLed
#   delete_server   rdma link delete of the server device
#
# After each: the rping clients end by themselves (link_flap: they may go on), then
# whatever still runs is killed; neither device keeps a QP or a cm_id; the devices are
# back, and the next teardown's traffic connects. The EXIT trap fails the suite on any
# splat, and kmemleak must find nothing leaked since the start.
#
# RIW_TEARDOWN_ROUNDS rounds of all five (default 1, 100 with RIW_LONG; make check-long
# shares its 100 out among several guests), RIW_TEARDOWN_QPS rping clients (default 3).
set -eu
. "$(dirname "$0")/lib.sh"

if [ -n "${RIW_LONG:-}" ]; then
	: "${RIW_TEARDOWN_ROUNDS:=100}"
else
	: "${RIW_TEARDOWN_ROUNDS:=1}"
fi
rounds=$RIW_TEARDOWN_ROUNDS
qps=${RIW_TEARDOWN_QPS:-3}
KINDS=(link_delete link_flap rmmod kill_server delete_server)
PING_PORT=7610
BW_PORT=7611

ktap_print_header
ktap_set_plan $((rounds * ${#KINDS[@]} + 2))

riw_kmemleak_mark
riw_pair_args riw riw
riw_pair_devices tds0 tdc0

# No QP or cm_id (rdma_cm's listeners included) on either device; else prints them.
no_objects() {
	local objs
	objs=$({ rdma resource show qp; rdma resource show cm_id; } 2>/dev/null)
	[[ $objs != *"link $srv_dev/"* && $objs != *"link $cli_dev/"* ]] && return 0
	echo "$objs"
	return 1
}

# Both devices there, their netdevs up, riw loaded.
restore() {
	[ -d /sys/module/riw ] || modprobe riw
	ip -n "$RIW_NS1" link set "$RIW_DEV1" up
	[ -e "/sys/class/infiniband/$srv_dev" ] ||
		in1 rdma link add "$srv_dev" type riw netdev "$RIW_DEV1"
	[ -e "/sys/class/infiniband/$cli_dev" ] ||
		in0 rdma link add "$cli_dev" type riw netdev "$RIW_DEV0"
}

# CMD in namespace NS in the background, its output in $tmp/NAME.log, its pid (ip netns
# exec becomes CMD, and nice becomes its command) in $! and added to traffic_pids: this
# script ends its traffic by those pids, without a look through every process, which is
# slow while the traffic runs.
traffic_pids=()
bg() { # NAME NS CMD...
	local name=$1 ns=$2
	shift 2
	ip netns exec "$ns" "$@" >"$tmp/$name.log" 2>&1 </dev/null &
	traffic_pids+=("$!")
}

# Traffic that keeps every vCPU busy would make each command of this script (a poll, an
# rdma call) take seconds on the debug kernel: it runs niced. ib_write_bw from its start,
# as nothing else runs then. rping only once all its clients are connected: a program
# starting up or accepting next to niced busy traffic and the script's polls gets little
# CPU, and a connection whose MPA exchange takes too long fails. The clients connect one
# after another: the server accepts one at a time, so the last of several connecting at
# once would wait for all the accepts before its own.
clients=() servers=()
# The server side, then QPS rping clients and an ib_write_bw pair; returns once every
# client has its QP and data flows.
traffic_start() {
	local i est=/sys/class/infiniband/$cli_dev/ports/1/hw_counters/connections_established
	local established t0=$SECONDS t1
	clients=() servers=() traffic_pids=()
	rm -f "$tmp"/*.log
	bg rping_server "$RIW_NS1" rping -s -P -a "$SRV4" -p $PING_PORT -S 16384 -V
	servers+=("$!")
	riw_poll 10 __riw_listening $PING_PORT || { echo "rping server: no listener"; return 1; }
	bg bw_server "$RIW_NS1" nice -n 15 ib_write_bw -d "$srv_dev" -R -p $BW_PORT -D 600 \
		-s 65536
	servers+=("$!")
	riw_poll 10 __riw_listening $BW_PORT || { echo "ib_write_bw server: no listener"; return 1; }
	# ib_write_bw first: its server's accept (buffers, registration) is slow on a debug
	# kernel, and slower with rping running.
	bg bw_client "$RIW_NS0" nice -n 15 ib_write_bw -d "$cli_dev" -R -p $BW_PORT -D 600 \
		-s 65536 "$SRV4"
	riw_flowing "$cli_dev" 100 30 || { echo "ib_write_bw moves no data"; return 1; }
	t1=$SECONDS
	read -r established <"$est"
	for ((i = 1; i <= qps; i++)); do
		bg "rping_client$i" "$RIW_NS0" rping -c -a "$SRV4" -p $PING_PORT -C 1000000 \
			-S 16384 -V
		clients+=("$!")
		riw_poll 30 riw_counter_reached "$est" $((established + i)) ||
			{ echo "rping client $i of $qps did not connect"; return 1; }
	done
	riw_flowing "$cli_dev" 200 30 || { echo "no data flows"; return 1; }
	renice -n 15 -p "${servers[0]}" "${clients[@]}" >/dev/null
	echo "traffic up in $((SECONDS - t0)) s, the rping clients' part $((SECONDS - t1)) s"
}

show_logs() {
	local f
	for f in "$tmp"/*.log; do
		[ -s "$f" ] && tail -n 5 "$f" | sed "s|^|$(basename "$f" .log): |"
	done
	return 0
}

clients_gone() {
	local p
	for p in "${clients[@]}"; do
		! kill -0 "$p" 2>/dev/null || return 1
	done
}

# One teardown of KIND under traffic, and what must follow.
teardown() { # KIND
	local kind=$1 rc=0
	traffic_start || rc=1
	if [ $rc -eq 0 ]; then
		case $kind in
		link_delete) riw_run 30 rdma link delete "$cli_dev" || rc=1 ;;
		link_flap)
			ip -n "$RIW_NS1" link set "$RIW_DEV1" down
			sleep 1
			ip -n "$RIW_NS1" link set "$RIW_DEV1" up
			;;
		rmmod)
			kill -KILL "${traffic_pids[@]}" 2>/dev/null || true
			wait "${traffic_pids[@]}" 2>/dev/null || true
			riw_ns_kill "$RIW_NS0"
			riw_ns_kill "$RIW_NS1"
			riw_run 60 modprobe -r riw || { echo "rmmod riw failed"; rc=1; }
			;;
		kill_server) kill -KILL "${servers[@]}" 2>/dev/null || true ;;
		delete_server) riw_run 30 rdma link delete "$srv_dev" || rc=1 ;;
		esac
		if [ $rc -eq 0 ] && [ "$kind" != link_flap ] &&
			! riw_poll 20 clients_gone; then
			echo "the rping clients did not end"
			rc=1
		fi
	fi
	kill -KILL "${traffic_pids[@]}" 2>/dev/null || true
	wait
	riw_ns_kill "$RIW_NS0"
	riw_ns_kill "$RIW_NS1"
	[ $rc -eq 0 ] || show_logs
	if ! riw_poll 30 no_objects >/dev/null; then
		echo "QPs or cm_ids stay:"
		no_objects
		rc=1
	fi
	restore || rc=1
	return $rc
}

for ((round = 1; round <= rounds; round++)); do
	for kind in "${KINDS[@]}"; do
		riw_check "round $round: $kind under traffic ($qps rping -V, ib_write_bw)" 180 \
			teardown "$kind" || true
	done
done

riw_check "no QPs or cm_ids left on $srv_dev or $cli_dev" 30 riw_poll 10 no_objects || true
if [ -e /sys/kernel/debug/kmemleak ]; then
	riw_check "kmemleak: nothing leaked since the start" 120 riw_kmemleak_new || true
else
	ktap_test_skip "kmemleak: nothing leaked since the start (no kmemleak)"
fi

ktap_finished
