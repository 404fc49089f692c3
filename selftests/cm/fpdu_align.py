# SPDX-License-Identifier: GPL-2.0
"""Whether every TCP segment of a captured iWARP stream starts and ends an FPDU.

  python3 -m fpdu_align CAPTURE.pcap SENDER_ADDR

CAPTURE is tcpdump's classic pcap of Ethernet frames, taken on the sender's interface with
segmentation offloads off (so that each frame is one TCP segment). For each TCP connection
from SENDER_ADDR that opens with an MPA request or reply, the stream is rebuilt in sequence
order (retransmissions folded), its FPDUs are walked by their length fields from the end of
the MPA frame, and each segment with payload is checked: it must begin where an FPDU
begins and end where one ends (RFC 5044 FPDU alignment, what a peer that did not agree to
FPDUs of several segments expects). Prints one line per connection and a summary; exit
status 0 if every segment was aligned and at least one FPDU segment was seen, 1 if not.
"""

import socket
import struct
import sys

import iwarp

PCAP_MAGIC = 0xA1B2C3D4
ETH_HEADER_LEN = 14
ETHERTYPE_IPV4 = 0x0800
IPPROTO_TCP = 6


def frames(path):
    """The captured frames of a pcap file, each as bytes (a truncated last one dropped)."""
    with open(path, 'rb') as f:
        data = f.read()
    if len(data) < 24 or struct.unpack('<I', data[:4])[0] != PCAP_MAGIC:
        raise ValueError(f'{path}: not a little-endian pcap file')
    off = 24
    while off + 16 <= len(data):
        caplen = struct.unpack('<I', data[off + 8:off + 12])[0]
        off += 16
        if off + caplen > len(data):
            break
        yield data[off:off + caplen]
        off += caplen


def segments(path, sender):
    """{(source port, destination address, destination port): [(seq, payload)]} of the TCP
    segments with payload that `sender` sent."""
    flows = {}
    for frame in frames(path):
        if len(frame) < ETH_HEADER_LEN + 40:
            continue
        if struct.unpack('>H', frame[12:14])[0] != ETHERTYPE_IPV4:
            continue
        ip = frame[ETH_HEADER_LEN:]
        ihl = (ip[0] & 0xF) * 4
        total = struct.unpack('>H', ip[2:4])[0]
        if ip[9] != IPPROTO_TCP or ip[12:16] != sender:
            continue
        tcp = ip[ihl:total]
        sport, dport, seq = struct.unpack('>HHI', tcp[:8])
        payload = tcp[(tcp[12] >> 4) * 4:]
        if payload:
            flows.setdefault((sport, ip[16:20], dport), []).append((seq, payload))
    return flows


def check(segs):
    """(aligned, misaligned) segments of one direction of a connection, or None if its
    stream does not open with an MPA frame or has a hole."""
    first = min(seq for seq, _ in segs)
    stream = bytearray()
    spans = []
    for off, payload in sorted(((seq - first) & 0xFFFFFFFF, p) for seq, p in segs):
        if off + len(payload) <= len(stream):
            continue
        if off > len(stream):
            return None
        spans.append((off, off + len(payload)))
        stream += payload[len(stream) - off:]
    if stream[:16] not in (iwarp.KEY_REQ, iwarp.KEY_REP):
        return None
    pos = iwarp.MPA_HEADER_LEN + struct.unpack('>H', stream[18:20])[0]
    start = pos
    bounds = set()
    while pos + 2 <= len(stream):
        bounds.add(pos)
        pos += iwarp.wire_len(struct.unpack('>H', stream[pos:pos + 2])[0])
    bounds.add(pos)
    aligned = misaligned = 0
    for begin, end in spans:
        if begin < start:
            continue
        if begin in bounds and end in bounds:
            aligned += 1
        else:
            misaligned += 1
    return aligned, misaligned


def main():
    path, sender = sys.argv[1], socket.inet_aton(sys.argv[2])
    aligned = misaligned = 0
    for (sport, daddr, dport), segs in segments(path, sender).items():
        result = check(segs)
        if result is None:
            continue
        print(f'# {sys.argv[2]}:{sport} -> {socket.inet_ntoa(daddr)}:{dport}: '
              f'{result[0]} segments aligned, {result[1]} not')
        aligned += result[0]
        misaligned += result[1]
    print(f'# {aligned} FPDU segments aligned, {misaligned} not')
    return 0 if aligned and not misaligned else 1


if __name__ == '__main__':
    sys.exit(main())
