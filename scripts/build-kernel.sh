#!/usr/bin/env bash
# Build (once) and cache a riw guest kernel: scripts/build-kernel.sh release|debug
# Prints nothing on a cache hit unless -v; the tree lands in $(riw_kernel_dir VARIANT)/linux.
set -euo pipefail
. "$(dirname "$0")/toolchain.sh"

variant=${1:?usage: build-kernel.sh release|debug}
# The cache key covers the toolchain that install-deps.sh installs: installed first.
"$RIW_TOP/scripts/install-deps.sh"
dir=$(riw_kernel_dir "$variant")
[ -e "$dir/built" ] && exit 0

frags=("$RIW_TOP/selftests/config")
[ "$variant" = debug ] && frags+=("$RIW_TOP/selftests/config.debug")

echo "riw: building the $variant kernel in $dir (several minutes)"
rm -rf "$dir"
mkdir -p "$dir"
tar -xf /usr/src/linux-source-6.12.tar.xz -C "$dir"
mv "$dir/linux-source-6.12" "$dir/linux"
cd "$dir/linux"

make -s "${RIW_KMAKE_FLAGS[@]}" tinyconfig
scripts/kconfig/merge_config.sh -m -O . .config "${frags[@]}" >/dev/null
make -s "${RIW_KMAKE_FLAGS[@]}" olddefconfig

# merge_config only warns; a fragment line that did not survive olddefconfig is an error.
bad=0
while read -r line; do
	case $line in
	CONFIG_*=*) grep -qxF "$line" .config || { echo "riw: config: wanted $line, got: $(grep "^${line%%=*}=" .config || echo unset)" >&2; bad=1; } ;;
	"# CONFIG_"*" is not set") opt=${line#\# }; opt=${opt%% *}
		grep -q "^$opt=" .config && { echo "riw: config: wanted $opt unset" >&2; bad=1; } ;;
	esac
done < <(cat "${frags[@]}")
[ $bad -eq 0 ] || exit 1

make -s "${RIW_KMAKE_FLAGS[@]}" -j"$(nproc)" bzImage modules
make -s "${RIW_KMAKE_FLAGS[@]}" INSTALL_MOD_PATH="$dir/modroot" INSTALL_MOD_STRIP=1 modules_install
touch "$dir/built"
echo "riw: $variant kernel ready: $dir/linux/arch/x86/boot/bzImage"
