# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# Sourced by every riw selftest, inside the guest (selftests/vm/run.sh), as root.
#
# Sourcing it brings in the kernel's ktap_helpers.sh (ktap_print_header, ktap_set_plan,
# ktap_test_pass/fail/skip/result, ktap_finished, ...) and installs an EXIT trap that
#   1. runs the commands registered with riw_defer, last registered first, and
#   2. scans the kernel log written since the test started for splats (BUG, WARNING, KASAN,
#      lockdep, kmemleak, Oops, ...): any hit is printed and fails the test whatever its status
#      (a test that fails allocations on purpose sets RIW_ALLOCATIONS_FAIL=1: the kernel's
#      reports of failed allocations are then not counted).
# Tests must not set their own EXIT trap; they register cleanup with riw_defer.
#
#   riw_defer CMD [ARGS...]          run CMD at exit (LIFO); its failure is ignored
#   riw_run SECONDS CMD [ARGS...]    run CMD (a program or shell function) with a timeout, its
#                                    output as KTAP diagnostics; returns CMD's status, 124 on
#                                    timeout
#   riw_check DESC SECONDS CMD...    riw_run, then report KTAP result DESC; returns the status
#   riw_result DESC CMD [ARGS...]   run CMD (a function too) with its arguments intact and
#                                    report KTAP result DESC by its status
#   riw_run_part SECONDS WHO NAMES CMD...
#                                    run CMD, whose output has "RESULT status name [reason]"
#                                    lines (status pass, fail, xfail, skip), and report one
#                                    KTAP result per entry of the array NAMES ("name
#                                    description" each), in that order; a name without a
#                                    result fails; an xfail is a pass marked "XFAIL WHO";
#                                    CMD's output shows as it comes, then riw_state if CMD
#                                    failed or timed out
#   riw_state                        what a hang leaves behind: TCP sockets of both
#                                    namespaces, RDMA QPs and cm_ids, and the kernel stacks of
#                                    tasks blocked (D) or inside riw
#   riw_bg CMD [ARGS...]             start CMD (a program or function) in the background,
#                                    killed at exit if still running; its pid in RIW_BG_PID
#   riw_wait PID SECONDS             wait for a riw_bg command, print its output as diagnostics;
#                                    returns its status, 124 on timeout
#   riw_poll SECONDS CMD [ARGS...]   retry CMD (a function too) until it succeeds, pausing
#                                    0.2 s or as long as CMD took; returns 0, or 124 once
#                                    SECONDS have passed
#   riw_sleep SECONDS                sleep (fractions too) without starting a process
#   riw_counter_reached FILE N       the number in FILE (a counter in sysfs) is N or more
#   riw_netns_setup                  two namespaces $RIW_NS0 and $RIW_NS1 joined by a veth pair:
#                                    $RIW_DEV0 (veth0) $RIW_ADDR0 (192.0.2.1/24) in RIW_NS0,
#                                    $RIW_DEV1 (veth1) $RIW_ADDR1 (192.0.2.2/24) in RIW_NS1,
#                                    and in each a sleeping process, $RIW_NS0_PID and
#                                    $RIW_NS1_PID (not this shell's child); removed at exit
#   riw_netns_cleanup                remove them now (idempotent)
#   riw_pair_args [SERVER_DRIVER CLIENT_DRIVER]
#                                    a server-client suite's arguments: riw or siw each
#                                    (default riw riw) into srv_drv and cli_drv; else usage
#                                    and exit 2
#   riw_pair_devices SERVER_DEV CLIENT_DEV
#                                    riw_pair_setup for srv_drv and cli_drv, then the
#                                    devices srv_dev (srv_drv on $RIW_DEV1, address $SRV4)
#                                    and cli_dev (cli_drv on $RIW_DEV0) and a directory
#                                    $tmp, all removed at exit; what still runs in either
#                                    namespace is ended at exit
#   riw_pair_run PORT SERVER_CMD... -- CLIENT_CMD...
#                                    SERVER_CMD in namespace 1 and, once it listens on PORT,
#                                    CLIENT_CMD in namespace 0; see its comment
#   riw_ns_kill NS                   end what runs in namespace NS (its sleeping process
#                                    aside)
#   riw_ns_pids NS                   the processes in namespace NS, its sleeping process
#                                    aside, into the array riw_pids
#   riw_tcp_listening PORT [NS]      a TCP socket listens on PORT in namespace NS (default:
#                                    this shell's)
#   riw_tcp_connected PORT [NS]      a TCP socket of PORT in namespace NS is in a state
#                                    other than LISTEN and TIME-WAIT
#   riw_qp_count RDMA_DEV            the QPs of RDMA_DEV's port 1, as rdma res lists them
#   riw_ns0_device DRIVER RDMA_DEV   DRIVER (riw or siw) loaded, riw_netns_setup, the device
#                                    RDMA_DEV of DRIVER on $RIW_DEV0, all removed at exit, and
#                                    in0 to run a command in $RIW_NS0
#   riw_build_prog SOURCE OUT        the selftests' C program SOURCE (cm/cm.c, ...) into OUT:
#                                    scripts/build-module.sh's build beside the guest's
#                                    riw.ko, else gcc here; gcc's messages and status
#   riw_ns0_rping PORT               rping -V, 10 iterations of 1000 bytes, server and client
#                                    on riw_ns0_device's device ($RIW_ADDR0)
#   riw_kmemleak_mark                remember what kmemleak reports now (nothing without
#                                    kmemleak)
#   riw_kmemleak_new                 fail, printing them, if kmemleak reports objects it did
#                                    not at the mark (riw_kmemleak_scan_twice); iw_cm's
#                                    known leak is printed and not failed on
#   riw_kmemleak_scan_twice          two kmemleak scans, the second over 5 s after the
#                                    first began
#   riw_kmemleak_classify            read a kmemleak report, print "ADDRESS known|new" per
#                                    object
#   riw_kmemleak_addrs KIND          read a kmemleak report, print its KIND (known, new)
#                                    objects' addresses
#   riw_kmemleak_note_known KNOWN REPORT
#                                    print REPORT's known-leak objects listed in file KNOWN
#   riw_kmemleak_show NEW REPORT     print REPORT's objects whose addresses file NEW lists
#   riw_initns_device RDMA_DEV NETDEV PEER ADDR
#                                    riw loaded, a veth pair NETDEV-PEER in the initial
#                                    namespace, ADDR/24 on NETDEV and the riw device
#                                    RDMA_DEV on it, all removed at exit: for the kernel
#                                    ULPs that use rdma_cm in the initial namespace only
#   riw_block_checks DISK BACKING NAME
#                                    three checks of a block device whose data lands in the
#                                    target's file BACKING: 16 MiB written (O_DIRECT) and
#                                    read back, the same bytes in BACKING, fio job NAME
#                                    verifying every block; uses $tmp
#   riw_peer_begin                   in a two-guest run (selftests/vm/pair.sh, $RIW_PEER set):
#                                    wait for the peer guest (up to 120 s) and mark its
#                                    kernel log, which the EXIT trap then scans as it scans
#                                    ours (unless riw_peer_gone); prints its kernel release
#   riw_peer CMD                     run the bash command line CMD in the peer (in the
#                                    repository's top directory), print its output, return
#                                    its status; 124 past RIW_PEER_TIMEOUT (default 60)
#                                    seconds, 125 if the peer does not answer
#   riw_peer_bg NAME CMD             start CMD in the peer's background, its output and
#                                    status kept there under NAME
#   riw_peer_wait NAME SECONDS       wait for it, print its output; return its status, 124
#                                    on timeout (it is killed)
#   riw_peer_gone                    the test powered the peer off: riw_peer fails at once,
#                                    and its log is not scanned
#   riw_writes_start DISK NAME       16 MiB of random data written (O_DIRECT, synced) at
#                                    32 MiB into DISK, then fio job NAME writing and verifying
#                                    DISK's first 16 MiB in the background (pid in
#                                    RIW_FIO_PID): I/O for a failure to happen under
#   riw_writes_end DISK NAME         wait for that fio (its log if it failed), then the
#                                    16 MiB read back: identical; uses $tmp
#   riw_kmod_results NAME [MORE]     plan and report, one KTAP result each, the checks a test
#                                    module logged as "NAME: ok|not ok N description", plus
#                                    MORE (default 1) results the caller reports itself
#   riw_skip_all REASON              KTAP "skip all" and exit with the kselftest skip status
#   riw_diag                         filter: prefix each line with "# " (KTAP diagnostics)
#
# Every SECONDS above is multiplied by RIW_TIMEOUT_SCALE: 10 on a KASAN kernel, whose TCG
# guest runs tens of times slower, else 1.

