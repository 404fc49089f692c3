#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# NFS over RDMA through stock tools: the kernel's nfsd, started with nfs-kernel-server's
# rpc.nfsd with an RDMA listener (port 20049), exports a tmpfs directory; the kernel's NFS
# client mounts it with mount.nfs (nfs-common), proto=rdma, NFSv3 and NFSv4.2:
#
#   riw_nfs.sh [SERVER_DRIVER CLIENT_DRIVER]   riw or siw each; default riw riw
#
# The server runs in a network namespace of its own (device on veth1, 192.0.2.2), entered
# with nsenter --net only, so that its mounts stay in the guest's one mount namespace; the
# client runs in the initial namespace (device on veth0, 192.0.2.1), where a siw client has
# to: siw opens a connection's socket in the namespace of the task that connects, for the
# NFS client a kernel worker of the initial one. Through each mount: files created, renamed
# and deleted as the server sees them, fio writing at random with every block verified, a
# large file copied in and read back over the wire; nfsd stopped and started again under a
# write, which completes. At the end the mounts, nfsd, its helpers and both devices go,
# with no QP or cm_id left behind. riw_nfs_riw_siw.sh and riw_nfs_siw_riw.sh run it against
# siw both ways (make check-long). make check runs NFSv4.2 riw to riw; RIW_LONG (make
# check-long) runs both versions everywhere and copies a larger file.
set -eu
. "$(dirname "$0")/lib.sh"

riw_pair_args "$@"
ktap_print_header
for t in rpc.nfsd rpc.mountd exportfs rpcbind mount.nfs fio nsenter; do
	command -v $t >/dev/null || riw_skip_all "$t not installed (nfs-kernel-server, nfs-common)"
done
grep -qw nfsd /proc/filesystems || riw_skip_all "no nfsd (CONFIG_NFSD)"
VERSIONS=(3 4.2)
# For time under the debug kernel, one version each without RIW_LONG: NFSv4.2 to a riw
# server, NFSv3 to a siw one.
if [ -z "${RIW_LONG:-}" ]; then
	[ "$srv_drv" = riw ] && VERSIONS=(4.2) || VERSIONS=(3)
