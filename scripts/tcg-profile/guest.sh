#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Guest side of scripts/tcg-profile.sh: for each driver of DRIVERS, a device on each end of a
# veth pair between two namespaces, then TOOL (a perftest over rdma_cm) twice, N1 and N2
# iterations, each inside a window of the plugin's marker (sync(2) calls ksys_sync). The
# difference of the two windows is N2 - N1 iterations, without the setup. With PERF set, no
# windows: TOOL runs N1 iterations once under `perf record` of both vCPUs with call chains,
# and the samples and the call chains to CALLERS go to RIW_OUT.
set -u
tool=${TOOL:-ib_send_lat} size=${SIZE:-64} n1=${N1:-1000} n2=${N2:-3000}
ip netns add tp0
ip netns add tp1
ip -n tp0 link add veth0 index 10 type veth peer name veth1 netns tp1 index 20
ip -n tp0 addr add 192.0.2.1/24 dev veth0
ip -n tp1 addr add 192.0.2.2/24 dev veth1
for i in 0 1; do
	ip -n tp$i link set lo up
	ip -n tp$i link set veth$i up
done
# Fixed neighbours: a learned one is resolved the slow way for its first seconds, which
# would tax the driver that runs first.
for i in 0 1; do
	j=$((1 - i))
	mac=$(ip -n tp$j -br link show veth$j | awk '{ print $3 }')
	ip -n tp$i neigh replace 192.0.2.$((j + 1)) lladdr "$mac" dev veth$i nud permanent
done
if [ -n "${PERF:-}" ]; then
	# perf finds a module's symbols in the module tree.
	mkdir -p "/lib/modules/$(uname -r)/extra"
	cp "$MODULE" "/lib/modules/$(uname -r)/extra/riw.ko"
	echo -1 >/proc/sys/kernel/perf_event_paranoid
fi
modprobe riw
modprobe siw
echo 0 >/proc/sys/kernel/kptr_restrict
port=9700
run() {
	port=$((port + 1))
	ip netns exec tp1 timeout 300 "$tool" -d ts0 -R -p $port -s "$size" -n "$1" -F \
		>"$RIW_OUT/server.log" 2>&1 &
	for _ in $(seq 100); do
		ip netns exec tp1 ss -Htln "sport = :$port" | grep -q . && break
		sleep 0.1
	done
	sync
	${PERF:+perf record -q -a -g -e cpu-clock -o /tmp/perf.$drv.data --} \
		ip netns exec tp0 timeout 300 "$tool" -d tc0 -R -p $port -s "$size" -n "$1" -F \
		192.0.2.2 >"$RIW_OUT/client.log" 2>&1
	sync
	wait
	echo "$drv: $(grep -A1 bytes "$RIW_OUT/client.log" | tail -n 1)"
}
# One line per sample (comm, tid, cpu, time, ip, symbol, object), and perf's call chains
# to CALLERS.
perf_out() {
	local data=/tmp/perf.$drv.data
	perf script -i "$data" -F comm,tid,cpu,time,ip,sym,dso -G 2>/dev/null \
		>"$RIW_OUT/samples.$drv"
	perf report -i "$data" --no-children -S "$CALLERS" -G --stdio 2>/dev/null \
		>"$RIW_OUT/callers.$drv"
}
for drv in ${DRIVERS:-riw siw}; do
	ip netns exec tp1 rdma link add ts0 type "$drv" netdev veth1
	ip netns exec tp0 rdma link add tc0 type "$drv" netdev veth0
	run "$n1"
	if [ -n "${PERF:-}" ]; then
		perf_out
	else
		run "$n2"
	fi
	cat /proc/kallsyms >"$RIW_OUT/kallsyms.$drv"
	rdma link delete tc0
	rdma link delete ts0
done
