#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Wire interoperability with iw_cxgb4's defaults, without Chelsio hardware: cm/cxgb4_peer.py
# is a raw-TCP peer that speaks iWARP as iw_cxgb4 does with its module defaults (MPA revision
# 2, peer-to-peer mode with a Read ready-to-receive, CRC always, at most 256 bytes of private
# data; see its header) and runs rping's protocol. riw runs stock rping on a device on veth0
# (namespace 0, 192.0.2.1); the peer sits on veth1 (namespace 1, 192.0.2.2) with no RDMA
# device.
#
#   resp_*       the peer is rping's server, riw's `rping -c -V` connects to it: with riw's
#                peer_to_peer=0 (no ready-to-receive), and with peer_to_peer=1, where riw
#                offers a Write ready-to-receive and the peer's reply names Read, as
#                iw_cxgb4's reply always does, while it waits for the Write riw offered
#   init_*       riw's `rping -s` listens, the peer connects as rping's client, sends its
#                Read ready-to-receive and takes the zero-length Read Response first
#   init_term    the Terminate iw_cxgb4 sends when a reply's ready-to-receive type differs
#                from its offer, in place of its RTR: riw ends the connection
#   resp_long_pd riw's request with 259 bytes of private data, which iw_cxgb4 aborts (256 at
#                most): riw's client fails at once
#
# Each rping run reports four results: NAME_connect (the MPA exchange and ready-to-receive),
# NAME_data (rping's iterations with the data checked on both sides), NAME_crc (the CRC32c of
# every FPDU riw sent) and NAME_mss (every FPDU riw sent fits the connection's MSS: no longer
# on the wire than one TCP segment, as toward any peer that did not agree to more).
# RIW_LONG (make check-long) adds runs of more sizes.
#
#   aligned_*    what riw sends toward any peer that did not agree to FPDUs of several
#                segments, under load: riw to riw with fpdu_segments=1 (a riw device added
#                on the peer's end), ib_write_bw (the client's Writes) and ib_read_bw (the
#                server's Read Responses) of 64 KiB, captured on veth0 with segmentation
#                offloads off; each TCP segment must start and end an FPDU
#                (cm/fpdu_align.py), also when TCP still held the last one unsent
set -eu
. "$(dirname "$0")/lib.sh"

here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
dev=cx0
RIW4=192.0.2.1 PEER4=192.0.2.2
P2P=/sys/module/riw/parameters/peer_to_peer
export RIW_TIMEOUT_SCALE

# MODE NAME SIZE COUNT PORT PEER_TO_PEER (riw's parameter for the run)
RUNS=(
	"responder resp_64 64 10 7801 0"
	"responder resp_64k 65535 3 7802 0"
	"responder resp_p2p_64 64 10 7803 1"
	"long_pd resp_long_pd - - 7804 0"
	"initiator init_64 64 10 7811 0"
	"initiator init_64k 65535 3 7812 0"
	"term_for_rtr init_term - - 7813 0"
)
# make check-long: 64 KiB in peer-to-peer mode, and sizes just past one segment's ULPDU
# (1442 bytes) and eleven segments' (15922).
if [ -n "${RIW_LONG:-}" ]; then
	RUNS+=(
		"responder resp_p2p_64k 65535 3 7805 1"
		"responder resp_1443 1443 10 7806 0"
		"initiator init_1443 1443 10 7814 0"
		"initiator init_15923 15923 5 7815 0"
	)
fi

ktap_print_header
tmp=$(mktemp -d)
riw_defer rm -rf "$tmp"
# Run as a module, so that Python compiles it once (into the guest's tmpfs), not at every
# start: the tree is read-only.
peer=(env PYTHONPATH="$here/cm" PYTHONPYCACHEPREFIX="$tmp/pycache" "$py" -m cxgb4_peer)
mapfile -t all_checks < <(printf '%s\n' "${RUNS[@]}" | "${peer[@]}" list)
# The peer's checks, aligned_write and aligned_read, nothing_left.
ktap_set_plan $((${#all_checks[@]} + 3))

riw_pair_setup riw riw
in0 rdma link add "$dev" type riw netdev "$RIW_DEV0"
riw_defer rdma link delete "$dev"
p2p_default=$(cat "$P2P")
restore_p2p() { echo "$p2p_default" >"$P2P"; }
riw_defer restore_p2p
echo "# riw device $dev on $RIW_DEV0 $RIW_ADDR0, the cxgb4 peer on $RIW_DEV1 $RIW_ADDR1;" \
	"timeout scale $RIW_TIMEOUT_SCALE"

in_peer=(ip netns exec "$RIW_NS1" "${peer[@]}")
in_riw=(ip netns exec "$RIW_NS0")
for r in "${RUNS[@]}"; do
	read -r mode name size count port p2p <<<"$r"
	mapfile -t checks < <(printf '%s\n' "${all_checks[@]}" | grep -E "^$name(_[a-z]+)? ")
	echo "$p2p" >"$P2P"
	case $mode in
	responder)
		cmd=("${in_peer[@]}" responder $PEER4 "$port" "$name" "$size" "$count" --
			"${in_riw[@]}" rping -c -V -a $PEER4 -p "$port" -S "$size" -C "$count") ;;
	initiator)
		cmd=("${in_peer[@]}" initiator $RIW4 "$port" "$name" "$size" "$count" --
			"${in_riw[@]}" rping -s -a $RIW4 -p "$port" -S "$size" -C "$count") ;;
	term_for_rtr)
		cmd=("${in_peer[@]}" term_for_rtr $RIW4 "$port" "$name" --
			"${in_riw[@]}" rping -s -a $RIW4 -p "$port") ;;
	long_pd)
		cmd=("${in_peer[@]}" long_pd $PEER4 "$port" "$name" --
			"${in_riw[@]}" "${peer[@]}" rdma_connect $PEER4 "$port" 255) ;;
	esac
	echo "# --- $name: riw's peer_to_peer=$p2p"
	riw_run_part 60 cxgb4 checks "${cmd[@]}"
