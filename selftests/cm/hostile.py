#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The hostile-peer part of riw_cm.sh: raw TCP clients against an rdma_cm listener.

  hostile.py list                        the subtest names and descriptions, one a line
  hostile.py run CM NS_SRV SRV_DRIVER PORT [NAME...]
                                         run the subtests (all without NAME), from the
                                         client's network namespace; CM is the built cm.c,
                                         whose `cm serve` listens on 192.0.2.2 PORT in NS_SRV

Every case connects a plain TCP socket to the listener and misbehaves. What each must see:
  - the listener refuses or ends the connection (an MPA reject, a Terminate or a bare close
    are all fine) within a bound, and the misbehaving request never reaches the application
    as a CONNECT_REQUEST;
  - no connection socket of the listener's port stays behind (TIME-WAIT aside);
  - the kernel log gains a line naming the driver and the peer (192.0.2.1), and a flood of
    such peers is rate-limited;
  - a normal client (`cm ping`) connects afterwards, and during the silent peer's wait.
The MPA frames follow RFC 5044 and RFC 6581 (enhanced connection establishment); FPDUs carry
an untagged RDMA SEND (RFC 5040/5041) with the CRC32c trailer, least significant byte first.

`run` prints one line "RESULT pass|fail|xfail|skip NAME [reason]" per subtest; any other line
is diagnostics. SRV_DRIVER only selects the expected failures: where siw deviates from what riw
must do, the check still runs and reports "xfail" on siw (with the reason).
Time bounds are multiplied by RIW_TIMEOUT_SCALE.
"""

import os
import re
import socket
import struct
import subprocess
import sys
import time
import traceback

import iwarp
from iwarp import F_CRC, F_ENHANCED, F_MARKERS, F_REJECT, KEY_REP, KEY_REQ, crc32c

SRV = '192.0.2.2'
CLI = '192.0.2.1'
SCALE = int(os.environ.get('RIW_TIMEOUT_SCALE', '1') or 1)
# How long a listener may take to drop a peer that sends nothing (seconds, scaled). siw
# takes about 5 s (its MPA request timer).
SILENCE_BOUND = 30
# How long a listener may take to end a connection after a protocol violation.
REFUSE_BOUND = 10

XFAIL_LOG = 'siw logs nothing about a refused peer (siw_dbg only)'
SKIP_TRUNCATED = ('siw drops its listener (refcount underflow, sometimes a crash) when a peer '
                  'closes mid-request')
XFAIL_P2P = "siw's peer-to-peer mode is a compile-time constant, off"
XFAIL_SENDS_FIRST = 'siw as responder sends as soon as the application posts'
XFAIL_CRC_PARAM = "siw's mpa_crc_required is a compile-time constant, not a module parameter"


class Failed(Exception):
    pass


class Skipped(Exception):
    pass


class Env:
    def __init__(self, cm, ns_srv, driver, port):
        self.cm, self.ns_srv, self.driver, self.port = cm, ns_srv, driver, port
        self.failures, self.xfails = [], []
        self.serve = None
        self.serve_log = f'/tmp/riw-cm-serve.{os.getpid()}.log'

    def check(self, cond, msg, xfail_siw=None):
        if cond:
            return True
        if xfail_siw and self.driver == 'siw':
            print(f'XFAIL: {msg} ({xfail_siw})')
            self.xfails.append(xfail_siw)
        else:
            print(f'FAIL: {msg}')
            self.failures.append(msg)
        return False

    # ---- the listener ----

    def start_serve(self):
        self.stop_serve()
        out = open(self.serve_log, 'w')
        self.serve = subprocess.Popen(['ip', 'netns', 'exec', self.ns_srv, self.cm, 'serve',
                                       SRV, str(self.port)], stdout=out, stderr=out)
        end = time.time() + 10 * SCALE
        while time.time() < end:
            if 'listening' in self.serve_text():
                return
            if self.serve.poll() is not None:
                break
            time.sleep(0.1)
        raise Failed(f'cm serve did not start: {self.serve_text()}')

    def stop_serve(self):
        if self.serve and self.serve.poll() is None:
            self.serve.terminate()
            try:
                self.serve.wait(10 * SCALE)
            except subprocess.TimeoutExpired:
                self.serve.kill()
                self.serve.wait()
        self.serve = None

    def serve_text(self):
        try:
            with open(self.serve_log) as f:
                return f.read()
        except OSError:
            return ''

    def requests(self):
        """CONNECT_REQUESTs that reached cm serve, the normal clients' aside (their request
        carries 4 bytes of private data, "ping")."""
        return sum(1 for ln in self.serve_text().splitlines()
                   if 'CONNECT_REQUEST' in ln and 'private data 4 bytes' not in ln)

    # ---- checks shared by the cases ----

    def ping(self, what, n=1):
        """A normal client connects, exchanges a message and disconnects."""
        r = subprocess.run([self.cm, 'ping', SRV, str(self.port), str(n)], capture_output=True,
                           text=True, timeout=60 * SCALE)
        for line in (r.stdout + r.stderr).splitlines():
            print(f'  ping: {line}')
        return self.check(r.returncode == 0, f'a normal client cannot connect {what}')

    def leftovers(self, local_port=None):
        """Connection sockets of the listener's port (listeners and TIME-WAIT aside)."""
        out = subprocess.run(['ip', 'netns', 'exec', self.ns_srv, 'ss', '-Htan',
                              f'( sport = :{self.port} )'], capture_output=True,
                             text=True).stdout
        lines = [ln for ln in out.splitlines()
                 if not ln.startswith(('LISTEN', 'TIME-WAIT'))]
        if local_port is not None:
            lines = [ln for ln in lines if f'{CLI}:{local_port}' in ln]
        return lines

    def no_leftovers(self, what, local_port=None):
        end = time.time() + 10 * SCALE
        while True:
            left = self.leftovers(local_port)
            if not left or time.time() > end:
                break
            time.sleep(0.2)
        for ln in left:
            print(f'  left: {ln}')
        return self.check(not left, f'{what}: {len(left)} connection sockets stay')


