#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make bench: riw and siw side by side in one guest run on the release kernel, then in two
# guests joined by a link (scripts/bench-guest.py), printed as tables of ratios. Builds
# what is missing.
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
module=$(riw_module_dir release)/riw.ko
# One guest (two namespaces over a veth), then two guests joined by a link, the same
# script in the first of them; RIW_BENCH_ONLY=two-guests runs only that, any other
# RIW_BENCH_ONLY only the one-guest part.
if [ "${RIW_BENCH_ONLY:-}" != two-guests ]; then
	"$RIW_TOP/selftests/vm/run.sh" --variant release --module "$module" \
		--out "$out" --timeout 3600 -- env "${settings[@]}" python3 scripts/bench-guest.py \
		>/dev/null || rc=$?
	cat "$out/output.log"
fi
if [ -z "${RIW_BENCH_ONLY:-}" ] || [ "$RIW_BENCH_ONLY" = two-guests ]; then
	kept=()
	for v in "${settings[@]}"; do [[ $v == RIW_BENCH_ONLY=* ]] || kept+=("$v"); done
	"$RIW_TOP/selftests/vm/pair.sh" --variant release --module "$module" \
		--out "$out/two-guests" --timeout 3600 -- env "${kept[@]}" \
		python3 scripts/bench-guest.py >/dev/null || rc=$?
	cat "$out/two-guests/output.log"
fi
rm -rf "$out"
exit $rc
