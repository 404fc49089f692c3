#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# iSCSI Extensions for RDMA over riw through stock tools: the kernel's LIO target with its
# iSER transport (ib_isert), configured with targetcli (targetcli-fb), exports a file; the
# kernel's iSER initiator (ib_iser), driven by open-iscsi's iscsid and iscsiadm, logs in
# to it. Both use rdma_cm in the initial network namespace only, so target and initiator
# share one device there and the connection runs over loopback TCP. The I/O takes a kernel
# consumer's paths: fast registration, Send with Invalidate, RDMA WRITE and READ, and
# Sends from packed descriptors (iSER's own, unaligned).
#
# The target's portal needs a network namespace of its own for LIO's plain TCP listener
# (selftests/iser.sh says why); Documentation/riw.rst gives the commands.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/iser.sh"

ktap_print_header
for t in targetcli iscsid iscsiadm dbus-daemon fio; do
	command -v $t >/dev/null || riw_skip_all "$t not installed (targetcli-fb, open-iscsi, dbus)"
done
cfg=/sys/kernel/config
mountpoint -q "$cfg" || mount -t configfs none "$cfg"
[ -d "$cfg/target" ] || riw_skip_all "no LIO target (CONFIG_TARGET_CORE)"
ktap_set_plan 7

DEV=isr0 PEER=isr1 ADDR=192.0.2.30 PORT=3260
IQN=iqn.2026-11.dev.riw:selftest
tmp=$(mktemp -d)
riw_defer rm -rf "$tmp"

riw_initns_device isriw0 "$DEV" "$PEER" "$ADDR"

riw_defer iser_target_down
riw_check "LIO's iSER target (targetcli) listens on $ADDR:$PORT through riw" 60 \
	iser_target_up "$IQN" "$ADDR" "$PORT" "$tmp/img" 64 || true

riw_qps() {
	riw_qp_count isriw0
}

iser_initiator_up iqn.2026-11.dev.riw:initiator
riw_defer iser_initiator_down
login() {
	iser_login "$IQN" "$ADDR" "$PORT" || return
	echo "$(riw_qps) riw QPs (both ends)"
}
riw_check "iscsiadm logs in over iSER: session up, SCSI disk attached" 60 login || true
disk=$(iser_disk || echo /dev/null)

riw_block_checks "$disk" "$tmp/img" riw-iser

logout() {
	iser_logout "$IQN" "$ADDR" "$PORT" || return
	riw_poll 30 eval '[ "$(riw_qps)" -eq 0 ]'
}
riw_check "iscsiadm logout: the disk and every riw QP gone" 30 logout || true

riw_check "the target goes down and the riw device with it" 60 \
	eval 'iser_target_down && rdma link delete isriw0' || true

ktap_finished
