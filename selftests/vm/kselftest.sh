#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Run riw's selftests in the test guest and sum them up:
#
#   selftests/vm/kselftest.sh [--variant debug|release] [--module FILE.ko]... [--filter REGEX]
#                             [--timeout SECONDS] [--out DIR] [--smp N] [--pair]
#                             [--env NAME=VALUE]...
#
# Prints the KTAP stream of selftests/run_kselftest.sh as the guest writes it (the kernel
# console goes to OUT/console.log only), then one line "guest: N passed, N failed, N skipped"
# counting the top-level results. --pair runs them in the first of two guests joined by a
# link (selftests/vm/pair.sh), where the suites that need a peer guest find it. Each --env
# sets a variable for the suites in the guest (e.g. a suite's round count). A run that did
# not complete (panic, timeout, no result, no plan, fewer results than planned) counts as
# one more failed test.
# Exits 0 if nothing failed, else run.sh's status when the run itself failed (120-123, see
# run.sh), else 1. Without --out, OUT is a temporary directory kept only after a failure.
set -euo pipefail

usage() {
	sed -n '6,8s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
	exit 2
}

run_args=() filter=() env_args=() out= keep_out=1 timeout=3600 runner=run.sh
while [ $# -gt 0 ]; do
	case $1 in
	--variant | --module | --smp) run_args+=("$1" "${2:?}"); shift 2 ;;
	--filter) filter=(--filter "${2:?}"); shift 2 ;;
	--timeout) timeout=${2:?}; shift 2 ;;
	--out) out=${2:?}; shift 2 ;;
	--pair) runner=pair.sh; shift ;;
	--env) [[ ${2:?} == [A-Za-z_]*=* ]] || usage; env_args+=("$2"); shift 2 ;;
	*) usage ;;
	esac
done
if [ -z "$out" ]; then
	out=$(mktemp -d "${TMPDIR:-/tmp}/riw-kselftest.XXXXXX")
	keep_out=
fi
ktap=$out/output.log
rm -f "$ktap"

# The guest writes COMMAND's output to OUT/output.log as it goes, free of kernel messages.
echo "# riw: guest console in $out/console.log" >&2
here=$(dirname "${BASH_SOURCE[0]}")
"$here/$runner" "${run_args[@]}" --timeout "$timeout" --out "$out" \
	-- env "${env_args[@]}" selftests/run_kselftest.sh "${filter[@]}" >/dev/null &
vm=$!
tail -n +1 -F --pid=$vm "$ktap" 2>/dev/null &
follower=$!
rc=0
wait $vm || rc=$?
wait $follower || true

read -r planned passed failed skipped < <(awk '
	/^1\.\.[0-9]+/ && !plan { plan = substr($1, 4) }
	/^ok [0-9]+ / { if (/# SKIP/) s++; else p++ }
	/^not ok [0-9]+ / { f++ }
	END { print plan + 0, p + 0, f + 0, s + 0 }' "$ktap" 2>/dev/null || echo 0 0 0 0)

incomplete=
if [ $rc -ge 120 ] && [ $rc -le 123 ]; then
	incomplete="the guest run failed (run.sh status $rc)"
elif [ "$planned" -eq 0 ]; then
	incomplete="no KTAP plan"
elif [ $((passed + failed + skipped)) -ne "$planned" ]; then
	incomplete="$((passed + failed + skipped)) results for a plan of $planned"
elif [ $rc -ne 0 ] && [ "$failed" -eq 0 ]; then
	incomplete="run_kselftest.sh failed with status $rc"
fi
if [ -n "$incomplete" ]; then
	echo "# riw: incomplete run: $incomplete"
	failed=$((failed + 1))
fi
echo "guest: $passed passed, $failed failed, $skipped skipped"

if [ "$failed" -eq 0 ]; then
	[ -n "$keep_out" ] || rm -rf "$out"
	exit 0
fi
echo "# riw: logs kept in $out" >&2
[ $rc -ge 120 ] && [ $rc -le 123 ] && exit $rc
exit 1
