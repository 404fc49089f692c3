#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The verbs fuzzer, verbs/fuzz.py: random sequences of valid and invalid verbs with random
# attributes, and rdma_cm connections with random traffic, disconnects and destruction, from
# stock pyverbs against one device, for RIW_FUZZ_VERBS_SECONDS (default 60, 900 with
# RIW_LONG). Then the kernel must show nothing of it:
#
#   the fuzzer ran and exited 0 within its time plus 60 s (times the timeout scale)
#   `rdma resource show` lists no object of any type on the device
#   rping -V runs across the device
#   the device can be deleted
#   kmemleak finds nothing leaked since the run began (skipped without kmemleak)
# and, as in every suite, no splat in the kernel log.
#
#   riw_fuzz.sh [riw|siw]       the driver under test; default riw. siw is not in make
#                               check: it trips lockdep, and 6.12's oopses under the fuzzer
#                               within seconds (a NULL dereference in siw_qp_sq_process
#                               from a post_send)
#
# The seed is random unless RIW_FUZZ_SEED is set; it is printed first, with the command that
# repeats the run in the guest.
set -eu
. "$(dirname "$0")/lib.sh"

driver=${1:-riw}
case $driver in
riw | siw) ;;
*) echo "usage: $0 [riw|siw]" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
dev=fz0
if [ -n "${RIW_LONG:-}" ]; then
	: "${RIW_FUZZ_VERBS_SECONDS:=900}"
else
	: "${RIW_FUZZ_VERBS_SECONDS:=60}"
fi
secs=$RIW_FUZZ_VERBS_SECONDS
seed=${RIW_FUZZ_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}

ktap_print_header
ktap_set_plan 5

echo "# seed $seed; to repeat this run: selftests/vm/run.sh --variant VARIANT --module riw.ko" \
	"-- env RIW_FUZZ_SEED=$seed RIW_FUZZ_VERBS_SECONDS=$secs selftests/run_kselftest.sh" \
	"--filter '^riw_fuzz\\.sh\$'"

riw_kmemleak_mark

riw_ns0_device "$driver" "$dev"
echo "# driver $driver, device $dev on $RIW_DEV0 $RIW_ADDR0, $secs s," \
	"timeout scale $RIW_TIMEOUT_SCALE"

# The fuzzer's own time plus 60 s, the 60 s scaled as every limit is.
limit=$(((secs + RIW_TIMEOUT_SCALE - 1) / RIW_TIMEOUT_SCALE + 60))
rc=0
riw_check "fuzz.py: $secs s of random verbs and connections, seed $seed" "$limit" \
	in0 $py "$here/verbs/fuzz.py" --seed "$seed" --seconds "$secs" "$dev" "$RIW_ADDR0" ||
	rc=$?
if [ $rc -ne 0 ]; then
	echo "# seed $seed"
	riw_state | riw_diag
fi

no_objects() {
	$py "$here/verbs/verbs.py" counts "$dev" pd=0 cq=0 qp=0 srq=0 mr=0 ctx=0 cm_id=0
}
riw_check "no objects left on $dev" 30 riw_poll 20 no_objects || true

# rping across the device, server and client on it, over loopback.
riw_check "rping -V: 10 iterations of 1000 bytes across $dev afterwards" 60 riw_ns0_rping 7174 || true

riw_check "rdma link delete $dev" 30 rdma link delete "$dev" || true

if [ -e /sys/kernel/debug/kmemleak ]; then
	riw_check "kmemleak: nothing leaked since the run began" 120 riw_kmemleak_new || true
else
	ktap_test_skip "kmemleak: nothing leaked since the run began (no kmemleak)"
fi

ktap_finished
