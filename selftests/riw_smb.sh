#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# SMB Direct over riw through stock tools: the kernel's SMB server (ksmbd, driven by
# ksmbd-tools' ksmbd.mountd) serves a tmpfs share over SMB Direct, which on an iWARP device
# listens on port 5445; the kernel's SMB client (cifs) mounts it with mount.cifs
# (cifs-utils), option rdma, SMB 3.1.1. Both use rdma_cm in the initial network namespace
# only, so server and client share one device there and the connection runs over loopback
# TCP. Through the mount: files created, renamed and deleted as the server sees them, fio
# writing at random with every block verified, a 16 MiB file copied in and read back over
# the wire. Then the mount goes (the client drains its QP: every receive it posted must
# complete), ksmbd stops and the device goes, with no QP or cm_id left behind.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/smb.sh"

ktap_print_header
for t in ksmbd.mountd ksmbd.adduser ksmbd.control mount.cifs fio; do
	command -v $t >/dev/null || riw_skip_all "$t not installed (ksmbd-tools, cifs-utils)"
done
grep -qw cifs /proc/filesystems || riw_skip_all "no SMB client (CONFIG_CIFS)"
ktap_set_plan 7

DEV=smr0 PEER=smr1 ADDR=192.0.2.40
tmp=$(mktemp -d)
riw_defer rm -rf "$tmp"
share=$tmp/share mnt=$tmp/mnt
mkdir -p "$share" "$mnt"
mount -t tmpfs -o size=256m riw-smb "$share"
riw_defer umount "$share"

# Before ksmbd starts: it picks SMB Direct's iWARP port (5445) when it finds an iWARP device.
riw_initns_device smbriw0 "$DEV" "$PEER" "$ADDR"

riw_cm_ids() {
	rdma res show cm_id link smbriw0/1 2>/dev/null | grep -c "comm \[$1\]" || true
}
riw_qps() {
	riw_qp_count smbriw0
}

server_up() {
	smb_server_up "$share" || return
	riw_poll 30 eval 'rdma res show cm_id 2>/dev/null | grep -q "LISTEN.*comm \[ksmbd\].*:5445"' ||
		return
	rdma res show cm_id | grep ksmbd
}
riw_defer smb_server_down
riw_check "ksmbd serves SMB Direct on port 5445 through riw" 60 server_up || true

mounted() {
	smb_mount "$ADDR" "$mnt" || return
	echo "mounted over SMB Direct; $(riw_qps) riw QPs (both ends)"
}
riw_defer umount "$mnt"
riw_check "mount.cifs -o rdma: SMB 3.1.1 over SMB Direct through riw" 60 mounted || true

riw_check "files created, renamed and deleted through the mount, as the server sees them" 60 \
	smb_file_ops "$mnt" "$share" || true

# Four jobs, a file each, write at random and then read back and verify every block; fio
# keeps its state in $tmp.
fio_verify() {
	cd "$tmp" &&
		fio --name=riw-smb --directory="$mnt" --direct=1 --ioengine=libaio \
			--rw=randwrite --bsrange=4k-128k --iodepth=16 --numjobs=4 --size=8M \
			--verify=crc32c --verify_fatal=1 --group_reporting || return
	rm -f "$mnt"/riw-smb.*
}
riw_check "fio: 4 jobs of random 4 KiB to 128 KiB writes, depth 16, each block verified" 120 \
	fio_verify || true

head -c $((16 << 20)) /dev/urandom >"$tmp/pattern"
copy() {
	dd if="$tmp/pattern" of="$mnt/big" bs=1M oflag=direct status=none || return
	cmp "$tmp/pattern" "$share/big" || return
	# The client's page cache goes: the read comes over the wire.
	echo 3 >/proc/sys/vm/drop_caches
	cmp "$tmp/pattern" "$mnt/big"
}
riw_check "16 MiB copied in (O_DIRECT), compared on the server and read back" 120 copy || true

unmounted() {
	umount "$mnt" || return
	# The client drains its QP before it lets go of the connection: that waits for every
	# receive it posted to complete.
	riw_poll 30 eval '[ "$(riw_cm_ids cifs)" -eq 0 ]' || return
	riw_poll 30 eval '[ "$(riw_qps)" -eq 0 ]'
}
riw_check "umount: the client's connection, cm_id and QPs gone" 60 unmounted || true

riw_check "ksmbd stops and the riw device goes, no cm_id left" 60 \
	eval 'smb_server_down && riw_poll 30 eval "[ \$(riw_cm_ids ksmbd) -eq 0 ]" &&
		rdma link delete smbriw0' || true

ktap_finished