__riw_selftests=$(realpath "$(dirname "${BASH_SOURCE[0]}")")

if [ -z "${RIW_KSRC:-}" ]; then
	echo "riw: RIW_KSRC is not set: run the tests in the guest (selftests/vm/kselftest.sh)" >&2
	exit 1
fi
. "$RIW_KSRC/tools/testing/selftests/kselftest/ktap_helpers.sh"

if zgrep -q '^CONFIG_KASAN=y' /proc/config.gz 2>/dev/null; then
	: "${RIW_TIMEOUT_SCALE:=10}"
else
	: "${RIW_TIMEOUT_SCALE:=1}"
fi

# Every process a test starts costs the debug guest tenths of a second (KASAN, kmemleak and
# lockdep track each of its allocations), so the helpers that loop or run for every check
# start none they can do without: a sleep is a read, with a timeout, of a pipe that this
# shell holds open at both ends and nothing writes to.
exec {__riw_sleep_fd}<> <(:)

riw_sleep() { # SECONDS
	read -rt "$1" -u "$__riw_sleep_fd" || true
}

riw_skip_all() {
	ktap_skip_all "$*"
	exit "$KSFT_SKIP"
}

riw_diag() {
	# A read loop rather than sed: no process to start, which is slow on the debug kernel.
	local line
	while IFS= read -r line || [ -n "$line" ]; do
		printf '# %s\n' "$line"
	done
}

# Cleanup stack. Each entry is a command line quoted for eval.
__riw_deferred=()

riw_defer() {
	__riw_deferred+=("$(printf '%q ' "$@")")
}

# CMD runs as a job of its own (set -m) so that a timeout kills all of it, shell functions
# and what they start included.
riw_run() {
	local -
	set -m
	local secs=$(($1 * RIW_TIMEOUT_SCALE)) pid rc wd
	shift
	("$@" 2>&1 </dev/null | riw_diag; exit "${PIPESTATUS[0]}") &
	pid=$!
	set +e
	# A watchdog of this shell's own (no process started) kills CMD's job at the timeout;
	# gone by the time CMD ended, it has fired.
	(riw_sleep "$secs"; kill -KILL -- -$pid 2>/dev/null) &
	wd=$!
	wait $pid 2>/dev/null
	rc=$?
	if kill $wd 2>/dev/null; then
		wait $wd 2>/dev/null
	else
		wait $wd 2>/dev/null
		rc=124
	fi
	case $rc in
	0) ;;
	124) echo "# timed out after $secs s: $*" ;;
	*) echo "# failed with status $rc: $*" ;;
	esac
	return $rc
}

