#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""A test peer that speaks iWARP as iw_cxgb4 does with its module defaults, over a plain TCP
socket, and runs rping's protocol against a stock rping on a riw device (riw_cxgb4.sh runs
it as `python3 -m cxgb4_peer`, with this directory on PYTHONPATH).

  cxgb4_peer.py responder ADDR PORT NAME SIZE COUNT -- CMD...
        listen on ADDR PORT as an rping server behind iw_cxgb4; CMD is riw's
        `rping -c -V -S SIZE -C COUNT` toward it
  cxgb4_peer.py initiator ADDR PORT NAME SIZE COUNT -- CMD...
        start CMD, riw's `rping -s -S SIZE` on ADDR PORT, and connect to it as an rping
        client behind iw_cxgb4
  cxgb4_peer.py term_for_rtr ADDR PORT NAME -- CMD...
        as initiator, answer riw's reply with the Terminate iw_cxgb4 sends when a reply's
        ready-to-receive type differs from its offer
  cxgb4_peer.py long_pd ADDR PORT NAME -- CMD...
        as responder, refuse a request with more than 256 bytes of private data as
        iw_cxgb4 does (CMD: this script's rdma_connect with 255 bytes)
  cxgb4_peer.py list
        for each line "MODE NAME [SIZE COUNT]" of its input, the checks such a run reports,
        "name description" a line
  cxgb4_peer.py rdma_connect ADDR PORT PD_LEN
        riw's side of long_pd: a librdmacm client (ctypes) that connects with PD_LEN bytes of
        private data; exits 0 if connected, 2 if the connection was refused or failed

What it models, from iw_cxgb4 (drivers/infiniband/hw/cxgb4, Linux 6.12) with its defaults
peer2peer=1, p2p_type=1 (Read), mpa_rev=2, crc_enabled=1, markers_enabled=0, read depth 32:
  - initiator (send_mpa_req, process_mpa_reply, build_rtr_msg in qp.c): a revision 2
    request asking for CRC, enhanced, with the ULP's IRD and ORD (ORD at least 1), the
    peer-to-peer bit and exactly one ready-to-receive type, Read. The reply's CRC flag is
    ORed with its own; the reply's IRD/ORD cut or raise its own (relaxed negotiation); a
    reply whose ready-to-receive type is not Read (none at all included) is answered by a
    Terminate (layer/type 0x23, MPA error 0x07 "no matching RTR") and a close. Otherwise its
    first FPDU is the RTR: a zero-length Read Request, sink STag 1 TO 1, source STag 1 TO 1.
  - responder (process_mpa_request, c4iw_accept_cr, send_mpa_reply): refuses by abort
    (reset) a revision above 2, a wrong key or more than 256 bytes of private data; records
    the type the initiator offered (Write checked first, then Read; with revision 1, its own
    type); takes IRD/ORD capped at 32; on accept cuts its ORD to the initiator's IRD and
    raises its IRD to the initiator's ORD, and an IRD of 0 becomes 1 with a Read RTR; its
    reply always advertises its own type, Read, whatever it recorded, and it then expects
    the RTR the initiator offered as the first FPDU (else Terminate 0x23/0x07).
  - CRC on every FPDU in both directions (its flag ORed with the peer's); no markers.
The ULP on the peer's side is rping's: conn param IRD 1 and ORD 1 as client, rdma_accept
with none as server (librdmacm then takes the request's ORD and IRD as its IRD and ORD).

rping's protocol (librdmacm/examples/rping.c): per iteration the client SENDs
{buf, rkey, size} (struct rping_rdma_info, network order) of its start buffer, the server
RDMA READs it and SENDs 16 bytes as an ack, the client SENDs the same for its rdma buffer,
the server RDMA WRITEs the data there (up to and with its first NUL) and SENDs another ack;
with -V the client compares the buffers. The client disconnects after COUNT iterations.
The peer checks the data it reads (rping's start buffer pattern) or gets written back.

Every FPDU riw sends is checked: its CRC32c, and its length on the wire (MPA length field,
ULPDU, pad, CRC) against the MSS of the peer's socket (TCP_MAXSEG): FPDUs are to fit one TCP
segment toward a peer that did not agree to more (RFC 5044 MULPDU). The peer's own FPDUs fit
its MSS. Every DDP/RDMAP field riw sends is checked too (versions, queue numbers, MSNs,
message offsets, STags and TOs against the peer's buffers).

A run prints "RESULT pass|fail|skip NAME [reason]" per check; every other line is
diagnostics. Time bounds are multiplied by RIW_TIMEOUT_SCALE.
"""

import collections
import os
import socket
import struct
import subprocess
import sys
import time
import traceback

import iwarp
from iwarp import (F_CRC, F_ENHANCED, F_MARKERS, F_REJECT, IRD_ORD_MASK, IRD_P2P,
                   IRD_RTR_SEND, KEY_REP, KEY_REQ, MPA_HEADER_LEN, ORD_RTR_READ, ORD_RTR_WRITE,
                   QN_READ, QN_SEND, QN_TERMINATE, READ_REQUEST, READ_RESPONSE, SENDS,
                   TAGGED_HEADER_LEN, TERMINATE, UNTAGGED_HEADER_LEN, WRITE, Segment)

SCALE = int(os.environ.get('RIW_TIMEOUT_SCALE', '1') or 1)
# Seconds (scaled): to connect and finish the MPA exchange; for one FPDU or message to come;
# for riw to end a connection it must end; for CMD to exit once the peer is done.
CONNECT_BOUND = 10
FPDU_BOUND = 20
CLOSE_BOUND = 5
CMD_BOUND = 20

# iw_cxgb4's module defaults.
PEER2PEER = True
P2P_TYPE = 'read'
MPA_REV = 2
CRC_ENABLED = True
MAX_READ_DEPTH = 32
MAX_PRIVATE_DATA = 256
# Its Terminate for MPA-level failures: layer LLP with its own error type 3, then the code.
TERM_MPA = 0x23
TERM_INSUFFICIENT_IRD = 0x06
TERM_NO_MATCHING_RTR = 0x07
# The values its RTR carries (build_rtr_msg).
RTR_STAG, RTR_TO = 1, 1

# rping's side of the peer: its conn param, receive buffer and the peer's buffers.
RPING_IRD = RPING_ORD = 1
RPING_INFO = struct.Struct('>QII')
START_STAG, START_TO = 0x00c4b101, 0x00007f4c00100000
RDMA_STAG, RDMA_TO = 0x00c4b202, 0x00007f4c00200000


class Failed(Exception):
    pass


class Closed(Exception):
    """The connection ended (end of stream or reset)."""


class Terminated(Exception):
    """riw sent a Terminate."""


class Violation(Exception):
    """riw broke the protocol."""


def ms(t0):
    return f'{time.time() - t0:.1f} s'


# ---- the connection ----

class Wire:
    """The TCP stream: MPA frames, then FPDUs, each one checked and counted."""

    def __init__(self, sock):
        self.sock = sock
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.mss = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG)
        self.buf = bytearray()
        self.crc = True
        self.fpdus = 0
        self.largest = 0
        self.oversize = collections.Counter()
        self.crc_errors = []

    def _fill(self, n, deadline, what):
        while len(self.buf) < n:
            left = deadline - time.time()
            if left <= 0:
                raise Failed(f'nothing more from riw within the bound, waiting for {what} '
                             f'({len(self.buf)} of {n} bytes here)')
            self.sock.settimeout(left)
            try:
                d = self.sock.recv(max(65536, n - len(self.buf)))
            except socket.timeout:
                continue
            except (ConnectionResetError, BrokenPipeError) as ex:
                raise Closed(f'connection reset ({ex}) waiting for {what}') from None
            if not d:
                raise Closed(f'connection closed by riw waiting for {what}'
                             + (f', {len(self.buf)} bytes of it here' if self.buf else ''))
            self.buf += d

    def take(self, n, deadline, what):
        self._fill(n, deadline, what)
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def read_mpa(self, deadline, what, pd_limit=None):
        """An MPA frame: (header, private data). With pd_limit, returns the header alone
        when its private data length exceeds it."""
        hdr = self.take(MPA_HEADER_LEN, deadline, what)
        pd_len = struct.unpack('>H', hdr[18:20])[0]
        if pd_limit is not None and pd_len > pd_limit:
            return hdr, None
        return hdr, self.take(pd_len, deadline, what)

    def read_fpdu(self, deadline, what):
        ln = struct.unpack('>H', self.take(2, deadline, what))[0]
        rest = self.take(ln + iwarp.pad_len(ln) + 4, deadline, what)
        self.fpdus += 1
        wire = iwarp.wire_len(ln)
        self.largest = max(self.largest, wire)
        if wire > self.mss:
            self.oversize[wire] += 1
        if self.crc:
            frame = struct.pack('>H', ln) + rest[:-4]
            got, want = struct.unpack('<I', rest[-4:])[0], iwarp.crc32c(frame)
            if got != want:
                self.crc_errors.append(f'FPDU {self.fpdus} ({ln} bytes): CRC 0x{got:08x}, '
                                       f'computed 0x{want:08x}')
                raise Violation(f'FPDU {self.fpdus} has a wrong CRC')
        try:
            return Segment(rest[:ln])
        except ValueError as ex:
            raise Violation(f'FPDU {self.fpdus}: {ex}') from None

    def send(self, data):
        self.sock.sendall(data)

    def send_fpdu(self, ulpdu):
        assert iwarp.wire_len(len(ulpdu)) <= self.mss
        self.sock.sendall(iwarp.fpdu(ulpdu, self.crc))

    def abort(self):
        """Close with a reset, as iw_cxgb4 aborts a connection."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
        self.sock.close()

    def fpdu_summary(self):
        return f'{self.fpdus} FPDUs from riw, the largest {self.largest} bytes on the wire'


class Read:
    """A Read Request the peer issued: where its Read Responses go."""

    def __init__(self, sink_stag, sink_to, size, tag):
        self.sink_stag, self.sink_to, self.size, self.tag = sink_stag, sink_to, size, tag
        self.got = 0


class Rnic:
    """The peer's queue pair: its registered buffers, message sequence numbers, the Read
    Requests outstanding, and the SENDs received."""

    def __init__(self, wire):
        self.w = wire
        self.regions = {}
        self.out_msn = {QN_SEND: 1, QN_READ: 1, QN_TERMINATE: 1}
        self.in_msn = {QN_SEND: 1, QN_READ: 1, QN_TERMINATE: 1}
        self.partial = None
        self.recvs = collections.deque()
        self.reads = collections.deque()
        self.reads_done = set()
        # Responder: the ready-to-receive type riw's first FPDU must be.
        self.expect_rtr = None
        # Initiator: the zero-length Read Response to the RTR must come first.
        self.rtr_response_first = False
        self.rtr_seen = None
        self.rtr_error = None
        self.reads_served = 0
        self.writes_placed = 0
        self.recv_size = RPING_INFO.size
        self.tagged_max = iwarp.max_payload(wire.mss, TAGGED_HEADER_LEN)
        self.untagged_max = iwarp.max_payload(wire.mss, UNTAGGED_HEADER_LEN)

    def register(self, stag, to, size, remote_read, remote_write):
        self.regions[stag] = (to, bytearray(size), remote_read, remote_write)
        return self.regions[stag][1]

    def _place(self, stag, to, data, write):
        r = self.regions.get(stag)
        if r is None:
            raise Violation(f'STag 0x{stag:x} is no buffer of the peer')
        base, buf, remote_read, remote_write = r
        if write and not remote_write:
            raise Violation(f'STag 0x{stag:x} does not take remote writes')
        off = to - base
        if off < 0 or off + len(data) > len(buf):
            raise Violation(f'{len(data)} bytes at TO 0x{to:x} fall outside STag 0x{stag:x} '
                            f'(TO 0x{base:x}, {len(buf)} bytes)')
        buf[off:off + len(data)] = data

    def _fetch(self, stag, to, size):
        r = self.regions.get(stag)
        if r is None:
            raise Violation(f'Read Request from STag 0x{stag:x}, no buffer of the peer')
        base, buf, remote_read, _ = r
        off = to - base
        if not remote_read:
            raise Violation(f'Read Request from STag 0x{stag:x}, which grants no remote read')
        if off < 0 or off + size > len(buf):
            raise Violation(f'Read Request of {size} bytes at TO 0x{to:x} outside STag '
                            f'0x{stag:x} (TO 0x{base:x}, {len(buf)} bytes)')
        return bytes(buf[off:off + size])

    # ---- what the peer sends ----

    def _segments(self, data, limit):
        """(offset, chunk, last) over data, chunks of at most limit bytes, one at least."""
        off = 0
        while True:
            chunk = data[off:off + limit]
            last = off + len(chunk) >= len(data)
            yield off, chunk, last
            if last:
                return
            off += len(chunk)

    def post_send(self, payload):
        msn = self.out_msn[QN_SEND]
        self.out_msn[QN_SEND] += 1
        for off, chunk, last in self._segments(payload, self.untagged_max):
            self.w.send_fpdu(iwarp.untagged(iwarp.SEND, QN_SEND, msn, off, chunk, last))

    def rdma_write(self, stag, to, data):
        for off, chunk, last in self._segments(data, self.tagged_max):
            self.w.send_fpdu(iwarp.tagged(WRITE, stag, to + off, chunk, last))

    def rdma_read(self, sink_stag, sink_to, size, src_stag, src_to, tag):
        msn = self.out_msn[QN_READ]
        self.out_msn[QN_READ] += 1
        self.reads.append(Read(sink_stag, sink_to, size, tag))
        self.w.send_fpdu(iwarp.untagged(READ_REQUEST, QN_READ, msn, 0, iwarp.read_request(
            sink_stag, sink_to, size, src_stag, src_to)))

    def send_terminate(self, layer_etype, ecode):
        msn = self.out_msn[QN_TERMINATE]
        self.out_msn[QN_TERMINATE] += 1
        self.w.send_fpdu(iwarp.untagged(TERMINATE, QN_TERMINATE, msn, 0,
                                        iwarp.terminate(layer_etype, ecode)))

    # ---- what riw sends ----

    def pump(self, deadline, what):
        """Takes one FPDU from riw and acts on it."""
        seg = self.w.read_fpdu(deadline, what)
        if seg.ddp_version != 1 or seg.rdmap_version != 1:
            raise Violation(f'DDP version {seg.ddp_version}, RDMAP version '
                            f'{seg.rdmap_version}: {seg}')
        if not seg.tagged and seg.qn == QN_TERMINATE and seg.opcode == TERMINATE:
            self._terminate(seg)
        if self.expect_rtr:
            return self._rtr(seg)
        if self.rtr_response_first and not (seg.tagged and seg.opcode == READ_RESPONSE):
            self.rtr_error = f'{seg} before the Read Response to the RTR'
            raise Violation(self.rtr_error)
        if seg.tagged:
            if seg.opcode == WRITE:
                self._place(seg.stag, seg.to, seg.payload, True)
                self.writes_placed += 1
            elif seg.opcode == READ_RESPONSE:
                self._response(seg)
            else:
                raise Violation(f'a tagged {seg}')
        elif seg.qn == QN_SEND and seg.opcode in SENDS:
            self._send(seg)
        elif seg.qn == QN_READ and seg.opcode == READ_REQUEST:
            self._read_request(seg)
        else:
            raise Violation(f'an untagged {seg}')

    def wait(self, cond, what, secs=FPDU_BOUND):
        deadline = time.time() + secs * SCALE
        while not cond():
            self.pump(deadline, what)

    def _terminate(self, seg):
        p = seg.payload
        if len(p) < 4:
            raise Violation(f'a Terminate of {len(p)} bytes')
        raise Terminated(f'riw sent a Terminate: layer {p[0] >> 4}, type {p[0] & 15}, '
                         f'code 0x{p[1]:02x}, header control 0x{p[2]:02x}{p[3]:02x}')

    def _rtr(self, seg):
        mode = self.expect_rtr
        print(f'first FPDU from riw: {seg}')
        if mode == 'write':
            ok = seg.tagged and seg.opcode == WRITE and seg.last and not seg.payload
        else:
            ok = (not seg.tagged and seg.opcode == READ_REQUEST and seg.qn == QN_READ and
                  seg.last and len(seg.payload) == iwarp.READ_REQUEST_LEN and
                  struct.unpack('>I', seg.payload[12:16])[0] == 0)
        if not ok:
            # The hardware takes nothing but the ready-to-receive it was told to expect.
            self.send_terminate(TERM_MPA, TERM_NO_MATCHING_RTR)
            raise Violation(f'the first FPDU is no zero-length {mode.capitalize()}, the '
                            f'ready-to-receive riw offered: {seg}')
        self.expect_rtr = None
        self.rtr_seen = str(seg)
        if mode == 'write':
            if seg.stag == 0:
                # Chelsio hardware fails any tagged segment with STag 0.
                raise Violation('the Write ready-to-receive carries STag 0')
            return
        if seg.msn != self.in_msn[QN_READ] or seg.mo != 0:
            raise Violation(f'the Read ready-to-receive has MSN {seg.msn} MO {seg.mo}')
        self.in_msn[QN_READ] += 1
        sink_stag, sink_to = struct.unpack('>IQ', seg.payload[:12])
        self.w.send_fpdu(iwarp.tagged(READ_RESPONSE, sink_stag, sink_to))

    def _response(self, seg):
        if not self.reads:
            raise Violation(f'{seg} with no Read Request outstanding')
        r = self.reads[0]
        if seg.stag != r.sink_stag or seg.to != r.sink_to + r.got:
            msg = f'{seg}: expected STag 0x{r.sink_stag:x} TO 0x{r.sink_to + r.got:x}'
            if r.tag == 'rtr':
                self.rtr_error = f'the answer to the RTR: {msg}'
            raise Violation(msg)
        if r.got + len(seg.payload) > r.size or (r.tag == 'rtr' and not seg.last):
            msg = f'{seg}: more than the {r.size} bytes asked for'
            if r.tag == 'rtr':
                self.rtr_error = f'the answer to the RTR: {msg}'
            raise Violation(msg)
        if seg.payload:
            self._place(seg.stag, seg.to, seg.payload, False)
        r.got += len(seg.payload)
        if seg.last:
            if r.got != r.size:
                raise Violation(f'the Read Response ended after {r.got} of {r.size} bytes')
            self.reads.popleft()
            self.reads_done.add(r.tag)
            if r.tag == 'rtr':
                self.rtr_response_first = False
                self.rtr_seen = str(seg)

    def _send(self, seg):
        if seg.msn != self.in_msn[QN_SEND]:
            raise Violation(f'{seg}: expected MSN {self.in_msn[QN_SEND]}')
        if self.partial is None:
            self.partial = bytearray()
        if seg.mo != len(self.partial):
            raise Violation(f'{seg}: expected MO {len(self.partial)}')
        self.partial += seg.payload
        if len(self.partial) > self.recv_size:
            raise Violation(f'a SEND of more than the {self.recv_size} bytes of the posted '
                            'receive')
        if seg.last:
            self.recvs.append(bytes(self.partial))
            self.partial = None
            self.in_msn[QN_SEND] += 1

    def _read_request(self, seg):
        if seg.msn != self.in_msn[QN_READ] or seg.mo != 0 or not seg.last or \
                len(seg.payload) != iwarp.READ_REQUEST_LEN:
            raise Violation(f'{seg}: expected MSN {self.in_msn[QN_READ]}, MO 0, last, '
                            f'{iwarp.READ_REQUEST_LEN} bytes')
        self.in_msn[QN_READ] += 1
        sink_stag, sink_to, size, src_stag, src_to = struct.unpack('>IQIIQ', seg.payload)
        data = self._fetch(src_stag, src_to, size)
        for off, chunk, last in self._segments(data, self.tagged_max):
            self.w.send_fpdu(iwarp.tagged(READ_RESPONSE, sink_stag, sink_to + off, chunk, last))
        self.reads_served += 1


# ---- the MPA exchange as iw_cxgb4 does it ----

def rtr_type(ird_word, ord_word):
    """The ready-to-receive type a revision 2 frame names: Write checked first."""
    if not ird_word & IRD_P2P:
        return None
    if ord_word & ORD_RTR_WRITE:
        return 'write'
    if ord_word & ORD_RTR_READ:
        return 'read'
    return None


def words(ird, ord_):
    return f'IRD 0x{ird:04x} ORD 0x{ord_:04x}'


def flags_text(flags):
    names = [(F_MARKERS, 'M'), (F_CRC, 'C'), (F_REJECT, 'R'), (F_ENHANCED, 'E')]
    return ''.join(n for f, n in names if flags & f) or '-'


def cxgb4_request():
    """send_mpa_req: revision 2, CRC asked for, the ULP's IRD/ORD with the peer-to-peer bit
    and the one ready-to-receive type."""
    ird, ord_ = RPING_IRD, max(RPING_ORD, 1)
    ird_word = ird | (IRD_P2P if PEER2PEER else 0)
    ord_word = ord_ | ((ORD_RTR_READ if P2P_TYPE == 'read' else ORD_RTR_WRITE)
                       if PEER2PEER else 0)
    flags = (F_CRC if CRC_ENABLED else 0) | F_ENHANCED
    print(f'request: revision {MPA_REV}, flags {flags_text(flags)}, {words(ird_word, ord_word)}')
    return iwarp.mpa_frame(KEY_REQ, flags, MPA_REV, iwarp.enhanced_words(ird_word, ord_word)), \
        ird, ord_


def cxgb4_reply_check(wire, hdr, pd, ird, ord_):
    """process_mpa_reply on riw's reply: returns (ready-to-receive type, why not) with the
    settled IRD/ORD printed; why is set when iw_cxgb4 would fail the connection, and a
    Terminate is owed when it says so."""
    flags, rev = hdr[16], hdr[17]
    pd_len = struct.unpack('>H', hdr[18:20])[0]
    print(f'reply: revision {rev}, flags {flags_text(flags)}, private data {pd_len} bytes')
    if hdr[:16] != KEY_REP:
        return None, f'reply key {hdr[:16]!r}', False
    if rev > MPA_REV:
        return None, f'reply revision {rev}', False
    if pd_len > MAX_PRIVATE_DATA:
        return None, f'reply private data of {pd_len} bytes', False
    if flags & F_REJECT:
        return None, 'riw rejected the request', False
    if flags & F_MARKERS:
        return None, 'riw asks for markers, which the peer does not model', False
    wire.crc = bool(flags & F_CRC) or CRC_ENABLED
    p2p = None
    if rev == 2 and flags & F_ENHANCED:
        if len(pd) < 4:
            return None, 'an enhanced reply without IRD/ORD', False
        ird_word, ord_word = struct.unpack('>HH', pd[:4])
        print(f'reply {words(ird_word, ord_word)}')
        resp_ird, resp_ord = ird_word & IRD_ORD_MASK, ord_word & IRD_ORD_MASK
        short = False
        if ird < resp_ord:
            if resp_ord <= MAX_READ_DEPTH:
                ird = resp_ord
            else:
                short = True
        elif ird > resp_ord:
            ird = resp_ord
        if ord_ > resp_ird:
            ord_ = resp_ird
        p2p = rtr_type(ird_word, ord_word)
        print(f'settled: IRD {ird} ORD {ord_}, CRC {"on" if wire.crc else "off"}, '
              f'ready-to-receive {p2p or "none"}')
        if p2p != P2P_TYPE:
            return p2p, (f'the reply names ready-to-receive {p2p or "none"}, the offer was '
                         f'{P2P_TYPE}: Terminate, no matching RTR'), TERM_NO_MATCHING_RTR
        if short:
            return p2p, f'the reply asks for ORD {resp_ord}: Terminate, insufficient IRD', \
                TERM_INSUFFICIENT_IRD
    elif rev == 1:
        p2p = P2P_TYPE
    elif PEER2PEER:
        return None, 'a revision 2 reply without IRD/ORD: Terminate, no matching RTR', \
            TERM_NO_MATCHING_RTR
    return p2p, None, False


def cxgb4_initiate(addr, port, cmd):
    """iw_cxgb4 as initiator up to riw's reply: connects once riw listens (cmd starting it),
    sends its MPA request and checks the reply. Returns the wire, the peer's RNIC on it and
    cxgb4_reply_check's answer. A reply with more private data than iw_cxgb4 takes is
    aborted; on any failure the connection is closed and the exception raised."""
    wire = Wire(connect(addr, port, cmd))
    try:
        req, ird, ord_ = cxgb4_request()
        wire.send(req)
        hdr, pd = wire.read_mpa(time.time() + CONNECT_BOUND * SCALE, 'the MPA reply',
                                MAX_PRIVATE_DATA)
        if pd is None:
            wire.abort()
            raise Failed('reply private data beyond 256 bytes: iw_cxgb4 aborts')
        return wire, Rnic(wire), cxgb4_reply_check(wire, hdr, pd, ird, ord_)
    except BaseException:
        wire.sock.close()
        raise


def cxgb4_respond(wire, hdr, pd):
    """process_mpa_request, c4iw_accept_cr and send_mpa_reply on riw's request: returns
    (reply frame, ready-to-receive type to expect), or raises Failed for a request iw_cxgb4
    refuses (the caller aborts)."""
    flags, rev = hdr[16], hdr[17]
    pd_len = struct.unpack('>H', hdr[18:20])[0]
    print(f'request: revision {rev}, flags {flags_text(flags)}, private data {pd_len} bytes')
    if rev > MPA_REV:
        raise Failed(f'request revision {rev}: iw_cxgb4 aborts')
    if hdr[:16] != KEY_REQ:
        raise Failed(f'request key {hdr[:16]!r}: iw_cxgb4 aborts')
    if pd is None:
        raise Failed(f'request private data of {pd_len} bytes: iw_cxgb4 aborts')
    if flags & F_MARKERS:
        raise Failed('riw asks for markers, which the peer does not model')
    wire.crc = bool(flags & F_CRC) or CRC_ENABLED
    enhanced = rev == 2 and bool(flags & F_ENHANCED)
    p2p = None
    ep_ird = ep_ord = 0
    if enhanced:
        if len(pd) < 4:
            raise Failed('an enhanced request without IRD/ORD')
        ird_word, ord_word = struct.unpack('>HH', pd[:4])
        print(f'request {words(ird_word, ord_word)}'
              + (' (the Send ready-to-receive bit, which iw_cxgb4 ignores)'
                 if ird_word & IRD_RTR_SEND else ''))
        ep_ird = min(ird_word & IRD_ORD_MASK, MAX_READ_DEPTH)
        ep_ord = min(ord_word & IRD_ORD_MASK, MAX_READ_DEPTH)
        if PEER2PEER:
            p2p = rtr_type(ird_word, ord_word)
    elif rev == 1 and PEER2PEER:
        p2p = P2P_TYPE
    # rping's rdma_accept without conn param: librdmacm takes the request's ORD as its
    # IRD and the request's IRD as its ORD, capped at the device's read depth.
    ulp_ird, ulp_ord = min(ep_ord, MAX_READ_DEPTH), min(ep_ird, MAX_READ_DEPTH)
    if enhanced:
        if ulp_ord > ep_ird:
            ulp_ord = ep_ird
        if ulp_ird < ep_ord:
            ulp_ird = ep_ord
    if p2p and P2P_TYPE == 'read' and ulp_ird == 0:
        ulp_ird = 1
    reply_pd = b''
    rflags = (F_CRC if wire.crc else 0) | (F_ENHANCED if enhanced else 0)
    if enhanced:
        ird_word, ord_word = ulp_ird, ulp_ord
        if PEER2PEER and p2p:
            ird_word |= IRD_P2P
            ord_word |= ORD_RTR_READ if P2P_TYPE == 'read' else ORD_RTR_WRITE
        reply_pd = iwarp.enhanced_words(ird_word, ord_word)
        print(f'reply: revision {rev}, flags {flags_text(rflags)}, {words(ird_word, ord_word)}; '
              f'expecting ready-to-receive {p2p or "none"}, CRC {"on" if wire.crc else "off"}')
    return iwarp.mpa_frame(KEY_REP, rflags, rev, reply_pd), p2p


# ---- rping ----

def rping_start_buffer(ping, size):
    """What rping's client puts in its start buffer for iteration ping."""
    text = f'rdma-ping-{ping}: '.encode()
    buf = bytearray(text[:size - 1].ljust(size, b'\0'))
    c = 65 + ping % 58
    for i in range(len(text), size):
        buf[i] = c
        c = c + 1 if c < 122 else 65
    buf[size - 1] = 0
    return bytes(buf)


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f'first difference at byte {i}: 0x{x:02x}, expected 0x{y:02x}'
    return f'{len(a)} bytes, expected {len(b)}'


def rping_server(rnic, size, count):
    """rping's server loop for count iterations, then riw's close."""
    rdma_buf = rnic.register(RDMA_STAG, RDMA_TO, size, False, False)
    done = 0
    while True:
        try:
            rnic.wait(lambda: rnic.recvs, f'the start buffer SEND of iteration {done + 1}')
        except Closed:
            if done == count:
                return done
            raise
        info = rnic.recvs.popleft()
        if len(info) != RPING_INFO.size:
            raise Violation(f'a SEND of {len(info)} bytes, not rping\'s {RPING_INFO.size}')
        addr, rkey, rlen = RPING_INFO.unpack(info)
        if done == count:
            raise Violation(f'iteration {done + 1} of {count}')
        if rlen > size:
            raise Violation(f'riw offers {rlen} bytes, the peer\'s buffer has {size}')
        rnic.rdma_read(RDMA_STAG, RDMA_TO, rlen, rkey, addr, done)
        rnic.wait(lambda: done in rnic.reads_done, f'the Read Response of iteration {done + 1}')
        want = rping_start_buffer(done, rlen)
        if bytes(rdma_buf[:rlen]) != want:
            raise Violation(f'iteration {done + 1}: the data read is not rping\'s: '
                            f'{first_diff(rdma_buf[:rlen], want)}')
        rnic.post_send(bytes(RPING_INFO.size))
        rnic.wait(lambda: rnic.recvs, f'the rdma buffer SEND of iteration {done + 1}')
        info = rnic.recvs.popleft()
        if len(info) != RPING_INFO.size:
            raise Violation(f'a SEND of {len(info)} bytes, not rping\'s {RPING_INFO.size}')
        addr, rkey, rlen2 = RPING_INFO.unpack(info)
        data = bytes(rdma_buf[:rlen])
        n = data.index(0) + 1 if 0 in data else rlen
        if n > rlen2:
            raise Violation(f'riw offers {rlen2} bytes to write {n} into')
        rnic.rdma_write(rkey, addr, data[:n])
        rnic.post_send(bytes(RPING_INFO.size))
        done += 1


def rping_client(rnic, size, count):
    """rping's client loop for count iterations, comparing the buffers as -V does."""
    start = rnic.register(START_STAG, START_TO, size, True, True)
    rdma_buf = rnic.register(RDMA_STAG, RDMA_TO, size, True, True)
    for i in range(count):
        start[:] = rping_start_buffer(i, size)
        rnic.post_send(RPING_INFO.pack(START_TO, START_STAG, size))
        rnic.wait(lambda: rnic.recvs, f'the first ack of iteration {i + 1}')
        ack = rnic.recvs.popleft()
        if len(ack) != RPING_INFO.size:
            raise Violation(f'an ack of {len(ack)} bytes, not {RPING_INFO.size}')
        if rnic.reads_served != i + 1:
            raise Violation(f'{rnic.reads_served} Read Requests served by the first ack of '
                            f'iteration {i + 1}')
        rdma_buf[:] = bytes(size)
        rnic.post_send(RPING_INFO.pack(RDMA_TO, RDMA_STAG, size))
        rnic.wait(lambda: rnic.recvs, f'the second ack of iteration {i + 1}')
        ack = rnic.recvs.popleft()
        if len(ack) != RPING_INFO.size:
            raise Violation(f'an ack of {len(ack)} bytes, not {RPING_INFO.size}')
        if rdma_buf != start:
            raise Violation(f'iteration {i + 1}: the data written back differs: '
                            f'{first_diff(rdma_buf, start)}')
    return count


# ---- runs ----

def kernel_log():
    return subprocess.run(['dmesg'], capture_output=True, text=True).stdout.splitlines()


class Run:
    def __init__(self, name, checks):
        self.name = name
        self.order = checks
        self.status = {c: None for c in checks}
        self.why = {}
        self.log_start = len(kernel_log())

    def full(self, check):
        return f'{self.name}_{check}' if check else self.name

    def set(self, check, ok, msg=''):
        """A check passes if nothing failed it."""
        if not ok:
            if self.status[check] != 'fail':
                print(f'FAIL {self.full(check)}: {msg}')
            self.status[check] = 'fail'
        elif self.status[check] is None:
            self.status[check] = 'pass'

    def settle(self, check, ok, msg=''):
        """Sets a check not set yet."""
        if self.status[check] is None:
            self.set(check, ok, msg)

    def skip(self, check, why):
        if self.status[check] is None:
            self.status[check] = 'skip'
            self.why[check] = why

    def report(self):
        for line in kernel_log()[self.log_start:]:
            if 'riw' in line:
                print(f'  kernel: {line}')
        for c in self.order:
            st = self.status[c] or 'fail'
            why = self.why.get(c, '') if st == 'skip' else ''
            print(f'RESULT {st} {self.full(c)} {why}'.rstrip(), flush=True)


class Cmd:
    """riw's side: a command started by the peer, its output kept for the end."""

    def __init__(self, argv):
        self.argv = argv
        self.label = 'rping' if 'rping' in argv else 'client'
        self.out = os.fdopen(os.open('/tmp', os.O_TMPFILE | os.O_RDWR, 0o600), 'w+')
        self.t0 = time.time()
        self.proc = subprocess.Popen(argv, stdout=self.out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)

    def running(self):
        return self.proc.poll() is None

    def finish(self, secs=CMD_BOUND):
        """Its exit status, or None if it had to be killed."""
        try:
            rc = self.proc.wait(secs * SCALE)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
            rc = None
        self.out.seek(0)
        for line in self.out.read().splitlines():
            print(f'  {self.label}: {line}')
        print(f'riw side: {" ".join(self.argv)}: '
              + (f'exit status {rc}' if rc is not None else
                 f'still running after {secs * SCALE} s, killed') + f' ({ms(self.t0)})')
        return rc


def listener(addr, port):
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(1)
    ls.settimeout(CONNECT_BOUND * SCALE)
    return ls


def accept(ls, cmd):
    try:
        s, peer = ls.accept()
    except socket.timeout:
        raise Failed(f'riw did not connect within {CONNECT_BOUND * SCALE} s'
                     + ('' if cmd.running() else ' (its command has ended)')) from None
    ls.close()
    print(f'connection from {peer[0]}:{peer[1]}')
    return s


def connect(addr, port, cmd):
    """Connects once riw listens (its command starting it)."""
    deadline = time.time() + CONNECT_BOUND * SCALE
    while True:
        try:
            s = socket.create_connection((addr, port), timeout=CONNECT_BOUND * SCALE)
            print(f'connected to {addr}:{port} from port {s.getsockname()[1]}')
            return s
        except ConnectionRefusedError:
            if time.time() > deadline or not cmd.running():
                raise Failed(f'nothing listens on {addr}:{port}'
                             + ('' if cmd.running() else ' (riw\'s command has ended)')) \
                    from None
            time.sleep(0.2)


def fpdu_checks(run, wire):
    if wire is None or wire.fpdus == 0:
        run.skip('crc', 'no FPDU from riw to check')
        run.skip('mss', 'no FPDU from riw to check')
        return
    print(f'{wire.fpdu_summary()}, MSS {wire.mss}')
    run.set('crc', not wire.crc_errors, '; '.join(wire.crc_errors[:5]))
    over = sum(wire.oversize.values())
    sizes = ', '.join(f'{n} x {ln}' for ln, n in sorted(wire.oversize.items(), reverse=True))
    run.set('mss', over == 0, f'{over} of {wire.fpdus} FPDUs longer on the wire than the MSS '
            f'of {wire.mss} bytes (wire length: {sizes})')


def until_closed(rnic, secs):
    """Takes what riw still sends until it closes."""
    try:
        rnic.wait(lambda: False, 'riw\'s close', secs)
    except Closed:
        pass


def run_responder(addr, port, name, size, count, argv):
    run = Run(name, CHECKS['responder'])
    ls = listener(addr, port)
    cmd = Cmd(argv)
    wire = rnic = None
    done = 0
    try:
        wire = Wire(accept(ls, cmd))
        rnic = Rnic(wire)
        hdr, pd = wire.read_mpa(time.time() + CONNECT_BOUND * SCALE, 'the MPA request',
                                MAX_PRIVATE_DATA)
        try:
            reply, p2p = cxgb4_respond(wire, hdr, pd)
        except Failed:
            wire.abort()
            raise
        wire.send(reply)
        if p2p:
            rnic.expect_rtr = p2p
            rnic.wait(lambda: not rnic.expect_rtr, f'the {p2p} ready-to-receive',
                      CONNECT_BOUND)
        run.set('connect', True)
        done = rping_server(rnic, size, count)
        print(f'{done} iterations of {size} bytes, the data read checked')
    except (Failed, Closed, Terminated, Violation, OSError) as ex:
        run.settle('connect', False, str(ex))
        run.set('data', False, f'after {done} of {count} iterations: {ex}')
    finally:
        ls.close()
        # On riw's close (or a failure) iw_cxgb4 closes too.
        if wire is not None:
            wire.sock.close()
    rc = cmd.finish(CMD_BOUND if done == count else CLOSE_BOUND)
    run.set('data', done == count and rc == 0,
            f'{done} of {count} iterations, riw\'s rping -c -V exit status {rc}')
    fpdu_checks(run, wire)
    run.report()


def run_initiator(addr, port, name, size, count, argv):
    run = Run(name, CHECKS['initiator'])
    cmd = Cmd(argv)
    wire = rnic = None
    done = 0
    connected = False
    try:
        wire, rnic, (p2p, why, term) = cxgb4_initiate(addr, port, cmd)
        if why:
            if term:
                rnic.send_terminate(TERM_MPA, term)
                wire.sock.shutdown(socket.SHUT_WR)
            raise Failed(why)
        if p2p == 'read':
            # The RTR goes first, and the ULP's first SEND right after it: the answer to
            # the RTR must be the first FPDU riw sends.
            rnic.reads.append(Read(RTR_STAG, RTR_TO, 0, 'rtr'))
            rnic.rtr_response_first = True
            rnic.out_msn[QN_READ] += 1
            wire.send_fpdu(iwarp.untagged(READ_REQUEST, QN_READ, 1, 0, iwarp.read_request(
                RTR_STAG, RTR_TO, 0, RTR_STAG, RTR_TO)))
            print('sent the Read ready-to-receive: sink STag 1 TO 1, source STag 1 TO 1')
        connected = True
        done = rping_client(rnic, size, count)
        print(f'{done} iterations of {size} bytes, the data written back checked')
        # rdma_disconnect on iw_cxgb4: a graceful close.
        wire.sock.shutdown(socket.SHUT_WR)
        until_closed(rnic, CLOSE_BOUND + FPDU_BOUND)
    except (Failed, Closed, Terminated, Violation, OSError) as ex:
        if not connected:
            run.set('connect', False, str(ex))
        run.set('data', False, f'after {done} of {count} iterations: {ex}')
    finally:
        if wire is not None:
            wire.sock.close()
    if rnic is not None:
        if rnic.rtr_seen:
            print(f'the answer to the RTR: {rnic.rtr_seen}')
        run.set('connect', not rnic.rtr_error, rnic.rtr_error)
        run.set('connect', not rnic.rtr_response_first, 'no answer to the RTR')
        run.settle('connect', connected)
    rc = cmd.finish(CMD_BOUND if done == count else CLOSE_BOUND)
    run.set('data', done == count and rc == 0,
            f'{done} of {count} iterations, riw\'s rping -s exit status {rc}')
    fpdu_checks(run, wire)
    run.report()


def run_term_for_rtr(addr, port, name, argv):
    run = Run(name, CHECKS['term_for_rtr'])
    cmd = Cmd(argv)
    wire = None
    try:
        wire, rnic, (_, why, _) = cxgb4_initiate(addr, port, cmd)
        if why:
            raise Failed(why)
        # What iw_cxgb4 sends on a reply it cannot use, then its graceful close.
        rnic.send_terminate(TERM_MPA, TERM_NO_MATCHING_RTR)
        try:
            wire.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # riw may end the connection with a reset as soon as the Terminate came
        t0 = time.time()
        print('sent a Terminate (0x23, no matching RTR) in place of the RTR, then a FIN')
        got = ''
        try:
            until_closed(rnic, CLOSE_BOUND)
        except Terminated as ex:
            got = f'{ex}, then '
            until_closed(rnic, CLOSE_BOUND)
        print(f'riw: {got}closed {ms(t0)} after the Terminate')
        run.set('', True)
    except (Failed, Closed, Terminated, Violation, OSError) as ex:
        run.set('', False, str(ex))
    finally:
        if wire is not None:
            wire.sock.close()
    rc = cmd.finish(CLOSE_BOUND)
    run.set('', rc is not None, 'riw\'s rping -s did not end')
    run.report()


def run_long_pd(addr, port, name, argv):
    run = Run(name, CHECKS['long_pd'])
    ls = listener(addr, port)
    cmd = Cmd(argv)
    try:
        wire = Wire(accept(ls, cmd))
        hdr, pd = wire.read_mpa(time.time() + CONNECT_BOUND * SCALE, 'the MPA request',
                                MAX_PRIVATE_DATA)
        try:
            cxgb4_respond(wire, hdr, pd)
            run.set('', False, 'the request is within iw_cxgb4\'s limits')
        except Failed as ex:
            print(f'{ex}: reset')
        wire.abort()
    except (Failed, Closed, OSError) as ex:
        run.set('', False, str(ex))
    finally:
        ls.close()
    t0 = time.time()
    rc = cmd.finish(CLOSE_BOUND)
    print(f'riw\'s client ended {ms(t0)} after the reset')
    run.set('', rc == 2, 'riw\'s client did not fail at once' if rc is None else
            f'riw\'s client ended with status {rc}, not 2 (refused)')
    run.report()


# ---- riw's side of long_pd ----

RDMA_PS_TCP, IBV_QPT_RC = 0x0106, 2

def rdma_connect(addr, port, pd_len):
    """Connects through librdmacm's synchronous calls with pd_len bytes of private data."""
    import ctypes

    class _AddrInfo(ctypes.Structure):
        pass

    _AddrInfo._fields_ = [
        ('ai_flags', ctypes.c_int), ('ai_family', ctypes.c_int), ('ai_qp_type', ctypes.c_int),
        ('ai_port_space', ctypes.c_int), ('ai_src_len', ctypes.c_uint32),
        ('ai_dst_len', ctypes.c_uint32), ('ai_src_addr', ctypes.c_void_p),
        ('ai_dst_addr', ctypes.c_void_p), ('ai_src_canonname', ctypes.c_char_p),
        ('ai_dst_canonname', ctypes.c_char_p), ('ai_route_len', ctypes.c_size_t),
        ('ai_route', ctypes.c_void_p), ('ai_connect_len', ctypes.c_size_t),
        ('ai_connect', ctypes.c_void_p), ('ai_next', ctypes.POINTER(_AddrInfo))]

    class _QpInitAttr(ctypes.Structure):
        _fields_ = [('qp_context', ctypes.c_void_p), ('send_cq', ctypes.c_void_p),
                    ('recv_cq', ctypes.c_void_p), ('srq', ctypes.c_void_p),
                    ('max_send_wr', ctypes.c_uint32), ('max_recv_wr', ctypes.c_uint32),
                    ('max_send_sge', ctypes.c_uint32), ('max_recv_sge', ctypes.c_uint32),
                    ('max_inline_data', ctypes.c_uint32), ('qp_type', ctypes.c_int),
                    ('sq_sig_all', ctypes.c_int)]

    class _ConnParam(ctypes.Structure):
        _fields_ = [('private_data', ctypes.c_void_p), ('private_data_len', ctypes.c_uint8),
                    ('responder_resources', ctypes.c_uint8),
                    ('initiator_depth', ctypes.c_uint8), ('flow_control', ctypes.c_uint8),
                    ('retry_count', ctypes.c_uint8), ('rnr_retry_count', ctypes.c_uint8),
                    ('srq', ctypes.c_uint8), ('qp_num', ctypes.c_uint32)]

    cm = ctypes.CDLL('librdmacm.so.1', use_errno=True)
    hints = _AddrInfo(ai_port_space=RDMA_PS_TCP, ai_qp_type=IBV_QPT_RC)
    res = ctypes.POINTER(_AddrInfo)()
    if cm.rdma_getaddrinfo(addr.encode(), str(port).encode(), ctypes.byref(hints),
                           ctypes.byref(res)):
        print(f'rdma_getaddrinfo: {os.strerror(ctypes.get_errno())}')
        return 1
    cm_id = ctypes.c_void_p()
    attr = _QpInitAttr(max_send_wr=1, max_recv_wr=1, max_send_sge=1, max_recv_sge=1,
                       qp_type=IBV_QPT_RC)
    if cm.rdma_create_ep(ctypes.byref(cm_id), res, None, ctypes.byref(attr)):
        print(f'rdma_create_ep: {os.strerror(ctypes.get_errno())}')
        return 1
    pd = ctypes.create_string_buffer(bytes((i * 7 + 1) & 0xFF for i in range(pd_len)), pd_len)
    param = _ConnParam(private_data=ctypes.cast(pd, ctypes.c_void_p), private_data_len=pd_len,
                       responder_resources=1, initiator_depth=1, retry_count=7,
                       rnr_retry_count=7)
    t0 = time.time()
    rc = cm.rdma_connect(cm_id, ctypes.byref(param))
    err = ctypes.get_errno()
    print(f'rdma_connect with {pd_len} bytes of private data: '
          + (f'failed, {os.strerror(err)}' if rc else 'connected') + f' ({ms(t0)})')
    if not rc:
        cm.rdma_disconnect(cm_id)
    cm.rdma_destroy_ep(cm_id)
    cm.rdma_freeaddrinfo(res)
    return 2 if rc else 0


CHECKS = {'responder': ['connect', 'data', 'crc', 'mss'],
          'initiator': ['connect', 'data', 'crc', 'mss'],
          'term_for_rtr': [''], 'long_pd': ['']}


def describe(mode, name, size=None, count=None):
    fpdu = {'crc': 'every FPDU riw sends has a correct CRC32c',
            'mss': 'every FPDU riw sends fits one TCP segment (no longer on the wire than '
                   'the MSS)'}
    if mode == 'responder':
        d = {'connect': 'riw\'s request as iw_cxgb4 takes it (process_mpa_request, '
                        'c4iw_accept_cr, send_mpa_reply), then the ready-to-receive riw '
                        'offered',
             'data': f'{count} rping exchanges of {size} bytes: riw\'s rping -c -V passes, the '
                     'data read checked'}
    elif mode == 'initiator':
        d = {'connect': 'riw answers iw_cxgb4\'s request (send_mpa_req, process_mpa_reply) '
                        'and its Read ready-to-receive (build_rtr_msg) with a zero-length '
                        'Read Response first',
             'data': f'{count} rping exchanges of {size} bytes with riw\'s rping -s, the data '
                     'written back checked'}
    elif mode == 'term_for_rtr':
        d = {'': 'the Terminate iw_cxgb4 sends when a reply\'s ready-to-receive differs from '
                 'its offer, in place of its RTR: riw ends the connection and its rping -s'}
    else:
        d = {'': 'riw\'s request with 259 bytes of private data, which iw_cxgb4 aborts: riw\'s '
                 'client fails at once'}
    d.update(fpdu)
    for c in CHECKS[mode]:
        print(f'{name}_{c} {d[c]}' if c else f'{name} {d[c]}')


def main(argv):
    if '--' in argv:
        i = argv.index('--')
        argv, cmd = argv[:i], argv[i + 1:]
    else:
        cmd = []
    if len(argv) == 2 and argv[1] == 'list':
        for line in sys.stdin:
            if line.split():
                describe(*line.split()[:4])
        return 0
    if len(argv) == 5 and argv[1] == 'rdma_connect':
        return rdma_connect(argv[2], int(argv[3]), int(argv[4]))
    try:
        if len(argv) == 7 and argv[1] in ('responder', 'initiator') and cmd:
            f = run_responder if argv[1] == 'responder' else run_initiator
            f(argv[2], int(argv[3]), argv[4], int(argv[5]), int(argv[6]), cmd)
        elif len(argv) == 5 and argv[1] in ('term_for_rtr', 'long_pd') and cmd:
            f = run_term_for_rtr if argv[1] == 'term_for_rtr' else run_long_pd
            f(argv[2], int(argv[3]), argv[4], cmd)
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except Exception:
        traceback.print_exc(file=sys.stdout)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
