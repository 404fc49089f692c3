#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# riw between two machines: this guest and its peer guest, joined by a virtio-net link
# (selftests/vm/pair.sh), each with its own kernel, so nothing is delivered locally as over
# veth. For each pairing of drivers here and there (riw and siw, siw and riw; riw and riw
# too in make check-long), stock programs run across the link with riw as server and as
# client: rping -V at 23 B and 64 KiB, and three kernel storage protocols with their stock
# tools, initiator or client here and target or server there, fio verifying on each: the
# NVMe/RDMA host against nvmet-rdma, open-iscsi's iSER initiator against LIO's iSER target
# (targetcli), and the cifs client against ksmbd over SMB Direct (make check: NVMe-oF with
# riw as host only). make check-long adds rping sizes, ucmatose and perftest over rdma_cm,
# and iSER and SMB Direct. Then, riw at both ends: (make check-long: the link goes down and
# up under rping -V; the target's device is deleted and riw unloaded under NVMe writes, and
# brought back, the host reconnecting;) and the peer guest is powered off under rping -V
# (and NVMe writes in make check-long), after which this side ends what it had (QPs and
# cm_ids gone, the controller given up, no splat, no leak) and deletes its device.
#
# Skipped outside a two-guest run (make check runs it in one). make check keeps the broad,
# fast part; NVMe-oF failures under I/O are in riw_nvme.sh too, in one guest.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nvmet.sh"
. "$(dirname "$0")/iser.sh"
. "$(dirname "$0")/smb.sh"

ktap_print_header
[ -n "${RIW_PEER:-}" ] || riw_skip_all "no peer guest (selftests/vm/kselftest.sh --pair)"
# riw against siw both ways; riw to riw across the link runs in the checks after them
# (link and peer lost), and the programs riw to riw in make check-long.
PAIRINGS=("riw siw" "siw riw")
# The storage protocols of each pairing: in make check NVMe-oF with riw as host (riw_nvme.sh
# has riw in both roles against itself); in make check-long all three, both ways.
STORAGE=("nvme" "")
# Per pairing: rping sizes with where the client runs, and perftest runs; make check-long
# runs more of them, and ucmatose both ways.
RPINGS=("23 here" "65535 peer") PERFTESTS=() UCMATOSE=0
if [ -n "${RIW_LONG:-}" ]; then
	PAIRINGS=("riw riw" "${PAIRINGS[@]}")
	STORAGE=("nvme iser smb" "nvme iser smb" "nvme iser smb")
	RPINGS+=("4096 peer" "65535 here")
	PERFTESTS=("ib_read_bw -s 65536" "ib_send_lat -s 64" "ib_write_bw -s 65536"
		"ib_write_lat -s 64" "ib_read_lat -s 64")
	UCMATOSE=2
