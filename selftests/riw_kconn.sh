#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# A kernel consumer's connection over riw, the way NVMe-oF and the rdma_rw API use one:
# rdma_cm across the two namespaces, fast registration (REG_MR) of mapped pages, RDMA
# WRITE and READ through such regions, Send with Invalidate, LOCAL_INV and
# re-registration, and work posted from a softirq completion handler. The module
# riw_kconn_test (selftests/kverbs) runs its checks at load and logs each one. riw splices
# every Read Response from kernel memory here (tx_zerocopy_min 1, not 16 KiB): the Read
# from a fast-registered region, two pages from an offset, goes as page references.
set -eu
. "$(dirname "$0")/lib.sh"

ktap_print_header
if ! modinfo riw_kconn_test >/dev/null 2>&1; then
	riw_skip_all "riw_kconn_test.ko not installed (selftests/vm/kselftest.sh --module)"
fi

riw_pair_setup riw riw
riw_defer modprobe -r riw_kconn_test
# (riw_pair_setup unloads riw at the end, which resets it.)
echo 1 >/sys/module/riw/parameters/tx_zerocopy_min
in0 rdma link add riw0 type riw netdev "$RIW_DEV0"
in1 rdma link add riw1 type riw netdev "$RIW_DEV1"
# riw_netns_setup's process in each namespace names it to the module.

rc=0
modprobe riw_kconn_test server_pid="$RIW_NS1_PID" client_pid="$RIW_NS0_PID" \
	server_addr="$RIW_ADDR1" || rc=$?
riw_kmod_results riw_kconn_test 2
riw_result "riw_kconn_test loads (every check passed)" [ "$rc" -eq 0 ]
riw_result "the server's riw1 spliced its Read Responses (zero_copy_sends)" \
	[ "$(cat /sys/class/infiniband/riw1/ports/1/hw_counters/zero_copy_sends)" -gt 0 ]
modprobe -r riw_kconn_test 2>/dev/null || true
in0 rdma link delete riw0
in1 rdma link delete riw1

ktap_finished
