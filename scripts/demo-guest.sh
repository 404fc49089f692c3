#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The guest side of "make demo": two network namespaces joined by a veth pair, a riw RNIC
# on each end, siw loaded beside them, and what stock rdma-core tools say about them.
set -eu
ns0=demo-ns0 ns1=demo-ns1
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
run() { step "$*"; "$@"; }
# SERVER_NS SERVER_CMD... -- CLIENT_NS CLIENT_CMD...: a server in the background, then
# its client; both outputs shown.
pair() {
	local sns=$1 srv=() cns cli=()
	shift
	while [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	cns=$1
	shift
	cli=("$@")
	step "ip netns exec $sns ${srv[*]} &"
	timeout 60 ip netns exec "$sns" "${srv[@]}" 2>&1 | sed 's/^/  server| /' &
	sleep 1
	step "ip netns exec $cns ${cli[*]}"
	timeout 60 ip netns exec "$cns" "${cli[@]}" 2>&1 | sed 's/^/  client| /'
	wait
}

ip netns add $ns0
ip netns add $ns1
ip -n $ns0 link add veth0 type veth peer name veth1 netns $ns1
ip -n $ns0 addr add 192.0.2.1/24 dev veth0
ip -n $ns1 addr add 192.0.2.2/24 dev veth1
ip -n $ns0 link set veth0 up
ip -n $ns1 link set veth1 up

run modprobe siw
run ip netns exec $ns0 rdma link add riw0 type riw netdev veth0
run ip netns exec $ns1 rdma link add riw1 type riw netdev veth1
run rdma link show
run lsmod
run ibv_devices
run ip netns exec $ns0 ibv_devinfo -d riw0
run ip netns exec $ns1 ibv_devinfo -v -d riw1

# Connections over the veth pair: riw on both ends, then riw against siw either way
# (one soft-iWARP device per netdev: the other end's riw device makes room for siw).
pair $ns1 rdma_server -s 192.0.2.2 -p 7471 -- $ns0 rdma_client -s 192.0.2.2 -p 7471
pair $ns1 ucmatose -b 192.0.2.2 -p 7472 -c 4 -C 10 -- $ns0 ucmatose -s 192.0.2.2 -p 7472 -c 4 -C 10
# rping: RDMA READ of the client's buffer, RDMA WRITE back, SENDs between; -V verifies.
pair $ns1 rping -s -a 192.0.2.2 -p 7475 -C 3 -S 64 -- \
	$ns0 rping -c -a 192.0.2.2 -p 7475 -C 3 -S 64 -V -v
run ip netns exec $ns1 rdma link delete riw1
run ip netns exec $ns1 rdma link add siw1 type siw netdev veth1
pair $ns1 ucmatose -b 192.0.2.2 -p 7473 -c 4 -C 10 -- $ns0 ucmatose -s 192.0.2.2 -p 7473 -c 4 -C 10
pair $ns1 rping -s -a 192.0.2.2 -p 7476 -C 3 -S 64 -- \
	$ns0 rping -c -a 192.0.2.2 -p 7476 -C 3 -S 64 -V -v
run ip netns exec $ns1 rdma link delete siw1
run ip netns exec $ns1 rdma link add riw1 type riw netdev veth1
run ip netns exec $ns0 rdma link delete riw0
run ip netns exec $ns0 rdma link add siw0 type siw netdev veth0
pair $ns1 ucmatose -b 192.0.2.2 -p 7474 -c 4 -C 10 -- $ns0 ucmatose -s 192.0.2.2 -p 7474 -c 4 -C 10
pair $ns1 rping -s -a 192.0.2.2 -p 7477 -C 3 -S 64 -- \
	$ns0 rping -c -a 192.0.2.2 -p 7477 -C 3 -S 64 -V -v
run ip netns exec $ns0 rdma link delete siw0
run ip netns exec $ns0 rdma link add riw0 type riw netdev veth0
run rdma resource show

step "ip netns exec $ns0 ip link set veth0 down; rdma link show riw0/1"
ip -n $ns0 link set veth0 down
sleep 1
rdma link show riw0/1
ip -n $ns0 link set veth0 up

run rdma link delete riw0
run rdma link delete riw1
run modprobe -r riw siw
step "dmesg | grep -E 'riw|siw|SoftiWARP'"
dmesg | grep -E 'riw|siw|SoftiWARP' || true