done
restore_p2p

# Streams of one-segment FPDUs, each TCP segment of them captured as it leaves.
SEGMENTS=/sys/module/riw/parameters/fpdu_segments
segments_default=$(cat "$SEGMENTS")
restore_segments() { echo "$segments_default" >"$SEGMENTS"; }
riw_defer restore_segments
echo 1 >"$SEGMENTS"
ip netns exec "$RIW_NS1" rdma link add cy0 type riw netdev "$RIW_DEV1"
riw_defer rdma link delete cy0
in0 ethtool -K "$RIW_DEV0" tso off gso off
ip netns exec "$RIW_NS1" ethtool -K "$RIW_DEV1" tso off gso off
aligned_stream() { # TOOL PORT SENDER_ADDR
	local tool=$1 port=$2 sender=$3 lim=$((30 * RIW_TIMEOUT_SCALE)) dump rc=0
	local opts=(-R -p "$port" -s 65536 -n 100)
	# Not through in0: $! is then tcpdump itself (ip execs it), which the signal must reach.
	ip netns exec "$RIW_NS0" tcpdump -q -i "$RIW_DEV0" -s 0 -B 32768 -w "$tmp/aligned.pcap" \
		tcp port "$port" 2>"$tmp/tcpdump.log" &
	dump=$!
	riw_poll 10 grep -q listening "$tmp/tcpdump.log" || echo "tcpdump did not start"
	ip netns exec "$RIW_NS1" timeout "$lim" "$tool" -d cy0 "${opts[@]}" >"$tmp/srv.log" 2>&1 &
	riw_poll 10 riw_tcp_listening "$port" "$RIW_NS1" || echo "nothing listens on $port"
	in0 timeout "$lim" "$tool" -d "$dev" "${opts[@]}" $PEER4 || rc=$?
	wait $! || rc=$?
	kill -INT "$dump"
	wait "$dump" || true
	cat "$tmp/tcpdump.log"
	[ $rc -eq 0 ] || { cat "$tmp/srv.log"; return 1; }
	(cd "$here/cm" && PYTHONPYCACHEPREFIX="$tmp/pycache" $py -m fpdu_align \
		"$tmp/aligned.pcap" "$sender")
}
riw_check "aligned_write: each TCP segment of riw's 64 KiB Writes holds whole FPDUs" 60 \
	aligned_stream ib_write_bw 7821 $RIW4 || true
riw_check "aligned_read: each TCP segment of riw's 64 KiB Read Responses holds whole FPDUs" \
	60 aligned_stream ib_read_bw 7822 $PEER4 || true
in0 ethtool -K "$RIW_DEV0" tso on gso on
ip netns exec "$RIW_NS1" ethtool -K "$RIW_DEV1" tso on gso on
restore_segments

# No QP or rdma_cm id of riw's device, and no connection socket in its namespace
# (listeners and TIME-WAIT aside).
count_left() {
	local what
	for what in qp cm_id; do
		rdma -j resource show "$what" | $py -c '
import json, sys
print(sum(1 for r in json.load(sys.stdin) if r.get("ifname") == "'$dev'"))'
	done
	in0 ss -Htan | grep -cv -e '^LISTEN' -e '^TIME-WAIT' || true
}
nothing_left() {
	[ "$(count_left | sort -u)" = 0 ]
}
t_nothing_left() {
	riw_poll 15 nothing_left && return 0
	rdma resource show qp
	rdma resource show cm_id
	in0 ss -tan
	return 1
}
riw_check "nothing_left: no QP, rdma_cm id or connection of riw's device stays" 30 \
	t_nothing_left || true

ktap_finished
