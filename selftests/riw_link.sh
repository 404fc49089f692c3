#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# rdma link add/delete of riw devices: several at once, beside siw, and every bad request
# refused with a clear error and nothing left behind.
set -eu
. "$(dirname "$0")/lib.sh"

ktap_print_header
ktap_set_plan 14

riw_defer modprobe -r riw
riw_defer modprobe -r siw
modprobe riw
modprobe siw
riw_netns_setup
in0=(ip netns exec "$RIW_NS0")
in1=(ip netns exec "$RIW_NS1")

# A third and fourth netdev in the first namespace, for several devices at once.
"${in0[@]}" ip link add riwtest2 type veth peer name riwtest3
"${in0[@]}" ip link set riwtest2 up
"${in0[@]}" ip link set riwtest3 up

riw_check "add riw0 on $RIW_DEV0" 30 "${in0[@]}" rdma link add riw0 type riw netdev "$RIW_DEV0"
riw_check "add riw1 on $RIW_DEV1" 30 "${in1[@]}" rdma link add riw1 type riw netdev "$RIW_DEV1"
riw_check "add riw2 on riwtest2" 30 "${in0[@]}" rdma link add riw2 type riw netdev riwtest2
riw_check "add siw3 beside them" 30 "${in0[@]}" rdma link add siw3 type siw netdev riwtest3

links=$(rdma link show)
echo "$links" | riw_diag
count=$(grep -cE '^link (riw0|riw1|riw2|siw3)/1 ' <<<"$links" || true)
riw_result "rdma link lists riw0 riw1 riw2 siw3" [ "$count" -eq 4 ]

# refused: each must fail with the right error and leave nothing behind
refused() {
	local desc=$1 want=$2 out
	shift 2
	if out=$("$@" 2>&1); then
		echo "# unexpectedly succeeded: $*"
		ktap_test_fail "$desc"
		return
	fi
	echo "# $out"
	riw_result "$desc" grep -q "$want" <<<"$out"
}
refused "nonexistent netdev: No such device" "No such device" \
	"${in0[@]}" rdma link add riw9 type riw netdev nosuchdev
refused "duplicate name: File exists" "File exists" \
	"${in0[@]}" rdma link add riw0 type riw netdev riwtest3
refused "over-long name: Invalid argument" "Invalid argument" \
	"${in0[@]}" rdma link add "riw$(printf 'x%.0s' {1..70})" type riw netdev riwtest3
refused "second riw device on a netdev: File exists" "File exists" \
	"${in0[@]}" rdma link add riw9 type riw netdev "$RIW_DEV0"
refused "riw device on a netdev with siw: File exists" "File exists" \
	"${in0[@]}" rdma link add riw9 type riw netdev riwtest3
refused "siw device on a netdev with riw: File exists" "File exists" \
	"${in0[@]}" rdma link add siw9 type siw netdev "$RIW_DEV0"
refused "non-Ethernet netdev (lo): Invalid argument" "Invalid argument" \
	"${in0[@]}" rdma link add riw9 type riw netdev lo

riw_check "delete riw0 riw1 riw2 siw3" 30 \
	sh -c 'rdma link delete riw0 && rdma link delete riw1 && rdma link delete riw2 &&
		rdma link delete siw3'
no_device() { [ -z "$(rdma link show)" ]; }
riw_result "no RDMA device left" no_device

ktap_finished
