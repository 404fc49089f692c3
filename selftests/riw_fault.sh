#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Allocation failures in every verbs call, one at a time: each call is made with the Nth
# fault point of the calling task failed (fail-nth), for N = 1, 2, ... until the call
# completes without reaching an Nth one. Only the caller's own allocations fail, and the
# kernel's other tasks (riw's work items among them) are left alone. After each N the call
# succeeded or returned an errno (a connection: or ended with an error event), what it
# created is destroyed, and the same call with nothing injected succeeds.
#
#   kverbs/riw_kfault_test.c   a kernel consumer: ib_alloc_pd (with its DMA MR), ib_alloc_cq
#                              (softirq and work-queue polling), ib_create_qp with rdma_rw
#                              contexts, ib_modify_qp, ib_create_srq, ib_alloc_mr, and
#                              rdma_cm's listen, connect and accept
#   verbs/fault_nth.c          userspace, stock libibverbs and librdmacm: the context, PD,
#                              CQ, QP and SRQ with their mmapped rings, a user MR,
#                              ibv_modify_qp, and rdma_cm's listen, connect and accept
#
# Each runs with slab allocations failing (failslab), then, in make check-long (RIW_LONG),
# with page allocations (fail_page_alloc, any order, vmalloc's included). Then the device must show nothing of
# it: no objects left, rping -V across it, rdma link delete, and kmemleak finds nothing
# leaked since the start.
#
# Before those last checks, allocations fail in the middle of transfers, per kind: a
# quarter of those made with riw's code on the stack, in any task, 20 at most, while two
# rping -V connections run (mid_transfer). Each must go on or end with an error.
#
# The kernel reports some failed allocations itself (warn_alloc: "vmalloc error" or "page
# allocation failure", with a stack trace): such a report is the injected failure's, named
# and not counted as a splat.
set -eu
. "$(dirname "$0")/lib.sh"

# The kernel's reports of the failed allocations are expected (lib.sh).
RIW_ALLOCATIONS_FAIL=1
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
dev=flt0
dbg=/sys/kernel/debug
# make check fails slab allocations; make check-long page allocations too.
KINDS=(failslab)
[ -z "${RIW_LONG:-}" ] || KINDS+=(fail_page_alloc)

ktap_print_header
[ -e /proc/self/fail-nth ] || riw_skip_all "the kernel has no CONFIG_FAULT_INJECTION (fail-nth)"
[ -d $dbg/failslab ] && [ -d $dbg/fail_page_alloc ] ||
	riw_skip_all "no failslab or fail_page_alloc in debugfs (FAILSLAB, FAIL_PAGE_ALLOC)"
modinfo riw_kfault_test >/dev/null 2>&1 ||
	riw_skip_all "riw_kfault_test.ko not installed (selftests/vm/kselftest.sh --module)"

tmp=$(mktemp -d)
riw_defer rm -rf "$tmp"
prog=$tmp/fault_nth
prog_build=$(riw_build_prog verbs/fault_nth.c "$prog" 2>&1) ||
	prog=
if [ -n "$prog" ]; then
	mapfile -t names < <("$prog" --list)
else
	names=("fault_nth the C part builds (gcc, librdmacm-dev, libibverbs-dev)")
fi

# Which fault points fail-nth counts: KIND's, and no other's. The defaults (off) ignore
# sleeping allocations, almost all of a verbs call's, and page allocations below order 1
# or from highmem (vmalloc's pages, and user memory: fault_nth locks its memory in, so a
# call does not fault it in). Each failure is not reported (verbose 0).
faults() { # failslab|fail_page_alloc|off
	local slab=Y page=Y
	case $1 in
	failslab) slab=N ;;
	fail_page_alloc) page=N ;;
	esac
	echo $slab >$dbg/failslab/ignore-gfp-wait
	echo $page >$dbg/fail_page_alloc/ignore-gfp-wait
	echo $page >$dbg/fail_page_alloc/ignore-gfp-highmem
	echo $([ $page = N ] && echo 0 || echo 1) >$dbg/fail_page_alloc/min-order
	echo 0 >$dbg/failslab/verbose
	echo 0 >$dbg/fail_page_alloc/verbose
}
riw_defer faults off
riw_defer under_riw failslab off
riw_defer under_riw fail_page_alloc off

