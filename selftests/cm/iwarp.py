# SPDX-License-Identifier: GPL-2.0
"""iWARP wire formats for the Python test peers (hostile.py, cxgb4_peer.py).

MPA frames and FPDU framing with the CRC32c trailer (RFC 5044, RFC 6581), DDP segment
headers (RFC 5041) and RDMAP headers (RFC 5040). Byte strings in, byte strings out: no
sockets here.
"""

import struct

KEY_REQ = b'MPA ID Req Frame'
KEY_REP = b'MPA ID Rep Frame'
MPA_HEADER_LEN = 20
F_MARKERS, F_CRC, F_REJECT, F_ENHANCED = 0x80, 0x40, 0x20, 0x10

# The revision 2 IRD/ORD words (RFC 6581): flags in the top two bits, the depth below.
IRD_P2P, IRD_RTR_SEND = 0x8000, 0x4000
ORD_RTR_WRITE, ORD_RTR_READ = 0x8000, 0x4000
IRD_ORD_MASK = 0x3FFF

# RDMAP opcodes.
WRITE, READ_REQUEST, READ_RESPONSE, SEND, SEND_INV, SEND_SE, SEND_SE_INV, TERMINATE = range(8)
OPCODE_NAMES = ['Write', 'Read Request', 'Read Response', 'Send', 'Send with Invalidate',
                'Send with SE', 'Send with SE and Invalidate', 'Terminate']
SENDS = (SEND, SEND_INV, SEND_SE, SEND_SE_INV)
# Untagged queues.
QN_SEND, QN_READ, QN_TERMINATE = 0, 1, 2

TAGGED_HEADER_LEN = 14
UNTAGGED_HEADER_LEN = 18
READ_REQUEST_LEN = 28
# Everything an FPDU adds to its DDP segment: the length field and the CRC (pad aside).
FPDU_OVERHEAD = 6


def _crc_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


CRC_TABLE = _crc_table()


def crc32c(data):
    c = 0xFFFFFFFF
    t = CRC_TABLE
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def pad_len(ulpdu_len):
    """Bytes of pad after a ULPDU of this length, so that length field, ULPDU and pad fill
    whole 4-byte words."""
    return -(ulpdu_len + 2) % 4


def wire_len(ulpdu_len):
    """An FPDU's length on the wire: length field, ULPDU, pad, CRC."""
    return ulpdu_len + pad_len(ulpdu_len) + FPDU_OVERHEAD


def fpdu(ulpdu, crc=True, crc_xor=0):
    """An FPDU around a ULPDU (a DDP segment): its CRC32c (0 without CRC, corrupted by
    crc_xor when asked), least significant byte first."""
    frame = struct.pack('>H', len(ulpdu)) + ulpdu + bytes(pad_len(len(ulpdu)))
    return frame + struct.pack('<I', (crc32c(frame) if crc else 0) ^ crc_xor)


def max_payload(mss, header_len):
    """The largest DDP payload whose FPDU, with a header of header_len, fits mss bytes."""
    return (mss - 4) // 4 * 4 - 2 - header_len


def _control(tagged, last, opcode):
    # DDP: T, L, reserved, DDP version 1. RDMAP: version 1, reserved, opcode.
    return bytes([(0x80 if tagged else 0) | (0x40 if last else 0) | 0x01, 0x40 | opcode])


def tagged(opcode, stag, to, payload=b'', last=True):
    """A tagged DDP segment: RDMA Write or Read Response."""
    return _control(True, last, opcode) + struct.pack('>IQ', stag, to) + payload


def untagged(opcode, qn, msn, mo=0, payload=b'', last=True, rsvd=0):
    """An untagged DDP segment; rsvd is the RDMAP word before the queue number (the STag
    to invalidate of a Send with Invalidate)."""
    return _control(False, last, opcode) + struct.pack('>IIII', rsvd, qn, msn, mo) + payload


def read_request(sink_stag, sink_to, size, src_stag, src_to):
    """The RDMAP header of a Read Request."""
    return struct.pack('>IQIIQ', sink_stag, sink_to, size, src_stag, src_to)


def terminate(layer_etype, ecode, hdrct=0, headers=b''):
    """A Terminate's payload: layer and error type, error code, which headers follow."""
    return bytes([layer_etype, ecode]) + struct.pack('>H', hdrct) + headers


class Segment:
    """A parsed DDP segment (the ULPDU of an FPDU)."""

    def __init__(self, ulpdu):
        if len(ulpdu) < 2:
            raise ValueError(f'a ULPDU of {len(ulpdu)} bytes')
        self.raw = ulpdu
        c0, c1 = ulpdu[0], ulpdu[1]
        self.tagged, self.last = bool(c0 & 0x80), bool(c0 & 0x40)
        self.ddp_version, self.rdmap_version = c0 & 0x03, c1 >> 6
        self.opcode = c1 & 0x0F
        self.stag = self.to = self.qn = self.msn = self.mo = self.rsvd = None
        if self.tagged:
            if len(ulpdu) < TAGGED_HEADER_LEN:
                raise ValueError(f'a tagged segment of {len(ulpdu)} bytes')
            self.stag, self.to = struct.unpack('>IQ', ulpdu[2:14])
            self.payload = ulpdu[14:]
        else:
            if len(ulpdu) < UNTAGGED_HEADER_LEN:
                raise ValueError(f'an untagged segment of {len(ulpdu)} bytes')
            self.rsvd, self.qn, self.msn, self.mo = struct.unpack('>IIII', ulpdu[2:18])
            self.payload = ulpdu[18:]

    def name(self):
        return OPCODE_NAMES[self.opcode] if self.opcode < len(OPCODE_NAMES) else \
            f'opcode {self.opcode}'

    def __str__(self):
        where = (f'STag 0x{self.stag:x} TO 0x{self.to:x}' if self.tagged else
                 f'queue {self.qn} MSN {self.msn} MO {self.mo}')
        return (f'{self.name()} ({"tagged" if self.tagged else "untagged"}, '
                f'{"last" if self.last else "not last"}, {where}, '
                f'{len(self.payload)} bytes)')


def mpa_frame(key, flags, rev, pd, pd_len=None):
    """An MPA request or reply: key, flags, revision, private data length, private data."""
    return key + bytes([flags, rev]) + struct.pack(
        '>H', len(pd) if pd_len is None else pd_len) + pd


def enhanced_words(ird, ord_):
    """The revision 2 IRD/ORD words, flags included."""
    return struct.pack('>HH', ird, ord_)
