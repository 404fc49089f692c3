#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Stock ibv_devinfo -v lists a riw device with exactly the attributes Documentation/riw.rst
# documents, through rdma-core's software iWARP provider (so alloc_ucontext works), with
# every provider of the host's libibverbs configuration loaded.
set -eu
. "$(dirname "$0")/lib.sh"

# attribute  value, as ibv_devinfo -v prints them (the table "Device limits")
expected="
transport iWARP
vendor_id 0x726977
vendor_part_id 1
hw_ver 0x1
max_mr_size 0x1000000000
page_size_cap 0x1000
max_qp 16384
max_qp_wr 16384
device_cap_flags 0x00200000
max_sge 6
max_sge_rd 1
max_cq 16384
max_cqe 1048576
max_mr 65536
max_pd 65536
max_qp_rd_atom 32
max_qp_init_rd_atom 32
max_res_rd_atom 524288
max_srq 16384
max_srq_wr 16384
max_srq_sge 6
max_mw 0
max_pkeys 1
atomic_cap ATOMIC_NONE
phys_port_cnt 1
state PORT_ACTIVE
max_mtu 4096
link_layer Ethernet
max_msg_sz 0x80000000
gid_tbl_len 1
pkey_tbl_len 1
"

ktap_print_header
ktap_set_plan $(($(grep -c . <<<"$expected") + 3))

riw_defer modprobe -r riw
modprobe riw
riw_netns_setup
in0() { ip netns exec "$RIW_NS0" "$@"; }
in0 rdma link add riw0 type riw netdev "$RIW_DEV0"

# With every provider of the host's libibverbs configuration, as users have it: the test
# guest lists only the siw provider (selftests/vm/init), which ip netns exec's own mount
# namespace lets this command undo.
info=$(timeout $((30 * RIW_TIMEOUT_SCALE)) ip netns exec "$RIW_NS0" sh -c \
	'! mountpoint -q /etc/libibverbs.d || umount /etc/libibverbs.d
	echo "providers listed: $(ls /etc/libibverbs.d | wc -l)"; exec ibv_devinfo -v -d riw0') ||
	true
riw_diag <<<"$info"
riw_result "ibv_devinfo -v -d riw0 succeeds" grep -q 'hca_id:.*riw0' <<<"$info"

while read -r attr want; do
	[ -n "$attr" ] || continue
	got=$(awk -v a="$attr:" '$1 == a { print $2; exit }' <<<"$info")
	[ "$got" = "$want" ] || echo "# $attr: got '$got', want '$want'"
	riw_result "$attr $want" [ "$got" = "$want" ]
done <<<"$expected"

# The node GUID is the modified EUI-64 of the MAC address.
mac=$(in0 cat /sys/class/net/"$RIW_DEV0"/address)
IFS=: read -r m0 m1 m2 m3 m4 m5 <<<"$mac"
guid=$(printf '%02x%s:%sff:fe%s:%s%s' $((0x$m0 ^ 2)) "$m1" "$m2" "$m3" "$m4" "$m5")
got=$(awk '$1 == "node_guid:" { print $2; exit }' <<<"$info")
echo "# mac $mac node_guid $got"
riw_result "node_guid $guid from the MAC" [ "$got" = "$guid" ]
got=$(awk '$1 == "fw_ver:" { print $2; exit }' <<<"$info")
echo "# fw_ver $got"
riw_result "fw_ver 0.1.0" [ "$got" = 0.1.0 ]

ktap_finished
