#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make bench: riw and siw side by side in one guest run on the release kernel
# (scripts/bench-guest.py), printed as tables of ratios. Builds what is missing.
set -euo pipefail
. "$(dirname "$0")/toolchain.sh"
"$RIW_TOP/scripts/install-deps.sh"
"$RIW_TOP/scripts/build-module.sh" release
out=$(mktemp -d "${TMPDIR:-/tmp}/riw-bench.XXXXXX")
rc=0
# The guest sees only what is passed on: the bench's settings, if set here.
settings=()
for v in RIW_BENCH_ROUNDS RIW_BENCH_ITERS_BW RIW_BENCH_ITERS_LAT RIW_BENCH_ITERS_LAT_BAR \
	RIW_BENCH_FPDU_ROUNDS RIW_BENCH_NVME_ROUNDS RIW_BENCH_NVME_SECONDS RIW_BENCH_NFS_ROUNDS \
	RIW_BENCH_ONLY; do
	[ -z "${!v:-}" ] || settings+=("$v=${!v}")
done
"$RIW_TOP/selftests/vm/run.sh" --variant release --module "$(riw_module_dir release)/riw.ko" \
	--out "$out" --timeout 3600 -- env "${settings[@]}" python3 scripts/bench-guest.py \
	>/dev/null || rc=$?
cat "$out/output.log"
rm -rf "$out"
exit $rc
