# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# The kernel's NVMe/RDMA target, set up through configfs by the NVMe suites, here or in the
# peer guest of a two-guest run (riw_peer ". selftests/nvmet.sh; nvmet_up ..."):
#
#   nvmet_up NQN ADDR PORT FILE MB   one subsystem open to any host, one namespace backed by
#                                    FILE (MB MiB, created) and one RDMA port on ADDR:PORT
#                                    (IPv4): nvmet-rdma listens through rdma_cm once the
#                                    subsystem is linked to the port
#   nvmet_relisten NQN               the port disabled and enabled again: nvmet-rdma
#                                    listens anew (after its RDMA device came back)
#   nvmet_down NQN                   all of it removed again (what exists of it)

__nvmet_cfg=/sys/kernel/config

nvmet_up() { # NQN ADDR PORT FILE MB
	local sub=$__nvmet_cfg/nvmet/subsystems/$1 port=$__nvmet_cfg/nvmet/ports/1
	mountpoint -q "$__nvmet_cfg" || mount -t configfs none "$__nvmet_cfg" || return
	modprobe nvmet-rdma || return
	truncate -s "$5M" "$4" || return
	mkdir "$sub" || return
	echo 1 >"$sub/attr_allow_any_host"
	mkdir "$sub/namespaces/1"
	echo "$4" >"$sub/namespaces/1/device_path"
	echo 1 >"$sub/namespaces/1/buffered_io"
	echo 1 >"$sub/namespaces/1/enable" || return
	mkdir "$port"
	echo rdma >"$port/addr_trtype"
	echo ipv4 >"$port/addr_adrfam"
	echo "$2" >"$port/addr_traddr"
	echo "$3" >"$port/addr_trsvcid"
	ln -s "$sub" "$port/subsystems/$1"
}

nvmet_down() { # NQN
	local sub=$__nvmet_cfg/nvmet/subsystems/$1 port=$__nvmet_cfg/nvmet/ports/1
	rm -f "$port/subsystems/$1"
	rmdir "$port" 2>/dev/null || true
	echo 0 >"$sub/namespaces/1/enable" 2>/dev/null || true
	rmdir "$sub/namespaces/1" 2>/dev/null || true
	rmdir "$sub" 2>/dev/null || true
}

nvmet_relisten() { # NQN
	local port=$__nvmet_cfg/nvmet/ports/1
	rm -f "$port/subsystems/$1"
	ln -s "$__nvmet_cfg/nvmet/subsystems/$1" "$port/subsystems/$1"
}
