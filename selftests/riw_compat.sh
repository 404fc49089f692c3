#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Third-party RDMA programs from Debian, unmodified, between a server device on veth1
# (namespace 1, 192.0.2.2) and a client device on veth0 (namespace 0, 192.0.2.1):
#
#   riw_compat.sh [SERVER_DRIVER CLIENT_DRIVER]     riw or siw each; default riw riw
#
#   qperf       (qperf) over rdma_cm: rc_bw, rc_lat, rc_rdma_read_bw and rc_rdma_read_lat,
#               each polling its CQs and waiting for completion events, and
#               rc_rdma_write_poll_lat (plain WRITEs, the peer polls memory). Its other
#               write tests post WRITE with immediate data, which the soft-iWARP user ABI
#               refuses: reported as skipped.
#   libfabric   (libfabric-bin) with its verbs provider: fi_info lists both devices, and
#               fi_pingpong with data checks (-c) over MSG endpoints (rdma_cm) and over RDM
#               endpoints (verbs;ofi_rxm), small and 64 KiB messages
#   rsockets    (rdmacm-utils) rstream and riostream verifying their data (-T v), rstream
#               with blocking and with nonblocking calls; rcopy copies a file, compared
#               byte for byte. Not rstream's asynchronous mode (-T a): it takes the POLLHUP
#               that rsockets reports with the last data, once the peer has closed, for an
#               error, so its client fails whenever the server finishes first, on any device.
#   cmtime      (rdmacm-utils) connection setup and teardown of many connections at once
#   fio         (fio) its rdma engine: RDMA WRITE and RDMA READ I/O against a peer fio. Not
#               its SEND mode: it sends before the peer has reposted its receives, which
#               only works with InfiniBand's RNR retry; iWARP has none (RFC 5041: no
#               buffer available) and terminates the connection.
#
# riw_compat_riw_siw.sh and riw_compat_siw_riw.sh run it against siw both ways. make check
# leaves qperf's event mode and rc_rdma_write_poll_lat, rstream's nonblocking mode and
# riostream to make check-long (RIW_LONG), which runs everything, and against siw cmtime
# and fio too. A program that
# fails between two siw devices as well is reported "XFAIL siw: why" where siw takes part.
# Not here: UD and multicast programs (udaddy, udpong, mckey: iWARP has neither), programs
# that connect QPs by GID without rdma_cm (ibv_*_pingpong), UCX (no iWARP support), and what
# riw_cm.sh and riw_data.sh already run (rping, perftest, rdma_server/client, ucmatose).
set -eu
. "$(dirname "$0")/lib.sh"

riw_pair_args "$@"
with_siw=
[ "$srv_drv" != siw ] && [ "$cli_drv" != siw ] || with_siw=1

QPERF_TESTS=(rc_bw rc_lat rc_rdma_read_bw rc_rdma_read_lat)
QPERF_IMM_TESTS=(rc_rdma_write_bw rc_rdma_write_lat)
# Endpoint type, provider, message size: RDM's 64 KiB go by rendezvous (RDMA READ).
FI_PINGPONG=("msg verbs 64" "msg verbs 65536" "rdm verbs;ofi_rxm 64" "rdm verbs;ofi_rxm 65536")
FIO_VERBS=(write read)

