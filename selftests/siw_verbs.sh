#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# riw_verbs.sh against Linux siw, the reference implementation of the same user ABI and
# provider: it validates the verbs tests themselves and needs no riw.ko. Where siw falls short
# of riw's requirements the subtest reports "# XFAIL siw: why".
#
# Not in TEST_PROGS: it tests the guest kernel's siw rather than riw, and would double the
# verbs time of every `make check` on the debug kernel. Run it when the tests change:
#   selftests/vm/run.sh --variant release -- selftests/siw_verbs.sh
#   selftests/vm/run.sh --variant debug -- bash -c 'selftests/siw_verbs.sh; selftests/kmemleak.sh'
exec "$(dirname "$0")/riw_verbs.sh" siw