def kmsg_lines():
    return subprocess.run(['dmesg'], capture_output=True, text=True).stdout.splitlines()


def peer_lines(lines, driver, local_port=None):
    """Kernel log lines about the peer: the driver's name and the peer's address."""
    pat = re.escape(CLI) + (f':{local_port}\\b' if local_port else '')
    return [ln for ln in lines if driver in ln and re.search(pat, ln)]


def expect_log(env, before, what, local_port):
    new = kmsg_lines()[len(before):]
    hits = peer_lines(new, env.driver, local_port)
    for ln in hits:
        print(f'  log: {ln}')
    env.check(hits, f'{what}: no kernel log line naming {env.driver} and {CLI}:{local_port}',
              XFAIL_LOG)


def connect():
    s = socket.create_connection((SRV, ENV.port), timeout=10 * SCALE)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def wait_closed(s, secs):
    """Read until the peer closes or resets: (closed, seconds, bytes read)."""
    t0 = time.time()
    got = b''
    s.settimeout(0.5)
    while time.time() - t0 < secs:
        try:
            d = s.recv(4096)
        except socket.timeout:
            continue
        except (ConnectionResetError, BrokenPipeError):
            return True, time.time() - t0, got
        if not d:
            return True, time.time() - t0, got
        got += d
    return False, time.time() - t0, got


def mpa_request(key=KEY_REQ, flags=0, rev=2, pd=b'', enhanced=True, ird=1, ord_=1, crc=False,
                pd_len=None):
    if rev == 2 and enhanced:
        flags |= F_ENHANCED
        pd = iwarp.enhanced_words(ird, ord_) + pd
    if crc:
        flags |= F_CRC
    return iwarp.mpa_frame(key, flags, rev, pd, pd_len)


def fpdu_send(payload, msn, crc=True, bad=False):
    """An FPDU carrying an untagged RDMA SEND (last segment, queue 0, MSN, MO 0)."""
    return iwarp.fpdu(iwarp.untagged(iwarp.SEND, iwarp.QN_SEND, msn, 0, payload), crc,
                      0x5A5A5A5A if bad else 0)


def fpdu_write_rtr(crc=True):
    """A zero-length RDMA Write (tagged, last segment, STag 0x100, TO 0): the peer-to-peer
    ready-to-receive message (RFC 6581). Never STag 0, which some hardware refuses."""
    return iwarp.fpdu(iwarp.tagged(iwarp.WRITE, 0x100, 0), crc)


def fpdu_read_rtr(crc=True):
    """A zero-length RDMA Read Request (untagged, queue 1, MSN 1; sink STag 0x100): the
    ready-to-receive message Chelsio initiators send by default."""
    return iwarp.fpdu(iwarp.untagged(iwarp.READ_REQUEST, iwarp.QN_READ, 1, 0,
                                     iwarp.read_request(0x100, 0, 0, 0x100, 0)), crc)


