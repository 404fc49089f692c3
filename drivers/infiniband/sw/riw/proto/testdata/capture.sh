#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Records the siw<->siw captures in this directory, which tests/captures.rs decodes with the
# protocol core's parsers. Regenerate them from the repository's top directory with
#
#   drivers/infiniband/sw/riw/proto/testdata/capture.sh
#
# (needs the cached release kernel, scripts/build-kernel.sh release, and tcpdump, rping and
# perftest on the host, scripts/install-deps.sh). That host side builds a second copy of the
# kernel's stock siw driver, "siw_crc", whose only change is that it asks for MPA CRCs (siw's
# mpa_crc_required and mpa_crc_strict are compile-time constants, false, in 6.12; no module
# parameter switches them), boots the guest with selftests/vm/run.sh --variant release and runs
# this script in it again as "capture.sh guest". The guest side joins two network namespaces by
# a veth pair (192.0.2.1 and 192.0.2.2), adds siw0 and siw1 on its ends and records, with
# tcpdump on veth0 and a filter on the RDMA connection's TCP port only:
#
#   rping-{nocrc,crc}.pcap         rping -C 3 -S 64 -V: Sends, RDMA Reads and Writes
#   write_bw-{nocrc,crc}.pcap      ib_write_bw -R -n 5 -s 4096 (rdma_cm): RDMA Writes
#
# first with the stock siw (no CRC), then with siw_crc on both ends (CRC required). The host
# side copies the pcaps here; nothing else changes.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

host() {
	. "$here/../../../../../../scripts/toolchain.sh"
	local kdir build out
	kdir=$(riw_kernel_dir release)/linux
	[ -f "$kdir/drivers/infiniband/sw/siw/siw_main.c" ] || {
		echo "capture.sh: no release kernel tree at $kdir" >&2
		exit 1
	}
	build=$(mktemp -d "${TMPDIR:-/tmp}/riw-capture.XXXXXX")
	out=$build/out
	mkdir -p "$build/siw_crc" "$out"
	cp "$kdir"/drivers/infiniband/sw/siw/{siw_*.c,*.h} "$build/siw_crc/"
	sed -i 's/^const bool mpa_crc_required;$/const bool mpa_crc_required = true;/' \
		"$build/siw_crc/siw_main.c"
	grep -q '^const bool mpa_crc_required = true;$' "$build/siw_crc/siw_main.c" || {
		echo "capture.sh: siw_main.c no longer has the mpa_crc_required constant" >&2
		exit 1
	}
	local objs
	objs=$(cd "$build/siw_crc" && ls ./*.c | sed 's|^\./||; s|\.c$|.o|' | tr '\n' ' ')
	printf 'obj-m := siw_crc.o\nsiw_crc-y := %s\n' "$objs" >"$build/siw_crc/Kbuild"
	make -s -C "$kdir" "${RIW_KMAKE_FLAGS[@]}" M="$build/siw_crc" modules
	"$RIW_TOP/selftests/vm/run.sh" --variant release --timeout 900 --out "$out" \
		--module "$build/siw_crc/siw_crc.ko" -- "$here/capture.sh" guest
	cp "$out"/*.pcap "$here/"
	ls -l "$here"/*.pcap
	rm -rf "$build"
}

# --- guest side ---

ns0=riwcap0 ns1=riwcap1 addr0=192.0.2.1 addr1=192.0.2.2
in0() { ip netns exec $ns0 "$@"; }
in1() { ip netns exec $ns1 "$@"; }

# Waits up to 20 s for a TCP listener on port $1 in the server namespace.
listening() {
	local i
	for i in $(seq 100); do
		in1 ss -Hltn "sport = :$1" | grep -q . && return 0
		sleep 0.2
	done
	echo "capture.sh: nothing listens on port $1" >&2
	return 1
}

# record NAME FILTER CMD...: runs CMD while tcpdump records FILTER on veth0 into NAME.pcap.
record() {
	local name=$1 filter=$2 dump
	shift 2
	in0 tcpdump -Z root -i veth0 -s 0 -U -w "$RIW_OUT/$name.pcap" "$filter" 2>"$RIW_OUT/$name.tcpdump" &
	dump=$!
	sleep 2 # tcpdump has no "ready" signal; give it time to open the socket
	"$@"
	sleep 1
	kill -INT $dump
	wait $dump || true
	cat "$RIW_OUT/$name.tcpdump"
	rm -f "$RIW_OUT/$name.tcpdump"
}

run_rping() {
	in1 timeout 60 rping -s -a $addr1 -C 3 -S 64 -V &
	local server=$!
	listening 7174
	in0 timeout 60 rping -c -a $addr1 -C 3 -S 64 -V
	wait $server
}

# perftest's out-of-band exchange runs over rdma_cm too with -R (on its port, 18515), then
# the test's own connection follows on the same port: both are MPA connections.
run_write_bw() {
	in1 timeout 60 ib_write_bw -R -n 5 -s 4096 -p 18515 >/dev/null &
	local server=$!
	sleep 3
	in0 timeout 60 ib_write_bw -R -n 5 -s 4096 -p 18515 $addr1
	wait $server
}

links() {
	in0 rdma link add siw0 type siw netdev veth0
	in1 rdma link add siw1 type siw netdev veth1
}

unlinks() {
	rdma link delete siw0
	rdma link delete siw1
}

guest() {
	ip netns add $ns0
	ip netns add $ns1
	in0 ip link add veth0 type veth peer name veth1 netns $ns1
	in0 ip addr add $addr0/24 dev veth0
	in1 ip addr add $addr1/24 dev veth1
	for ns in $ns0 $ns1; do
		ip -n $ns link set lo up
	done
	in0 ip link set veth0 up
	in1 ip link set veth1 up
	# No TSO/GSO: every TCP segment on the wire is one the capture holds whole.
	in0 ethtool -K veth0 tso off gso off gro off 2>/dev/null || true
	in1 ethtool -K veth1 tso off gso off gro off 2>/dev/null || true

	for crc in nocrc crc; do
		if [ $crc = crc ]; then
			modprobe -r siw
			modprobe siw_crc
		fi
		links
		record "rping-$crc" "tcp port 7174" run_rping
		record "write_bw-$crc" "tcp port 18515" run_write_bw
		unlinks
	done
	modprobe -r siw_crc
	ls -l "$RIW_OUT"/*.pcap
}

case ${1:-host} in
host) host ;;
guest) guest ;;
*) echo "usage: $0 [host|guest]" >&2; exit 2 ;;
esac
