#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# riw.ko loads and unloads cleanly, repeatedly, with and without siw beside it; "rdma link
# add ... type riw" autoloads it; rmmod removes the devices it still has; a device goes away
# (link delete, rmmod) even while a process holds it with mapped rings; rmmod waits for
# an unregistration its netdev queued.
set -eu
. "$(dirname "$0")/lib.sh"

ktap_print_header
ktap_set_plan 12

riw_defer modprobe -r riw
riw_defer modprobe -r siw
modprobe -r riw siw 2>/dev/null || true

# Rounds of each loop below; make check-long (RIW_LONG) runs more.
ROUNDS=5
[ -z "${RIW_LONG:-}" ] || ROUNDS=20
load_unload() {
	local i
	for ((i = 0; i < ROUNDS; i++)); do
		modprobe riw && modprobe -r riw || return 1
	done
	! [ -d /sys/module/riw ]
}
riw_check "modprobe/rmmod riw $ROUNDS times" 120 \
	bash -c "ROUNDS=$ROUNDS; $(declare -f load_unload); load_unload"

modprobe siw
riw_check "modprobe/rmmod riw $ROUNDS times with siw loaded" 120 \
	bash -c "ROUNDS=$ROUNDS; $(declare -f load_unload); load_unload"
modprobe -r siw

riw_netns_setup
riw_check "rdma link add autoloads riw (alias rdma-link-riw)" 30 \
	ip netns exec "$RIW_NS0" rdma link add riw0 type riw netdev "$RIW_DEV0"
riw_result "riw is loaded" [ -d /sys/module/riw ]

ip netns exec "$RIW_NS1" rdma link add riw1 type riw netdev "$RIW_DEV1"
riw_check "rmmod riw with two devices present" 60 modprobe -r riw
no_riw_device() { ! rdma link show | grep -q riw; }
riw_result "rmmod removed every riw device" no_riw_device

# A netdev that goes away unregisters its device from a work item; rmmod right after it
# must wait for that work to leave riw's code.
queued_then_rmmod() {
	for _ in $(seq "$ROUNDS"); do
		modprobe riw || return 1
		ip link add riwq0 type veth peer name riwq1 || return 1
		rdma link add riwq type riw netdev riwq0 || return 1
		ip link del riwq0
		modprobe -r riw || return 1
	done
}
riw_check "rmmod riw right after its netdev went away, $ROUNDS times" 120 \
	bash -c "ROUNDS=$ROUNDS; $(declare -f queued_then_rmmod); queued_then_rmmod"
riw_result "no riw device left behind" no_riw_device

# A process holding objects of every type (and their rings mapped) must not pin the device
# or the module: the core disassociates it, its later calls fail with EIO.
holder_ready() { [ -e "$RIW_OUT/hold.ready" ]; }
start_holder() {
	rm -f "$RIW_OUT/hold.ready"
	riw_bg ip netns exec "$RIW_NS0" python3 "$(dirname "$0")/verbs/verbs.py" hold riw0 \
		"$RIW_OUT/hold.ready"
	riw_poll 30 holder_ready
}
ip netns exec "$RIW_NS0" rdma link add riw0 type riw netdev "$RIW_DEV0"
start_holder || echo "# the holder did not get ready"
riw_check "rdma link delete while a process holds the device" 30 rdma link delete riw0
riw_result "the device is gone" no_riw_device
ip netns exec "$RIW_NS0" rdma link add riw0 type riw netdev "$RIW_DEV0"
start_holder || echo "# the holder did not get ready"
riw_check "rmmod riw while a process holds a device" 30 modprobe -r riw
riw_result "the module is gone" test ! -d /sys/module/riw

ktap_finished
