#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Verbs objects and the shared-ring user ABI, driven by stock libibverbs and its soft-iWARP
# provider: ucontext, PD, CQ, QP, SRQ, MR and the mmapped rings, their limits, their invalid
# inputs, their cleanup when the owner dies, and what `rdma resource show` says about them.
#
#   riw_verbs.sh [riw|siw]      the driver under test; default $RIW_VERBS_DRIVER, else riw
#
# The same suite runs against Linux siw (siw_verbs.sh), which speaks the same ABI: that run
# validates the tests themselves. Where siw falls short of what riw must do, the check keeps
# riw's requirement and reports "# XFAIL" on siw only.
#
# Parts:
#   verbs/verbs.py      pyverbs: objects, 1,000-object loops, limits read from
#                       ibv_query_device, invalid inputs, the iWARP QP state machine
#   verbs/verbs_raw.c   C, as scripts/build-module.sh built it with the host's gcc and
#                       libibverbs-dev (riw_build_prog, else built here): EBUSY on destroying objects in use, unknown handles as raw
#                       uverbs commands, the rings found in /proc/self/maps and filled with
#                       garbage, the doorbell rung (see the comment at its top)
#   here                a process holding objects of every type is counted in
#                       `rdma resource show` and SIGKILLed, so is one creating and destroying
#                       objects in a loop; after every part the device's counts are back to 0
# kmemleak.sh, the last test of every run, then finds anything the driver leaked.
set -eu
. "$(dirname "$0")/lib.sh"

driver=${1:-${RIW_VERBS_DRIVER:-riw}}
case $driver in
riw | siw) ;;
*) echo "usage: $0 [riw|siw]" >&2; exit 2 ;;
esac
export RIW_VERBS_DRIVER=$driver
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
dev=verbs0
KINDS=(pd cq qp srq mr ctx)

ktap_print_header

mapfile -t py_tests < <($py "$here/verbs/verbs.py" list)
tmp=$(mktemp -d)
riw_defer rm -rf "$tmp"
raw=$tmp/verbs_raw
raw_build=$(riw_build_prog verbs/verbs_raw.c "$raw" 2>&1) || raw=
if [ -n "$raw" ]; then
	mapfile -t raw_tests < <("$raw" --list)
else
	raw_tests=("raw the C part builds (gcc, libibverbs-dev)")
fi
# subtests + "no objects left" after each part + kill (counted, gone) + churn kill
ktap_set_plan $((${#py_tests[@]} + ${#raw_tests[@]} + 2 + 3 + 1))

riw_ns0_device "$driver" "$dev"
echo "# driver $driver, device $dev on $RIW_DEV0"

# No objects of any kind on the device.
no_objects() {
	local args=() k
	for k in "${KINDS[@]}"; do args+=("$k=0"); done
	$py "$here/verbs/verbs.py" counts "$dev" "${args[@]}"
}

# pyverbs: objects, loops, limits, invalid inputs, the state machine.
riw_run_part 300 "$driver" py_tests ip netns exec "$RIW_NS0" $py "$here/verbs/verbs.py" run "$dev" "$driver"
riw_check "no objects left on $dev after verbs.py" 30 riw_poll 10 no_objects || true

# C: busy objects, handles, rings.
if [ -n "$raw" ]; then
	riw_run_part 120 "$driver" raw_tests ip netns exec "$RIW_NS0" "$raw" "$dev"
else
	riw_diag <<<"$raw_build"
	ktap_test_fail "${raw_tests[0]}"
fi
riw_check "no objects left on $dev after verbs_raw" 30 riw_poll 10 no_objects || true

# A process holding objects of every type: counted with its pid, then killed.
ready=$tmp/hold.ready
riw_bg in0 $py "$here/verbs/verbs.py" hold "$dev" "$ready"
holder=$RIW_BG_PID
if riw_run 60 riw_poll 60 test -s "$ready"; then
	pid=$(cat "$ready")
	riw_check "rdma resource show counts the holder's objects, owned by its pid" 30 \
		$py "$here/verbs/verbs.py" counts "$dev" --pid "$pid" \
		pd=2 cq=3 qp=4 srq=1 mr=5 ctx=1 || true
	rdma resource show | riw_diag
	kill -KILL "$pid"
	riw_result "the holder is SIGKILLed" riw_poll 10 eval "! kill -0 $pid 2>/dev/null"
else
	riw_wait "$holder" 1 || true
	ktap_test_fail "rdma resource show counts the holder's objects, owned by its pid"
	ktap_test_fail "the holder is SIGKILLed"
fi
riw_check "no objects left on $dev after the holder's death" 60 riw_poll 30 no_objects || true

# A process creating and destroying objects, killed in the middle of it.
ready=$tmp/churn.ready
riw_bg in0 $py "$here/verbs/verbs.py" churn "$dev" "$ready"
churner=$RIW_BG_PID
riw_poll 60 test -e "$ready" || true
sleep "$RIW_TIMEOUT_SCALE" # let it churn a while
rdma resource show | riw_diag
kill -KILL -- -"$churner" 2>/dev/null || true
wait "$churner" 2>/dev/null || true
riw_check "no objects left on $dev after a churning process's death" 60 \
	riw_poll 30 no_objects || true

ktap_finished
