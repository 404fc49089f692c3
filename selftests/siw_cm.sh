#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# riw_cm.sh siw<->siw: the connection-management suite against Linux siw on both ends, the
# reference implementation of the same wire protocol and user ABI. It validates the tests
# themselves and needs no riw.ko. Where siw falls short of riw's requirements the subtest
# reports "# XFAIL siw: why".
#
# Not in TEST_PROGS: it tests the guest kernel's siw rather than riw. Run it when the tests
# change:
#   selftests/vm/run.sh --variant release -- selftests/siw_cm.sh
#   selftests/vm/run.sh --variant debug -- bash -c 'selftests/siw_cm.sh; selftests/kmemleak.sh'
exec "$(dirname "$0")/riw_cm.sh" siw siw
