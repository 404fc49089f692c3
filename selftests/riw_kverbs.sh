#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The verbs only kernel consumers reach (PD with its DMA MR, posting, polling, arming,
# flushes, SRQ posting, fast-registration MRs), checked by a kernel consumer: the module
# riw_kverbs_test (selftests/kverbs), which runs its checks at load and logs each one.
set -eu
. "$(dirname "$0")/lib.sh"

ktap_print_header
if ! modinfo riw_kverbs_test >/dev/null 2>&1; then
	riw_skip_all "riw_kverbs_test.ko not installed (selftests/vm/kselftest.sh --module)"
fi

riw_defer modprobe -r riw
riw_defer modprobe -r riw_kverbs_test
modprobe riw
riw_netns_setup
ip netns exec "$RIW_NS0" rdma link add riw0 type riw netdev "$RIW_DEV0"

rc=0
modprobe riw_kverbs_test device=riw0 || rc=$?
riw_kmod_results riw_kverbs_test
riw_result "riw_kverbs_test loads (every check passed)" [ "$rc" -eq 0 ]
modprobe -r riw_kverbs_test 2>/dev/null || true
ip netns exec "$RIW_NS0" rdma link delete riw0

ktap_finished
