#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Exact instruction counts of a perftest round trip, riw and siw, on the release kernel:
#
#   scripts/tcg-profile.sh [--tool ib_send_lat] [--size 64] [--drivers "riw siw"]
#                          [--iterations N] [--trace "FUNCTION..." [--clock]]
#                          [--tlb BITS] [--jump-cache] [--coherence] [--pages]
#                          [--perf [--callers SYMBOL]] [--module FILE.ko] [--out DIR]
#
# A QEMU TCG plugin (scripts/tcg-profile/plugin.c) counts every block of guest kernel code
# the guest executes while TOOL runs N and then 3N iterations; the difference, over 2N, is
# what one iteration executes, by module and function (scripts/tcg-profile/report.py), with
# its memory accesses and the block exits TCG cannot chain (each a lookup of the next block).
# Two models of QEMU's own caches count misses as well, each costing the emulator a search:
# --tlb, the softmmu TLB (2^BITS entries per vCPU, direct mapped, eight victims; a miss is a
# page-table walk), and --jump-cache, the per-vCPU cache of QEMU 7.2 that every unchained
# block entry looks up (4096 entries hashed on the PC; a miss searches all translations).
# Both depend on where code and data lie, so they differ between builds of the same code.
# --coherence counts the 64-byte lines of guest memory that move between the vCPUs (each a
# host thread, so a move between host cores): the last column of counts.N, per block.
# --pages counts the accesses to each page, per vCPU (DIR/pages.N: "vcpu page count
# first-block module-accesses"): how many pages an iteration keeps hot, each needing an
# entry of the softmmu TLB.
# --module profiles that riw.ko instead of the tree's release build.
# With --trace, the entries of the named kernel or module functions (as /proc/kallsyms spells
# them, or a part of such a name: every match) are logged with each
# vCPU's instruction count, and the report gives the median instructions from one to the
# next: the length of each step of a critical path, comparable across builds where wall
# clock under TCG is not. The run is several times slower than without the plugin.
# With --clock, each step's median length is in host nanoseconds instead, and nothing but the
# traced entries is instrumented (no counts): what the steps cost in time under TCG, where
# instructions differ in cost (atomics, indirect branches). Compare the drivers within a run.
# With --perf, no plugin: perf samples both vCPUs (the guest's tick, 250 Hz) while TOOL runs
# N iterations (150,000 by default) over each driver, and the report gives the shares of the
# samples of the run's steady part by process, object and symbol, and the call chains to
# SYMBOL (default queued_spin_lock_slowpath: who waits on a spinlock). Instrumentation moves
# the two vCPUs' timing against each other; this sees waits only the real timing produces.
set -euo pipefail
. "$(dirname "$0")/toolchain.sh"

tool=ib_send_lat size=64 drivers="riw siw" iterations="" trace="" out="" clock="" perf=""
tlb="" jump_cache="" coherence="" pages="" module=""
callers=queued_spin_lock_slowpath
while [ $# -gt 0 ]; do
	case $1 in
	--tool) tool=${2:?}; shift 2 ;;
	--size) size=${2:?}; shift 2 ;;
	--drivers) drivers=${2:?}; shift 2 ;;
	--iterations) iterations=${2:?}; shift 2 ;;
	--trace) trace=${2:?}; shift 2 ;;
	--clock) clock=1; shift ;;
	--tlb) tlb=${2:?}; shift 2 ;;
	--jump-cache) jump_cache=1; shift ;;
	--coherence) coherence=1; shift ;;
	--pages) pages=1; shift ;;
	--perf) perf=1; shift ;;
	--callers) callers=${2:?}; shift 2 ;;
	--out) out=${2:?}; shift 2 ;;
	--module) module=$(realpath -e "${2:?}"); shift 2 ;;
	*) sed -n '5,8s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
	esac
done

"$RIW_TOP/scripts/install-deps.sh"
"$RIW_TOP/scripts/build-module.sh" release
[ -n "$module" ] || module=$(riw_module_dir release)/riw.ko
kdir=$(riw_kernel_dir release)/linux
[ -n "$out" ] || out=$(mktemp -d "${TMPDIR:-/tmp}/riw-tcg-profile.XXXXXX")
mkdir -p "$out"
out=$(realpath "$out")
run_guest() {
	"$RIW_TOP/selftests/vm/run.sh" --variant release --module "$module" --timeout 1800 \
		--out "$out" "$@"
}
if [ -n "$perf" ]; then
	run_guest -- env TOOL="$tool" SIZE="$size" DRIVERS="$drivers" PERF=1 \
		N1="${iterations:-150000}" CALLERS="$callers" MODULE="$module" \
		scripts/tcg-profile/guest.sh >"$out/guest.log"
	report=(perf-report.py "$out" "$tool" $drivers)
else
	iterations=${iterations:-1000}
	work=$RIW_CACHE/tcg-profile
	mkdir -p "$work"
	plugin=$work/plugin.so
	src=$RIW_TOP/scripts/tcg-profile/plugin.c
	if [ ! -e "$plugin" ] || [ "$src" -nt "$plugin" ]; then
		gcc -shared -fPIC -O2 -Wall -o "$plugin" "$src" -lpthread
	fi
	marker=$(awk '$3 == "ksys_sync" { print $1 }' "$kdir/System.map")
	[ -n "$marker" ] || { echo "tcg-profile: no ksys_sync in $kdir/System.map" >&2; exit 1; }
	args=marker=$marker,out=$out
	[ -z "$tlb" ] || args=$args,tlb=$tlb
	[ -z "$jump_cache" ] || args=$args,jmpcache=1
	[ -z "$coherence" ] || args=$args,coherence=1
	[ -z "$pages" ] || args=$args,pages=1
	if [ -n "$trace" ]; then
		# Module functions have the addresses of the same modules loaded the same way.
		run_guest -- bash -c 'modprobe riw; modprobe siw; echo 0 >/proc/sys/kernel/kptr_restrict;
			cat /proc/kallsyms >"$RIW_OUT/kallsyms.boot"' >/dev/null
		for f in $trace; do
			awk -v f="$f" '($2 == "t" || $2 == "T") && index($3, f) { print $1 }' \
				"$out/kallsyms.boot"
		done | sort -u >"$out/traced"
		args=$args,trace=$out/traced
		[ -z "$clock" ] || args=$args,clock=1
	fi
	run_guest --plugin "$plugin,$args" -- env TOOL="$tool" SIZE="$size" DRIVERS="$drivers" \
		N1="$iterations" N2=$((3 * iterations)) scripts/tcg-profile/guest.sh >"$out/guest.log"
	report=(report.py "$out" "$drivers" $((2 * iterations)))
fi
grep -E '^(riw|siw):' "$out/guest.log" || true
python3 "$RIW_TOP/scripts/tcg-profile/${report[0]}" "${report[@]:1}"
echo "tcg-profile: reports and logs in $out"