riw_result() {
	local desc=$1
	shift
	if "$@"; then
		ktap_test_pass "$desc"
	else
		ktap_test_fail "$desc"
	fi
}

riw_kmod_results() { # NAME
	local results line
	dmesg | grep -oE "$1: # .*" | sed "s/^$1: //" || true
	results=$(dmesg | grep -oE "$1: (not )?ok [0-9]+ .*" | sed "s/^$1: //" || true)
	ktap_set_plan $(($(grep -c . <<<"$results") + ${2:-1}))
	while read -r line; do
		[ -n "$line" ] || continue
		case $line in
		"not ok "*) ktap_test_fail "$(sed -E 's/^not ok [0-9]+ //' <<<"$line")" ;;
		*) ktap_test_pass "$(sed -E 's/^ok [0-9]+ //' <<<"$line")" ;;
		esac
	done <<<"$results"
}

riw_check() {
	local desc=$1 rc=0 t0=$SECONDS
	shift
	riw_run "$@" || rc=$?
	# What a check costs, for make check's time budget: those of 10 s or more.
	[ $((SECONDS - t0)) -lt 10 ] || echo "# check took $((SECONDS - t0)) s"
	if [ $rc -eq 0 ]; then
		ktap_test_pass "$desc"
	else
		ktap_test_fail "$desc"
	fi
	return $rc
}

riw_run_part() {
	local secs=$(($1 * RIW_TIMEOUT_SCALE)) who=$2 log line status name why t rc desc pid
	local diag diag_pid
	local -n __riw_names=$3
	shift 3
	local -A res=() reason=()
	local t0=$SECONDS
	log=$(mktemp /tmp/riw-part.XXXXXX)
	set +e
	timeout -k 5 "$secs" "$@" >"$log" 2>&1 </dev/null &
	pid=$!
	exec {diag}> >(riw_diag)
	diag_pid=$!
	# The output shows as it comes, so that a run cut short still shows how far it got.
	# A CMD stuck in the kernel outlives even SIGKILL: it is given up on, not waited for.
	if timeout $((secs + 15)) tail -n +1 -s 0.5 -f --pid="$pid" "$log" >&"$diag"; then
		wait "$pid"
		rc=$?
	else
		rc=124
	fi
	exec {diag}>&-
	wait "$diag_pid"
	set -e
	while IFS= read -r line; do
		if [[ $line == "RESULT "* ]]; then
			read -r _ status name why <<<"$line"
			res[$name]=$status
			reason[$name]=$why
		fi
	done <"$log"
	rm -f "$log"
	if [ $rc -ne 0 ]; then
		echo "# part exited with status $rc$([ $rc -ne 124 ] || echo ", timed out")"
		riw_state | riw_diag
	fi
	echo "# part took $((SECONDS - t0)) s"
	for t in "${__riw_names[@]}"; do
		name=${t%% *}
		desc="$name: ${t#* }"
		case ${res[$name]:-none} in
		pass) ktap_test_pass "$desc" ;;
		xfail)
			__ktap_test ok "$desc" "XFAIL $who: ${reason[$name]}"
			KTAP_CNT_PASS=$((KTAP_CNT_PASS + 1))
			;;
		skip)
			__ktap_test ok "$desc" "SKIP ${reason[$name]}"
			KTAP_CNT_SKIP=$((KTAP_CNT_SKIP + 1))
			;;
		*) ktap_test_fail "$desc" ;;
		esac
	done
}

riw_state() {
	local ns t
	for ns in "${RIW_NS0:-}" "${RIW_NS1:-}"; do
		[ -n "$ns" ] && ip netns list | grep -qw "$ns" || continue
		echo "TCP sockets in $ns:"
		ip netns exec "$ns" ss -tanmoi
	done
	echo "RDMA resources:"
	rdma resource show qp
	rdma resource show cm_id
	for t in /proc/[0-9]*; do
		grep -q '^State:.*D (' "$t/status" 2>/dev/null ||
			grep -qs riw "$t/stack" || continue
		echo "task ${t#/proc/} $(cat "$t/comm" 2>/dev/null), $(grep '^State' "$t/status" 2>/dev/null):"
		cat "$t/stack" 2>/dev/null
	done
}

declare -A __riw_bg_log

riw_bg() {
	local -
	set -m
	local log
	log=$(mktemp /tmp/riw-bg.XXXXXX)
	"$@" >"$log" 2>&1 </dev/null &
	RIW_BG_PID=$!
	__riw_bg_log[$RIW_BG_PID]=$log
	riw_defer __riw_bg_reap "$RIW_BG_PID"
}

__riw_bg_reap() {
	kill -KILL -- -"$1" 2>/dev/null && wait "$1" 2>/dev/null
	rm -f "${__riw_bg_log[$1]}"
}

riw_wait() {
	local pid=$1 secs=$(($2 * RIW_TIMEOUT_SCALE)) rc=0
	if ! timeout "$secs" tail --pid="$pid" -f /dev/null; then
		riw_diag <"${__riw_bg_log[$pid]}"
		echo "# timed out after $secs s: background pid $pid"
		return 124
	fi
	wait "$pid" || rc=$?
	riw_diag <"${__riw_bg_log[$pid]}"
	[ $rc -eq 0 ] || echo "# background pid $pid failed with status $rc"
	return $rc
}

