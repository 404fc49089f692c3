#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The soak test (make soak; not in make check): RIW_SOAK_MINUTES (default 30) of mixed
# traffic on riw devices, all at once:
#
#   the verbs fuzzer (verbs/fuzz.py) on the client device: random objects, every opcode,
#   random sizes, connections over loopback, disconnects and destruction
#   RIW_SOAK_QPS (default 4) workers, each running rping -V clients one after another
#   against a persistent rping server, with random sizes and counts, a quarter of them
#   SIGKILLed at a random moment, any still running after 2 minutes (x timeout scale) ended
#   ib_write_bw, ib_read_bw and ib_send_bw in turn, random sizes, 5 s each
#   the server's netdev down for 1 to 3 s every 60 to 120 s
#   NVMe over Fabrics (nvmet-rdma to nvme-rdma on a third riw device) under fio writing and
#   reading 4 KiB to 128 KiB blocks, verifying every block
#
# It reports what each did (runs, outcomes by kind), then: the fuzzer found nothing, fio
# verified every block, a last rping -V passes, no QP or cm_id is left once all ended,
# kmemleak finds nothing new, and the slab caches' object counts next to the start's. The
# EXIT trap fails the test on any splat.
#
#   selftests/vm/run.sh --module riw.ko --timeout T -- env RIW_SOAK_MINUTES=M selftests/riw_soak.sh
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nvmet.sh"

