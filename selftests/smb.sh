# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# SMB Direct through stock tools, for the SMB suites, here or in the peer guest of a
# two-guest run (riw_peer ". selftests/smb.sh; smb_server_up ..."): the kernel's SMB server
# (ksmbd, driven by ksmbd-tools' ksmbd.mountd) and the kernel's SMB client (cifs, mounted
# with cifs-utils' mount.cifs, option rdma, SMB 3.1.1).
#
#   smb_server_up DIR   ksmbd serves DIR as share "riw" to user riw; on an iWARP device
#                       SMB Direct listens on port 5445 (ksmbd picks that port when it
#                       starts with an iWARP device present: add the device first)
#   smb_server_down     ksmbd stops; the listener goes
#   smb_mount ADDR MNT  share "riw" of the server at ADDR mounted on MNT over SMB Direct
#   smb_file_ops MNT DIR
#                       files and a directory created, renamed and deleted through the
#                       mount MNT, each step seen in the share's directory DIR

SMB_USER=riw SMB_PASS=riw-selftest
__smb_run=/run/riw-smb

smb_server_up() { # DIR
	mkdir -p "$__smb_run" || return
	cat >"$__smb_run/ksmbd.conf" <<EOF
[global]
	netbios name = RIWSELFTEST
[riw]
	path = $1
	read only = no
	force user = root
	force group = root
EOF
	ksmbd.adduser -c "$__smb_run/ksmbd.conf" -i "$__smb_run/users.db" -a "$SMB_USER" \
		-p "$SMB_PASS" || return
	ksmbd.mountd -c "$__smb_run/ksmbd.conf" -u "$__smb_run/users.db"
}

smb_server_down() {
	ksmbd.control -s >/dev/null 2>&1
	rm -rf "$__smb_run"
	true
}

smb_mount() { # ADDR MNT
	mount -t cifs "//$1/riw" "$2" -o "rdma,vers=3.1.1,username=$SMB_USER,password=$SMB_PASS" ||
		return
	grep -q "^RDMA" /proc/fs/cifs/DebugData
}

smb_file_ops() { # MNT DIR
	echo riw >"$1/created" || return
	[ "$(cat "$2/created")" = riw ] || return
	mv "$1/created" "$1/renamed" || return
	[ ! -e "$2/created" ] && [ "$(cat "$2/renamed")" = riw ] || return
	mkdir "$1/dir" && [ -d "$2/dir" ] || return
	rm "$1/renamed" && rmdir "$1/dir" || return
	[ -z "$(ls -A "$2")" ]
}