def recv_exact(s, n, secs):
    s.settimeout(secs)
    buf = b''
    while len(buf) < n:
        d = s.recv(n - len(buf))
        if not d:
            raise Failed(f'connection closed after {len(buf)} of {n} bytes')
        buf += d
    return buf


def read_reply(s):
    hdr = recv_exact(s, 20, 10 * SCALE)
    pd_len = struct.unpack('>H', hdr[18:20])[0]
    pd = recv_exact(s, pd_len, 10 * SCALE) if pd_len else b''
    return hdr, pd


def read_fpdu(s, crc):
    ln = struct.unpack('>H', recv_exact(s, 2, 10 * SCALE))[0]
    rest = recv_exact(s, ln + (-(ln + 2) % 4) + 4, 10 * SCALE)
    frame = struct.pack('>H', ln) + rest[:-4]
    got = struct.unpack('<I', rest[-4:])[0]
    return rest[:ln], (not crc) or got == crc32c(frame)


# ---- subtests ----

def refused_case(env, what, payload, close_after=False):
    """Send payload; the listener must end the connection without telling the application."""
    reqs = env.requests()
    before = kmsg_lines()
    s = connect()
    lport = s.getsockname()[1]
    s.sendall(payload)
    if close_after:
        s.close()
    else:
        closed, secs, got = wait_closed(s, REFUSE_BOUND * SCALE)
        print(f'{what}: closed {closed} after {secs:.1f} s, {len(got)} bytes back'
              f'{" (MPA reject)" if got[:16] == KEY_REP and len(got) > 16 and got[16] & F_REJECT else ""}')
        env.check(closed, f'{what}: the connection is still open after {secs:.0f} s')
        s.close()
    env.no_leftovers(what, lport)
    env.check(env.requests() == reqs, f'{what}: reached the application as a CONNECT_REQUEST')
    if not close_after:
        expect_log(env, before, what, lport)
    env.ping(f'after the {what}')


def t_garbage(env):
    """64 bytes that are no MPA request: refused, logged, the listener serves on"""
    refused_case(env, 'garbage request', bytes((i * 37 + 11) & 0xFF for i in range(64)))


def t_truncated(env):
    """10 bytes of an MPA request, then close: nothing stays, the listener serves on"""
    if env.driver == 'siw':
        # Seen on 6.12: the peer's close and the failed read both drop the new endpoint's
        # reference on the listener (refcount_t underflow in siw_cep_put), the listener is
        # lost (later connects are refused), and once the guest died outright.
        raise Skipped(SKIP_TRUNCATED)
    refused_case(env, 'truncated request', mpa_request()[:10], close_after=True)


def t_truncated_hold(env):
    """10 bytes of an MPA request, then silence: dropped within the bound, logged"""
    silence_case(env, 'truncated request then silence', mpa_request()[:10])


def t_wrong_key(env):
    """an MPA request with the reply's key: refused, logged, the listener serves on"""
    refused_case(env, 'wrong key', mpa_request(key=KEY_REP))


def t_bad_revision(env):
    """an MPA request of revision 3: refused, logged, the listener serves on"""
    refused_case(env, 'revision 3', mpa_request(rev=3, enhanced=False))


def t_pd_too_long(env):
    """PD_Length 513, beyond MPA's 512: refused, logged, the listener serves on"""
    refused_case(env, 'private data length 513',
                 mpa_request(enhanced=False, pd=bytes(513)))


def t_pd_huge(env):
    """PD_Length 65535 with 600 bytes following: refused, logged, the listener serves on"""
    refused_case(env, 'private data length 65535',
                 mpa_request(enhanced=False, pd=bytes(600), pd_len=0xFFFF))


def t_markers(env):
    """an MPA request that asks for markers: refused, logged, the listener serves on"""
    refused_case(env, 'markers requested', mpa_request(flags=F_MARKERS))


