#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Generate riw's Rust bindings with the very bindgen command line the kernel used for its own
# (recorded by Kbuild in rust/bindings/.bindings_generated.rs.cmd), so that types and layouts
# agree with the kernel being built against.
#
# usage: riw-bindgen.sh KERNEL_OBJTREE HEADER OUTPUT bindings|uapi
set -euo pipefail

objtree=$1 header=$(realpath "$2") out=$(realpath -m "$3") kind=$4
saved=$(sed -n 's|^savedcmd_rust/bindings/bindings_generated.rs := ||p' \
	"$objtree/rust/bindings/.bindings_generated.rs.cmd")
saved=${saved%%; sed *} # the kernel's post-processing is for its own helper constants
eval "set -- $saved"

args=("$1" "$header")
shift 2
while [ $# -gt 0 ]; do
	case $1 in
	-o) shift ;;
	--ctypes-prefix) args+=(--ctypes-prefix core::ffi); shift ;;
	--no-layout-tests) [ "$kind" = uapi ] || args+=("$1") ;;
	-Wp,-MMD,*) ;; # the dependency file is the kernel's own
	--)
		case $kind in
		# The driver's view of the kernel: what it calls and every type those reach.
		bindings) args+=(
			--allowlist-function '(ib|rdma|iw|_ib|__ib)_.*'
			--allowlist-function 'riw_.*'
			--allowlist-var 'riw_.*'
			--allowlist-var '__tracepoint_riw_.*'
			--allowlist-function '(un)?register_netdevice_notifier'
			--allowlist-function 'crc32c|vfree|remap_vmalloc_range|ida_.*|xa_(load|erase|find|destroy)'
			--allowlist-function 'sock_release|net_ratelimit|destroy_workqueue|cancel_delayed_work(_sync)?|complete|wait_for_completion'
			--allowlist-function 'seq_(read|lseek|write)|single_(open|release)'
			--allowlist-var 'VM_[A-Z]+'
			--allowlist-type '(ib|rdma|iw|riw)_.*|netdev_cmd|sockaddr_in6?|__kernel_sockaddr_storage'
			--allowlist-var '(IB|RDMA|IW|NETDEV|NOTIFY|ARPHRD|IFF|TCP|AF)_.*'
			--allowlist-var 'E[A-Z0-9]+'
			--allowlist-var 'GFP_KERNEL|ETH_ALEN|IFNAMSIZ'
			--blocklist-function 'ib_get_rmpp_.*|ib_(create|free)_send_mad|ib_post_send_mad'
		) ;;
		# The user ABI riw speaks, with bindgen's compile-time size and offset checks.
		uapi) args+=(
			--allowlist-type 'siw_.*'
			--allowlist-var 'SIW_.*'
		) ;;
		esac
		args+=(-o "$out" --)
		;;
	*) args+=("$1") ;;
	esac
	shift
done

cd "$objtree"
"${args[@]}"
