#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Boot two test guests joined by an Ethernet link and run one command in the first:
#
#   selftests/vm/pair.sh [--variant debug|release] [--module FILE.ko]... [--timeout SECONDS]
#                        [--out DIR] [--smp N] [--mem SIZE] -- COMMAND [ARGS...]
#
# The second guest (the peer) serves commands for the first over the link
# (selftests/vm/peer.py): COMMAND runs with RIW_PEER (the peer's address), RIW_LINK (the
# first guest's end of the link, a virtio-net NIC, down) and RIW_LINK_ADDR (the address with
# prefix for it) in its environment, and reaches the peer with riw_peer (selftests/lib.sh). Both guests boot the same kernel
# with the same modules, each with --smp vCPUs (default 1: a 2-core host's fair share each),
# and the link is QEMU's, between the two processes only (selftests/vm/run.sh --link).
#
# The first guest's run is run.sh's with --out DIR; the peer's console and logs are in
# DIR/peer. Exit status: the first guest's, as run.sh gives it. The peer is stopped when the
# first guest is done (or it stopped itself, or a test powered it off).
set -euo pipefail

here=$(dirname "${BASH_SOURCE[0]}")
FIRST_ADDR=192.0.2.101 PEER_ADDR=192.0.2.102 PREFIX=24

args=() out= smp=1
while [ $# -gt 0 ]; do
	case $1 in
	--variant | --module | --timeout | --mem) args+=("$1" "${2:?}"); shift 2 ;;
	--out) out=${2:?}; shift 2 ;;
	--smp) smp=${2:?}; shift 2 ;;
	--) shift; break ;;
	*) sed -n '6,7s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2; exit 120 ;;
	esac
done
[ $# -gt 0 ] || { echo "pair: no COMMAND" >&2; exit 120; }
keep_out=1
if [ -z "$out" ]; then
	out=$(mktemp -d "${TMPDIR:-/tmp}/riw-pair.XXXXXX")
	keep_out=
fi
mkdir -p "$out/peer" "$out/link"
out=$(realpath "$out")

# The peer in a process group of its own, so that QEMU goes with it.
echo "pair: peer guest console in $out/peer/console.log" >&2
setsid "$here/run.sh" "${args[@]}" --smp "$smp" --out "$out/peer" --link "$out/link:2" \
	-- selftests/vm/peer.py serve eth0 "$PEER_ADDR/$PREFIX" >/dev/null 2>"$out/peer/run.err" &
peer=$!
stop_peer() {
	kill -TERM -- "-$peer" 2>/dev/null || true
	wait "$peer" 2>/dev/null || true
}
trap stop_peer EXIT

rc=0
"$here/run.sh" "${args[@]}" --smp "$smp" --out "$out" --link "$out/link:1" \
	-- env RIW_PEER="$PEER_ADDR" RIW_LINK=eth0 RIW_LINK_ADDR="$FIRST_ADDR/$PREFIX" "$@" || rc=$?
# A peer still serving is stopped at once; one that reported its own end has its logs.
stop_peer
trap - EXIT
[ $rc -ne 0 ] || [ -n "$keep_out" ] || rm -rf "$out"
exit $rc
