#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# rdma-core's own pyverbs test suite (python3-pyverbs ships it in /usr/share/doc/rdma-core/tests,
# run by its run_tests.py) on a riw device, against the same suite on a siw device in the same
# guest as the reference. One KTAP result per pyverbs test, naming riw's outcome and siw's:
#
#   riw passes                     ok
#   both skip                      ok # SKIP riw's reason
#   both fail                      ok # XFAIL siw: siw's error (the test does not fit iWARP)
#   riw does worse than siw        not ok (a test passing on siw must pass on riw, one
#                                  skipping on siw may only skip or pass on riw)
#
# Each device sits alone on its end of the veth pair (siw on veth1 in namespace 1 first, then
# riw on veth0 in namespace 0), and the suite runs in that device's namespace. The tests draw
# QP sizes and flags at random: seeded per test, both runs make the same choices. Skipping
# on both: the vendor tests (mlx5, efa), and the rdma_cm tests, which find the device's
# address under /sys/class/infiniband/DEV/device/net/, absent for a device on a veth.
# It loads siw, so check.sh runs it in a guest with the siw suites (siw trips lockdep).
set -eu
. "$(dirname "$0")/lib.sh"

here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
helper=$here/pyverbs/pyverbs_tests.py
siw_dev=pvs0 riw_dev=pvr0
# Each run's limit, times the timeout scale; the whole script has settings' 900 s.
: "${RIW_PYVERBS_LIMIT:=40}"

ktap_print_header
[ -d /usr/share/doc/rdma-core/tests ] ||
	riw_skip_all "no /usr/share/doc/rdma-core/tests (python3-pyverbs)"
tmp=$(mktemp -d)
riw_defer rm -rf "$tmp"
tests=$($py "$helper" unpack "$tmp")
mapfile -t ids < <($py "$helper" list "$tests")
ktap_set_plan ${#ids[@]}

riw_pair_setup riw siw
in0() { ip netns exec "$RIW_NS0" "$@"; }
in1() { ip netns exec "$RIW_NS1" "$@"; }

# run_tests.py's arguments: the device, its port and the GID of its netdev's MAC.
pyverbs() { # NS DEV RESULTS
	ip netns exec "$1" $py "$helper" run "$tests" "$3" --dev "$2" --port 1 --gid 0
}

echo "# reference: siw device $siw_dev on $RIW_DEV1 ($RIW_ADDR1); timeout scale $RIW_TIMEOUT_SCALE"
in1 rdma link add "$siw_dev" type siw netdev "$RIW_DEV1"
riw_defer rdma link delete "$siw_dev"
# siw's own failures show in the results below; its log only ends here.
rc=0
riw_run "$RIW_PYVERBS_LIMIT" pyverbs "$RIW_NS1" "$siw_dev" "$tmp/siw.results" \
	>"$tmp/siw.log" || rc=$?
tail -n 4 "$tmp/siw.log"
[ $rc -ne 124 ] || riw_state | riw_diag
rdma link delete "$siw_dev" 2>/dev/null || true

echo "# riw device $riw_dev on $RIW_DEV0 ($RIW_ADDR0)"
in0 rdma link add "$riw_dev" type riw netdev "$RIW_DEV0"
riw_defer rdma link delete "$riw_dev"
rc=0
riw_run "$RIW_PYVERBS_LIMIT" pyverbs "$RIW_NS0" "$riw_dev" "$tmp/riw.results" || rc=$?
[ $rc -ne 124 ] || riw_state | riw_diag

set -f # reasons are printed unquoted by ktap_helpers.sh
while IFS=$'\t' read -r verdict id r s why; do
	desc="$id: riw $r, siw $s"
	case $verdict in
	pass) ktap_test_pass "$desc" ;;
	skip) __ktap_test ok "$desc" "SKIP $why"; KTAP_CNT_SKIP=$((KTAP_CNT_SKIP + 1)) ;;
	xfail) __ktap_test ok "$desc" "XFAIL siw: $why"; KTAP_CNT_PASS=$((KTAP_CNT_PASS + 1)) ;;
	*)
		echo "# $id: $why"
		ktap_test_fail "$desc"
		;;
	esac
done < <($py "$helper" compare "$tmp/siw.results" "$tmp/riw.results" "$tests")

ktap_finished
