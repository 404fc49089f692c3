#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build riw.ko (and the selftests' test modules and C programs) out of tree against the
# cached kernel of VARIANT (building it if missing).
# The sources are mirrored into a build directory beside that kernel, so build outputs
# never land in the repository and the debug and release builds do not step on each other.
#
# usage: build-module.sh debug|release [--print-path]
set -euo pipefail
. "$(dirname "$0")/toolchain.sh"

variant=${1:-debug}
# Installs the toolchain first, which the kernel cache key covers; looked up after.
"$RIW_TOP/scripts/build-kernel.sh" "$variant" >&2
kdir=$(riw_kernel_dir "$variant")
bdir=$(riw_module_dir "$variant")
mkdir -p "$bdir"

# Sources only; what the build generated stays (excluded files survive --delete). Files
# are compared by content and a changed one gets the time of the copy, not its own: a
# source older than its object (another worktree's, say) still rebuilds.
rsync -rlpgoD --checksum --delete \
	--exclude='*_generated.rs' --exclude='target/' --exclude='fuzz/' --exclude='testdata/' \
	--include='*/' --include='Kbuild' --include='*.rs' --include='*.c' --include='*.h' \
	--include='scripts/*.sh' --exclude='*' \
	"$RIW_TOP/" "$bdir/"

make -s -C "$kdir/linux" M="$bdir" "${RIW_KMAKE_FLAGS[@]}" -j"$(nproc)" \
	KRUSTFLAGS="--remap-path-prefix=$bdir=$RIW_TOP" modules >&2
# The kernel consumer the selftests load (selftests/kverbs).
make -s -C "$kdir/linux" M="$bdir/selftests/kverbs" "${RIW_KMAKE_FLAGS[@]}" modules >&2
# The selftests' C programs, built here for the guests, which compile slowly
# (riw_build_prog in selftests/lib.sh uses these, or builds one itself when its source
# differs). The same command as riw_build_prog's.
for prog in cm/cm verbs/fault_nth verbs/verbs_raw; do
	src=$bdir/selftests/$prog.c
	[ "$bdir/selftests/$prog" -nt "$src" ] ||
		gcc -O2 -Wall -pthread -o "$bdir/selftests/$prog" "$src" -lrdmacm -libverbs >&2
done
