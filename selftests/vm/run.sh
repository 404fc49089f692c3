#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Boot riw's test guest and run one command in it as root:
#
#   selftests/vm/run.sh [--variant debug|release] [--kernel BZIMAGE] [--module FILE.ko]...
#                       [--timeout SECONDS] [--out DIR] [--smp N] [--mem SIZE]
#                       [--plugin FILE.so[,ARG=VALUE...]] [--link DIR:SIDE]...
#                       -- COMMAND [ARGS...]
#
# The guest (QEMU, TCG) chroots into the host's / shared read-only over 9p, with tmpfs on /tmp,
# /run, /var/tmp, /root and /lib/modules, and runs COMMAND in the repository's top directory
# with RIW_KSRC (the guest kernel's source tree), RIW_OUT (DIR) and RIW_MODULES (the
# --module files' host paths, space-separated) exported, and RIW_LONG if it is set (make
# check-long). DIR is shared
# writable at the same path; it keeps console.log (the whole serial console), output.log
# (COMMAND's output alone) and dmesg.log (the guest's kernel log at the end). Without --out,
# DIR is a fresh temporary directory, removed when the run succeeds. --plugin loads a QEMU TCG
# plugin with its arguments (scripts/tcg-profile.sh). --link gives the guest a virtio-net NIC
# (eth0, eth1, ... in the order given) whose frames go, as datagrams on the host's Unix sockets
# DIR/link-SIDE.sock, to the guest started with the other SIDE (1 or 2) of the same DIR:
# one Ethernet link between two guests and nothing else (selftests/vm/pair.sh).
# /lib/modules/$(uname -r) holds the kernel's modules plus each --module file under extra/,
# indexed by depmod, so modprobe and request_module() autoloading work.
#
# The default kernel is the cached one of --variant (default debug, see
# scripts/build-kernel.sh); --kernel takes a bzImage inside a built kernel tree instead.
#
# Streams the console to stdout. Exit status: COMMAND's, or
#   120  usage error, missing kernel or module, QEMU failed to start
#   121  the guest kernel panicked
#   122  the guest ran past --timeout (default 600 s) and was killed
#   123  the guest stopped without reporting COMMAND's status, or its kernel was tainted
#        while booting, three boots in a row (a guest whose boot tainted it boots again)
# and for those, a one-line reason and the last console lines on stderr.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/toolchain.sh"

E_SETUP=120 E_PANIC=121 E_TIMEOUT=122 E_NORESULT=123

usage() {
	sed -n '4,9s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
	exit $E_SETUP
}

fail() {
	echo "riw-vm: $*" >&2
	exit $E_SETUP
}

variant=debug kernel= timeout=600 out= smp=2 mem=2G
modules=() plugin=() links=()
while [ $# -gt 0 ]; do
	case $1 in
	--variant) variant=${2:?}; shift 2 ;;
	--kernel) kernel=${2:?}; shift 2 ;;
	--module) modules+=("$(realpath -e "${2:?}")") || fail "no module $2"; shift 2 ;;
	--timeout) timeout=${2:?}; shift 2 ;;
	--out) out=${2:?}; shift 2 ;;
	--smp) smp=${2:?}; shift 2 ;;
	--mem) mem=${2:?}; shift 2 ;;
	--plugin) plugin=(-plugin "${2:?}"); shift 2 ;;
	--link) links+=("${2:?}"); shift 2 ;;
	--) shift; break ;;
	*) usage ;;
	esac
