#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# A riw port follows its netdev: state with "ip link set down/up" (and the async events),
# active MTU with the netdev's MTU, GID with its address; unregistering the netdev removes
# the device.
set -eu
. "$(dirname "$0")/lib.sh"

ktap_print_header
ktap_set_plan 9

riw_defer modprobe -r riw
riw_defer modprobe -r siw
modprobe riw
modprobe siw # its netdev notifier sees riw's devices too (shared driver id)
riw_netns_setup
in0() { ip netns exec "$RIW_NS0" "$@"; }
in0 rdma link add riw0 type riw netdev "$RIW_DEV0"

port_is() {
	rdma link show riw0/1 | grep -q "state $1 physical_state $2"
}
port_field() {
	in0 ibv_devinfo -v -d riw0 | awk -v f="$1:" '$1 == f { print $2; exit }'
}

riw_result "port ACTIVE/LINK_UP while $RIW_DEV0 is up" port_is ACTIVE LINK_UP

# ibv_asyncwatch reports the port events riw dispatches: from when its async event file
# shows among its descriptors (ip and stdbuf exec it, so it keeps their pid), the core
# queues events there.
riw_bg ip netns exec "$RIW_NS0" stdbuf -oL ibv_asyncwatch -d riw0
watch=$RIW_BG_PID
watching() {
	ls -l /proc/"$watch"/fd 2>/dev/null | grep -qF '[infinibandevent]'
}
riw_poll 20 watching || echo "# ibv_asyncwatch has not opened riw0 yet"
in0 ip link set "$RIW_DEV0" down
riw_result "port DOWN/DISABLED after ip link set down" riw_poll 5 port_is DOWN DISABLED
in0 ip link set "$RIW_DEV0" up
riw_result "port ACTIVE/LINK_UP after ip link set up" riw_poll 5 port_is ACTIVE LINK_UP
active_seen() {
	grep -q IBV_EVENT_PORT_ACTIVE "${__riw_bg_log[$watch]}"
}
riw_poll 10 active_seen || true
kill "$watch"
events=$(riw_wait "$watch" 10 || true)
echo "$events"
port_events_seen() {
	local err active
	err=$(grep -n IBV_EVENT_PORT_ERR <<<"$events" | head -1 | cut -d: -f1)
	active=$(grep -n IBV_EVENT_PORT_ACTIVE <<<"$events" | tail -1 | cut -d: -f1)
	[ -n "$err" ] && [ -n "$active" ] && [ "$err" -lt "$active" ]
}
riw_result "async events PORT_ERR then PORT_ACTIVE" port_events_seen

in0 ip link set "$RIW_DEV0" mtu 9000
riw_result "active_mtu 4096 at netdev MTU 9000" [ "$(port_field active_mtu)" = 4096 ]
in0 ip link set "$RIW_DEV0" mtu 1500
riw_result "active_mtu 1024 at netdev MTU 1500" [ "$(port_field active_mtu)" = 1024 ]

mac=$(in0 cat /sys/class/net/"$RIW_DEV0"/address)
gid=$(cat /sys/class/infiniband/riw0/ports/1/gids/0)
want=$(echo "$mac" | tr -d : | sed -E 's/^(....)(....)(....)$/\1:\2:\3:0000:0000:0000:0000:0000/')
echo "# mac $mac gid $gid"
riw_result "GID[0] is the MAC address followed by zeroes" [ "$gid" = "$want" ]

in0 ip link del "$RIW_DEV0"
no_riw0() { ! rdma link show | grep -q riw0; }
riw_result "deleting the netdev removes the device" riw_poll 5 no_riw0
riw_check "rmmod riw afterwards" 30 modprobe -r riw

ktap_finished