def silence_case(env, what, payload):
    reqs = env.requests()
    before = kmsg_lines()
    s = connect()
    lport = s.getsockname()[1]
    if payload:
        s.sendall(payload)
    t0 = time.time()
    # The listener serves others while this peer waits.
    env.ping(f'while a peer is silent ({what})')
    closed, _, got = wait_closed(s, SILENCE_BOUND * SCALE - (time.time() - t0))
    secs = time.time() - t0
    print(f'{what}: closed {closed} after {secs:.1f} s, {len(got)} bytes back')
    env.check(closed, f'{what}: still open after {secs:.0f} s (bound {SILENCE_BOUND * SCALE} s)')
    s.close()
    env.no_leftovers(what, lport)
    env.check(env.requests() == reqs, f'{what}: reached the application as a CONNECT_REQUEST')
    expect_log(env, before, what, lport)
    env.ping(f'after the {what}')


def t_silence(env):
    """a peer that connects and sends nothing: dropped within the bound, logged"""
    silence_case(env, 'silent peer', b'')


def crc_session(env, request_crc, want_crc_reply=True):
    """MPA v2 with a request that asks for CRC (or not), then a good SEND (answered by cm
    serve with a pong), then one with a bad CRC: the listener must terminate."""
    s = connect()
    lport = s.getsockname()[1]
    s.sendall(mpa_request(pd=b'crc please', crc=request_crc))
    hdr, pd = read_reply(s)
    flags, rev = hdr[16], hdr[17]
    print(f'reply: key {hdr[:16]!r} flags 0x{flags:02x} rev {rev} private data {pd!r}')
    env.check(hdr[:16] == KEY_REP, 'reply key')
    if not env.check(not flags & F_REJECT, 'the listener rejected the request'):
        return s, lport
    env.check(rev == 2, f'reply revision {rev}, want 2')
    crc = bool(flags & F_CRC)
    if want_crc_reply:
        env.check(crc, 'the reply does not confirm CRC')
    if flags & F_ENHANCED:
        ird, ord_ = struct.unpack('>HH', pd[:4])
        print(f'reply IRD 0x{ird:04x} ORD 0x{ord_:04x}')
        env.check(pd[4:].startswith(b'pong'), f'reply private data {pd[4:]!r}')
    s.sendall(fpdu_send(b'ping over MPA with CRC', 1, crc=crc))
    ulpdu, ok = read_fpdu(s, crc)
    print(f'answer: {len(ulpdu)} bytes, CRC ok {ok}, control 0x{ulpdu[0]:02x}{ulpdu[1]:02x}')
    env.check(ok, 'the answer\'s CRC is wrong')
    env.check(ulpdu[1] & 0x0F == 0x3 and ulpdu[18:22] == b'pong',
              f'the answer is no SEND of pong: {ulpdu[:24].hex()}')
    return s, lport, crc


def t_bad_crc(env):
    """MPA v2 asking for CRC: the reply confirms it, a good FPDU is answered, one with a bad
    CRC ends the connection, logged; the listener serves on"""
    before = kmsg_lines()
    r = crc_session(env, True)
    if len(r) == 2:
        r[0].close()
        return
    s, lport, crc = r
    disc = env.serve_text().count('DISCONNECTED')
    s.sendall(fpdu_send(b'this one is corrupt', 2, crc=True, bad=True))
    closed, secs, got = wait_closed(s, REFUSE_BOUND * SCALE)
    print(f'bad CRC: closed {closed} after {secs:.1f} s, {len(got)} bytes back')
    env.check(closed, 'the connection is still open after an FPDU with a bad CRC')
    s.close()
    end = time.time() + 10 * SCALE
    while env.serve_text().count('DISCONNECTED') == disc and time.time() < end:
        time.sleep(0.2)
    env.check(env.serve_text().count('DISCONNECTED') > disc,
              'the application got no DISCONNECTED')
    env.no_leftovers('bad CRC', lport)
    expect_log(env, before, 'bad CRC', lport)
    env.ping('after the bad CRC')


def t_peer_to_peer(env):
    """MPA v2 asking for peer-to-peer mode, ready-to-receive by zero-length Write: the
    reply agrees, and after the Write a SEND is answered"""
    peer_to_peer_case(env, read=False)


def t_peer_to_peer_read(env):
    """peer-to-peer mode with a zero-length Read as ready-to-receive (Chelsio's default):
    the reply agrees, the Read is answered by a zero-length Read Response, then a SEND"""
    peer_to_peer_case(env, read=True)