fi
# nfsd stopped and started again under I/O: riw to riw, and against siw under RIW_LONG.
LOST=
[ "$srv_drv" != "$cli_drv" ] && [ -z "${RIW_LONG:-}" ] || LOST=${VERSIONS[-1]}
ktap_set_plan $((2 + 5 * ${#VERSIONS[@]} + ${LOST:+1} + 1))

COPY_MB=16
[ -z "${RIW_LONG:-}" ] || COPY_MB=256
riw_pair_setup "$srv_drv" "$cli_drv"
SRV4=$RIW_ADDR1
# Namespace 0's veth end moves to the initial namespace (taking its address along anew).
ip -n "$RIW_NS0" link set "$RIW_DEV0" netns 1
riw_defer ip link del "$RIW_DEV0"
ip addr add "$RIW_ADDR0/24" dev "$RIW_DEV0"
ip link set "$RIW_DEV0" up
riw_poll 10 eval 'ip -o link show dev "$RIW_DEV0" | grep -q " state UP "' || true
in1 rdma link add nfss0 type "$srv_drv" netdev "$RIW_DEV1"
rdma link add nfsc0 type "$cli_drv" netdev "$RIW_DEV0"
riw_defer rdma link delete nfsc0
riw_defer rdma link delete nfss0
riw_defer riw_ns_kill "$RIW_NS1"
echo "# server nfss0 ($srv_drv) on $RIW_DEV1 $SRV4 (own namespace), client nfsc0 ($cli_drv)" \
	"on $RIW_DEV0 $RIW_ADDR0 (initial namespace); timeout scale $RIW_TIMEOUT_SCALE"
tmp=$(mktemp -d)
riw_defer rm -rf "$tmp"
srv() { nsenter --net="/run/netns/$RIW_NS1" "$@"; }
cli() { "$@"; }
export_dir=$tmp/export
mnt=$tmp/mnt
mkdir -p "$export_dir" "$mnt"
mount -t tmpfs -o size=512m riw-nfs "$export_dir"
riw_defer umount "$export_dir"

# nfs-utils keeps its state in /var/lib/nfs, read-only in the guest: a tmpfs of our own.
mount -t tmpfs riw-nfs-state /var/lib/nfs
riw_defer umount /var/lib/nfs
mkdir -p /var/lib/nfs/v4recovery /run/rpcbind
touch /var/lib/nfs/etab /var/lib/nfs/rmtab

server_up() {
	srv rpcbind -w || return
	# nfsd's control files belong to the namespace of whoever mounts them.
	srv mount -t nfsd nfsd /proc/fs/nfsd || return
	# fsid=0: the export is NFSv4's root too (its parents, on the guest's 9p root, cannot
	# be exported).
	srv exportfs -o rw,no_root_squash,insecure,no_subtree_check,fsid=0 \
		"192.0.2.0/24:$export_dir" || return
	srv rpc.mountd || return
	# A grace period of the shortest, so that NFSv4 opens need not wait 90 s.
	srv rpc.nfsd -G 10 -L 10 --rdma=20049 4 || return
	cat /proc/fs/nfsd/portlist
	grep -qx "rdma 20049" /proc/fs/nfsd/portlist
}

server_down() {
	srv rpc.nfsd 0
	srv exportfs -ua
	pkill -x rpc.mountd
	pkill -x rpcbind
	umount /proc/fs/nfsd
	return 0
}
riw_defer server_down
riw_check "nfsd listens for RDMA on $SRV4:20049 ($srv_drv server)" 60 server_up || true

mount_rdma() { # VERSION
	local path=$export_dir
	[ "$1" = 3 ] || path=/
	cli mount -t nfs -o "vers=$1,proto=rdma,port=20049,nolock,hard,timeo=600" \
		"$SRV4:$path" "$mnt" || return
	grep " $mnt " /proc/mounts
	grep " $mnt " /proc/mounts | grep -q "proto=rdma" || return
	# The mount's transport is the client device's QP, answered by one on the server's.
	echo "QPs: client $(riw_qp_count nfsc0), server $(riw_qp_count nfss0)"
	[ "$(riw_qp_count nfsc0)" -ge 1 ] && [ "$(riw_qp_count nfss0)" -ge 1 ]
}

file_ops() {
	local d=$mnt/dir
	mountpoint -q "$mnt" || return
	mkdir "$d" || return
	echo "riw over NFS" >"$d/a" || return
	mv "$d/a" "$d/b" || return
	[ "$(cat "$export_dir/dir/b")" = "riw over NFS" ] || return
	[ ! -e "$export_dir/dir/a" ] || return
	for i in $(seq 20); do echo "$i" >"$d/f$i" || return; done
	[ "$(ls "$export_dir/dir" | wc -l)" -eq 21 ] || return
	rm "$d"/f* "$d/b" || return
	rmdir "$d" || return
	[ ! -e "$export_dir/dir" ]
}

fio_verify() {
	local out rc=0
	mountpoint -q "$mnt" || return
	out=$(cd "$tmp" &&
		fio --name=riw-nfs --directory="$mnt" --direct=1 --ioengine=libaio \
			--rw=randwrite --bsrange=4k-128k --iodepth=8 --numjobs=2 --size=4M \
			--verify=crc32c --verify_fatal=1 --group_reporting 2>&1) || rc=$?
	# Its summary, or all of it if it failed.
	if [ $rc -eq 0 ]; then grep -E "err=|READ:|WRITE:" <<<"$out"; else echo "$out"; fi
	[ $rc -eq 0 ] || return $rc
	rm -f "$mnt"/riw-nfs.*
}

# Written with O_DIRECT, a MiB at a time: the kernel client's writeback would otherwise
# have the server read all of it at once, and a siw client's sending thread, answering
# those Reads without a break, trips the soft lockup detector on the debug kernel.
copy_compare() {
	mountpoint -q "$mnt" || return
	dd if="$tmp/pattern" of="$mnt/big" bs=1M oflag=direct status=none || return
	# Read back over the wire, not from the client's page cache.
	sync && echo 3 >/proc/sys/vm/drop_caches
	cmp "$tmp/pattern" "$mnt/big" || return
	cmp "$tmp/pattern" "$export_dir/big" || return
	rm "$mnt/big"
}

unmount() {
	umount "$mnt" || return
	riw_poll 30 eval '[ "$(riw_qp_count nfsc0)" -eq 0 ]'
}

# nfsd stops while a file is written (O_DIRECT, hard mount) and starts again: the client
# reconnects and the write completes; a file written and synced before, and the one
# written across the outage, read back intact on both sides.
server_lost() {
	local dd_pid i
	mountpoint -q "$mnt" || return
	head -c $((8 << 20)) /dev/urandom >"$tmp/before" || return
	dd if="$tmp/before" of="$mnt/before" bs=1M oflag=direct conv=fsync status=none || return
	# 16 MiB, a MiB at a time with pauses (8 s at least): the write spans the outage.
	(
		for ((i = 0; i < 16; i++)); do
			dd if="$tmp/pattern" of="$mnt/across" bs=1M skip=$i seek=$i count=1 \
				conv=notrunc oflag=direct status=none || exit
			sleep 0.5
		done
	) &
	dd_pid=$!
	sleep 2
	srv rpc.nfsd 0 || return
	echo "nfsd stopped: client QPs $(riw_qp_count nfsc0)"
	sleep 2
	srv rpc.nfsd -G 10 -L 10 --rdma=20049 4 || return
	echo "nfsd started again"
	wait "$dd_pid" || return
	echo "the write across the outage completed: client QPs $(riw_qp_count nfsc0)"
	sync && echo 3 >/proc/sys/vm/drop_caches
	cmp "$tmp/before" "$mnt/before" && cmp "$tmp/before" "$export_dir/before" || return
	head -c $((16 << 20)) "$tmp/pattern" >"$tmp/across" || return
	cmp "$tmp/across" "$mnt/across" && cmp "$tmp/across" "$export_dir/across" || return
	rm "$mnt/before" "$mnt/across"
}

head -c $((COPY_MB << 20)) /dev/urandom >"$tmp/pattern"
for v in "${VERSIONS[@]}"; do
	riw_check "NFSv$v mount over RDMA ($cli_drv client to $srv_drv server)" 60 \
		mount_rdma "$v" || true
	riw_check "NFSv$v: files created, renamed and deleted as the server sees them" 60 \
		file_ops || true
	riw_check "NFSv$v: fio, 2 jobs of random 4 KiB to 128 KiB writes, each block verified" \
		120 fio_verify || true
	riw_check "NFSv$v: a $COPY_MB MiB file copied in and read back over the wire, identical" \
		120 copy_compare || true
	if [ "$v" = "$LOST" ]; then
		riw_check "NFSv$v: nfsd stopped and started under a write: the client reconnects, data intact" \
			300 server_lost || true
	fi
	riw_check "NFSv$v: unmounted, the client's QP gone" 60 unmount || true
done


gone() {
	server_down || return
	rdma link delete nfsc0 || return
	rdma link delete nfss0 || return
	[ -z "$(rdma res show cm_id 2>/dev/null)" ] || return
	[ -z "$(rdma res show qp 2>/dev/null)" ]
}
riw_check "nfsd stopped, both devices deleted: no QP or cm_id left" 60 gone || true

riw_check "the driver modules unload" 60 eval 'modprobe -r riw; modprobe -r siw; true' || true
ktap_finished
