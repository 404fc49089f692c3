#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make demo: build what is missing (release kernel, riw.ko), boot the guest and show riw at
# work with stock rdma-core tools (scripts/demo-guest.sh).
set -euo pipefail
. "$(dirname "$0")/toolchain.sh"
variant=${VARIANT:-release}
"$RIW_TOP/scripts/install-deps.sh"
"$RIW_TOP/scripts/build-module.sh" "$variant"
out=$(mktemp -d "${TMPDIR:-/tmp}/riw-demo.XXXXXX")
"$RIW_TOP/selftests/vm/run.sh" --variant "$variant" --module "$(riw_module_dir "$variant")/riw.ko" \
	--out "$out" --timeout 600 -- scripts/demo-guest.sh >/dev/null
cat "$out/output.log"
rm -rf "$out"