# KIND's allocations fail (PERCENT of them, TIMES at most) in every task, but only those
# made with riw's code on the stack (its module's text, from kallsyms): in practice TCP's
# buffers for riw's sends. Never those under the uverbs core's completion handler: it
# drops the completion event when its GFP_ATOMIC allocation fails, whatever the driver,
# and the application waiting for the event then waits for ever. "off" puts the defaults
# back, which fail-nth obeys too.
under_riw() { # KIND PERCENT TIMES | KIND off
	local d=$dbg/$1 percent=$2 times=${3:-}
	if [ "$percent" = off ]; then
		echo 0 >"$d/probability"
		echo 0 >"$d/require-start"
		echo 18446744073709551615 >"$d/require-end"
		echo 0 >"$d/reject-start"
		echo 0 >"$d/reject-end"
		echo 1 >"$d/times"
		return
	fi
	[ -n "$text_ranges" ] || return 1
	set -- $text_ranges
	echo N >"$d/task-filter"
	echo 32 >"$d/stacktrace-depth"
	echo "$1" >"$d/require-start"
	echo "$2" >"$d/require-end"
	echo "$3" >"$d/reject-start"
	echo "$4" >"$d/reject-end"
	echo 0 >"$d/space"
	echo 1 >"$d/interval"
	echo "$times" >"$d/times"
	echo "$percent" >"$d/probability"
}

pings() { grep -c "ping data" "$tmp/ping$1.log" || true; }

# Allocations failing in the middle of transfers: two rping -V connections across the
# device (pinging until stopped), while KIND fails allocations under riw. A send that
# TCP refuses for want of memory is sent again once there is some, even when TCP held
# nothing of the connection and so has no write space to announce. Afterwards each
# connection has either moved on by 20 more pings (its client prints each, -v) within 20 s
# (scaled), or ended with an error; none stalls, and none saw different data (-V).
mid_transfer() { # KIND PORT
	local kind=$1 port=$2 t times=20 left rc=0 t0=$SECONDS
	local -a srv=() cli=() at=()
	faults "$kind"
	for t in 0 1; do
		# Not in0 (a function, run in a subshell): $! is rping's own. Niced: this
		# script's looks at the pings come first, rping takes what they leave.
		ip netns exec "$RIW_NS0" nice -n 15 rping -s -a "$RIW_ADDR0" -p $((port + t)) \
			-S 4096 -V >/dev/null 2>&1 &
		srv+=($!)
		riw_poll 10 riw_tcp_listening $((port + t)) "$RIW_NS0" || true
		ip netns exec "$RIW_NS0" nice -n 15 rping -c -a "$RIW_ADDR0" -p $((port + t)) \
			-S 4096 -V -v >"$tmp/ping$t.log" 2>&1 &
		cli+=($!)
	done
	riw_poll 30 eval '[ $(pings 0) -ge 20 ] && [ $(pings 1) -ge 20 ]' ||
		echo "# $kind: no pings before the faults"
	under_riw "$kind" 25 $times || echo "# $kind: riw's text not found in kallsyms"
	riw_poll 10 eval "[ \$(cat $dbg/$kind/times) -eq 0 ]" || true
	left=$(cat "$dbg/$kind/times")
	under_riw "$kind" off
	faults off
	echo "# $kind: $((times - left)) allocations under riw failed mid-transfer"
	riw_result "$kind: allocations under riw failed mid-transfer" [ "$left" -lt "$times" ]
	at=("$(pings 0)" "$(pings 1)")
	moved() { # T
		! kill -0 "${cli[$1]}" 2>/dev/null || [ "$(pings "$1")" -ge $((at[$1] + 20)) ]
	}
	if ! riw_poll 20 eval 'moved 0 && moved 1'; then
		echo "# $kind: a connection stopped (pings $(pings 0) and $(pings 1), from ${at[*]})"
		{ riw_state; rdma resource show qp -dd; rdma resource show cq -dd; } | riw_diag
		rc=1
	fi
	for t in 0 1; do
		if kill -0 "${cli[t]}" 2>/dev/null; then
			echo "# $kind: connection $t went on ($(pings $t) pings)"
		else
			wait "${cli[t]}" || echo "# $kind: connection $t ended with $? ($(pings $t) pings)"
		fi
		if grep -qi mismatch "$tmp/ping$t.log"; then
			grep -i mismatch "$tmp/ping$t.log" | head -3 | riw_diag
			rc=1
		fi
	done
	kill -KILL "${cli[@]}" "${srv[@]}" 2>/dev/null || true
	wait "${cli[@]}" "${srv[@]}" 2>/dev/null || true
	echo "# $kind: took $((SECONDS - t0)) s"
	riw_result "$kind: both connections go on or end with an error; none stalls" [ $rc -eq 0 ]
}

