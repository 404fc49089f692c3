#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# NVMe over Fabrics over riw: the kernel's NVMe/RDMA target (nvmet-rdma) exports a file
# through a riw device and the kernel's NVMe/RDMA host (nvme-rdma) connects to it with
# stock nvme-cli. Both use rdma_cm in the initial network namespace only, so host and
# target share one device there and the connections run over loopback TCP. The I/O takes
# every path of a kernel consumer: fast registration, Send with Invalidate, RDMA WRITE,
# and RDMA READ with local invalidate (the rdma_rw API's Reads on iWARP). Then the link
# goes down under I/O: the host reconnects once it is back, the I/O completes and
# verifies, and what was written before reads back intact.
#
# Against siw there is no test here: with both ends in the initial namespace, each on its
# own device, the connection runs over loopback and the listener, bound to its device as
# on an RNIC, does not see it (siw's neither). That needs two machines.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nvmet.sh"

ktap_print_header
command -v nvme >/dev/null || riw_skip_all "nvme-cli not installed"
command -v fio >/dev/null || riw_skip_all "fio not installed"
cfg=/sys/kernel/config
if [ ! -d "$cfg/nvmet" ]; then
	mountpoint -q "$cfg" || mount -t configfs none "$cfg"
	[ -d "$cfg/nvmet" ] || riw_skip_all "no NVMe target (CONFIG_NVME_TARGET_RDMA)"
fi
ktap_set_plan 9

DEV=nvr0 PEER=nvr1 ADDR=192.0.2.10 PORT=4420
NQN=nqn.2026-11.dev.riw:selftest
HOSTNQN=nqn.2014-08.org.nvmexpress:uuid:6a1d3e0c-6d1e-4e34-9b8e-72a3c1f0b0a1
HOSTID=6a1d3e0c-6d1e-4e34-9b8e-72a3c1f0b0a1
IMG_MB=64
tmp=$(mktemp -d)
riw_defer rm -rf "$tmp"

riw_initns_device nvriw0 "$DEV" "$PEER" "$ADDR"

target_up() {
	nvmet_up "$NQN" "$ADDR" "$PORT" "$tmp/img" "$IMG_MB"
}

target_down() {
	nvmet_down "$NQN"
}

riw_defer target_down
riw_check "nvmet-rdma listens on $ADDR:$PORT through riw" 60 target_up || true

# The block device of the connected controller.
nvme_blockdev() {
	local b
	for b in /sys/block/nvme*; do
		[ -e "$b" ] || continue
		if [ "$(cat "$b/device/subsysnqn" 2>/dev/null)" = "$NQN" ]; then
			echo "/dev/${b##*/}"
			return 0
		fi
	done
	return 1
}

riw_qps() {
	riw_qp_count nvriw0
}

# (The functions below run in `||` lists, where set -e does not apply: each step checks.)
connect() {
	# Back within a second of the target, and lost only after a minute without it.
	modprobe nvme-rdma || return
	nvme connect -t rdma -a "$ADDR" -s "$PORT" -n "$NQN" \
		--hostnqn="$HOSTNQN" --hostid="$HOSTID" --nr-io-queues=2 --queue-size=32 \
		--reconnect-delay=1 --ctrl-loss-tmo=$((60 * RIW_TIMEOUT_SCALE)) || return
	riw_poll 30 nvme_blockdev || return
	echo "block device $(nvme_blockdev), $(riw_qps) riw QPs (admin and I/O queues, both ends)"
}
riw_defer nvme disconnect -n "$NQN"
riw_check "nvme connect over riw: admin and I/O queues up, namespace attached" 30 \
	connect || true
blk=$(nvme_blockdev || echo /dev/null)

zero_copy=/sys/class/infiniband/nvriw0/ports/1/hw_counters/zero_copy_sends
zero_copy_before=$(cat $zero_copy)
riw_block_checks "$blk" "$tmp/img" riw-nvme
# The target reads what the host writes with RDMA Reads, which the host answers from its
# fast-registration regions: those of 16 KiB or more hand their pages to TCP uncopied.
riw_check "the host's Read Responses of 16 KiB or more went without a copy" 10 \
	eval '[ $(($(cat $zero_copy) - zero_copy_before)) -gt 0 ]' || true

# A TCP connection that reaches nvmet's listener while the link is down is reset at once,
# not kept for an MPA exchange.
reset_at_once() {
	local out
	out=$(timeout 5 bash -c 'exec 3<>"/dev/tcp/$0/$1" && cat <&3' "$ADDR" "$PORT" 2>&1)
	echo "a TCP connection to the listener: ${out##*: }"
	[[ $out == *"reset by peer"* ]]
}

# The link goes down while fio writes and verifies: riw ends the connections, the host's
# controller reconnects (it tries every second) once the link is back, not before, and
# fio, whose I/O waited meanwhile, completes and verifies. 16 MiB written and synced
# before, beyond fio's range, read back intact afterwards.
link_lost() {
	local state=/sys/block/${blk#/dev/}/device/state
	riw_writes_start "$blk" riw-nvme-link || return
	riw_flowing nvriw0 200 || return
	ip link set "$DEV" down || return
	riw_poll 60 eval '[ "$(cat "$state")" != live ]' || return
	echo "link down: controller $(cat "$state")"
	# No connection starts on a device whose link is down (here it would run over
	# loopback).
	sleep 3
	[ "$(cat "$state")" != live ] || { echo "reconnected with the link down"; return 1; }
	dmesg | grep -q 'rdma_connect_locked failed (-100)' ||
		{ echo "nvme-rdma's reconnects were not refused with ENETDOWN"; return 1; }
	reset_at_once || return
	ip link set "$DEV" up || return
	riw_poll 60 eval '[ "$(cat "$state")" = live ]' || return
	echo "link up: controller live again"
	riw_writes_end "$blk" riw-nvme-link
}
riw_check "link down under I/O: no reconnect until it is up, fio verifies, earlier data intact" 300 \
	link_lost || true

disconnect() {
	nvme disconnect -n "$NQN" || return
	riw_poll 30 eval '! nvme_blockdev >/dev/null' || return
	riw_poll 30 eval '[ "$(riw_qps)" -eq 0 ]'
}
riw_check "nvme disconnect: the namespace and every riw QP gone" 30 disconnect || true

riw_check "the target goes down and the riw device with it" 60 \
	eval 'target_down && rdma link delete nvriw0' || true

ktap_finished
