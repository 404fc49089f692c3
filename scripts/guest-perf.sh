#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Where a perftest's time goes with nothing instrumented, riw and siw, on the release kernel:
#
#   scripts/guest-perf.sh [--tool ib_send_lat] [--size 64] [--drivers "riw siw"]
#                         [--iterations N] [--callers SYMBOL] [--out DIR]
#
# perf samples both vCPUs (the guest's tick, 250 Hz) while TOOL runs N iterations over each
# driver in turn; the report gives, per driver, the share of the samples of the run's steady
# part (its first and last tenth left out) by process, by object and by symbol, and the call
# chains that reach SYMBOL (default queued_spin_lock_slowpath: who waits on a spinlock).
# scripts/tcg-profile.sh counts exactly but its instrumentation moves the timing of the two
# vCPUs against each other; this sees waits that only the uninstrumented timing produces.
set -euo pipefail
. "$(dirname "$0")/toolchain.sh"

tool=ib_send_lat size=64 drivers="riw siw" iterations=150000 callers=queued_spin_lock_slowpath
out=""
while [ $# -gt 0 ]; do
	case $1 in
	--tool) tool=${2:?}; shift 2 ;;
	--size) size=${2:?}; shift 2 ;;
	--drivers) drivers=${2:?}; shift 2 ;;
	--iterations) iterations=${2:?}; shift 2 ;;
	--callers) callers=${2:?}; shift 2 ;;
	--out) out=${2:?}; shift 2 ;;
	*) sed -n '4,5s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
	esac
done

"$RIW_TOP/scripts/install-deps.sh"
"$RIW_TOP/scripts/build-module.sh" release
module=$(riw_module_dir release)/riw.ko
[ -n "$out" ] || out=$(mktemp -d "${TMPDIR:-/tmp}/riw-guest-perf.XXXXXX")
mkdir -p "$out"
out=$(realpath "$out")
"$RIW_TOP/selftests/vm/run.sh" --variant release --module "$module" --timeout 1800 \
	--out "$out" -- env TOOL="$tool" SIZE="$size" DRIVERS="$drivers" N="$iterations" \
	CALLERS="$callers" MODULE="$module" scripts/guest-perf/guest.sh >"$out/guest.log"
grep -E '^(riw|siw):' "$out/guest.log" || true
python3 "$RIW_TOP/scripts/guest-perf/report.py" "$out" "$tool" $drivers
echo "guest-perf: samples, reports and logs in $out"
