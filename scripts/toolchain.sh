# Sourced by riw's scripts: the toolchain of the kernel and module builds (design.md §4).
# The rustup toolchain has no rust-src, so kernel builds use Debian's rustc-web explicitly.
export PATH="/usr/lib/llvm-16/bin:$HOME/.cargo/bin:$PATH"
export LIBCLANG_PATH=/usr/lib/llvm-16/lib
RIW_KMAKE_FLAGS=(
	LLVM=1
	RUSTC=/usr/bin/rustc
	RUSTDOC=/usr/bin/rustdoc
	BINDGEN="$HOME/.cargo/bin/bindgen"
	RUST_LIB_SRC=/usr/src/rustc-1.96.0/library
)
RIW_CACHE="${RIW_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/riw}"
RIW_TOP="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# riw_kernel_dir VARIANT: the cache directory of that kernel, keyed by the source package
# version, the config fragments, this toolchain and the build script itself. Those change
# when install-deps.sh installs them, so callers run it before looking a kernel up.
riw_kernel_dir() {
	local variant=$1 frags key
	case $variant in
	release) frags=("$RIW_TOP/selftests/config") ;;
	debug) frags=("$RIW_TOP/selftests/config" "$RIW_TOP/selftests/config.debug") ;;
	*) echo "riw: unknown kernel variant '$variant' (release or debug)" >&2; return 1 ;;
	esac
	key=$({
		dpkg-query -W -f='${Version}' linux-source-6.12 2>/dev/null || echo none
		cat "${frags[@]}" "$RIW_TOP/scripts/build-kernel.sh"
		/usr/bin/rustc --version 2>/dev/null; clang-16 --version 2>/dev/null | head -1
	} | sha256sum | cut -c1-12)
	echo "$RIW_CACHE/kernel/$variant-$key"
}

# riw_module_dir VARIANT: where riw.ko is built against that kernel.
riw_module_dir() {
	local kdir
	kdir=$(riw_kernel_dir "$1") || return
	echo "$RIW_CACHE/build/$(basename "$kdir")"
}
