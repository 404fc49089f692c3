#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Last test of every run: fail, listing them, if kmemleak finds objects leaked since
# run_kselftest.sh cleared its list. Skips on a kernel without kmemleak (the release one).
set -eu
. "$(dirname "$0")/lib.sh"

kmemleak=/sys/kernel/debug/kmemleak
[ -e $kmemleak ] || riw_skip_all "kernel without kmemleak"

ktap_print_header
ktap_set_plan 1

# kmemleak reports an object only when it is over 5 s old and unchanged since the previous
# scan: scan twice, further apart than that.
echo scan >$kmemleak
sleep 6
echo scan >$kmemleak
leaks=$(cat $kmemleak)
if [ -z "$leaks" ]; then
	ktap_test_pass "no kmemleak reports"
else
	riw_diag <<<"$leaks"
	ktap_test_fail "no kmemleak reports"
fi
ktap_finished