fi
planned=0
for protocols in "${STORAGE[@]}"; do
	read -ra protocols <<<"$protocols"
	planned=$((planned + ${#RPINGS[@]} + ${#PERFTESTS[@]} + UCMATOSE + 2 + 2 * ${#protocols[@]}))
done
# make check-long: the link flap, and the target's device lost under I/O.
long_checks=0
[ -z "${RIW_LONG:-}" ] || long_checks=2
# MiB each storage check writes and reads back, and fio writes: data crossing the link
# is slow on the debug kernel, and make check-long moves more.
IO_MB=4
[ -z "${RIW_LONG:-}" ] || IO_MB=8
ktap_set_plan $((planned + 5 + long_checks))

tmp=$(mktemp -d)
riw_defer rm -rf "$tmp"
ip link set "$RIW_LINK" up
ip addr add "$RIW_LINK_ADDR" dev "$RIW_LINK"
riw_defer ip addr flush dev "$RIW_LINK"
HERE=${RIW_LINK_ADDR%/*}
riw_result "the peer guest answers over the link" riw_peer_begin ||
	riw_skip_all "the peer does not answer"
riw_defer riw_peer "pkill -KILL -x 'rping|ucmatose|ib_write_bw|ib_read_bw|ib_send_lat'"
# Leaks in the peer count from here, as ours do (run_kselftest.sh).
riw_peer "echo clear >/sys/kernel/debug/kmemleak 2>/dev/null; true" >/dev/null

NQN=nqn.2026-11.dev.riw:two-guests PORT=4420
IQN=iqn.2026-11.dev.riw:two-guests ISCSI_PORT=3260 SHARE=/tmp/riw-share
iser_initiator_up iqn.2026-11.dev.riw:two-guests-initiator
riw_defer iser_initiator_down
mkdir -p "$tmp/mnt"
riw_defer umount -l "$tmp/mnt"

# The device of DRIVER on the link here (l0) and there (p0).
devices_up() { # LOCAL_DRIVER PEER_DRIVER
	rdma link add l0 type "$1" netdev "$RIW_LINK" || return
	riw_peer "rdma link add p0 type $2 netdev eth0"
}

devices_down() {
	rdma link delete l0 2>/dev/null
	riw_peer "rdma link delete p0 2>/dev/null; true"
	riw_poll 30 eval '[ ! -e /sys/class/infiniband/l0 ]'
}

# Waits in the peer until something listens on TCP port PORT there.
peer_listens() { # PORT
	riw_peer "timeout $((20 * RIW_TIMEOUT_SCALE)) bash -c 'until ss -Hltn \"sport = :$1\" | grep -q .; do sleep 0.2; done'"
}

# What both sides have: TCP sockets with their queues, QPs, cm_ids, riw's endpoints.
both_states() {
	local state="ss -tanmoi; rdma res show qp; rdma res show cm_id
		grep -H . /sys/kernel/debug/riw/*/endpoints 2>/dev/null"
	echo "here:"
	bash -c "$state"
	echo "in the peer:"
	riw_peer "$state"
}

# siw on the passive side hands the socket from its connection manager to the QP only
# after its MPA reply has gone (siw_accept()): what the initiator sends as soon as the reply
# arrives, if it arrives before that, stays in siw's socket unread (its connection manager
# ignores it), and the connection hangs. A vCPU of siw's guest held up by the host's other
# load makes room for that. True if the peer's siw has left data unread on PORT.
siw_left_unread() { # PORT
	[ "$there" = siw ] &&
		riw_peer "ss -Htn 'sport = :$1' | awk '\$2 > 0 { found = 1 } END { exit !found }'"
}

# CMD, run here, connects to a server of the kernel's (a storage target) on PORT in the peer.
# The first command a ULP sends there can meet siw's race above, and then nothing answers it
# until the ULP's own timeout fails the connect (nvme-rdma: 60 s). Seen as data left unread
# in siw's socket for a second while CMD waits, that is said, and a CMD that failed runs
# once more.
connect_peer_server() { # PORT CMD...
	local port=$1 pid raced= rc=0
	shift
	"$@" &
	pid=$!
	while kill -0 $pid 2>/dev/null; do
		if [ -z "$raced" ] && siw_left_unread "$port" && sleep 1 &&
			siw_left_unread "$port"; then
			raced=1
			echo "siw left what came after its MPA reply unread (its accept race)"
			both_states
		fi
		sleep 1
	done
	wait $pid || rc=$?
	[ $rc -ne 0 ] && [ -n "$raced" ] || return $rc
	echo "failed after siw's accept race: once more"
	"$@"
}

# SERVER runs in the peer, CLIENT here once the server listens on PORT; both must succeed
# within SECONDS. A client still running then is shown with both sides' state, and killed;
# tried once more if siw's race above caused it.
peer_serves() { # PORT SECONDS SERVER CLIENT...
	local port=$1 secs=$2 server=$3 pid rc=0
	shift 3
	riw_peer_bg server "$server" || return
	peer_listens "$port" || { riw_peer_wait server 5; return 1; }
	"$@" >"$tmp/client.log" 2>&1 &
	pid=$!
	if ! timeout $((secs * RIW_TIMEOUT_SCALE)) tail --pid=$pid -f /dev/null; then
		echo "client still running after $((secs * RIW_TIMEOUT_SCALE)) s: $*"
		both_states
		if [ "$port" -lt 8000 ] && siw_left_unread "$port"; then
			echo "siw left what came after its MPA reply unread (its accept race): once more"
			kill -KILL $pid
			wait $pid || true
			again "$port" "$secs" "$server" "$@"
			return
		fi
		kill -KILL $pid
	fi
	wait $pid || rc=$?
	cat "$tmp/client.log"
	# perftest's client is now and then refused by a server whose port listens (as in
	# make bench, with siw's servers and riw's alike).
	if [ $rc -ne 0 ] && [ "$port" -lt 8000 ] &&
		grep -qE "RDMA_CM_EVENT_REJECTED|Connection refused" "$tmp/client.log"; then
		echo "refused by a listening server: once more"
		again "$port" "$secs" "$server" "$@"
		return
	fi
	[ $rc -eq 0 ] || { riw_peer_wait server 5; return $rc; }
	riw_peer_wait server "$secs"
}

# peer_serves once more, on a port of its own.
again() { # PORT SECONDS SERVER CLIENT...
	local port=$1 secs=$2 server=$3
	shift 3
	riw_peer "pkill -KILL -f -- '-p $port'; true"
	peer_serves $((port + 1000)) "$secs" "${server/-p $port/-p $((port + 1000))}" \
		"${@/#$port/$((port + 1000))}"
}

# SERVER runs here, CLIENT in the peer once the server listens on PORT.
peer_connects() { # PORT SECONDS CLIENT SERVER...
	local port=$1 secs=$2 client=$3 pid
	shift 3
	riw_bg "$@"
	pid=$RIW_BG_PID
	riw_poll 20 riw_tcp_listening "$port" || { riw_wait "$pid" 1; return 1; }
	riw_peer "$client" || { riw_wait "$pid" 5; return 1; }
	riw_wait "$pid" "$secs"
}

nvme_blockdev() {
	local b
	for b in /sys/block/nvme*; do
		[ "$(cat "$b/device/subsysnqn" 2>/dev/null)" = "$NQN" ] || continue
		echo "/dev/${b##*/}"
		return 0
	done
	return 1
}

# IO_MB MiB written and read back, then fio writing at random, every block verified.
block_io() { # DISK
	head -c $((IO_MB << 20)) /dev/urandom >"$tmp/pattern"
	dd if="$tmp/pattern" of="$1" bs=1M oflag=direct status=none || return
	dd if="$1" of="$tmp/back" bs=1M count=$IO_MB iflag=direct status=none || return
	cmp "$tmp/pattern" "$tmp/back" || return
	(cd "$tmp" && fio --name=two-guests --filename="$1" --direct=1 --ioengine=libaio \
		--rw=randwrite --bsrange=4k-128k --iodepth=16 --size=${IO_MB}M --verify=crc32c \
		--verify_fatal=1)
}

nvme_io() {
	local blk
	modprobe nvme-rdma || return
	connect_peer_server "$PORT" nvme connect -t rdma -a "$RIW_PEER" -s "$PORT" -n "$NQN" \
		--nr-io-queues=2 --queue-size=32 || return
	riw_poll 30 nvme_blockdev || return
	blk=$(nvme_blockdev)
	echo "block device $blk"
	block_io "$blk" || return
	nvme disconnect -n "$NQN" || return
	riw_poll 30 eval '! nvme_blockdev >/dev/null'
}

iser_io() {
	iser_login "$IQN" "$RIW_PEER" "$ISCSI_PORT" || return
	block_io "$(iser_disk)" || return
	iser_logout "$IQN" "$RIW_PEER" "$ISCSI_PORT"
}

# Through the mount: files made, renamed and removed; fio's verified writes; IO_MB MiB copied
# in, the same on the server, and read back over the wire; then umount, the cm_id gone.
smb_io() {
	local mnt=$tmp/mnt
	connect_peer_server 5445 smb_mount "$RIW_PEER" "$mnt" || return
	echo riw >"$mnt/created" && mv "$mnt/created" "$mnt/renamed" || return
	mkdir "$mnt/dir" && [ "$(cat "$mnt/renamed")" = riw ] || return
	[ "$(riw_peer "ls $SHARE")" = "$(printf 'dir\nrenamed')" ] || return
	rm "$mnt/renamed" && rmdir "$mnt/dir" || return
	(cd "$tmp" && fio --name=two-guests-smb --directory="$mnt" --direct=1 \
		--ioengine=libaio --rw=randwrite --bsrange=4k-128k --iodepth=16 --numjobs=1 \
		--size=${IO_MB}M --verify=crc32c --verify_fatal=1 --group_reporting) || return
	rm -f "$mnt"/two-guests-smb.*
	head -c $((IO_MB << 20)) /dev/urandom >"$tmp/pattern"
	dd if="$tmp/pattern" of="$mnt/big" bs=1M oflag=direct status=none || return
	[ "$(riw_peer "sha256sum <$SHARE/big")" = "$(sha256sum <"$tmp/pattern")" ] || return
	echo 3 >/proc/sys/vm/drop_caches
	cmp "$tmp/pattern" "$mnt/big" || return
	umount "$mnt" || return
	riw_poll 30 eval '! rdma res show cm_id | grep -q "comm \[cifs\]"'
}

# Each server gets a port of its own: a listener just closed may still show in ss.
p=7600
for i in "${!PAIRINGS[@]}"; do
	read -r here there <<<"${PAIRINGS[i]}"
	storage=" ${STORAGE[i]} "
	with="$here here, $there in the peer"
	riw_check "$with: devices on the link" 60 devices_up "$here" "$there" || true
	for run in "${RPINGS[@]}"; do
		read -r size client <<<"$run"
		p=$((p + 1))
		if [ "$client" = here ]; then
			riw_check "$with: rping -V $size B, client here" 60 peer_serves $p 20 \
				"rping -s -a $RIW_PEER -p $p -C 20 -S $size -V" \
				rping -c -a "$RIW_PEER" -p $p -C 20 -S "$size" -V || true
		else
			riw_check "$with: rping -V $size B, client in the peer" 40 peer_connects $p 20 \
				"rping -c -a $HERE -p $p -C 20 -S $size -V" \
				rping -s -a "$HERE" -p $p -C 20 -S "$size" -V || true
		fi
	done
	if [ "$UCMATOSE" -gt 0 ]; then
		# ucmatose's server sends first: as responder without peer-to-peer mode riw holds
		# it until the client's first FPDU or a grace period, so siw's client never reads
		# an FPDU together with the MPA reply (which it refuses).
		p=$((p + 1))
		riw_check "$with: ucmatose, client here" 60 peer_serves $p 20 \
			"ucmatose -p $p -C 20" ucmatose -s "$RIW_PEER" -p $p -C 20 || true
		p=$((p + 1))
		riw_check "$with: ucmatose, client in the peer" 40 peer_connects $p 20 \
			"ucmatose -s $HERE -p $p -C 20" ucmatose -p $p -C 20 || true
	fi
	for t in "${PERFTESTS[@]}"; do
		p=$((p + 1))
		riw_check "$with: ${t% -s *} -R, ${t##* } B" 60 peer_serves $p 20 \
			"$t -R -d p0 -p $p -n 200" $t -R -d l0 -p $p -n 200 "$RIW_PEER" || true
	done
	if [[ $storage == *" nvme "* ]]; then
		riw_check "$with: nvmet-rdma listens in the peer" 60 riw_peer \
			". selftests/nvmet.sh && nvmet_up $NQN $RIW_PEER $PORT /tmp/nvmet.img 64" || true
		riw_check "$with: nvme-rdma here: $IO_MB MiB read back, fio verify, disconnect" 200 \
			nvme_io || true
		riw_peer ". selftests/nvmet.sh; nvmet_down $NQN" || true
	fi
	if [[ $storage == *" iser "* ]]; then
		riw_check "$with: LIO's iSER target (targetcli) listens in the peer" 90 riw_peer \
			". selftests/iser.sh && iser_target_up $IQN $RIW_PEER $ISCSI_PORT /tmp/iser.img 64" ||
			true
		riw_check "$with: iSER initiator here: login, $IO_MB MiB read back, fio verify, logout" 120 \
			iser_io || true
		riw_peer ". selftests/iser.sh; iser_target_down" || true
	fi
	if [[ $storage == *" smb "* ]]; then
		riw_check "$with: ksmbd serves SMB Direct in the peer" 60 riw_peer \
			"mkdir -p $SHARE && . selftests/smb.sh && smb_server_up $SHARE &&
			timeout 30 bash -c 'until ss -Hltn \"sport = :5445\" | grep -q .; do sleep 0.2; done'" ||
			true
		riw_check "$with: cifs here over SMB Direct: file operations, fio verify, $IO_MB MiB copy, umount" \
			180 smb_io || true
		umount -l "$tmp/mnt" 2>/dev/null || true
		riw_peer ". selftests/smb.sh; smb_server_down; rm -rf $SHARE" || true
	fi
	riw_check "$with: devices deleted" 60 devices_down || true
done

# riw at both ends from here on.
riw_check "riw here and in the peer again" 60 devices_up riw riw || true

# rping -V runs until killed; the link goes down for a few seconds and comes back: the
# connection either survives (TCP retransmits) and rping goes on verifying, or ends with an
# error; what matters is what comes after: nothing left, and a new connection works.
link_flap() {
	local pid
	riw_peer_bg flap "rping -s -a $RIW_PEER -p 7700 -S 65535 -V" || return
	peer_listens 7700 || return
	riw_bg rping -c -a "$RIW_PEER" -p 7700 -S 65535 -V
	pid=$RIW_BG_PID
	riw_flowing l0 || return
	ip link set "$RIW_LINK" down
	sleep 3
	ip link set "$RIW_LINK" up
	sleep 3
	kill -INT "$pid" 2>/dev/null || true
	riw_wait "$pid" 30 || true
	riw_peer "pkill -INT -x rping; sleep 1; pkill -KILL -x rping; true"
	riw_poll 30 eval '[ "$(riw_qp_count l0)" -eq 0 ]' || return
	riw_peer "timeout 60 bash -c 'until [ \"\$(rdma res show qp link p0/1 | grep -c lqpn)\" -eq 0 ]; do sleep 0.2; done'" ||
		return
	peer_serves 7701 20 "rping -s -a $RIW_PEER -p 7701 -C 10 -S 4096 -V" \
		rping -c -a "$RIW_PEER" -p 7701 -C 10 -S 4096 -V
}
[ -z "${RIW_LONG:-}" ] ||
	riw_check "link down and up under rping -V: nothing left either side, a new one passes" \
		180 link_flap || true

# The NVMe host here with a controller that reconnects every second, for a minute.
nvme_connect_reconnecting() { # CTRL_LOSS_SECONDS
	modprobe nvme-rdma || return
	nvme connect -t rdma -a "$RIW_PEER" -s "$PORT" -n "$NQN" --nr-io-queues=2 \
		--queue-size=32 --reconnect-delay=1 --ctrl-loss-tmo="$1" || return
	riw_poll 30 nvme_blockdev
}

# The target's riw device deleted and riw unloaded under fio's writes, then loaded and
# added back, and nvmet's port enabled again (as its operator would): the host reconnects,
# fio completes and verifies, and 16 MiB written before reads back intact.
target_device_lost() {
	local blk state
	riw_peer ". selftests/nvmet.sh && nvmet_up $NQN $RIW_PEER $PORT /tmp/nvmet.img 64" ||
		return
	nvme_connect_reconnecting $((60 * RIW_TIMEOUT_SCALE)) || return
	blk=$(nvme_blockdev)
	state=/sys/block/${blk#/dev/}/device/state
	riw_writes_start "$blk" two-guests-lost || return
	riw_flowing l0 || return
	riw_peer "rdma link delete p0 && modprobe -r riw" || return
	riw_poll 60 eval '[ "$(cat "$state")" != live ]' || return
	echo "the target's device gone: controller $(cat "$state")"
	riw_peer "modprobe riw && rdma link add p0 type riw netdev eth0 &&
		. selftests/nvmet.sh && nvmet_relisten $NQN" || return
	riw_poll 120 eval '[ "$(cat "$state")" = live ]' || return
	echo "the target's device back: controller live again"
	riw_writes_end "$blk" two-guests-lost || return
	nvme disconnect -n "$NQN" || return
	riw_poll 30 eval '! nvme_blockdev >/dev/null'
}
[ -z "${RIW_LONG:-}" ] ||
	riw_check "the target's device deleted and riw unloaded under I/O, then back: the host reconnects, fio verifies, earlier data intact" \
		300 target_device_lost || true

# As kmemleak.sh does here (no kmemleak on the release kernel: nothing to find).
peer_leaks() {
	local report leaks
	report=$(riw_peer "k=/sys/kernel/debug/kmemleak; [ -e \$k ] || exit 0
		echo scan >\$k; sleep 6; echo scan >\$k; cat \$k")
	leaks=$(riw_kmemleak_addrs new <<<"$report")
	echo "$report"
	[ -z "$leaks" ]
}
riw_check "no kmemleak reports in the peer" 120 peer_leaks || true

# The peer powers off mid-transfer, without a FIN or a RST: TCP here would retransmit for
# many minutes. rping is killed; its QP and cm_id go at once. In make check-long the NVMe
# host writes too: its writes unanswered, it finds the target gone (keep-alive), fails to
# reconnect and gives the controller up after its loss timeout: fio's I/O fails instead of
# hanging. Then nothing of either is left here, and the device can be deleted.
peer_lost() {
	local pid fio_pid=
	if [ -n "${RIW_LONG:-}" ]; then
		nvme_connect_reconnecting 2 || return
		(cd "$tmp" && exec fio --name=two-guests-gone --filename="$(nvme_blockdev)" \
			--direct=1 --ioengine=libaio --rw=randwrite --bs=4k --iodepth=8 --size=16M \
			--time_based --runtime=3600 >"$tmp/fio-gone.log" 2>&1) &
		fio_pid=$!
	fi
	riw_peer_bg lost "rping -s -a $RIW_PEER -p 7702 -S 65535 -V" || return
	peer_listens 7702 || return
	riw_bg rping -c -a "$RIW_PEER" -p 7702 -S 65535 -V
	pid=$RIW_BG_PID
	riw_flowing l0 200 || return
	riw_peer_bg off "sleep 1; echo o >/proc/sysrq-trigger" || return
	riw_peer_gone
	sleep 5
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "rping ended by itself"
	fi
	kill -KILL "$pid" 2>/dev/null || true
	riw_wait "$pid" 30 || true
	if [ -n "$fio_pid" ]; then
		riw_poll 120 eval '! nvme_blockdev >/dev/null' || return
		echo "the controller given up"
		if wait "$fio_pid"; then
			echo "fio completed writes to a target that was gone"
			return 1
		fi
		grep -m3 -iE "error|err=" "$tmp/fio-gone.log"
	fi
	riw_poll 30 eval '[ "$(riw_qp_count l0)" -eq 0 ]' || return
	riw_poll 30 eval '! rdma res show cm_id | grep -q .'
}
riw_check "the peer powered off under rping -V${RIW_LONG:+ and NVMe writes}: rping's QP and cm_id go${RIW_LONG:+, the controller is given up, fio fails}, nothing left" \
	300 peer_lost || true
riw_check "the device deleted after its peer went" 60 \
	eval 'rdma link delete l0 && modprobe -r riw' || true

ktap_finished