riw_poll() {
	local end=$((SECONDS + $1 * RIW_TIMEOUT_SCALE)) t0 us
	shift
	while t0=${EPOCHREALTIME/./} && ! "$@"; do
		[ $SECONDS -lt $end ] || return 124
		# 0.2 s, or as long as the look took if longer: a look that starts processes
		# (seconds each on the debug kernel) takes at most half the CPU from what it
		# waits for.
		us=$((${EPOCHREALTIME/./} - t0))
		((us >= 200000)) || us=200000
		printf -v us %d.%06d $((us / 1000000)) $((us % 1000000))
		riw_sleep "$us"
	done
}

# Waits until the riw device DEV has sent FPDUS (default 100) more FPDUs than when called:
# traffic flows, however slow the kernel. Status 124 if it does not within SECONDS (scaled).
riw_flowing() { # DEV [FPDUS] [SECONDS]
	local c=/sys/class/infiniband/$1/ports/1/hw_counters/tx_fpdus start
	read -r start <"$c" || return
	riw_poll "${3:-30}" riw_counter_reached "$c" "$((start + ${2:-100}))"
}

riw_counter_reached() { # COUNTER TARGET
	local n
	read -r n <"$1" && [ "$n" -ge "$2" ]
}

riw_netns_setup() {
	export RIW_NS0=riw-ns0-$$ RIW_NS1=riw-ns1-$$
	export RIW_DEV0=veth0 RIW_DEV1=veth1 RIW_ADDR0=192.0.2.1 RIW_ADDR1=192.0.2.2
	riw_defer riw_netns_cleanup
	ip netns add "$RIW_NS0"
	ip netns add "$RIW_NS1"
	# A process in each namespace for as long as it exists: riw_tcp_listening reads the
	# namespace's sockets from its /proc/PID/net, where finding one of the namespace's
	# processes would mean a look at every process. Started from a subshell, so that the
	# scripts' plain "wait" does not wait for it.
	RIW_NS0_PID=$(ip netns exec "$RIW_NS0" sleep infinity </dev/null >/dev/null 2>&1 & echo $!)
	RIW_NS1_PID=$(ip netns exec "$RIW_NS1" sleep infinity </dev/null >/dev/null 2>&1 & echo $!)
	export RIW_NS0_PID RIW_NS1_PID
	# ip enters the namespace, then becomes the sleep.
	riw_poll 10 eval '[ /proc/$RIW_NS0_PID/ns/net -ef /run/netns/$RIW_NS0 ] &&
		[ /proc/$RIW_NS1_PID/ns/net -ef /run/netns/$RIW_NS1 ]' ||
		echo "# the sleeping processes did not enter $RIW_NS0 and $RIW_NS1"
	# Distinct interface indexes: siw listens on a wildcard address by binding the
	# netdev's index in the listener's namespace, so with equal indexes a listener in one
	# namespace collides with itself on the other namespace's siw device (EADDRINUSE).
	ip -n "$RIW_NS0" link add "$RIW_DEV0" index 10 type veth \
		peer name "$RIW_DEV1" netns "$RIW_NS1" index 20
	ip -n "$RIW_NS0" addr add "$RIW_ADDR0/24" dev "$RIW_DEV0"
	ip -n "$RIW_NS1" addr add "$RIW_ADDR1/24" dev "$RIW_DEV1"
	ip -n "$RIW_NS0" link set lo up
	ip -n "$RIW_NS1" link set lo up
	ip -n "$RIW_NS0" link set "$RIW_DEV0" up
	ip -n "$RIW_NS1" link set "$RIW_DEV1" up
	# Until linkwatch marks a veth end operationally up its qdisc drops every packet, so
	# a consumer resolving an address at once (a kernel one has a single 5 s attempt)
	# would see its ARP requests vanish.
	riw_poll 10 __riw_link_up "$RIW_NS0" "$RIW_DEV0" &&
		riw_poll 10 __riw_link_up "$RIW_NS1" "$RIW_DEV1" ||
		echo "# $RIW_DEV0 or $RIW_DEV1 not operationally up after 10 s"
}

__riw_link_up() { # NS DEV
	ip -n "$1" -o link show dev "$2" | grep -q ' state UP '
}

# A server driver on namespace 1's end and a client driver on namespace 0's: loads both
# modules (riw's first when they differ, each unloaded at exit), sets up the namespaces and
# defines in0/in1 to run a command in either.
riw_pair_setup() { # SERVER_DRIVER CLIENT_DRIVER
	local d
	for d in $(printf '%s\n' "$1" "$2" | sort -u); do
		modprobe "$d"
		riw_defer modprobe -r "$d"
	done
	riw_netns_setup
	in0() { ip netns exec "$RIW_NS0" "$@"; }
	in1() { ip netns exec "$RIW_NS1" "$@"; }
}

riw_netns_cleanup() {
	kill "${RIW_NS0_PID:-}" "${RIW_NS1_PID:-}" 2>/dev/null || true
	ip netns del "$RIW_NS0" 2>/dev/null || true
	ip netns del "$RIW_NS1" 2>/dev/null || true
}

riw_pair_args() { # [SERVER_DRIVER CLIENT_DRIVER]
	local d
	srv_drv=${1:-riw}
	cli_drv=${2:-riw}
	for d in "$srv_drv" "$cli_drv"; do
		case $d in
		riw | siw) ;;
		*) echo "usage: $0 [riw|siw riw|siw]" >&2; exit 2 ;;
		esac
	done
}