def peer_to_peer_case(env, read):
    s = connect()
    lport = s.getsockname()[1]
    # IRD 1 with P (peer-to-peer), ORD 1 with W (Write) or R (Read) as ready-to-receive.
    s.sendall(mpa_request(pd=b'p2p please', ird=0x8001, ord_=0x4001 if read else 0x8001))
    hdr, pd = read_reply(s)
    flags = hdr[16]
    print(f'reply: flags 0x{flags:02x} rev {hdr[17]} private data {pd!r}')
    if not env.check(hdr[:16] == KEY_REP and not flags & F_REJECT, 'the request was rejected'):
        s.close()
        return
    ird, ord_ = struct.unpack('>HH', pd[:4]) if flags & F_ENHANCED else (0, 0)
    print(f'reply IRD 0x{ird:04x} ORD 0x{ord_:04x}')
    crc = bool(flags & F_CRC)
    p2p = bool(ird & 0x8000)
    mode = 0x4000 if read else 0x8000
    if env.check(p2p and ord_ & 0xC000 == mode and not ird & 0x4000,
                 'the reply does not agree on peer-to-peer mode with a '
                 f'{"Read" if read else "Write"}', XFAIL_P2P):
        # The responder sends nothing before the ready-to-receive message.
        s.settimeout(0.5)
        try:
            early = s.recv(64)
        except socket.timeout:
            early = b''
        env.check(not early, f'{len(early)} bytes before the ready-to-receive message')
        if read:
            s.sendall(fpdu_read_rtr(crc))
            # Tagged, last, Read Response, to the sink STag 0x100 at TO 0, no payload.
            ulpdu, ok = read_fpdu(s, crc)
            env.check(ok and ulpdu == bytes([0xC1, 0x42]) + struct.pack('>IQ', 0x100, 0),
                      f'no zero-length Read Response: {ulpdu.hex()}')
        else:
            s.sendall(fpdu_write_rtr(crc))
    s.sendall(fpdu_send(b'ping after ready-to-receive', 1, crc=crc))
    ulpdu, ok = read_fpdu(s, crc)
    env.check(ok and ulpdu[1] & 0x0F == 0x3 and ulpdu[18:22] == b'pong',
              f'the answer is no SEND of pong: {ulpdu[:24].hex()}')
    s.close()
    env.no_leftovers('peer-to-peer', lport)
    env.ping('after the peer-to-peer client')


def server_first_session(env):
    """An MPA v2 request without peer-to-peer mode whose private data has cm serve send
    "hello" as soon as it is connected: (socket, local port, CRC, seconds the reply
    took to read)."""
    s = connect()
    lport = s.getsockname()[1]
    s.sendall(mpa_request(pd=b'hello first'))
    hdr, pd = read_reply(s)
    if not env.check(hdr[:16] == KEY_REP and not hdr[16] & F_REJECT, 'the request was rejected'):
        s.close()
        return None
    return s, lport, bool(hdr[16] & F_CRC), time.time()


def is_send_of(ulpdu, ok, what):
    return ok and len(ulpdu) >= 18 + len(what) and ulpdu[1] & 0x0F == 0x3 and \
        ulpdu[18:18 + len(what)] == what


def t_server_sends_first(env):
    """a server that sends as soon as it accepts, an initiator without peer-to-peer mode:
    the responder sends nothing before the initiator's first FPDU (RFC 5044), then both
    messages come; an initiator that sends nothing still gets the message, after the
    responder's grace period"""
    r = server_first_session(env)
    if not r:
        return
    s, lport, crc, t_reply = r
    # Well within riw's grace period (200 ms): nothing may come yet.
    s.settimeout(0.1)
    try:
        early = s.recv(64)
    except socket.timeout:
        early = b''
    waited = time.time() - t_reply
    if waited < 0.15:
        env.check(not early, f'{len(early)} bytes right behind the MPA reply, before the '
                  'initiator sent anything', XFAIL_SENDS_FIRST)
    else:
        print(f'the early check took {waited:.2f} s: not judged')
    if early:
        # What came early is the start of the stream: parsed first.
        s = _Prefixed(s, early)
    s.sendall(fpdu_send(b'ping from the initiator', 1, crc=crc))
    got = [read_fpdu(s, crc) for _ in range(2)]
    print('messages: ' + ', '.join(repr(u[18:23]) for u, _ in got))
    env.check(any(is_send_of(u, ok, b'hello') for u, ok in got), 'no "hello" from the server')
    env.check(any(is_send_of(u, ok, b'pong') for u, ok in got), 'no "pong" to the ping')
    s.close()
    # An initiator that never sends first still hears from the server.
    r = server_first_session(env)
    if not r:
        return
    s2, lport2, crc, t_reply = r
    ulpdu, ok = read_fpdu(s2, crc)
    secs = time.time() - t_reply
    print(f'silent initiator: "{ulpdu[18:23].decode(errors="replace")}" after {secs:.2f} s')
    env.check(is_send_of(ulpdu, ok, b'hello'), 'the silent initiator got no "hello"')
    s2.close()
    env.no_leftovers('server that sends first', lport)
    env.no_leftovers('server that sends first, silent initiator', lport2)


