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
#                              contexts, ib_modify_qp, ib_create_srq, ib_alloc_mr
#   verbs/fault_nth.c          userspace, stock libibverbs and librdmacm: the context, PD,
#                              CQ, QP and SRQ with their mmapped rings, a user MR,
#                              ibv_modify_qp, and rdma_cm's listen, connect and accept
#
# Each runs twice: with slab allocations failing (failslab), then with page allocations
# (fail_page_alloc, any order, vmalloc's included). Then the device must show nothing of
# it: no objects left, rping -V across it, rdma link delete, and kmemleak finds nothing
# leaked since the start.
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
KINDS=(failslab fail_page_alloc)

ktap_print_header
[ -e /proc/self/fail-nth ] || riw_skip_all "the kernel has no CONFIG_FAULT_INJECTION (fail-nth)"
[ -d $dbg/failslab ] && [ -d $dbg/fail_page_alloc ] ||
	riw_skip_all "no failslab or fail_page_alloc in debugfs (FAILSLAB, FAIL_PAGE_ALLOC)"
modinfo riw_kfault_test >/dev/null 2>&1 ||
	riw_skip_all "riw_kfault_test.ko not installed (selftests/vm/kselftest.sh --module)"

tmp=$(mktemp -d)
riw_defer rm -rf "$tmp"
prog=$tmp/fault_nth
prog_build=$(gcc -O2 -Wall -pthread -o "$prog" "$here/verbs/fault_nth.c" -lrdmacm -libverbs 2>&1) ||
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

riw_kmemleak_mark
riw_ns0_device riw "$dev"
echo "# device $dev on $RIW_DEV0 $RIW_ADDR0, timeout scale $RIW_TIMEOUT_SCALE"

# The kernel consumer, once per kind: it loads only if every check passed.
rcs=()
for kind in "${KINDS[@]}"; do
	faults "$kind"
	rc=0
	t0=$SECONDS
	modprobe riw_kfault_test device=$dev label="$kind" || rc=$?
	faults off
	echo "# riw_kfault_test with $kind took $((SECONDS - t0)) s"
	rcs+=("$rc")
	modprobe -r riw_kfault_test 2>/dev/null || true
done
# and after the user part, per kind: no objects, rping, link delete, kmemleak
riw_kmod_results riw_kfault_test $((${#KINDS[@]} * (1 + ${#names[@]}) + 4))
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