riw_pair_devices() { # SERVER_DEV CLIENT_DEV
	srv_dev=$1 cli_dev=$2
	riw_pair_setup "$srv_drv" "$cli_drv"
	SRV4=$RIW_ADDR1
	in1 rdma link add "$srv_dev" type "$srv_drv" netdev "$RIW_DEV1"
	in0 rdma link add "$cli_dev" type "$cli_drv" netdev "$RIW_DEV0"
	riw_defer rdma link delete "$cli_dev"
	riw_defer rdma link delete "$srv_dev"
	tmp=$(mktemp -d)
	riw_defer rm -rf "$tmp"
	riw_defer riw_ns_kill "$RIW_NS1"
	riw_defer riw_ns_kill "$RIW_NS0"
	echo "# server $srv_dev ($srv_drv) on $RIW_DEV1 $SRV4, client $cli_dev ($cli_drv) on" \
		"$RIW_DEV0 $RIW_ADDR0; timeout scale $RIW_TIMEOUT_SCALE"
}

# The processes in network namespace NS, as ip netns pids lists them, into the array
# riw_pids, riw_netns_setup's sleeping ones aside. Shell builtins only: starting a process
# is slow on the debug kernel, and pollers call this again and again.
riw_ns_pids() { # NS
	local d
	riw_pids=()
	for d in /proc/[0-9]*; do
		[ "$d/ns/net" -ef "/run/netns/$1" ] || continue
		[ "${d#/proc/}" = "${RIW_NS0_PID:-}" ] || [ "${d#/proc/}" = "${RIW_NS1_PID:-}" ] ||
			riw_pids+=("${d#/proc/}")
	done
	return 0
}