ktap_print_header
ktap_set_plan $((${#QPERF_TESTS[@]} * 2 + 1 + ${#QPERF_IMM_TESTS[@]} + 2 +
	${#FI_PINGPONG[@]} + 4 + 1 + ${#FIO_VERBS[@]}))

riw_pair_devices cps0 cpc0

# A program's check: a pass, or where siw takes part and its output matches SIW_FAILURE, a
# failure of siw's own (known from siw<->siw runs): "XFAIL siw: SIW_WHY".
# With LONG_ONLY=1, a check that only make check-long runs (RIW_LONG); with LONG_ONLY=siw,
# one that make check runs riw to riw only: make check keeps the broad, fast part of the
# suite.
compat_check() { # DESC SECONDS SIW_FAILURE SIW_WHY CMD...
	local desc=$1 secs=$2 pattern=$3 why=$4 rc=0
	shift 4
	if [ -z "${RIW_LONG:-}" ] && { [ "${LONG_ONLY:-}" = 1 ] ||
		{ [ "${LONG_ONLY:-}" = siw ] && [ -n "$with_siw" ]; }; }; then
		__ktap_test ok "$desc" "SKIP${with_siw:+ against siw} in make check-long only"
		KTAP_CNT_SKIP=$((KTAP_CNT_SKIP + 1))
		return 0
	fi
	riw_run "$secs" "$@" >"$tmp/check.log" || rc=$?
	cat "$tmp/check.log"
	if [ $rc -eq 0 ]; then
		ktap_test_pass "$desc"
	elif [ -n "$with_siw" ] && [ -n "$pattern" ] && grep -Eq -- "$pattern" "$tmp/check.log"; then
		__ktap_test ok "$desc" "XFAIL siw: $why"
		KTAP_CNT_PASS=$((KTAP_CNT_PASS + 1))
	else
		ktap_test_fail "$desc"
	fi
}

# Client commands end within LIMIT seconds (times the scale) or are killed.
LIMIT=20
lim=$((LIMIT * RIW_TIMEOUT_SCALE))

# qperf: a server per test (it forks a child per test and waits for it, so a stuck child
# would block the next test), its control port PORT; the client names the test.
# On the slow debug kernel, qperf's client now and then connects before its server's child
# listens for RDMA connections, and gets "Event rejected" (no listener, no MPA exchange),
# or with siw's client, whose connect call waits for TCP's, "rdma_connect failed" (TCP
# refused): such a run is tried again, on another port, up to three times in all (twice
# was not always enough).
qperf_run() { # PORT QPERF_OPTIONS... TEST
	local port=$1 try
	shift
	for try in 1 2 3; do
		if DAEMON=1 riw_pair_run "$port" qperf -lp "$port" -- \
			timeout "$lim" qperf "$SRV4" -lp "$port" -cm1 -t 1 \
			-to $((5 * RIW_TIMEOUT_SCALE)) "$@" >"$tmp/qperf.log" 2>&1; then
			cat "$tmp/qperf.log"
			grep -Eq '(bw|latency) += +[0-9.]+' "$tmp/qperf.log"
			return
		fi
		cat "$tmp/qperf.log"
		[ $try != 3 ] && grep -qE 'Event rejected|rdma_connect failed' "$tmp/qperf.log" ||
			return 1
		echo "qperf's connection was rejected before its server listened: once more"
		port=$((port + 100))
	done
}

# Only rc_lat gives every QP both queues: the streaming and read tests' servers create QPs
# without a send queue, which siw refuses (EINVAL), and their clients (and both sides of
# rc_rdma_write_poll_lat) QPs without a receive queue, whose empty ring siw's provider
# fails to map (EINVAL).
# A siw server that fails so may close the connection before its message reaches the
# client, which then reports the rejection.
qperf_siw_failure='failed to create QP: Invalid argument'
[ "$srv_drv" != siw ] || qperf_siw_failure+='|unexpected event from RDMA CM: Event rejected'
qperf_siw_why='siw refuses a QP without a send queue, and its provider one without a receive queue'
qperf_check() { # PORT DESC QPERF_OPTIONS... TEST
	local port=$1 desc=$2 pattern= why=
	shift 2
	if [ "${*: -1}" != rc_lat ]; then
		pattern=$qperf_siw_failure why=$qperf_siw_why
	fi
	compat_check "$desc" $LIMIT "$pattern" "$why" qperf_run "$port" "$@"
}
port=7800
for t in "${QPERF_TESTS[@]}"; do
	for mode in 1 0; do
		port=$((port + 1))
		how=$([ $mode = 1 ] && echo "polling its CQs" || echo "waiting for CQ events")
		long=0
		[ $mode = 1 ] || long=1
		LONG_ONLY=$long qperf_check $port "qperf -cm1 $t, $how" -cp $mode "$t"
	done
done
port=$((port + 1))
LONG_ONLY=1 qperf_check $port "qperf -cm1 rc_rdma_write_poll_lat" rc_rdma_write_poll_lat
for t in "${QPERF_IMM_TESTS[@]}"; do
	__ktap_test ok "qperf -cm1 $t" \
		"SKIP posts RDMA WRITE with immediate data, which the soft-iWARP user ABI refuses"
	KTAP_CNT_SKIP=$((KTAP_CNT_SKIP + 1))
done

# libfabric's verbs provider finds each device through the addresses of its namespace.
fi_lists() { # IN DEV
	local out
	out=$("$1" fi_info -p verbs) || { echo "$out"; return 1; }
	echo "$out"
	grep -Eq "^ *domain: $2\$" <<<"$out"
}
compat_check "fi_info -p verbs lists $srv_dev" $LIMIT "" "" fi_lists in1 $srv_dev
compat_check "fi_info -p verbs lists $cli_dev" $LIMIT "" "" fi_lists in0 $cli_dev

port=7850
for t in "${FI_PINGPONG[@]}"; do
	port=$((port + 1))
	read -r ep prov size <<<"$t"
	args=(-p "$prov" -e "$ep" -I 20 -S "$size" -c)
	# RDM's resources are set up inside fi_enable(): libfabric's warnings name what failed.
	env=()
	[ "$ep" = msg ] || env=(env FI_LOG_LEVEL=warn)
	compat_check "fi_pingpong -p '$prov' -e $ep: 20 round trips of $size bytes, checked" \
		$LIMIT "" "" \
		riw_pair_run $port timeout "$lim" "${env[@]}" fi_pingpong "${args[@]}" -B $port -- \
		timeout "$lim" "${env[@]}" fi_pingpong "${args[@]}" -P $port $SRV4
done

# rsockets: both sides verify what they receive (-T v); the server takes the same options.
port=7870
for opt in b n; do
	port=$((port + 1))
	args=(-p $port -T v -T $opt -S 65536 -C 100)
	long=0
	[ $opt = b ] || long=1
	LONG_ONLY=$long compat_check "rstream -T v -T $opt: 100 transfers of 64 KiB, verified" \
		$LIMIT "" "" \
		riw_pair_run $port timeout "$lim" rstream "${args[@]}" -- \
		timeout "$lim" rstream -s $SRV4 "${args[@]}"
done
port=$((port + 1))
args=(-p $port -T v -S 65536 -C 100)
LONG_ONLY=1 compat_check "riostream -T v: 100 transfers of 64 KiB, verified" $LIMIT "" "" \
	riw_pair_run $port timeout "$lim" riostream "${args[@]}" -- \
	timeout "$lim" riostream -s $SRV4 "${args[@]}"

rcopy_file() { # PORT
	head -c $((3 * 1024 * 1024 + 12345)) /dev/urandom >"$tmp/rcopy.src"
	DAEMON=1 riw_pair_run "$1" rcopy -p "$1" -- \
		timeout "$lim" rcopy "$tmp/rcopy.src" "$SRV4:$tmp/rcopy.dst" -p "$1" &&
		cmp "$tmp/rcopy.src" "$tmp/rcopy.dst"
}
port=$((port + 1))
compat_check "rcopy: a file of 3 MiB and a bit, compared" $LIMIT "" "" rcopy_file $port

port=$((port + 1))
DAEMON=1 LONG_ONLY=siw compat_check "cmtime: 20 connections at once" $LIMIT "" "" \
	riw_pair_run $port timeout "$lim" cmtime -b $SRV4 -p $port -c 20 -- \
	timeout "$lim" cmtime -s $SRV4 -p $port -c 20

# fio's rdma engine: the server's job is rw=read, the client's rw=write with the verb.
fio_rdma() { # PORT VERB
	local job=(--ioengine=rdma --port="$1" --bs=64k --size=8m --iodepth=8)
	riw_pair_run "$1" timeout "$lim" fio --name=server "${job[@]}" --rw=read -- \
		timeout "$lim" fio --name=client "${job[@]}" --hostname=$SRV4 --verb="$2" --rw=write
}
port=7890
for v in "${FIO_VERBS[@]}"; do
	port=$((port + 1))
	LONG_ONLY=siw compat_check "fio --ioengine=rdma --verb=$v: 8 MiB in 64 KiB I/Os" $LIMIT "" "" \
		fio_rdma $port "$v"
done

ktap_finished
