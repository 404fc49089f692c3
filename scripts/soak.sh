#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make soak: selftests/riw_soak.sh in a guest of the debug kernel (KASAN, lockdep,
# kmemleak) for RIW_SOAK_MINUTES (default 30) of mixed traffic; its KTAP output, then the
# line "N passed, N failed".
set -euo pipefail
. "$(dirname "$0")/toolchain.sh"
cd "$RIW_TOP"

mins=${RIW_SOAK_MINUTES:-30}
"$RIW_TOP/scripts/build-module.sh" debug >/dev/null
out=$(mktemp -d "${TMPDIR:-/tmp}/riw-soak.XXXXXX")
echo "soak: $mins minutes on the debug kernel; the guest's console in $out/console.log"
rc=0
# The soak, then up to 30 minutes more for the set-up and the checks after it.
selftests/vm/run.sh --variant debug --module "$(riw_module_dir debug)/riw.ko" \
	--timeout $((mins * 60 + 1800)) --out "$out" \
	-- env RIW_SOAK_MINUTES="$mins" ${RIW_SOAK_QPS:+RIW_SOAK_QPS=$RIW_SOAK_QPS} \
	${RIW_FUZZ_SEED:+RIW_FUZZ_SEED=$RIW_FUZZ_SEED} selftests/riw_soak.sh >/dev/null || rc=$?
cat "$out/output.log"
p=$(grep -c '^ok ' "$out/output.log" || true)
f=$(grep -c '^not ok ' "$out/output.log" || true)
[ "$rc" -eq 0 ] || [ "$f" -gt 0 ] || f=1
echo "$p passed, $f failed"
[ "$f" -eq 0 ]
