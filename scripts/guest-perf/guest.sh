#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Guest side of scripts/guest-perf.sh: for each driver of DRIVERS, a device on each end of a
# veth pair between two namespaces, then TOOL (a perftest over rdma_cm) N iterations under
# `perf record` of both vCPUs with call chains; the samples and the callers of CALLERS go
# to RIW_OUT.
set -u
tool=${TOOL:-ib_send_lat} size=${SIZE:-64} n=${N:-150000}
ip netns add tp0
ip netns add tp1
ip -n tp0 link add veth0 index 10 type veth peer name veth1 netns tp1 index 20
ip -n tp0 addr add 192.0.2.1/24 dev veth0
ip -n tp1 addr add 192.0.2.2/24 dev veth1
for i in 0 1; do
	ip -n tp$i link set lo up
	ip -n tp$i link set veth$i up
done
# perf finds a module's symbols in the module tree.
mkdir -p "/lib/modules/$(uname -r)/extra"
cp "$MODULE" "/lib/modules/$(uname -r)/extra/riw.ko"
modprobe riw
modprobe siw
echo 0 >/proc/sys/kernel/kptr_restrict
echo -1 >/proc/sys/kernel/perf_event_paranoid
port=9700
for drv in ${DRIVERS:-riw siw}; do
	ip netns exec tp1 rdma link add ts0 type "$drv" netdev veth1
	ip netns exec tp0 rdma link add tc0 type "$drv" netdev veth0
	port=$((port + 1))
	ip netns exec tp1 timeout 600 "$tool" -d ts0 -R -p $port -s "$size" -n "$n" -F \
		>"$RIW_OUT/server.$drv.log" 2>&1 &
	for _ in $(seq 100); do
		ip netns exec tp1 ss -Htln "sport = :$port" | grep -q . && break
		sleep 0.1
	done
	data=/tmp/perf.$drv.data
	perf record -q -a -g -e cpu-clock -o "$data" -- ip netns exec tp0 timeout 600 "$tool" \
		-d tc0 -R -p $port -s "$size" -n "$n" -F 192.0.2.2 >"$RIW_OUT/client.$drv.log" 2>&1
	wait
	echo "$drv: $(grep -A1 bytes "$RIW_OUT/client.$drv.log" | tail -n 1)"
	perf script -i "$data" -F comm,tid,cpu,time,ip,sym,dso -G 2>/dev/null \
		>"$RIW_OUT/samples.$drv"
	perf report -i "$data" --no-children -S "$CALLERS" -G --stdio 2>/dev/null \
		>"$RIW_OUT/callers.$drv"
	rdma link delete tc0
	rdma link delete ts0
done