done
[ $# -gt 0 ] || usage
[[ $timeout =~ ^[0-9]+$ ]] || fail "--timeout wants seconds"

# The kernel and the tree it was built in: DIR/linux/arch/x86/boot/bzImage, modules in DIR/modroot.
if [ -z "$kernel" ]; then
	kdir=$(riw_kernel_dir "$variant") || exit $E_SETUP
	[ -e "$kdir/built" ] || fail "no $variant kernel in $kdir: run scripts/build-kernel.sh $variant"
	kernel=$kdir/linux/arch/x86/boot/bzImage
fi
kernel=$(realpath -e "$kernel") || fail "no kernel $kernel"
ksrc=$(realpath -m "$(dirname "$kernel")/../../..")
[ -f "$ksrc/Makefile" ] || fail "$kernel is not inside a kernel tree"
modroot=$(realpath -m "$ksrc/../modroot")

for p in "$RIW_TOP" "$ksrc" "$modroot" "${modules[@]}"; do
	[[ $p != *[[:space:]\'\"\\]* ]] || fail "path with blanks or quotes: $p"
done

keep_out=1
if [ -z "$out" ]; then
	out=$(mktemp -d "${TMPDIR:-/tmp}/riw-vm.XXXXXX")
	keep_out=
fi
mkdir -p "$out"
out=$(realpath "$out")
rm -rf "$out/.riw-vm" "$out/console.log" "$out/output.log" "$out/dmesg.log"
mkdir "$out/.riw-vm"

# The initramfs: busybox and the init script, cached by their content.
initrd_dir=$RIW_CACHE/initramfs
initrd=$initrd_dir/$(cat /bin/busybox "$RIW_TOP/selftests/vm/init" | sha256sum | cut -c1-16).cpio
if [ ! -e "$initrd" ]; then
	stage=$(mktemp -d)
	mkdir -p "$stage/bin" "$initrd_dir"
	cp /bin/busybox "$stage/bin/"
	install -m 0755 "$RIW_TOP/selftests/vm/init" "$stage/init"
	(cd "$stage" && find . | cpio -o -H newc -R 0:0 --quiet) >"$initrd.$$"
	mv "$initrd.$$" "$initrd"
	rm -rf "$stage"
fi

# What the guest's init reads (busybox sh, so plain single quotes) and what it runs (bash).
nonce=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
cat >"$out/.riw-vm/env" <<EOF
RIW_OUT='$out'
RIW_TOP='$RIW_TOP'
RIW_KSRC='$ksrc'
RIW_MODROOT='$modroot'
RIW_MODULES='${modules[*]}'
RIW_NONCE='$nonce'
EOF
{
	printf 'export RIW_KSRC=%q RIW_OUT=%q RIW_MODULES=%q\n' "$ksrc" "$out" "${modules[*]}"
	# make check-long: the suites' longer sweeps.
	[ -z "${RIW_LONG:-}" ] || printf 'export RIW_LONG=%q\n' "$RIW_LONG"
	printf 'exec'
	printf ' %q' "$@"
	printf '\n'
} >"$out/.riw-vm/cmd"

# Each link: this side's socket, bound by QEMU (a stale one from an earlier run would make
# the bind fail), and the other side's, to which frames go once that guest has bound it.
nics=()
for link in "${links[@]}"; do
	dir=${link%:*} side=${link##*:}
	[[ $side =~ ^[12]$ ]] && [ -d "$dir" ] || fail "--link wants DIR:1 or DIR:2 with DIR a directory"
	dir=$(realpath "$dir")
	rm -f "$dir/link-$side.sock"
	n=$((${#nics[@]} / 4))
	mac=$(printf '52:54:00:72:%02x:%02x' "$n" "$side") # unique per link and side
	nics+=(-netdev "dgram,id=link$n,local.type=unix,local.path=$dir/link-$side.sock,remote.type=unix,remote.path=$dir/link-$((3 - side)).sock"
		-device "virtio-net-pci,netdev=link$n,mac=$mac")
done

console=$out/console.log
start=$SECONDS
echo "riw-vm: booting $kernel (output in $out)"
# q35, not the default i440fx: enabling each PCI device through i440fx's ACPI interrupt links
# took the debug kernel 25 s under TCG.
# tsc=reliable: under TCG the clocksource watchdog finds the TSC skewed against the emulated
# HPET after some minutes and switches to the HPET, after which each gettimeofday() traps into
# the emulator; perftest's TSC-against-gettimeofday calibration then fails its fit ("Can't
# produce a report"). All vCPUs read one emulated TSC, so it is safe to trust.
# -cpu max without ERMS and FSRM: with them the kernel copies and clears memory by
# "rep movsb", which TCG emulates a byte at a time, slower than the unrolled word copies the
# kernel uses without them. Without LA57, four levels of page tables for TCG to walk, not five.
# A guest whose kernel was tainted while booting says so and stops (selftests/vm/init): its
# console is kept as console.tainted-N.log, and another boots, three times at most.
for boot in 1 2 3; do
	rc=0
	timeout --foreground -k 10 "$timeout" \
		qemu-system-x86_64 -machine q35 -accel tcg,thread=multi -cpu max,erms=off,fsrm=off,la57=off -smp "$smp" -m "$mem" \
			-nodefaults -nic none -no-reboot -display none \
			-chardev stdio,id=con,signal=off,logfile="$console" -serial chardev:con \
			-kernel "$kernel" -initrd "$initrd" \
			-append "console=ttyS0 loglevel=5 printk.time=1 panic=-1 tsc=reliable" \
			-fsdev local,id=root,path=/,readonly=on,security_model=none,multidevs=remap \
			-device virtio-9p-pci,fsdev=root,mount_tag=hostroot \
			-fsdev local,id=out,path="$out",security_model=none,multidevs=remap \
			-device virtio-9p-pci,fsdev=out,mount_tag=riwout \
			"${plugin[@]}" "${nics[@]}" \
		</dev/null || rc=$?
	tainted=$(tr -d '\r' <"$console" | grep -ao "riw-vm-tainted:$nonce:[0-9]*" || true)
	[ -n "$tainted" ] && [ $boot -lt 3 ] || break
	echo "riw-vm: the kernel was tainted (${tainted##*:}) while booting: booting again"
	mv "$console" "$out/console.tainted-$boot.log"
done
echo "riw-vm: guest ran $((SECONDS - start)) s"

# The verdict, from the console: the result marker, else why there is none.
log=$(tr -d '\r' <"$console" 2>/dev/null || true)
result=$(grep -ao "riw-vm-result:$nonce:[0-9]*" <<<"$log" | tail -n1 || true)
if [ -n "$result" ]; then
	status=${result##*:}
	[ "$status" -ne 0 ] || [ -n "$keep_out" ] || rm -rf "$out"
	exit "$status"
fi
if panic=$(grep -a -m1 'Kernel panic - not syncing' <<<"$log"); then
	code=$E_PANIC reason="guest kernel panic: ${panic#*Kernel panic - not syncing: }"
elif [ -n "$tainted" ]; then
	code=$E_NORESULT reason="the kernel was tainted (${tainted##*:}) while booting, three times"
elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
	code=$E_TIMEOUT reason="guest timed out after $timeout s, killed"
elif [ -z "$log" ]; then
	code=$E_SETUP reason="QEMU failed (status $rc) before the guest printed anything"
else
	code=$E_NORESULT reason="guest stopped without reporting a result (QEMU status $rc)"
fi
{
	echo "riw-vm: last console lines ($console):"
	tail -n 40 <<<"$log"
	echo "riw-vm: $reason"
} >&2
exit $code