riw_kmemleak_mark
riw_ns0_device riw "$dev"
echo "# device $dev on $RIW_DEV0 $RIW_ADDR0, timeout scale $RIW_TIMEOUT_SCALE"

# The kernel consumer, once per kind: it loads only if every check passed. Its rdma_cm
# calls run in the namespace of riw_netns_setup's process there.
rcs=()
for kind in "${KINDS[@]}"; do
	faults "$kind"
	rc=0
	t0=$SECONDS
	modprobe riw_kfault_test device=$dev label="$kind" netns_pid="$RIW_NS0_PID" \
		addr="$RIW_ADDR0" ||
		rc=$?
	faults off
	echo "# riw_kfault_test with $kind took $((SECONDS - t0)) s"
	rcs+=("$rc")
	modprobe -r riw_kfault_test 2>/dev/null || true
done
# and after the user part, per kind: no objects, rping, link delete, kmemleak
riw_kmod_results riw_kfault_test $((${#KINDS[@]} * (3 + ${#names[@]}) + 4))
for i in "${!KINDS[@]}"; do
	riw_result "${KINDS[i]}: riw_kfault_test loads (every check passed)" [ "${rcs[i]}" -eq 0 ]
done

# Userspace, per kind.
for kind in "${KINDS[@]}"; do
	# "name description" each: the kind goes into the description.
	tests=()
	for t in "${names[@]}"; do tests+=("${t%% *} $kind: ${t#* }"); done
	if [ -z "$prog" ]; then
		riw_diag <<<"$prog_build"
		ktap_test_fail "${tests[0]}"
		continue
	fi
	faults "$kind"
	riw_run_part 600 riw tests ip netns exec "$RIW_NS0" \
		env RIW_TIMEOUT_SCALE="$RIW_TIMEOUT_SCALE" "$prog" "$dev" "$RIW_ADDR0"
	faults off
done

# under_riw's text ranges, "require-start require-end reject-start reject-end": read
# before any traffic, as parsing kallsyms takes long on a busy guest.
text_ranges=$($py - <<-'EOF'
	syms = [l.split() for l in open("/proc/kallsyms")]
	text = sorted({int(s[0], 16) for s in syms if s[1] in "tT"})
	riw = [int(s[0], 16) for s in syms if s[-1] == "[riw]" and s[1] in "tT"]
	cb = [int(s[0], 16) for s in syms if s[2:] == ["ib_uverbs_comp_handler"]]
	if riw and cb:
	    print(min(riw), max(riw) + 65536, cb[0], min(x for x in text if x > cb[0]))
	EOF
)
port=7180
for kind in "${KINDS[@]}"; do
	mid_transfer "$kind" $port
	port=$((port + 2))
done

no_objects() {
	$py "$here/verbs/verbs.py" counts "$dev" pd=0 cq=0 qp=0 srq=0 mr=0 ctx=0 cm_id=0
}
riw_check "no objects left on $dev" 30 riw_poll 20 no_objects || true
riw_check "rping -V: 10 iterations of 1000 bytes across $dev afterwards" 60 riw_ns0_rping 7175 ||
	true
riw_check "rdma link delete $dev" 30 rdma link delete "$dev" || true
if [ -e $dbg/kmemleak ]; then
	riw_check "kmemleak: nothing leaked since the start" 120 riw_kmemleak_new || true
else
	ktap_test_skip "kmemleak: nothing leaked since the start (no kmemleak)"
fi

ktap_finished
