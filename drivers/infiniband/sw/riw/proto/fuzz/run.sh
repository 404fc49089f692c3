#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Runs every fuzz target of the riw protocol core for SECONDS each
# (default 60). Exits non-zero if any target finds a crash; the reproducer
# is left in artifacts/<target>/.
#
# cargo-fuzz needs nightly-only flags; RUSTC_BOOTSTRAP lets the stable
# toolchain accept them.

set -u
secs=${1:-60}
cd "$(dirname "$0")" || exit 1

if ! cargo fuzz --version >/dev/null 2>&1; then
	cargo install --locked cargo-fuzz || exit 1
fi
export RUSTC_BOOTSTRAP=1

failed=""
for target in $(cargo fuzz list); do
	mkdir -p "corpus/$target"
	if [ -d "seeds/$target" ]; then
		cp -n "seeds/$target"/* "corpus/$target/" 2>/dev/null
	fi
	echo "== $target: ${secs}s"
	if ! cargo fuzz run "$target" "corpus/$target" -- \
		-max_total_time="$secs" -max_len=4096 -print_final_stats=1; then
		failed="$failed $target"
	fi
done

if [ -n "$failed" ]; then
	echo "fuzz: crashes in:$failed" >&2
	exit 1
fi
echo "fuzz: all targets ran ${secs}s without a crash"
