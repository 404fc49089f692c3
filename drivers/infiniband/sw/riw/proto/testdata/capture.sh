#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Records the siw<->siw captures in this directory, which tests/captures.rs decodes with the
# protocol core's parsers. Regenerate them from the repository's top directory with
#
#   drivers/infiniband/sw/riw/proto/testdata/capture.sh
#
# (needs the cached release kernel, scripts/build-kernel.sh release, and tcpdump, rping and
# perftest on the host, scripts/install-deps.sh). In 6.12, siw's MPA settings are compile-time
# constants (mpa_crc_required, peer_to_peer, ...: all false, no module parameters), so the host
# side builds two more copies of the kernel's own siw sources, each differing from the stock
# driver in one constant and in its link type, so that "rdma link add" never autoloads two:
#
#   siw_crc    mpa_crc_required = true    link type siw_crc
#   siw_p2p    peer_to_peer = true        link type siw_p2p
#
# It boots the guest with selftests/vm/run.sh --variant release, runs this script in it again
# as "capture.sh guest" and copies the pcaps here. The guest side joins two network namespaces
# by a veth pair (192.0.2.1 and 192.0.2.2), adds siw0 and siw1 on its ends and records, with
# tcpdump on veth0 and a filter on the test's TCP port only:
#
#   rping-nocrc.pcap, rping-crc.pcap          rping -C 3 -S 64 -V: Sends, RDMA Reads and Writes
#   write_bw-nocrc.pcap, write_bw-crc.pcap    ib_write_bw -R -n 5 -s 4096: perftest's exchange
#                                             (Sends) and the test (RDMA Writes), each on an
#                                             rdma_cm connection of its own on port 18515
#   rping-p2p-nocrc.pcap                      rping as above, MPA peer-to-peer mode: the
#                                             initiator's zero-length ready-to-receive first
#
# "nocrc" with the stock siw, "crc" with siw_crc, "p2p" with siw_p2p, on both ends each time.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# build_variant KDIR DIR NAME CONSTANT: builds DIR/NAME/NAME.ko from KDIR's siw sources with
# "const bool CONSTANT;" set to true and link type NAME.
build_variant() {
	local kdir=$1 dir=$2/$3 name=$3 constant=$4 objs
	mkdir -p "$dir"
	cp "$kdir"/drivers/infiniband/sw/siw/{siw_*.c,*.h} "$dir/"
	sed -i -e "s/^const bool $constant;\$/const bool $constant = true;/" \
		-e "s/^\\t\\.type = \"siw\",\$/\\t.type = \"$name\",/" \
		-e "s/^MODULE_ALIAS_RDMA_LINK(\"siw\");\$/MODULE_ALIAS_RDMA_LINK(\"$name\");/" \
		"$dir/siw_main.c"
	[ "$(grep -c -e "^const bool $constant = true;\$" -e "\"$name\"" "$dir/siw_main.c")" = 3 ] || {
		echo "capture.sh: siw_main.c changed; cannot derive $name from it" >&2
		exit 1
	}
	objs=$(cd "$dir" && ls ./*.c | sed 's|^\./||; s|\.c$|.o|' | tr '\n' ' ')
	printf 'obj-m := %s.o\n%s-y := %s\n' "$name" "$name" "$objs" >"$dir/Kbuild"
	make -s -C "$kdir" "${RIW_KMAKE_FLAGS[@]}" M="$dir" modules
}

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
	mkdir -p "$out"
	build_variant "$kdir" "$build" siw_crc mpa_crc_required
	build_variant "$kdir" "$build" siw_p2p peer_to_peer
	"$RIW_TOP/selftests/vm/run.sh" --variant release --timeout 900 --out "$out" \
		--module "$build/siw_crc/siw_crc.ko" --module "$build/siw_p2p/siw_p2p.ko" \
		-- "$here/capture.sh" guest
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
	# Not through in0: $! must be tcpdump's own pid (ip netns exec execs it), and SIGTERM, as
	# a background job ignores SIGINT.
	ip netns exec $ns0 tcpdump -Z root -i veth0 -s 0 -U -w "$RIW_OUT/$name.pcap" "$filter" \
		2>"$RIW_OUT/$name.tcpdump" &
	dump=$!
	sleep 2 # tcpdump has no "ready" signal; give it time to open the socket
	"$@"
	sleep 1
	kill -TERM $dump
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
	in0 rdma link add siw0 type "$1" netdev veth0
	in1 rdma link add siw1 type "$1" netdev veth1
}

unlinks() {
	rdma link delete siw0
	rdma link delete siw1
}

guest() {
	# A tcpdump left behind would keep the guest's output pipe, and so the guest, open.
	trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
	ip netns add $ns0
	ip netns add $ns1
	# Distinct ifindexes: a wildcard rdma_cm listen (perftest's server) makes siw bind one
	# socket per device, tied to that device's netdev by ifindex, all in the listener's
	# namespace; with veth0 and veth1 both ifindex 2 there, the second bind is refused.
	in0 ip link add veth0 index 10 type veth peer name veth1 index 11 netns $ns1
	in0 ip addr add $addr0/24 dev veth0
	in1 ip addr add $addr1/24 dev veth1
	for ns in $ns0 $ns1; do
		ip -n $ns link set lo up
	done
	in0 ip link set veth0 up
	in1 ip link set veth1 up

	local mode module
	for mode in nocrc:siw crc:siw_crc p2p:siw_p2p; do
		module=${mode#*:} mode=${mode%:*}
		links "$module"
		if [ "$mode" = p2p ]; then
			record rping-p2p-nocrc "tcp port 7174" run_rping
		else
			record "rping-$mode" "tcp port 7174" run_rping
			record "write_bw-$mode" "tcp port 18515" run_write_bw
		fi
		unlinks
		modprobe -r "$module"
	done
	dmesg | grep -i -e siw -e warn -e bug || true
	ls -l "$RIW_OUT"/*.pcap
}

case ${1:-host} in
host) host ;;
guest) guest ;;
*) echo "usage: $0 [host|guest]" >&2; exit 2 ;;
esac
