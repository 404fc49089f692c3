#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Last test of every run: fail, listing them, if kmemleak finds objects leaked since
# run_kselftest.sh cleared its list; iw_cm's known leak (lib.sh) is listed, not failed on.
# Skips on a kernel without kmemleak (the release one).
set -eu
. "$(dirname "$0")/lib.sh"

kmemleak=/sys/kernel/debug/kmemleak
[ -e $kmemleak ] || riw_skip_all "kernel without kmemleak"

ktap_print_header
ktap_set_plan 1

# kmemleak reports an object only when it is over 5 s old and unchanged since the previous
# scan: scan twice, further apart than that.
riw_kmemleak_scan_twice
report=$(cat $kmemleak)
leaks=$(riw_kmemleak_addrs new <<<"$report")
riw_kmemleak_note_known <(riw_kmemleak_addrs known <<<"$report") <(echo "$report") | riw_diag
if [ -z "$leaks" ]; then
	ktap_test_pass "no kmemleak reports"
else
	riw_kmemleak_show <(echo "$leaks") <(echo "$report") | riw_diag
	ktap_test_fail "no kmemleak reports"
fi
ktap_finished
