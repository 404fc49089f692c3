#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Smoke test of the harness with the stock soft-iWARP driver: a siw device on each end of the
# veth pair (siw itself autoloaded by "rdma link add"), ibv_devinfo, an rping exchange with
# data validation between the two namespaces, teardown and module unload.
set -eu
. "$(dirname "$0")/lib.sh"

ktap_print_header
ktap_set_plan 8

# The RDMA subsystem stays in its default "shared" netns mode: both devices are visible
# everywhere, and rdma_cm picks the one on the netdev a namespace routes through.
ktap_print_msg "$(rdma system show)"

if [ -d /sys/module/siw ]; then
	riw_run 30 modprobe -r siw
fi
riw_netns_setup
riw_defer modprobe -r siw

riw_check "rdma link add siw0 on $RIW_DEV0" 30 \
	ip netns exec "$RIW_NS0" rdma link add siw0 type siw netdev "$RIW_DEV0"
riw_check "siw autoloaded through rdma-link-siw" 5 test -d /sys/module/siw
riw_check "rdma link add siw1 on $RIW_DEV1" 30 \
	ip netns exec "$RIW_NS1" rdma link add siw1 type siw netdev "$RIW_DEV1"

devinfo=$(riw_run 30 ip netns exec "$RIW_NS0" ibv_devinfo -d siw0) || true
echo "$devinfo"
if grep -q 'state:.*PORT_ACTIVE' <<<"$devinfo"; then
	ktap_test_pass "ibv_devinfo -d siw0 shows an active port"
else
	ktap_test_fail "ibv_devinfo -d siw0 shows an active port"
	exit "$KSFT_FAIL"
fi

# rping's port, 7174, is listened on by a kernel socket that /proc/net/tcp lists like any
# other.
server_listening() {
	riw_tcp_listening 7174 "$RIW_NS1"
}
riw_bg ip netns exec "$RIW_NS1" rping -s -a "$RIW_ADDR1" -C 10 -S 100 -V
server=$RIW_BG_PID
riw_poll 10 server_listening || echo "# rping server not listening yet, trying anyway"
riw_check "rping -c -C 10 -S 100 -V $RIW_ADDR0 -> $RIW_ADDR1" 60 \
	ip netns exec "$RIW_NS0" rping -c -a "$RIW_ADDR1" -C 10 -S 100 -V
rc=0
riw_wait "$server" 30 || rc=$?
ktap_test_result "rping server exits cleanly" [ $rc -eq 0 ]

riw_check "rdma link delete siw0 siw1" 30 \
	sh -c 'rdma link delete siw0 && rdma link delete siw1'
riw_check "modprobe -r siw" 30 modprobe -r siw

ktap_finished
