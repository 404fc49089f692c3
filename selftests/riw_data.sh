#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The data path (issue 6) through stock tools, between a server device on veth1 (namespace 1,
# 192.0.2.2) and a client device on veth0 (namespace 0, 192.0.2.1):
#
#   riw_data.sh [SERVER_DRIVER CLIENT_DRIVER]   riw or siw each; default riw riw
#
#   rping -V      RDMA READ, WRITE and SEND verified by rping itself, at its smallest
#                 message (23 bytes) up to 64 KiB (its largest, 65535), $RIW_RPING_COUNT
#                 iterations each (default 200; 1000 with RIW_LONG, make check-long,
#                 which also runs sizes around the FPDU boundaries, 100 iterations each)
#   perftest      ib_send_bw, ib_write_bw, ib_read_bw, ib_send_lat, ib_write_lat,
#                 ib_read_lat, all over rdma_cm (-R); ib_send_bw and ib_send_lat also
#                 with completion events (-e). Each must run to its end and report a
#                 result; the numbers are not judged here (make bench compares them).
#
# riw_data_riw_siw.sh and riw_data_siw_riw.sh run it against siw both ways. The debug kernel
# under TCG is slow: perftest runs few iterations, and rping's counts are those of the issue
# (1000) in make check-long only.
set -eu
. "$(dirname "$0")/lib.sh"

riw_pair_args "$@"
RPING_SIZES=(23 4096 65535)
# make check runs 200 of them: what either driver must get right shows in the first ones,
# and the debug kernel is slow (siw with 64 KiB messages most, below); make check-long
# runs 1000.
if [ -z "${RIW_LONG:-}" ]; then
	: "${RIW_RPING_COUNT:=200}"
fi
: "${RIW_RPING_COUNT:=1000}"
# make check-long: sizes around the FPDU boundaries of a 1500-byte MTU (a ULPDU of 1442
# bytes per segment-sized FPDU, 11 segments of 1448 bytes per large one), 100 iterations.
if [ -n "${RIW_LONG:-}" ]; then
	RPING_LONG_SIZES=(24 1424 1425 1442 1443 2884 2885 15922 15923 16384 32768 40000)
else
	RPING_LONG_SIZES=()
fi
PERFTEST=("ib_send_bw" "ib_send_bw -e" "ib_write_bw" "ib_read_bw"
	"ib_send_lat" "ib_send_lat -e" "ib_write_lat" "ib_read_lat")

ktap_print_header
ktap_set_plan $((${#RPING_SIZES[@]} + ${#RPING_LONG_SIZES[@]} + ${#PERFTEST[@]}))

riw_pair_devices dts0 dtc0

# siw is slow with 64 KiB messages on the debug kernel: 1000 rping iterations of them took
# 298 s between two siw devices, 224 s from a siw client to a riw server, 122 to 143 s the
# other way round and 63 s between riw devices. Their limit leaves room for a slower host.
port=7600
for size in "${RPING_SIZES[@]}"; do
	port=$((port + 1))
	limit=30
	[ "$size" -le 4096 ] || limit=60
	riw_check "rping -V: $RIW_RPING_COUNT iterations of $size bytes" $limit \
		riw_pair_run $port rping -s -a $SRV4 -p $port -C "$RIW_RPING_COUNT" -S "$size" -- \
		rping -c -a $SRV4 -p $port -C "$RIW_RPING_COUNT" -S "$size" -V || true
done
for size in "${RPING_LONG_SIZES[@]}"; do
	port=$((port + 1))
	riw_check "rping -V: 100 iterations of $size bytes (long)" 60 \
		riw_pair_run $port rping -s -a $SRV4 -p $port -C 100 -S "$size" -- \
		rping -c -a $SRV4 -p $port -C 100 -S "$size" -V || true
done

# A perftest result line: bytes and iterations first.
perftest_done() { # LOG
	grep -Eq '^ *[0-9]+ +[0-9]+ +[0-9.]+' "$1"
}

# Each perftest run ends within PERFTEST_LIMIT seconds (times the scale) or is killed; a
# normal run takes a few.
PERFTEST_LIMIT=8
pt_rc=0 riw_pair_srv_rc=0

perftest_once() { # PORT TOOL [OPTIONS...]
	local port=$1 tool=$2 lim=$((PERFTEST_LIMIT * RIW_TIMEOUT_SCALE))
	shift 2
	local opts=(-R -p "$port" "$@")
	case $tool in
	*_bw) opts+=(-s 4096 -n 200) ;;
	*_lat) opts+=(-s 64 -n 200) ;;
	esac
	pt_rc=0 riw_pair_srv_rc=0
	riw_pair_run "$port" timeout "$lim" "$tool" -d "$srv_dev" "${opts[@]}" -- \
		timeout "$lim" "$tool" -d "$cli_dev" "${opts[@]}" $SRV4 >"$tmp/pt.log" 2>&1 ||
		pt_rc=$?
	cat "$tmp/pt.log"
	[ $pt_rc -eq 0 ] && perftest_done "$tmp/pt.log"
}

# Two failures of perftest's own are retried once, on another port:
# - It derives its clock rate from TSC samples and gives up ("Can't produce a report", after
#   all its transfers) when they do not fit a line, which a TSC under TCG sometimes fails.
# - ib_send_bw -e of perftest 4.5-0.17 (Debian's) can wait for a completion event that
#   never comes: on iWARP its client stops posting until the server's receive credit
#   arrives, which the server RDMA-Writes and which raises no event, and it may then block
#   for an event with no signalled send outstanding. The run is killed at the limit (the
#   server's, started first, may go first: the client then fails with its work flushed).
perftest() { # PORT TOOL [OPTIONS...]
	local port=$1
	shift
	perftest_once "$port" "$@" && return 0
	if grep -q "Can't produce a report" "$tmp/pt.log"; then
		echo "perftest could not time the run (TSC samples under TCG): once more"
	elif [ "$*" = "ib_send_bw -e" ] && { [ $pt_rc -eq 124 ] || [ $riw_pair_srv_rc -eq 124 ]; }; then
		echo "ib_send_bw -e did not end: perftest's event mode waits for a credit" \
			"without an event to wake it: once more"
	else
		return 1
	fi
	perftest_once $((port + 50)) "$@"
}

port=7700
for t in "${PERFTEST[@]}"; do
	port=$((port + 1))
	# shellcheck disable=SC2086 # the tool and its extra option
	riw_check "perftest $t -R" 20 perftest $port $t || true
done

ktap_finished