here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
mins=${RIW_SOAK_MINUTES:-30}
qps=${RIW_SOAK_QPS:-4}
secs=$((mins * 60))
seed=${RIW_FUZZ_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
NVDEV=skn0 NVPEER=skn1 NVADDR=192.0.2.20 NVPORT=4420
NQN=nqn.2026-11.dev.riw:soak
PING_PORT=7620

ktap_print_header
ktap_set_plan 6
echo "# $mins minutes, $qps rping workers, fuzzer seed $seed, timeout scale $RIW_TIMEOUT_SCALE"

slabs() {
	awk 'NR > 2 { print $1, $2 }' /proc/slabinfo | sort
}
slabs >/tmp/riw-soak.slabs.before
riw_defer rm -f /tmp/riw-soak.slabs.before
riw_kmemleak_mark

riw_pair_args riw riw
riw_pair_devices sks0 skc0
riw_initns_device skn "$NVDEV" "$NVPEER" "$NVADDR"
riw_defer nvmet_down "$NQN"
riw_defer nvme disconnect -n "$NQN"
nvmet_up "$NQN" "$NVADDR" "$NVPORT" "$tmp/img" 64
modprobe nvme-rdma
nvme connect -t rdma -a "$NVADDR" -s "$NVPORT" -n "$NQN" --nr-io-queues=2 --queue-size=32 \
	--hostnqn=nqn.2014-08.org.nvmexpress:uuid:5b0c1e2d-7f3a-4c6b-8d9e-0a1b2c3d4e5f \
	--hostid=5b0c1e2d-7f3a-4c6b-8d9e-0a1b2c3d4e5f --reconnect-delay=1 --ctrl-loss-tmo=$((60 * RIW_TIMEOUT_SCALE)) >/dev/null
nvme_blockdev() {
	local b
	for b in /sys/block/nvme*; do
		[ "$(cat "$b/device/subsysnqn" 2>/dev/null)" = "$NQN" ] && echo "/dev/${b##*/}" && return
	done
	return 1
}
riw_poll 30 nvme_blockdev >/dev/null
blk=$(nvme_blockdev)
echo "# NVMe namespace $blk over $NVDEV"

end=$((SECONDS + secs))
running() { [ $SECONDS -lt $end ]; }

in1 rping -s -P -a "$SRV4" -p $PING_PORT -S 65535 -V >"$tmp/rping-server.log" 2>&1 &
riw_poll 10 __riw_listening $PING_PORT || echo "# the rping server does not listen"

rping_worker() { # N
	local size count pid rc
	while running; do
		size=$((64 + RANDOM * 2 % 65472))
		count=$((1 + RANDOM % 50))
		# A client that has not ended in 2 minutes (20 on the debug kernel) is counted as
		# "exit 124".
		ip netns exec "$RIW_NS0" timeout $((120 * RIW_TIMEOUT_SCALE)) \
			rping -c -a "$SRV4" -p $PING_PORT -S $size -C $count -V >/dev/null 2>&1 &
		pid=$!
		if [ $((RANDOM % 4)) -eq 0 ]; then
			sleep $((RANDOM % 4))
			# rping, then the timeout that runs it.
			if pkill -KILL -P $pid 2>/dev/null; then
				kill -KILL $pid 2>/dev/null
				wait $pid 2>/dev/null
				echo killed
				continue
			fi
		fi
		rc=0
		wait $pid || rc=$?
		if [ $rc -eq 0 ]; then echo ok; else echo "exit $rc"; fi
	done >"$tmp/rping-$1.results"
}

perftest_loop() {
	local tools=(ib_write_bw ib_read_bw ib_send_bw) port=7630 t size rc
	while running; do
		t=${tools[RANDOM % 3]}
		size=$((1 << (RANDOM % 17)))
		port=$((port + 1))
		in1 timeout 120 "$t" -d sks0 -R -p $port -D 5 -s $size >/dev/null 2>&1 &
		riw_poll 10 __riw_listening $port || true
		rc=0
		in0 timeout 120 "$t" -d skc0 -R -p $port -D 5 -s $size "$SRV4" >/dev/null 2>&1 || rc=$?
		wait || true
		if [ $rc -eq 0 ]; then echo "$t ok"; else echo "$t exit $rc"; fi
	done >"$tmp/perftest.results"
}

flap_loop() {
	local next
	while running; do
		next=$((SECONDS + 60 + RANDOM % 61))
		while running && [ $SECONDS -lt $next ]; do sleep 1; done
		running || break
		ip -n "$RIW_NS1" link set "$RIW_DEV1" down
		sleep $((1 + RANDOM % 3))
		ip -n "$RIW_NS1" link set "$RIW_DEV1" up
		echo flap
	done >"$tmp/flaps.results"
}

pids=()
in0 $py "$here/verbs/fuzz.py" --seed "$seed" --seconds "$secs" skc0 "$RIW_ADDR0" \
	>"$tmp/fuzz.log" 2>&1 &
fuzz_pid=$!
fio --name=soak --filename="$blk" --direct=1 --ioengine=libaio --rw=randrw \
	--bsrange=4k-128k --iodepth=8 --size=48M --time_based --runtime="$secs" \
	--verify=crc32c --verify_backlog=64 --verify_fatal=1 >"$tmp/fio.log" 2>&1 &
fio_pid=$!
for ((i = 0; i < qps; i++)); do
	rping_worker $i &
	pids+=($!)
done
perftest_loop &
pids+=($!)
flap_loop &
pids+=($!)

while running; do
	sleep 60
	echo "# $(((secs - (end - SECONDS)) / 60)) of $mins minutes"
done
# The rping clients still running are ended (counted as "exit 137"), not waited for;
# what they and riw were doing is shown first.
if pgrep -f "^rping -c -a $SRV4 -p $PING_PORT " >/dev/null; then
	{
		echo "rping clients still running at the end:"
		ps -o pid,etimes,stat,wchan:32,args -C rping
		riw_state
		grep -H . /sys/kernel/debug/riw/*/connections 2>/dev/null
	} | riw_diag
fi
pkill -KILL -f "^rping -c -a $SRV4 -p $PING_PORT " || true
wait "${pids[@]}" || true
fuzz_rc=0 fio_rc=0
wait_pid() { timeout $((600 * RIW_TIMEOUT_SCALE)) tail --pid="$1" -f /dev/null; }
wait_pid $fuzz_pid || true
wait $fuzz_pid || fuzz_rc=$?
wait_pid $fio_pid || true
wait $fio_pid || fio_rc=$?

# Outcomes counted: "#   WHAT: N".
counted() { # PREFIX
	awk -v p="$1" '{ n[$0]++ } END { for (k in n) printf "#   %s%s: %d\n", p, k, n[k] }' | sort
}
echo "# what ran:"
cat "$tmp"/rping-*.results | counted "rping "
counted "" <"$tmp/perftest.results"
echo "#   link flaps: $(grep -c flap "$tmp/flaps.results" || true)"
grep -E '^fuzz: [0-9]+ operations' "$tmp/fuzz.log" | sed 's/^/#   /' || true
grep -E 'READ:|WRITE:' "$tmp/fio.log" | sed 's/^ */#   fio /' || true

riw_result "the verbs fuzzer ran $mins minutes and found nothing (seed $seed)" \
	[ $fuzz_rc -eq 0 ]
[ $fuzz_rc -eq 0 ] || grep -E 'FAIL|Error|Traceback' "$tmp/fuzz.log" | head -20 | riw_diag
riw_result "fio verified every block it read over NVMe-oF" [ $fio_rc -eq 0 ]
[ $fio_rc -eq 0 ] || tail -n 20 "$tmp/fio.log" | riw_diag

riw_ns_kill "$RIW_NS0"
riw_ns_kill "$RIW_NS1"
nvme disconnect -n "$NQN" >/dev/null || true
riw_poll 30 eval '! nvme_blockdev >/dev/null' || true
nvmet_down "$NQN"

no_objects() {
	$py "$here/verbs/verbs.py" counts skc0 pd=0 cq=0 qp=0 srq=0 mr=0 ctx=0 cm_id=0 &&
		$py "$here/verbs/verbs.py" counts sks0 pd=0 cq=0 qp=0 srq=0 mr=0 ctx=0 cm_id=0
}
riw_check "no objects left on sks0 or skc0 once everything ended" 60 riw_poll 30 no_objects ||
	true

last_rping() {
	local rc=0
	in1 rping -s -a "$SRV4" -p $((PING_PORT + 1)) -C 10 -S 1000 -V &
	riw_poll 10 __riw_listening $((PING_PORT + 1)) || true
	in0 rping -c -a "$SRV4" -p $((PING_PORT + 1)) -C 10 -S 1000 -V || rc=$?
	wait || rc=1
	return $rc
}
riw_check "rping -V across the devices afterwards" 60 last_rping || true

if [ -e /sys/kernel/debug/kmemleak ]; then
	riw_check "kmemleak: nothing leaked since the start" 180 riw_kmemleak_new || true
else
	ktap_test_skip "kmemleak: nothing leaked since the start (no kmemleak)"
fi

# The slab caches whose object count changed most, start and end, for the report.
rdma link delete skc0
rdma link delete sks0
rdma link delete skn
echo "# slab caches, active objects at the start and now (the 15 that changed most):"
join /tmp/riw-soak.slabs.before <(slabs) |
	awk '{ d = $3 - $2; print (d < 0 ? -d : d), $1, $2, $3 }' | sort -rn | head -15 |
	awk '{ printf "#   %-28s %8d %8d\n", $2, $3, $4 }'
riw_result "no riw device is left" eval '! rdma dev show 2>/dev/null | grep -q " sk[cns]"'

ktap_finished