# Ends what still runs in namespace NS: a server that serves on, or one left behind.
riw_ns_kill() { # NS
	local riw_pids
	riw_ns_pids "$1"
	[ ${#riw_pids[@]} -gt 0 ] || return 0
	kill "${riw_pids[@]}" 2>/dev/null
	riw_poll 2 __riw_ns_empty "$1" && return 0
	riw_ns_pids "$1"
	[ ${#riw_pids[@]} -eq 0 ] || kill -KILL "${riw_pids[@]}" 2>/dev/null
}

__riw_ns_empty() { # NS
	local riw_pids
	riw_ns_pids "$1"
	[ ${#riw_pids[@]} -eq 0 ]
}

# Whether a TCP socket listens on PORT in namespace NS (empty: this shell's), read from
# /proc/PID/net/tcp and tcp6 of a process there with builtins only, as riw_ns_pids: the
# namespace's sleeping process where riw_netns_setup made NS, else any found there.
riw_tcp_listening() { # PORT [NS]
	__riw_tcp_socket "$1" "${2:-}" listening
}

# Whether a TCP connection of PORT, local or remote, is in namespace NS (empty: this
# shell's) in any state but LISTEN and TIME-WAIT, read as riw_tcp_listening does.
riw_tcp_connected() { # PORT [NS]
	__riw_tcp_socket "$1" "${2:-}" connected
}

__riw_tcp_socket() { # PORT NS listening|connected
	local hex f sl addr rem st rest riw_pids=(self)
	printf -v hex '%04X' "$1"
	case $2 in
	'') ;;
	"${RIW_NS0:-}") riw_pids=("$RIW_NS0_PID") ;;
	"${RIW_NS1:-}") riw_pids=("$RIW_NS1_PID") ;;
	*)
		riw_ns_pids "$2"
		[ ${#riw_pids[@]} -gt 0 ] || return 1
		;;
	esac
	for f in tcp tcp6; do
		# "sl local_address rem_address st ...": ports in hex; LISTEN is state 0A,
		# TIME-WAIT 06.
		while read -r sl addr rem st rest; do
			if [ "$3" = listening ]; then
				[[ $st == 0A && ${addr##*:} == "$hex" ]] && return 0
			elif [[ $st != 0A && $st != 06 ]]; then
				[[ ${addr##*:} == "$hex" || ${rem##*:} == "$hex" ]] && return 0
			fi
		done 2>/dev/null <"/proc/${riw_pids[0]}/net/$f"
	done
	return 1
}

__riw_listening() { # PORT [NS, default $RIW_NS1]
	riw_tcp_listening "$1" "${2:-$RIW_NS1}"
}

# Both commands must exit 0, else the status is the client's failure, or the server's; the
# server's own status is left in riw_pair_srv_rc. A server whose client failed may wait for
# it for ever: it gets a moment, no more. With DAEMON=1 the server serves on and is ended
# once the client is done, its status not counted. The server's output is shown after the
# client's.
riw_pair_run() { # PORT SERVER_CMD... -- CLIENT_CMD...
	local port=$1 srv=() rc=0 spid st=0
	shift
	while [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	in1 "${srv[@]}" >"$tmp/srv.log" 2>&1 &
	spid=$!
	riw_poll 10 __riw_listening "$port" || echo "nothing listens on port $port"
	in0 "$@" || rc=$?
	__riw_gone() { ! kill -0 "$spid" 2>/dev/null; }
	if [ "${DAEMON:-0}" = 1 ]; then
		riw_ns_kill "$RIW_NS1"
	elif [ $rc -ne 0 ] && ! riw_poll 5 __riw_gone; then
		echo "the server still runs: killed"
		riw_ns_kill "$RIW_NS1"
	fi
	wait "$spid" || { st=$?; [ $rc -ne 0 ] || [ "${DAEMON:-0}" = 1 ] || rc=$st; }
	riw_pair_srv_rc=$st
	sed 's/^/server: /' "$tmp/srv.log"
	return $rc
}

# The kernel log since this test began: after its marker line, or all of it if the ring
# buffer has wrapped past the marker.
__riw_tag="riw-selftest: begin $(basename "$0") $$.$RANDOM"
echo "<6>$__riw_tag" >/dev/kmsg

__riw_splats='\bBUG[: ]|WARNING:|Oops|general protection|Call Trace|KASAN|KFENCE|UBSAN'
__riw_splats+='|refcount_t|list_(add|del) corruption|possible (circular|recursive) locking'
__riw_splats+='|inconsistent lock state|suspicious RCU usage|lock held when returning'
__riw_splats+='|held lock freed|suspected memory leak|blocked for more than|soft lockup'

# siw read-locks its sockets' callback lock with softirqs enabled (in 6.12 its data_ready,
# state_change and write_space callbacks: siw_cm_llp_*, siw_qp_llp_*, siw_rtr_data_ready),
# which lockdep reports as "SOFTIRQ-safe -> SOFTIRQ-unsafe lock order" once any TCP listener
# closes with connections not yet accepted (that path takes the lock under the socket
# spinlock), as an "irq lock inversion" when siw's callback comes second, or as an
# "inconsistent lock state" ({SOFTIRQ-ON-R} -> {IN-SOFTIRQ-W}) when siw's softirq write
# lock of the same class meets it. A report whose softirq-unsafe acquisition is that
# read_lock of clock-AF_INET[6] from siw's code is siw's own: it is named, not counted.
# Everything else in it still is.
__riw_without_siw_lockdep() {
	awk '
	function flush() {
		report = 0
		if (siw) print "riw-selftest: siw lockdep report (siw read-locks sk_callback_lock with softirqs enabled), not counted"
		else printf "%s", buf
	}
	/SOFTIRQ-safe -> SOFTIRQ-unsafe lock order detected|possible irq lock inversion dependency detected|WARNING: inconsistent lock state/ {
		if (report) flush()
		report = 1; buf = ""; section = ""; siw = 0; clock = 0; changed = 0; prev = ""
	}
	report {
		buf = buf $0 "\n"
		# Safe -> unsafe: the unsafe lock is named, then the trace of its first unsafe use.
		if (/to a SOFTIRQ-irq-unsafe lock:/) section = "name"
		else if (section == "name" && /\(clock-AF_INET6?\)/) clock = 1
		else if (/which became SOFTIRQ-irq-unsafe at/) section = clock ? "trace" : ""
		else if (/other info that might help/) section = ""
		else if (section == "trace" && prev ~ /_raw_read_lock\+/ && /\[siw\][[:space:]]*$/) siw = 1
		# Inconsistent state: the read lock with softirqs on was either taken now (the
		# line after "takes:") or registered earlier (the trace after "was registered").
		if (/inconsistent \{SOFTIRQ-ON-R\} -> \{IN-SOFTIRQ-W\} usage/) section = "registered"
		else if (/inconsistent \{IN-SOFTIRQ-W\} -> \{SOFTIRQ-ON-R\} usage/) section = "takes"
		else if (prev ~ / takes:$/ && /\(clock-AF_INET6?\)/) {
			clock = 1
			if (section == "takes" && /at: siw_[a-z_]+\+0x[0-9a-f]+\/0x[0-9a-f]+ \[siw\]/) siw = 1
		} else if (section == "registered" && clock && /\{SOFTIRQ-ON-R\} state was registered at:/) section = "trace"
		# Inversion: the line after this names the lock and where its state changed, the
		# next says the change was to softirq-unsafe.
		if (prev ~ /just changed the state of lock:/ && /\(clock-AF_INET6?\)/ && /at: siw_[a-z_]+\+0x[0-9a-f]+\/0x[0-9a-f]+ \[siw\]/) changed = 1
		else if (changed && /but this lock was taken by another, SOFTIRQ-safe lock/) siw = 1
		else changed = 0
		prev = $0
		if (/<\/TASK>/) flush()
		next
	}
	{ print }
	END { if (report) printf "%s", buf }'
}

# Prints the counted hits, then the kernel log from the first of them on (bounded), so
# that a report in a CI log can be read without the guest's console.
# A program's own crash ("traps: PROG[PID] general protection fault ... in LIB"), which
# perftest has on some error paths, is userspace's, not a kernel splat.
__riw_without_user_traps() {
	grep -vE '\] traps: [^ ]+\[[0-9]+\] general protection fault .* in ' || true
}

# A test that fails allocations on purpose (riw_fault.sh) sets RIW_ALLOCATIONS_FAIL: the
# kernel's report of a failed allocation (warn_alloc: "page allocation failure" or "vmalloc
# error", with a stack trace) is then the injected failure's, named and not counted.
__riw_without_alloc_failures() {
	if [ -z "${RIW_ALLOCATIONS_FAIL:-}" ]; then
		cat
		return
	fi
	awk '/: (page allocation failure|vmalloc error): / { skip = 1; n++; next }
		skip { if (/<\/TASK>/) skip = 0; next }
		{ print }
		END { if (n) print "riw-selftest: " n " reports of an injected allocation failure, not counted" }'
}

__riw_splat_check() {
	local log hits first
	log=$(dmesg | __riw_without_siw_lockdep | __riw_without_user_traps |
		__riw_without_alloc_failures)
	if grep -qF "$__riw_tag" <<<"$log"; then
		log=$(awk -v tag="$__riw_tag" 'seen; index($0, tag) { seen = 1 }' <<<"$log")
	fi
	grep -F -e "siw lockdep report" -e "injected allocation failure" <<<"$log" | riw_diag || true
	hits=$(grep -E "$__riw_splats" <<<"$log") || return 0
	echo "# kernel log splat during $(basename "$0"):"
	riw_diag <<<"$hits"
	echo "# kernel log from the first of them:"
	first=$(grep -nE -m1 "$__riw_splats" <<<"$log" | cut -d: -f1)
	tail -n +"$first" <<<"$log" | head -n 200 | riw_diag
	return 1
}

__riw_exit() {
	local rc=$? i
	set +e
	for ((i = ${#__riw_deferred[@]} - 1; i >= 0; i--)); do
		eval "${__riw_deferred[i]}" >/dev/null 2>&1
	done
	__riw_splat_check || rc=$KSFT_FAIL
	__riw_peer_splat_check || rc=$KSFT_FAIL
	exit $rc
}
trap __riw_exit EXIT

riw_qp_count() { # RDMA_DEV
	rdma res show qp link "$1/1" 2>/dev/null | grep -c lqpn || true
}

riw_ns0_device() { # DRIVER RDMA_DEV
	modprobe "$1"
	riw_defer modprobe -r "$1"
	riw_netns_setup
	in0() { ip netns exec "$RIW_NS0" "$@"; }
	in0 rdma link add "$2" type "$1" netdev "$RIW_DEV0"
	riw_defer rdma link delete "$2"
}

# scripts/build-module.sh builds the selftests' C programs beside riw.ko, with this same
# command: where the guest was given that riw.ko (RIW_MODULES) and the program's source
# there is this one, a copy of that build is taken; gcc on the debug guest is slow.
riw_build_prog() { # SOURCE OUT
	local m built=
	for m in ${RIW_MODULES:-}; do
		[ "${m##*/}" = riw.ko ] && built=${m%/*}/selftests/${1%.c}
	done
	if [ -n "$built" ] && [ "$built" -nt "${built%/*}/${1##*/}" ] &&
		cmp -s "${built%/*}/${1##*/}" "$__riw_selftests/$1"; then
		cp "$built" "$2"
		return
	fi
	gcc -O2 -Wall -pthread -o "$2" "$__riw_selftests/$1" -lrdmacm -libverbs
}

riw_ns0_rping() { # PORT
	local port=$1 srv rc=0 st=0
	in0 rping -s -a "$RIW_ADDR0" -p "$port" -C 10 -S 1000 -V &
	srv=$!
	riw_poll 10 __riw_listening "$port" "$RIW_NS0" || echo "no listener"
	in0 rping -c -a "$RIW_ADDR0" -p "$port" -C 10 -S 1000 -V || rc=$?
	if [ $rc -ne 0 ]; then
		kill "$srv" 2>/dev/null
	fi
	wait "$srv" || st=$?
	[ $rc -ne 0 ] || rc=$st
	return $rc
}

__riw_kmemleak=/sys/kernel/debug/kmemleak

# Reads kmemleak's report; prints "ADDRESS known" or "ADDRESS new" per object. Known is the
# one leak of the kernel's iw_cm that any iWARP driver meets and none can prevent (6.12 up
# to at least 6.19): cm_event_handler() copies a connection request's private data, and when
# the listening cm_id is destroyed before iw_cm's work item runs, cm_work_handler() drops the
# event without freeing the copy (Documentation/riw.rst, "Building and testing").
riw_kmemleak_classify() {
	awk 'function out() { if (addr != "") print addr, (known ? "known" : "new") }
		/^unreferenced object/ { out(); addr = $3; known = 0; prev = ""; next }
		/^    [^ ]/ { if (prev ~ /^kmemdup/ && $1 ~ /^cm_event_handler\+/) known = 1
			prev = $1 }
		END { out() }'
}

# Prints the report's objects of the given ADDRESSes (one per line in the file NEW).
riw_kmemleak_show() { # NEW REPORT
	awk 'FNR == NR { new[$1] = 1; next }
		/^unreferenced object/ { show = ($3 in new) } show' "$1" "$2"
}

# Reads kmemleak's report; prints the addresses of its objects of KIND, known or new.
riw_kmemleak_addrs() { # KIND
	riw_kmemleak_classify | awk -v k="$1" '$2 == k { print $1 }'
}

# Prints REPORT's objects whose addresses file KNOWN lists as iw_cm's known leak, if any.
riw_kmemleak_note_known() { # KNOWN REPORT
	local known
	known=$(cat "$1")
	[ -n "$known" ] || return 0
	echo "iw_cm's known leak (a dropped connection request's private data), not failed on:"
	riw_kmemleak_show <(echo "$known") "$2"
}

__riw_leaked() { # KIND
	riw_kmemleak_addrs "$1" <$__riw_kmemleak | sort
}

riw_kmemleak_mark() {
	[ -e $__riw_kmemleak ] || return 0
	echo scan >$__riw_kmemleak
	__riw_leaked new >/tmp/riw-kmemleak.mark
	__riw_leaked known >/tmp/riw-kmemleak.known
	riw_defer rm -f /tmp/riw-kmemleak.mark /tmp/riw-kmemleak.known
}

# Two kmemleak scans, the second over 5 s after the first began: kmemleak reports an
# object over 5 s old, unchanged since the previous scan. On the debug guest a scan mostly
# takes longer than that by itself, and then nothing waits in between.
riw_kmemleak_scan_twice() {
	local start=$SECONDS
	echo scan >$__riw_kmemleak
	[ $((SECONDS - start)) -ge 7 ] || sleep $((start + 7 - SECONDS))
	echo scan >$__riw_kmemleak
}

riw_kmemleak_new() {
	local new
	riw_kmemleak_scan_twice
	riw_kmemleak_note_known <(__riw_leaked known | comm -13 /tmp/riw-kmemleak.known -) \
		$__riw_kmemleak
	new=$(__riw_leaked new | comm -13 /tmp/riw-kmemleak.mark -)
	[ -z "$new" ] && return 0
	echo "objects leaked since the mark:"
	riw_kmemleak_show <(echo "$new") $__riw_kmemleak
	return 1
}

riw_initns_device() { # RDMA_DEV NETDEV PEER ADDR
	modprobe riw
	riw_defer modprobe -r riw
	ip link add "$2" type veth peer name "$3"
	riw_defer ip link del "$2"
	ip addr add "$4/24" dev "$2"
	ip link set "$2" up
	ip link set "$3" up
	rdma link add "$1" type riw netdev "$2"
	riw_defer rdma link delete "$1"
}

__riw_write_read() { # DISK
	dd if="$tmp/pattern" of="$1" bs=1M oflag=direct status=none || return
	dd if="$1" of="$tmp/back" bs=1M count=16 iflag=direct status=none || return
	cmp "$tmp/pattern" "$tmp/back"
}

__riw_backing_holds() { # BACKING
	sync || return
	cmp -n $((16 << 20)) "$tmp/pattern" "$1"
}

# Four jobs, each in its own 8 MiB of the disk, write at random and then read back and
# verify every block; fio runs in $tmp, where it may keep its state.
__riw_fio_verify() { # DISK NAME
	cd "$tmp" &&
		fio --name="$2" --filename="$1" --direct=1 --ioengine=libaio \
			--rw=randwrite --bsrange=4k-128k --iodepth=16 --numjobs=4 --size=8M \
			--offset_increment=8M --verify=crc32c --verify_fatal=1 --group_reporting
}

riw_writes_start() { # DISK NAME
	head -c $((16 << 20)) /dev/urandom >"$tmp/before" || return
	dd if="$tmp/before" of="$1" bs=1M seek=32 oflag=direct conv=fsync status=none || return
	(cd "$tmp" && exec fio --name="$2" --filename="$1" --direct=1 --ioengine=libaio \
		--rw=randwrite --bs=4k --iodepth=8 --size=16M --verify=crc32c --verify_fatal=1 \
		>"$tmp/$2.log" 2>&1) &
	RIW_FIO_PID=$!
}

riw_writes_end() { # DISK NAME
	wait "$RIW_FIO_PID" || { cat "$tmp/$2.log"; return 1; }
	dd if="$1" of="$tmp/after" bs=1M skip=32 count=16 iflag=direct status=none || return
	cmp "$tmp/before" "$tmp/after"
}

riw_block_checks() { # DISK BACKING NAME
	head -c $((16 << 20)) /dev/urandom >"$tmp/pattern"
	riw_check "16 MiB written with O_DIRECT and read back: identical" 60 \
		__riw_write_read "$1" || true
	riw_check "the target's file holds the same 16 MiB" 60 __riw_backing_holds "$2" || true
	riw_check "fio: 4 jobs of random 4 KiB to 128 KiB writes, depth 16, each block verified" \
		120 __riw_fio_verify "$1" "$3" || true
}

__riw_peer_tag= __riw_peer_off=/tmp/riw-peer-off.$$

__riw_peer_call() { # SECONDS CMD
	python3 "$__riw_selftests/vm/peer.py" call --timeout "$1" "$RIW_PEER" "$2"
}

riw_peer_begin() {
	__riw_peer_tag="riw-selftest: begin $(basename "$0") on the peer $$.$RANDOM"
	python3 "$__riw_selftests/vm/peer.py" call --wait 120 "$RIW_PEER" \
		"echo '<6>$__riw_peer_tag' >/dev/kmsg; uname -r"
}

riw_peer() { # CMD
	[ ! -e "$__riw_peer_off" ] || return 125
	__riw_peer_call $((${RIW_PEER_TIMEOUT:-60} * RIW_TIMEOUT_SCALE)) "$1"
}

riw_peer_bg() { # NAME CMD
	riw_peer "rm -f /tmp/peer-$1.*; setsid bash -c $(printf %q "($2) </dev/null >/tmp/peer-$1.log 2>&1; echo \$? >/tmp/peer-$1.rc") >/dev/null 2>&1 </dev/null & echo \$! >/tmp/peer-$1.pid"
}

riw_peer_wait() { # NAME SECONDS
	local secs=$(($2 * RIW_TIMEOUT_SCALE))
	RIW_PEER_TIMEOUT=$(($2 + 30)) riw_peer "
		timeout $secs bash -c 'until [ -e /tmp/peer-$1.rc ]; do sleep 0.2; done'
		cat /tmp/peer-$1.log
		[ -e /tmp/peer-$1.rc ] && exit \$(cat /tmp/peer-$1.rc)
		kill -KILL -- -\$(cat /tmp/peer-$1.pid); echo '# timed out after $secs s: $1 in the peer'
		exit 124"
}

riw_peer_gone() {
	touch "$__riw_peer_off"
}

__riw_peer_splat_check() {
	local log
	if [ -e "$__riw_peer_off" ]; then
		rm -f "$__riw_peer_off"
		return 0
	fi
	[ -n "$__riw_peer_tag" ] || return 0
	log=$(__riw_peer_call 60 dmesg) || { echo "# no kernel log from the peer"; return 1; }
	log=$(awk -v tag="$__riw_peer_tag" 'seen; index($0, tag) { seen = 1 }' <<<"$log" |
		__riw_without_siw_lockdep | __riw_without_user_traps)
	grep -qE "$__riw_splats" <<<"$log" || return 0
	echo "# the peer's kernel log has a splat since $(basename "$0") began:"
	riw_diag <<<"$log" | head -n 200
	return 1
}
