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
# LIO opens a plain iSCSI/TCP listener for every portal, on the portal's address and port,
# beside the iSER one; a software RNIC shares the host's TCP ports, so riw's iSER listener
# would find the port taken. The portal is therefore created from a network namespace of
# its own, where LIO's TCP listener lives (LIO opens it in the namespace of the process
# that creates the portal); the iSER listener stays in the initial namespace. The same
# holds for siw. Documentation/riw.rst gives the commands.
set -eu
. "$(dirname "$0")/lib.sh"

ktap_print_header
for t in targetcli iscsid iscsiadm dbus-daemon fio; do
	command -v $t >/dev/null || riw_skip_all "$t not installed (targetcli-fb, open-iscsi, dbus)"
done
cfg=/sys/kernel/config
mountpoint -q "$cfg" || mount -t configfs none "$cfg"
[ -d "$cfg/target" ] || riw_skip_all "no LIO target (CONFIG_TARGET_CORE)"
ktap_set_plan 7

DEV=isr0 PEER=isr1 ADDR=192.0.2.30 PORT=3260 NS=riw-lio
IQN=iqn.2026-11.dev.riw:selftest
INITIATOR=iqn.2026-11.dev.riw:initiator
IMG_MB=64
tmp=$(mktemp -d)
riw_defer rm -rf "$tmp"

riw_initns_device isriw0 "$DEV" "$PEER" "$ADDR"

# The guest's /etc is read-only: open-iscsi's and targetcli's state go to tmpfs, and
# targetcli, which asks the system bus for user-space backstores, gets a bus of its own.
cp /etc/iscsi/iscsid.conf "$tmp/" 2>/dev/null || echo "node.startup = manual" >"$tmp/iscsid.conf"
for d in /etc/iscsi /etc/rtslib-fb-target; do
	mkdir -p "$d"
	mount -t tmpfs riw-iser "$d"
	riw_defer umount "$d"
done
cp "$tmp/iscsid.conf" /etc/iscsi/
echo "InitiatorName=$INITIATOR" >/etc/iscsi/initiatorname.iscsi
mkdir -p /run/lock/iscsi /run/dbus
dbus-daemon --session --address=unix:path=/run/dbus/riw-iser-bus --fork --nopidfile \
	--print-pid=3 3>"$tmp/dbus.pid"
riw_defer eval 'kill $(cat "$tmp/dbus.pid")'
export DBUS_SYSTEM_BUS_ADDRESS=unix:path=/run/dbus/riw-iser-bus
tcli() { targetcli "$@" >>"$tmp/targetcli.log" 2>&1 || { cat "$tmp/targetcli.log"; return 1; }; }

# The portal's namespace: the portal's address on its loopback, for LIO's TCP listener.
ip netns add "$NS"
riw_defer ip netns del "$NS"
ip -n "$NS" link set lo up
ip -n "$NS" addr add "$ADDR/32" dev lo

target_down() {
	targetcli clearconfig confirm=True >/dev/null 2>&1
}

tpg=/iscsi/$IQN/tpg1
target_up() {
	truncate -s "${IMG_MB}M" "$tmp/img" || return
	tcli set global auto_save_on_exit=false auto_add_default_portal=false || return
	tcli /backstores/fileio create name=riwiser file_or_dev="$tmp/img" || return
	tcli /iscsi create "$IQN" || return
	tcli "$tpg/luns" create /backstores/fileio/riwiser || return
	ip netns exec "$NS" targetcli "$tpg/portals" create "$ADDR" "$PORT" \
		>>"$tmp/targetcli.log" 2>&1 || return
	# ib_isert listens through rdma_cm: riw's listener takes the port in this namespace.
	tcli "$tpg/portals/$ADDR:$PORT" enable_iser true || return
	tcli "$tpg" set attribute authentication=0 demo_mode_write_protect=0 \
		generate_node_acls=1 cache_dynamic_acls=1 || return
	[ "$(cat "$cfg/target/iscsi/$IQN/tpgt_1/np/$ADDR:$PORT/iser")" = 1 ]
}
riw_defer target_down
riw_check "LIO's iSER target (targetcli) listens on $ADDR:$PORT through riw" 60 \
	target_up || true

riw_qps() {
	riw_qp_count isriw0
}

# The SCSI disk of the session.
iser_disk() {
	local d
	for d in /sys/class/iscsi_session/session*/device/target*/*/block/*; do
		[ -e "$d" ] && { echo "/dev/${d##*/}"; return 0; }
	done
	return 1
}

iscsid
riw_defer pkill -x iscsid
login() {
	iscsiadm -m node -o new -T "$IQN" -p "$ADDR:$PORT" -I iser >/dev/null || return
	iscsiadm -m node -T "$IQN" -p "$ADDR:$PORT" -I iser --login || return
	riw_poll 30 iser_disk || return
	echo "disk $(iser_disk), session $(iscsiadm -m session), $(riw_qps) riw QPs (both ends)"
}
riw_defer iscsiadm -m node -T "$IQN" -p "$ADDR:$PORT" -I iser --logout
riw_check "iscsiadm logs in over iSER: session up, SCSI disk attached" 60 login || true
disk=$(iser_disk || echo /dev/null)

riw_block_checks "$disk" "$tmp/img" riw-iser

logout() {
	iscsiadm -m node -T "$IQN" -p "$ADDR:$PORT" -I iser --logout || return
	riw_poll 30 eval '! iser_disk >/dev/null' || return
	riw_poll 30 eval '[ "$(riw_qps)" -eq 0 ]'
}
riw_check "iscsiadm logout: the disk and every riw QP gone" 30 logout || true

riw_check "the target goes down and the riw device with it" 60 \
	eval 'target_down && rdma link delete isriw0' || true

ktap_finished
