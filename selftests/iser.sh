# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# iSCSI Extensions for RDMA through stock tools, for the iSER suites, here or in the peer
# guest of a two-guest run (riw_peer ". selftests/iser.sh; iser_target_up ..."): the kernel's
# LIO target with its iSER transport (ib_isert), configured with targetcli (targetcli-fb),
# and the kernel's iSER initiator (ib_iser), driven by open-iscsi's iscsid and iscsiadm.
#
#   iser_target_up IQN ADDR PORT FILE MB
#                       one target IQN open to any initiator, one LUN backed by FILE (MB
#                       MiB, created), one portal on ADDR:PORT with iSER enabled: ib_isert
#                       listens through rdma_cm in the initial network namespace
#   iser_target_down    all of it removed again, targetcli's bus stopped
#   iser_initiator_up NAME
#                       iscsid runs, with open-iscsi's state in tmpfs and initiator NAME
#   iser_login IQN ADDR PORT
#                       a session over iSER (-I iser); its SCSI disk attached
#   iser_disk           the session's SCSI disk (/dev/sdX), if there is one
#   iser_logout IQN ADDR PORT
#                       the session ends and its disk goes
#   iser_initiator_down the node records forgotten, iscsid stopped, the tmpfs unmounted
#
# LIO opens a plain iSCSI/TCP listener for every portal, on the portal's address and port,
# beside the iSER one; a software RNIC shares the host's TCP ports, so the RNIC's iSER
# listener would find the port taken (riw and siw alike). The portal is therefore created
# from a network namespace of its own, where LIO's TCP listener lives (LIO opens it in the
# namespace of the process that creates the portal), with the portal's address on its
# loopback; the iSER listener stays in the initial namespace. The guest's /etc is
# read-only: targetcli's and open-iscsi's state go to tmpfs, and targetcli, which asks the
# system bus for user-space backstores, gets a bus of its own.

__iser_run=/run/riw-iser __iser_ns=riw-lio
__iser_cfg=/sys/kernel/config

__iser_tmpfs() { # DIR
	mkdir -p "$1" && { mountpoint -q "$1" || mount -t tmpfs riw-iser "$1"; }
}

iser_target_up() { # IQN ADDR PORT FILE MB
	local tpg=/iscsi/$1/tpg1
	mountpoint -q "$__iser_cfg" || mount -t configfs none "$__iser_cfg" || return
	[ -d "$__iser_cfg/target" ] || { echo "no LIO target (CONFIG_TARGET_CORE)"; return 1; }
	mkdir -p "$__iser_run" /run/dbus || return
	__iser_tmpfs /etc/rtslib-fb-target || return
	dbus-daemon --session --address="unix:path=$__iser_run/bus" --fork --nopidfile \
		--print-pid=3 3>"$__iser_run/dbus.pid" || return
	export DBUS_SYSTEM_BUS_ADDRESS=unix:path=$__iser_run/bus
	ip netns add "$__iser_ns" || return
	ip -n "$__iser_ns" link set lo up
	ip -n "$__iser_ns" addr add "$2/32" dev lo || return
	truncate -s "$5M" "$4" || return
	# Two targetcli sessions rather than one per command (each start costs seconds on a
	# debug kernel); targetcli reads the commands from stdin and goes on after one that
	# fails, so what they made is checked in configfs. The portal is made from its
	# namespace, its iSER listener from the initial one: siw opens its listening socket in
	# the namespace of the process that asks for it.
	ip netns exec "$__iser_ns" targetcli >>"$__iser_run/targetcli.log" 2>&1 <<-EOF
		set global auto_save_on_exit=false auto_add_default_portal=false
		/backstores/fileio create name=riwiser file_or_dev=$4
		/iscsi create $1
		$tpg/luns create /backstores/fileio/riwiser
		$tpg/portals create $2 $3
		$tpg set attribute authentication=0 demo_mode_write_protect=0
		$tpg set attribute generate_node_acls=1 cache_dynamic_acls=1
	EOF
	targetcli "$tpg/portals/$2:$3" enable_iser true >>"$__iser_run/targetcli.log" 2>&1
	local t=$__iser_cfg/target/iscsi/$1/tpgt_1
	[ -d "$t/lun/lun_0" ] && [ "$(cat "$t/np/$2:$3/iser" 2>/dev/null)" = 1 ] &&
		[ "$(cat "$t/attrib/generate_node_acls")" = 1 ] ||
		{ cat "$__iser_run/targetcli.log"; return 1; }
}

iser_target_down() {
	DBUS_SYSTEM_BUS_ADDRESS=unix:path=$__iser_run/bus \
		targetcli clearconfig confirm=True >/dev/null 2>&1
	[ ! -e "$__iser_run/dbus.pid" ] || kill "$(cat "$__iser_run/dbus.pid")" 2>/dev/null
	rm -f "$__iser_run/dbus.pid"
	ip netns del "$__iser_ns" 2>/dev/null
	umount /etc/rtslib-fb-target 2>/dev/null
	true
}

iser_initiator_up() { # NAME
	local conf
	conf=$(cat /etc/iscsi/iscsid.conf 2>/dev/null) || conf="node.startup = manual"
	mkdir -p /run/lock/iscsi || return
	__iser_tmpfs /etc/iscsi || return
	echo "$conf" >/etc/iscsi/iscsid.conf
	echo "InitiatorName=$1" >/etc/iscsi/initiatorname.iscsi
	iscsid
}

iser_login() { # IQN ADDR PORT
	iscsiadm -m node -o new -T "$1" -p "$2:$3" -I iser >/dev/null || return
	iscsiadm -m node -T "$1" -p "$2:$3" -I iser --login || return
	__iser_poll 30 iser_disk || return
	echo "disk $(iser_disk), session $(iscsiadm -m session)"
}

iser_disk() {
	local d
	for d in /sys/class/iscsi_session/session*/device/target*/*/block/*; do
		[ -e "$d" ] && { echo "/dev/${d##*/}"; return 0; }
	done
	return 1
}

iser_logout() { # IQN ADDR PORT
	iscsiadm -m node -T "$1" -p "$2:$3" -I iser --logout || return
	__iser_poll 30 eval '! iser_disk >/dev/null'
}

iser_initiator_down() {
	iscsiadm -m session >/dev/null 2>&1 && iscsiadm -m node --logoutall=all >/dev/null 2>&1
	pkill -x iscsid
	umount /etc/iscsi 2>/dev/null
	true
}

# As lib.sh's riw_poll, for where lib.sh is not sourced (the peer).
__iser_poll() { # SECONDS CMD...
	local end=$((SECONDS + $1 * ${RIW_TIMEOUT_SCALE:-1}))
	shift
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -lt $end ] || return 1
		sleep 0.2
	done
}
