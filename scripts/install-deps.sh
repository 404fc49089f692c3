#!/usr/bin/env bash
# Install every Debian package and cargo tool the riw build, guest and tests need.
# Idempotent: only what is missing is installed.
set -euo pipefail

debs=(
	linux-source-6.12 xz-utils
	clang-16 lld-16 llvm-16 libclang-16-dev
	rustc-web rust-web-src
	rsync make flex bison bc libelf-dev libssl-dev cpio kmod pahole
	qemu-system-x86 busybox-static
	iproute2 rdma-core ibverbs-utils rdmacm-utils perftest python3-pyverbs
	iperf3 nvme-cli fio tcpdump ethtool linux-perf qperf libfabric-bin
	nfs-kernel-server nfs-common rpcbind targetcli-fb open-iscsi dbus-daemon ksmbd-tools cifs-utils
	gcc libc6-dev libibverbs-dev librdmacm-dev
)

missing=()
for p in "${debs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "riw: installing Debian packages: ${missing[*]}"
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	$sudo apt-get update -q
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# bindgen at the version the kernel's rust toolchain checks accept.
bindgen_version=0.70.1
if ! command -v bindgen >/dev/null 2>&1 ||
	! bindgen --version 2>/dev/null | grep -q " $bindgen_version\$"; then
	echo "riw: installing bindgen-cli $bindgen_version"
	cargo install --locked bindgen-cli --version "$bindgen_version"
fi