class _Prefixed:
    """A socket whose first bytes were already read."""

    def __init__(self, sock, head):
        self.sock, self.head = sock, head

    def settimeout(self, t):
        self.sock.settimeout(t)

    def recv(self, n):
        if self.head:
            d, self.head = self.head[:n], self.head[n:]
            return d
        return self.sock.recv(n)

    def sendall(self, b):
        self.sock.sendall(b)

    def close(self):
        self.sock.close()


def t_crc_required(env):
    """with riw's mpa_crc_required=1, a request without CRC gets a reply that demands it,
    and CRC is used"""
    if env.driver == 'siw':
        raise Skipped(XFAIL_CRC_PARAM)
    param = '/sys/module/riw/parameters/mpa_crc_required'
    if not env.check(os.path.exists(param), f'no {param}'):
        return
    with open(param) as f:
        old = f.read().strip()
    try:
        with open(param, 'w') as f:
            f.write('1')
        r = crc_session(env, False)
        r[0].close()
    finally:
        with open(param, 'w') as f:
            f.write(old)


def t_flood(env):
    """50 garbage requests in a row: the log lines about them are rate-limited"""
    before = kmsg_lines()
    for i in range(50):
        try:
            s = connect()
            s.sendall(b'GET / HTTP/1.0\r\n\r\n' + bytes(16))
            # The listener closes first (closing mid-request ourselves is the truncated
            # case, which siw does not survive).
            wait_closed(s, REFUSE_BOUND * SCALE)
            s.close()
        except OSError as ex:
            print(f'flood {i}: {ex}')
    time.sleep(1)
    env.no_leftovers('flood')
    hits = peer_lines(kmsg_lines()[len(before):], env.driver)
    print(f'{len(hits)} log lines about 50 refused peers')
    if env.check(hits, f'no kernel log line about 50 refused peers', XFAIL_LOG):
        env.check(len(hits) <= 20, f'{len(hits)} log lines for 50 refused peers: not '
                  'rate-limited')
    env.ping('after the flood')


TESTS = [t_garbage, t_truncated, t_truncated_hold, t_wrong_key, t_bad_revision, t_pd_too_long,
         t_pd_huge, t_markers, t_silence, t_bad_crc, t_peer_to_peer, t_peer_to_peer_read,
         t_server_sends_first, t_crc_required, t_flood]


def name(t):
    return t.__name__[2:]


def run(cm, ns_srv, driver, port, names):
    global ENV
    env = ENV = Env(cm, ns_srv, driver, int(port))
    try:
        for t in TESTS:
            if names and name(t) not in names:
                continue
            env.failures, env.xfails = [], []
            print(f'--- {name(t)}', flush=True)
            t0 = time.time()
            why = ''
            try:
                # A listener of its own for each case: one case's damage stays its own.
                for line in env.serve_text().splitlines():
                    print(f'  {line}')
                env.start_serve()
                t(env)
                status = 'fail' if env.failures else 'xfail' if env.xfails else 'pass'
                why = '; '.join(sorted(set(env.xfails))) if status == 'xfail' else ''
            except Skipped as ex:
                status, why = 'skip', str(ex)
            except Exception:
                traceback.print_exc(file=sys.stdout)
                status = 'fail'
            print(f'({time.time() - t0:.1f} s)')
            print(f'RESULT {status} {name(t)} {why}'.rstrip(), flush=True)
    finally:
        env.stop_serve()
        for line in env.serve_text().splitlines():
            print(f'  {line}')
        try:
            os.unlink(env.serve_log)
        except OSError:
            pass


ENV = None

if __name__ == '__main__':
    if len(sys.argv) >= 2 and sys.argv[1] == 'list':
        for t in TESTS:
            print(f'{name(t)} {t.__doc__.split(chr(10))[0] if False else " ".join(t.__doc__.split())}')
    elif len(sys.argv) >= 6 and sys.argv[1] == 'run':
        run(*sys.argv[2:6], sys.argv[6:])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
