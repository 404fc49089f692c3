#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Guest side of riw's selftests: run_kselftest.sh [--filter REGEX]
# Runs the TEST_PROGS of the Makefile beside it, in order, through the kernel's own kselftest
# runner (runner.sh run_many: KTAP, the per-test timeout from "settings"). --filter keeps the
# tests whose file name matches the extended REGEX; the last test, the kmemleak check, always
# runs. Exits 1 if any test failed.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
filter=
if [ $# -gt 0 ]; then
	if [ $# -ne 2 ] || [ "$1" != --filter ]; then
		echo "usage: $0 [--filter REGEX]" >&2
		exit 2
	fi
	filter=$2
fi

mapfile -t tests < <(make -s --no-print-directory -C "$here" emit_tests | sed 's/^riw://')
[ ${#tests[@]} -gt 0 ] || { echo "riw: no TEST_PROGS in $here/Makefile" >&2; exit 1; }
last=${tests[-1]}
unset 'tests[-1]'
if [ -n "$filter" ]; then
	mapfile -t tests < <(printf '%s\n' "${tests[@]}" | grep -E -- "$filter" || true)
fi
tests+=("$last")

# Only leaks of objects allocated from now on count, not boot-time noise.
if [ -e /sys/kernel/debug/kmemleak ]; then
	echo clear >/sys/kernel/debug/kmemleak
fi

# runner.sh finds its helpers and each test's "settings" under BASE_DIR and names the
# collection after the working directory below it: lay that out with symlinks.
base=$(mktemp -d)
trap 'rm -rf "$base"' EXIT
ln -s "$RIW_KSRC/tools/testing/selftests/kselftest" "$base/kselftest"
ln -s "$here" "$base/riw"
cd "$base/riw"

# make check-long's longest sweeps (riw_fuzz.sh's 900 s of verbs, a guest's share of
# riw_teardown.sh's 100 rounds) may take a test up to the guest's own limit there (check.sh).
[ -z "${RIW_LONG:-}" ] || export kselftest_override_timeout=11400

set +eu # runner.sh is not written for errexit and nounset
BASE_DIR=$base
. "$BASE_DIR/kselftest/runner.sh"
# Each result line is followed by how long its test took, for whoever trims the suite.
start=$SECONDS
run_many "${tests[@]/#/./}" | while IFS= read -r line; do
	printf '%s\n' "$line"
	if [[ $line =~ ^(not\ )?ok\ [0-9]+ ]]; then
		printf '# riw: took %d s\n' $((SECONDS - start))
		start=$SECONDS
	fi
done | tee "$base/ktap"
! grep -q '^not ok ' "$base/ktap"
