#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The verbs fuzzer of riw_fuzz.sh: random sequences of valid and invalid verbs with random
attributes, through stock libibverbs, librdmacm and pyverbs, against one device.

  fuzz.py [--seed N] [--seconds S] [--ops N] [--verbose] DEVICE ADDRESS

DEVICE is a riw (or siw) device whose netdev has the IPv4 ADDRESS; connections run over
loopback on it, both ends in this process. The first line printed is the seed and the command
that repeats the run: one seed always draws the same operations, and --ops stops after as
many as the run printed at its end, so that the replay ends where the original did (what the
kernel answers, connections and completions, may still differ in timing).

Operations: contexts, PDs, CQs (cqe 0, huge, over the limit), QPs (any caps and type, with
or without an SRQ), SRQs, MRs (any address, length and access flags), MWs, QP modifies with
any state and attribute mask, queries, posts with any opcode, SGE and key on QPs in any
state, polls, notification requests, destruction in any order, processes killed while
holding objects, and rdma_cm connections on which Sends, Writes and Reads with valid and
invalid keys, addresses and lengths are posted while either end disconnects or is
destroyed. Errors the verbs return are expected: they are counted by verb and errno, work
completions by status. At the end everything is closed and a summary printed.

Exit status 1 if the verbs contract broke: a destroy of an object without users refused,
a PD in use deallocated, data written into read-only memory registered without write
access; else 0. Splats, hangs, leaks and a device left unusable are for the caller to
find.
"""

import argparse
import collections
import ctypes
import errno
import faulthandler
import os
import random
import select
import signal
import sys
import time
import traceback

import pyverbs.cm_enums as ce
import pyverbs.enums as e
from pyverbs.cmid import CMID, AddrInfo, CMEvent, CMEventChannel, ConnParam
from pyverbs.cq import CQ, CompChannel
from pyverbs.device import Context
from pyverbs.mr import MR, MW
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsError, PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

ACCESS = [e.IBV_ACCESS_LOCAL_WRITE, e.IBV_ACCESS_REMOTE_WRITE, e.IBV_ACCESS_REMOTE_READ,
          e.IBV_ACCESS_REMOTE_ATOMIC, e.IBV_ACCESS_MW_BIND, e.IBV_ACCESS_ZERO_BASED,
          e.IBV_ACCESS_ON_DEMAND, e.IBV_ACCESS_HUGETLB, e.IBV_ACCESS_RELAXED_ORDERING]
RDMA_ACCESS = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
QP_TYPES = [e.IBV_QPT_RC, e.IBV_QPT_UC, e.IBV_QPT_UD, e.IBV_QPT_RAW_PACKET,
            e.IBV_QPT_XRC_SEND, e.IBV_QPT_XRC_RECV, e.IBV_QPT_DRIVER, 0, 1, 5, 200]
OPCODES = [e.IBV_WR_SEND, e.IBV_WR_SEND_WITH_INV, e.IBV_WR_RDMA_WRITE, e.IBV_WR_RDMA_READ,
           e.IBV_WR_SEND_WITH_IMM, e.IBV_WR_RDMA_WRITE_WITH_IMM,
           e.IBV_WR_ATOMIC_CMP_AND_SWP, e.IBV_WR_ATOMIC_FETCH_AND_ADD, e.IBV_WR_LOCAL_INV,
           e.IBV_WR_BIND_MW, 13, 99]
# The opcodes a connection's traffic mostly uses.
DATA_OPCODES = [e.IBV_WR_SEND, e.IBV_WR_SEND_WITH_INV, e.IBV_WR_RDMA_WRITE,
                e.IBV_WR_RDMA_READ]
SEND_FLAGS = [e.IBV_SEND_FENCE, e.IBV_SEND_SIGNALED, e.IBV_SEND_SOLICITED]
PORT = 7470

# Userspace memory every MR and SGE points into: an arena, then a reserved range without
# access, so that no length from an address in the arena reaches other memory of this
# process (a random registration with remote write access over Python's heap would let a
# random Write corrupt it), and a read-only page.
ARENA = 4 << 20
GUARD = 1 << 30
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
PROT_NONE, PROT_READ, PROT_WRITE = 0, 1, 2
MAP_PRIVATE, MAP_ANONYMOUS, MAP_NORESERVE = 0x02, 0x20, 0x4000


def mmap(length, prot):
    addr = libc.mmap(None, length, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
    if addr in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), 'mmap')
    return addr


class Obj:
    """A pyverbs object with the objects it depends on: closing one of those closes it too
    (as pyverbs does), after which it is never used again."""

    def __init__(self, kind, py, parents, **info):
        self.kind, self.py, self.alive = kind, py, True
        self.children = []
        self.info = info
        parents = [p for p in parents if p is not None]
        # The context whose objects these are (the first parent's).
        self.ctx = parents[0].ctx if parents else self
        self.mixed = any(p.ctx is not self.ctx for p in parents)
        for p in parents:
            p.children.append(self)


class Side:
    """One end of a connection: its cm_id and the verbs objects it posts on."""

    def __init__(self):
        self.cmid = None
        self.pd = self.cq = self.qp = self.srq = None
        self.mrs = []
        self.peer = None


class Conn:
    """A connection over loopback, its choices drawn when it is made (plan)."""

    def __init__(self, num, plan):
        self.num, self.plan = num, plan
        self.state = 'resolving'
        self.cli, self.srv = Side(), Side()
        self.cli.peer, self.srv.peer = self.srv, self.cli


libibverbs = ctypes.CDLL('libibverbs.so.1')
libibverbs.ibv_wc_status_str.restype = ctypes.c_char_p


class Raw:
    """libibverbs without pyverbs, which always destroys children first: for a PD
    deallocated while an MR and a QP still use it. (Not a CQ destroyed under its QP: the
    provider unmaps the CQ's ring before asking the kernel, and again when asked again.)"""

    class QPCap(ctypes.Structure):
        _fields_ = [(n, ctypes.c_uint32) for n in ('max_send_wr', 'max_recv_wr', 'max_send_sge',
                                                   'max_recv_sge', 'max_inline_data')]

    class QPInitAttr(ctypes.Structure):
        pass

    QPInitAttr._fields_ = [('qp_context', ctypes.c_void_p), ('send_cq', ctypes.c_void_p),
                           ('recv_cq', ctypes.c_void_p), ('srq', ctypes.c_void_p),
                           ('cap', QPCap), ('qp_type', ctypes.c_int),
                           ('sq_sig_all', ctypes.c_int)]

    def __init__(self, dev):
        v = ctypes.CDLL('libibverbs.so.1', use_errno=True)
        P = ctypes.c_void_p
        for name, res, args in (
                ('ibv_get_device_list', ctypes.POINTER(P), [ctypes.POINTER(ctypes.c_int)]),
                ('ibv_free_device_list', None, [ctypes.POINTER(P)]),
                ('ibv_get_device_name', ctypes.c_char_p, [P]),
                ('ibv_open_device', P, [P]), ('ibv_close_device', ctypes.c_int, [P]),
                ('ibv_alloc_pd', P, [P]), ('ibv_dealloc_pd', ctypes.c_int, [P]),
                ('ibv_reg_mr', P, [P, P, ctypes.c_size_t, ctypes.c_int]),
                ('ibv_dereg_mr', ctypes.c_int, [P]),
                ('ibv_create_cq', P, [P, ctypes.c_int, P, P, ctypes.c_int]),
                ('ibv_destroy_cq', ctypes.c_int, [P]),
                ('ibv_create_qp', P, [P, ctypes.POINTER(self.QPInitAttr)]),
                ('ibv_destroy_qp', ctypes.c_int, [P])):
            fn = getattr(v, name)
            fn.restype, fn.argtypes = res, args
        self.v = v
        n = ctypes.c_int()
        devs = v.ibv_get_device_list(ctypes.byref(n))
        self.ctx = None
        for i in range(n.value):
            if v.ibv_get_device_name(devs[i]).decode() == dev:
                self.ctx = v.ibv_open_device(devs[i])
        v.ibv_free_device_list(devs)
        if not self.ctx:
            raise OSError(ctypes.get_errno(), f'cannot open {dev}')

    def close(self):
        self.v.ibv_close_device(self.ctx)


def wc_status(n):
    return libibverbs.ibv_wc_status_str(n).decode()


def errname(n):
    return errno.errorcode.get(n, str(n))


class Fuzzer:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.dev, self.addr = args.device, args.address
        self.objs = collections.defaultdict(list)  # kind -> [Obj] alive
        self.counts = collections.Counter()  # (verb, outcome) -> n
        self.ops = 0
        self.slowest = collections.defaultdict(lambda: (0, 0))  # op -> (seconds, op number)
        self.tracebacks = 0
        self.contract = []  # what broke the verbs contract
        self.conns = []
        self.next_conn = 0
        self.wr_id = 0
        arena = mmap(ARENA + GUARD, PROT_NONE)
        if libc.mprotect(arena, ARENA, PROT_READ | PROT_WRITE) != 0:
            raise OSError(ctypes.get_errno(), 'mprotect')
        self.arena = arena
        # Never written: MRs over it lack local write access, so nothing may land in it.
        self.rdonly = mmap(1 << 16, PROT_READ)
        probe = Context(name=self.dev)
        self.attr = probe.query_device()
        probe.close()
        # Event channels, found by their file descriptors so that a select() tells whether
        # an event waits (reading one blocks otherwise): the listener's, which its
        # connections' server ends share, and one per client end, which tells whose
        # event it is.
        self.srv_ch, self.srv_fd = self.channel()
        self.listener = None
        self.listen()
        self.raw = Raw(self.dev)

    # ---- bookkeeping ----

    def outcome(self, verb, fn, *a, count_ok=True, **kw):
        """Run a verb; count its outcome (a success only if count_ok); return its result or
        None if it failed."""
        try:
            r = fn(*a, **kw)
        except PyverbsRDMAError as ex:
            # The provider's posts return negative errnos, ibv_query_gid and the doorbell
            # -1 whatever the error.
            n = ex.error_code
            self.counts[(verb, '-1' if n == -1 else errname(abs(n)))] += 1
            return None
        except PyverbsError:
            self.counts[(verb, 'PyverbsError')] += 1
            return None
        except (OverflowError, ValueError, TypeError) as ex:
            # pyverbs refusing a value before any call: userspace, counted.
            self.counts[(verb, type(ex).__name__)] += 1
            return None
        except Exception as ex:  # noqa: BLE001 (pyverbs's own surprises are counted too)
            self.counts[(verb, 'python ' + type(ex).__name__)] += 1
            if self.tracebacks < 5:
                self.tracebacks += 1
                traceback.print_exc(file=sys.stdout)
            return None
        if count_ok:
            self.counts[(verb, 'ok')] += 1
        return True if r is None else r

    def add(self, kind, py, parents, **info):
        o = Obj(kind, py, parents, **info)
        if o.mixed:
            # Made of objects of more than one context: the kernel took each handle for
            # one of the first context, which pyverbs does not know, so that its order of
            # destruction would be wrong. It goes at once.
            for p in parents:
                if p is not None:
                    p.children.remove(o)
            self.outcome(f'destroy {kind} made across contexts', py.close)
            return None
        self.objs[kind].append(o)
        return o

    def bury(self, o):
        """o and what depends on it are closed: forget them."""
        stack = [o]
        while stack:
            x = stack.pop()
            if not x.alive:
                continue
            x.alive = False
            self.objs[x.kind].remove(x)
            stack.extend(x.children)

    def destroy(self, o, verb):
        ok = self.outcome(verb, o.py.close)
        if ok is None:
            self.contract.append(f'{verb} failed (op {self.ops})')
        self.bury(o)

    def destroy_some(self, kind, verb, chance):
        """Destroy an object of this kind, picked at random, with this chance."""
        o = self.pick(kind)
        if o and self.rng.random() < chance:
            self.destroy(o, verb)

    def pick(self, kind):
        lst = self.objs[kind]
        return self.rng.choice(lst) if lst else None

    # ---- random values ----

    def small_num(self, limit):
        """0, 1, 2, up to limit, limit, one more."""
        return self.rng.choice([0, 1, 2, self.rng.randint(1, max(1, limit)), limit,
                                limit + 1])

    def access(self):
        r = self.rng
        if r.random() < 0.5:
            return r.choice([0, e.IBV_ACCESS_LOCAL_WRITE, RDMA_ACCESS,
                             RDMA_ACCESS | e.IBV_ACCESS_REMOTE_ATOMIC,
                             e.IBV_ACCESS_REMOTE_READ])
        flags = 0
        for f in ACCESS:
            if r.random() < 0.3:
                flags |= f
        if r.random() < 0.1:
            flags |= 1 << r.randint(0, 31)
        return flags

    def address(self):
        r = self.rng
        return r.choice([
            self.arena + r.randint(0, ARENA), self.arena + r.randrange(0, ARENA, 4096),
            self.arena, self.arena + ARENA + r.randint(0, GUARD // 2), self.rdonly,
            4096, 0xffff888000000000, 1 << 47, (1 << 64) - 4096])

    def length(self):
        r = self.rng
        return r.choice([0, 1, r.randint(1, 4096), r.randint(1, ARENA), ARENA,
                         self.attr.max_mr_size, self.attr.max_mr_size + 1, 1 << 63,
                         (1 << 64) - 1, r.randint(1, 64 << 20)])

    def in_arena(self, addr, length):
        return self.arena <= addr and addr + length <= self.arena + ARENA

    def sge(self, mrs):
        """An SGE: mostly inside a registered MR, else anywhere with any key."""
        r = self.rng
        live = [m for m in mrs if m.alive]
        if live and r.random() < 0.8:
            m = r.choice(live)
            base, length = m.info['addr'], m.info['len']
            off = r.choice([0, r.randint(0, max(0, length - 1)), length, length + 1])
            ln = r.choice([0, 1, r.randint(0, max(0, length - off)), length - off + 1,
                           r.randint(0, 1 << 20)])
            key = m.py.lkey if r.random() < 0.95 else m.py.lkey ^ r.choice([1, 0x100])
            return SGE(base + off, max(0, min(ln, (1 << 32) - 1)), key)
        return SGE(self.arena + r.randint(0, ARENA - 1), r.choice([0, 1, 64, 4096, 1 << 31]),
                   r.randint(0, (1 << 32) - 1))

    def sges(self, mrs, inline=False):
        r = self.rng
        n = r.choice([1, 1, 2, 3, r.randint(1, 8)])
        sg = [self.sge(mrs) for _ in range(n)]
        if inline:
            # The provider copies inline data itself: only readable memory of the arena.
            for s in sg:
                if not self.in_arena(s.addr, s.length):
                    s.addr, s.length = self.arena, r.randint(0, 128)
        return sg

    # ---- rdma_cm ----

    def channel(self):
        before = self.rdma_cm_fds()
        ch = CMEventChannel()
        new = self.rdma_cm_fds() - before
        if len(new) != 1:
            raise RuntimeError(f'cannot find the event channel file descriptor ({new})')
        return ch, new.pop()

    @staticmethod
    def rdma_cm_fds():
        fds = set()
        for fd in os.listdir('/proc/self/fd'):
            try:
                if os.readlink(f'/proc/self/fd/{fd}') == '/dev/infiniband/rdma_cm':
                    fds.add(int(fd))
            except OSError:
                pass
        return fds

    def listen(self):
        lid = CMID(creator=self.srv_ch, port_space=ce.RDMA_PS_TCP)
        ai = AddrInfo(src=self.addr, src_service=str(PORT), port_space=ce.RDMA_PS_TCP,
                      flags=ce.RAI_PASSIVE)
        lid.bind_addr(ai)
        lid.listen(self.rng.choice([0, 1, 8, 128]))
        self.listener = lid

    def conn_by_data(self, data):
        if data[:4] != b'fuzz':
            return None
        num = int.from_bytes(data[4:8], 'little')
        for c in self.conns:
            if c.num == num:
                return c
        return None

    def pump(self):
        """Handle every rdma_cm event that waits, acknowledging each at once (a cm_id with
        an event unacknowledged cannot be destroyed)."""
        for _ in range(64):
            fds = {self.srv_fd: None}
            for c in self.conns:
                if c.cli.cmid:
                    fds[c.fd] = c
            ready, _, _ = select.select(list(fds), [], [], 0)
            if not ready:
                return
            for fd in ready:
                c = fds[fd]
                ev = CMEvent(self.srv_ch if c is None else c.ch)
                try:
                    self.event(ev, c)
                finally:
                    ev.ack_cm_event()

    def event(self, ev, c):
        t = ev.event_type
        self.counts[('cm event', ev.event_str())] += 1
        if c is None:
            if t == ce.RDMA_CM_EVENT_CONNECT_REQUEST:
                self.request(ev)
            return
        if t == ce.RDMA_CM_EVENT_ADDR_RESOLVED:
            c.state = 'routing'
            if self.outcome('rdma_resolve_route', c.cli.cmid.resolve_route) is None:
                c.state = 'failed'
        elif t == ce.RDMA_CM_EVENT_ROUTE_RESOLVED:
            c.state = 'connecting'
            p = c.plan
            qpn = c.cli.qp.py.qp_num if c.cli.qp and c.cli.qp.alive else p['stale_qpn']
            self.qp_init(c.cli)
            param = ConnParam(resources=p['ird'], depth=p['ord'], qp_num=qpn, data_len=56)
            param.set_private_data(b'fuzz' + c.num.to_bytes(4, 'little'))
            if self.outcome('rdma_connect', c.cli.cmid.connect, param) is None:
                c.state = 'failed'
        elif t == ce.RDMA_CM_EVENT_ESTABLISHED:
            c.state = 'established'
        elif t == ce.RDMA_CM_EVENT_DISCONNECTED:
            c.state = 'disconnected'
        elif t != ce.RDMA_CM_EVENT_TIMEWAIT_EXIT:
            c.state = 'failed'

    def qp_init(self, side):
        """iWARP QPs take their access flags in INIT, which rdma_cm sets for its own QPs
        only: ours get them here, or not, as the plan says."""
        if not (side.qp and side.qp.alive and side.cmid):
            return
        how = side.conn.plan['init']
        if how == 'cm':
            r = self.outcome('rdma_init_qp_attr', side.cmid.init_qp_attr, e.IBV_QPS_INIT)
            if r is not None:
                self.outcome('modify_qp', side.qp.py.modify, r[0], r[1])
        elif how == 'verbs':
            attr = QPAttr(qp_state=e.IBV_QPS_INIT)
            attr.qp_access_flags = RDMA_ACCESS
            self.outcome('modify_qp', side.qp.py.modify, attr,
                         e.IBV_QP_STATE | e.IBV_QP_ACCESS_FLAGS)

    def request(self, ev):
        c = self.conn_by_data(ev.private_data)
        if self.listener is None:
            return
        child = CMID(creator=ev, listen_id=self.listener)
        if c is None or c.srv.cmid is not None:
            self.outcome('rdma_destroy_id', child.close)
            return
        c.srv.cmid = child
        p = c.plan
        if p['server'] == 'reject':
            self.outcome('rdma_reject', child.reject, b'fuzz')
        elif p['server'] == 'destroy':
            self.outcome('rdma_destroy_id', child.close)
            c.srv.cmid = None
        else:
            self.qp_init(c.srv)
            qpn = c.srv.qp.py.qp_num if c.srv.qp and c.srv.qp.alive else p['stale_qpn']
            param = ConnParam(resources=p['ird'], depth=p['ord'], qp_num=qpn)
            self.outcome('rdma_accept', child.accept, param)

    # ---- operations ----

    def op_open_context(self):
        if len(self.objs['ctx']) >= 3:
            return
        ctx = self.outcome('open_device', Context, name=self.dev)
        if ctx:
            self.add('ctx', ctx, [])

    def op_query(self):
        ctx = self.pick('ctx')
        if not ctx:
            return
        r, c = self.rng, ctx.py
        which = r.randrange(5)
        if which == 0:
            self.outcome('query_device', c.query_device)
        elif which == 1:
            self.outcome('query_device_ex', c.query_device_ex)
        elif which == 2:
            self.outcome('query_port', c.query_port, r.choice([0, 1, 1, 2, 255]))
        elif which == 3:
            self.outcome('query_gid', c.query_gid, r.choice([0, 1, 1, 2]),
                         r.choice([0, 0, 1, 15, 255, r.randint(0, 1 << 20)]))
        else:
            self.outcome('query_pkey', c.query_pkey, r.choice([0, 1, 2]),
                         r.choice([0, 1, 1000]))

    def create_on_context(self, kind, verb, cls, most):
        """An object of a context picked at random, while there are fewer than most."""
        ctx = self.pick('ctx')
        if ctx and len(self.objs[kind]) < most:
            obj = self.outcome(verb, cls, ctx.py)
            if obj:
                self.add(kind, obj, [ctx])

    def op_alloc_pd(self):
        self.create_on_context('pd', 'alloc_pd', PD, 16)

    def op_create_comp_channel(self):
        self.create_on_context('cc', 'create_comp_channel', CompChannel, 4)

    def op_create_cq(self):
        ctx = self.pick('ctx')
        if not ctx or len(self.objs['cq']) >= 24:
            return
        r = self.rng
        cqe = r.choice([0, 1, r.randint(1, 64), r.randint(1, 4096), self.attr.max_cqe,
                        self.attr.max_cqe + 1, (1 << 31) - 1, -1])
        cc = self.pick('cc') if r.random() < 0.3 else None
        vec = r.choice([0, 0, 0, 1, 1000])
        cq = self.outcome('create_cq', CQ, ctx.py, cqe, None, cc.py if cc else None, vec)
        if cq:
            self.add('cq', cq, [ctx, cc])

    def op_cq(self):
        o = self.pick('cq')
        if not o:
            return
        r = self.rng
        which = r.randrange(4)
        if which == 0:
            self.outcome('resize_cq', o.py.resize, r.choice([0, 1, 100, self.attr.max_cqe + 1]))
        elif which == 1:
            self.outcome('req_notify_cq', o.py.req_notify, r.random() < 0.5)
        else:
            self.poll(o)

    def poll(self, o):
        got = self.outcome('poll_cq', o.py.poll, self.rng.choice([1, 4, 64]))
        if got:
            for wc in got[1]:
                self.counts[('wc', wc_status(wc.status))] += 1

    def op_create_srq(self):
        pd = self.pick('pd')
        if not pd or len(self.objs['srq']) >= 8:
            return
        r, a = self.rng, self.attr
        attr = SrqAttr(max_wr=self.small_num(a.max_srq_wr), max_sge=self.small_num(a.max_srq_sge),
                       srq_limit=r.choice([0, 0, 1, r.randint(0, 1 << 16)]))
        srq = self.outcome('create_srq', SRQ, pd.py, SrqInitAttr(attr))
        if srq:
            self.add('srq', srq, [pd], pd=pd)

    def op_srq(self):
        o = self.pick('srq')
        if not o:
            return
        r, a = self.rng, self.attr
        which = r.randrange(4)
        if which == 0:
            attr = SrqAttr(max_wr=self.small_num(a.max_srq_wr), max_sge=1,
                           srq_limit=r.choice([0, 1, 10, 1 << 20]))
            self.outcome('modify_srq', o.py.modify, attr, r.randint(0, 7))
        elif which == 1:
            self.outcome('query_srq', o.py.query)
        elif which == 2:
            self.post_recv(o, self.objs['mr'])
        elif r.random() < 0.3:
            self.destroy(o, 'destroy_srq')

    def op_reg_mr(self):
        pd = self.pick('pd')
        if not pd or len(self.objs['mr']) >= 32:
            return
        r = self.rng
        addr, length, acc = self.address(), self.length(), self.access()
        if r.random() < 0.5:
            # A registration that may succeed: inside the arena.
            addr = self.arena + r.choice([0, r.randrange(0, ARENA // 2, 4096),
                                          r.randint(0, ARENA // 2)])
            length = r.choice([1, r.randint(1, 8192), r.randint(1, ARENA // 2)])
        mr = self.outcome('reg_mr', MR, pd.py, length, acc, address=addr)
        if mr:
            self.add('mr', mr, [pd], addr=addr, len=length, pd=pd, acc=acc)

    def op_dereg_mr(self):
        o = self.pick('mr')
        if not o:
            return
        if self.rng.random() < 0.2:
            # pyverbs passes the PD on without a check for None.
            pd = self.pick('pd')
            if pd:
                self.outcome('rereg_mr', o.py.rereg, self.rng.randint(0, 7), pd.py,
                             self.arena, 4096, e.IBV_ACCESS_LOCAL_WRITE)
        else:
            self.destroy(o, 'dereg_mr')

    def op_alloc_mw(self):
        pd = self.pick('pd')
        if pd:
            mw = self.outcome('alloc_mw', MW, pd.py, self.rng.choice([1, 2, 3]))
            if mw:
                self.add('mw', mw, [pd])

    def op_busy(self):
        """A PD deallocated while an MR and a QP use it: EBUSY, until they are gone."""
        r, v, ctx = self.rng, self.raw.v, self.raw.ctx
        pd = v.ibv_alloc_pd(ctx)
        cq = v.ibv_create_cq(ctx, 4, None, None, 0)
        if not (pd and cq):
            self.contract.append(f'raw alloc_pd or create_cq failed (op {self.ops})')
            return
        init = Raw.QPInitAttr(send_cq=cq, recv_cq=cq, cap=Raw.QPCap(1, 1, 1, 1, 0),
                              qp_type=e.IBV_QPT_RC)
        users = {'qp': v.ibv_create_qp(pd, ctypes.byref(init)),
                 'mr': v.ibv_reg_mr(pd, self.arena, 4096, e.IBV_ACCESS_LOCAL_WRITE)}
        destroy = {'qp': v.ibv_destroy_qp, 'mr': v.ibv_dereg_mr}
        for k in users:
            self.counts[(f'raw {k} on a raw PD', 'ok' if users[k] else 'failed')] += 1
        order = [k for k in users if users[k]]
        r.shuffle(order)
        for k in order + ['pd']:
            if r.random() < 0.5 or k == 'pd':
                rc = v.ibv_dealloc_pd(pd)
                busy = any(users[u] for u in users)
                self.counts[('dealloc_pd in use' if busy else 'dealloc_pd', errname(rc)
                             if rc else 'ok')] += 1
                if busy and rc != errno.EBUSY:
                    self.contract.append(f'dealloc_pd of a PD in use: {errname(rc) if rc else 0}'
                                         f' (op {self.ops})')
                    if not rc:
                        return  # the rest is lost
                if not busy:
                    if rc:
                        self.contract.append(f'dealloc_pd: {errname(rc)} (op {self.ops})')
                    break
            if k != 'pd':
                rc = destroy[k](users[k])
                self.counts[('raw ' + destroy[k].__name__, errname(rc) if rc else 'ok')] += 1
                if rc:
                    self.contract.append(f'{destroy[k].__name__}: {errname(rc)} (op {self.ops})')
                users[k] = None
        if v.ibv_destroy_cq(cq):
            self.contract.append(f'raw destroy_cq failed (op {self.ops})')

    def caps(self, srq):
        a, r = self.attr, self.rng
        return QPCap(max_send_wr=self.small_num(a.max_qp_wr),
                     max_recv_wr=0 if srq and r.random() < 0.8 else self.small_num(a.max_qp_wr),
                     max_send_sge=self.small_num(a.max_sge),
                     max_recv_sge=self.small_num(a.max_sge),
                     max_inline_data=r.choice([0, 0, 64, 72, 100, 1 << 20]))

    def create_qp(self, pd, cq1, cq2, srq, qp_type, caps, sig_all):
        init = QPInitAttr(qp_type=qp_type, scq=cq1.py, rcq=cq2.py,
                          srq=srq.py if srq else None, cap=caps, sq_sig_all=sig_all)
        qp = self.outcome('create_qp', QP, pd.py, init)
        if qp:
            return self.add('qp', qp, [pd, cq1, cq2, srq], pd=pd, srq=srq)
        return None

    def op_create_qp(self):
        pd, cq1, cq2 = self.pick('pd'), self.pick('cq'), self.pick('cq')
        if not (pd and cq1 and cq2) or len(self.objs['qp']) >= 32:
            return
        r = self.rng
        srq = self.pick('srq') if r.random() < 0.3 else None
        qp_type = e.IBV_QPT_RC if r.random() < 0.7 else r.choice(QP_TYPES)
        self.create_qp(pd, cq1, cq2, srq, qp_type, self.caps(srq), r.randint(0, 1))

    def op_modify_qp(self):
        o = self.pick('qp')
        if not o:
            return
        r = self.rng
        attr = QPAttr(qp_state=r.choice([0, 1, 1, 2, 3, 3, 4, 5, 6, 6, 7, 8]),
                      cur_qp_state=r.randint(0, 7))
        attr.qp_access_flags = self.access()
        attr.max_rd_atomic = r.choice([0, 1, 16, 255])
        attr.max_dest_rd_atomic = r.choice([0, 1, 16, 255])
        attr.path_mtu = r.randint(0, 6)
        attr.port_num = r.choice([0, 1, 1, 2])
        attr.dest_qp_num = r.randint(0, 1 << 24)
        attr.sq_psn = r.randint(0, 1 << 24)
        attr.timeout = r.randint(0, 31)
        attr.min_rnr_timer = r.randint(0, 31)
        attr.en_sqd_async_notify = r.randint(0, 1)
        if r.random() < 0.5:
            mask = e.IBV_QP_STATE | (e.IBV_QP_ACCESS_FLAGS if r.random() < 0.3 else 0)
        else:
            mask = r.getrandbits(26)
        self.outcome('modify_qp', o.py.modify, attr, mask)

    def op_query_qp(self):
        o = self.pick('qp')
        if o:
            self.outcome('query_qp', o.py.query, self.rng.choice([e.IBV_QP_STATE, e.IBV_QP_CAP,
                                                                  self.rng.getrandbits(26)]))

    def post_recv(self, o, mrs):
        r = self.rng
        wrs = []
        for _ in range(r.choice([1, 1, 2, 8])):
            sg = self.sges(mrs)
            wr = RecvWR(wr_id=self.next_id(), num_sge=len(sg), sg=sg)
            if wrs:
                wrs[-1].next_wr = wr
            wrs.append(wr)
        self.outcome('post_recv' if o.kind == 'qp' else 'post_srq_recv', o.py.post_recv,
                     wrs[0])

    def next_id(self):
        self.wr_id += 1
        return self.wr_id

    def send_wr(self, mrs, peer_mrs):
        r = self.rng
        op = r.choice(DATA_OPCODES) if r.random() < 0.85 else r.choice(OPCODES)
        flags = e.IBV_SEND_SIGNALED if r.random() < 0.8 else 0
        for f in SEND_FLAGS:
            if r.random() < 0.15:
                flags ^= f
        inline = r.random() < 0.1 and op in (e.IBV_WR_SEND, e.IBV_WR_RDMA_WRITE)
        if inline:
            flags |= e.IBV_SEND_INLINE
        sg = self.sges(mrs, inline)
        wr = SendWR(wr_id=self.next_id(), opcode=op, num_sge=len(sg), sg=sg,
                    send_flags=flags)
        live = [m for m in peer_mrs if m.alive]
        if live and r.random() < 0.85:
            m = r.choice(live)
            rkey = m.py.rkey if r.random() < 0.9 else r.randint(0, (1 << 32) - 1)
            raddr = m.info['addr'] + r.choice([0, 0, r.randint(0, m.info['len']),
                                               m.info['len'], -1])
        else:
            rkey, raddr = r.randint(0, (1 << 32) - 1), self.arena + r.randint(0, ARENA)
        raddr &= (1 << 64) - 1
        if op in (e.IBV_WR_ATOMIC_CMP_AND_SWP, e.IBV_WR_ATOMIC_FETCH_AND_ADD):
            wr.set_wr_atomic(rkey, raddr, r.getrandbits(64), r.getrandbits(64))
        else:
            wr.set_wr_rdma(rkey, raddr)
        if op in (e.IBV_WR_SEND_WITH_INV, e.IBV_WR_LOCAL_INV):
            # imm_data shares its place with invalidate_rkey; a local invalidation names
            # one of ours, mostly.
            own = [m for m in mrs if m.alive]
            if op == e.IBV_WR_LOCAL_INV and own and r.random() < 0.7:
                rkey = r.choice(own).py.lkey
            wr.imm_data = rkey
        return wr

    def post_send(self, qp, mrs, peer_mrs):
        wrs = []
        for _ in range(self.rng.choice([1, 1, 1, 2, 4])):
            wr = self.send_wr(mrs, peer_mrs)
            if wrs:
                wrs[-1].next_wr = wr
            wrs.append(wr)
        self.outcome('post_send', qp.py.post_send, wrs[0])

    def op_post(self):
        o = self.pick('qp')
        if not o:
            return
        mrs = [m for m in self.objs['mr'] if m.info['pd'] is o.info['pd']]
        if self.rng.random() < 0.5:
            self.post_send(o, mrs or self.objs['mr'], self.objs['mr'])
        elif not o.info['srq']:
            # The soft-iWARP provider (rdma-core 44) divides by the size of the receive
            # queue of a QP on an SRQ, 0: SIGFPE. Not a kernel matter.
            self.post_recv(o, mrs or self.objs['mr'])

    def op_spawn(self):
        """A process that creates objects, connects QPs of its own or not, posts on them
        and is SIGKILLed holding them, at any point of that."""
        seed = self.rng.getrandbits(32)
        connect = self.rng.random() < 0.5
        port = PORT + 1 + self.rng.randrange(64)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0 and connect:
            try:
                self.connected_child(random.Random(seed), port)
            except Exception:  # noqa: BLE001 (the child dies whatever it managed)
                pass
            os.kill(os.getpid(), signal.SIGKILL)
        if pid == 0:
            try:
                r = random.Random(seed)
                ctx = Context(name=self.dev)
                pd, cq = PD(ctx), CQ(ctx, r.randint(1, 64))
                mr = MR(pd, 1 << 16, RDMA_ACCESS, address=self.arena)
                qps = [QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                                         cap=QPCap(r.randint(1, 32), r.randint(1, 32))))
                       for _ in range(r.randint(1, 4))]
                for qp in qps:
                    qp.post_recv(RecvWR(wr_id=1, num_sge=1,
                                        sg=[SGE(self.arena, 64, mr.lkey)]))
                    if r.random() < 0.5:
                        qp.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
            except Exception:  # noqa: BLE001 (the child dies whatever it managed)
                pass
            os.kill(os.getpid(), signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        self.counts[('spawned process' + (' connecting' if connect else ''),
                     'killed' if os.WIFSIGNALED(status) else 'exited')] += 1

    def connected_child(self, r, port):
        """In a spawned process: a connection of two QPs through a listener of its own,
        traffic on it, and death after a random number of steps."""
        steps = r.randint(1, 12)
        ctx = Context(name=self.dev)
        pd, cq = PD(ctx), CQ(ctx, r.choice([8, 64]))
        mr = MR(pd, 1 << 16, RDMA_ACCESS, address=self.arena)
        qps = [QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                                 cap=QPCap(16, 16, 1, 1))) for _ in range(2)]
        for qp in qps:
            for _ in range(r.randint(0, 8)):
                qp.post_recv(RecvWR(wr_id=1, num_sge=1, sg=[SGE(self.arena, 4096, mr.lkey)]))
        lch, lfd = self.channel()
        cch, cfd = self.channel()
        lid = CMID(creator=lch, port_space=ce.RDMA_PS_TCP)
        lid.bind_addr(AddrInfo(src=self.addr, src_service=str(port), port_space=ce.RDMA_PS_TCP,
                               flags=ce.RAI_PASSIVE))
        lid.listen()
        cid = CMID(creator=cch, port_space=ce.RDMA_PS_TCP)
        cid.resolve_addr(AddrInfo(src=self.addr, dst=self.addr, dst_service=str(port),
                                  port_space=ce.RDMA_PS_TCP))
        held = []
        deadline = time.monotonic() + r.uniform(0.05, 3)
        while steps > 0 and time.monotonic() < deadline:
            ready, _, _ = select.select([lfd, cfd], [], [], 0.05)
            for fd in ready:
                ev = CMEvent(lch if fd == lfd else cch)
                t = ev.event_type
                if t == ce.RDMA_CM_EVENT_ADDR_RESOLVED:
                    cid.resolve_route()
                elif t == ce.RDMA_CM_EVENT_ROUTE_RESOLVED:
                    qps[0].modify(*cid.init_qp_attr(e.IBV_QPS_INIT))
                    cid.connect(ConnParam(qp_num=qps[0].qp_num))
                elif t == ce.RDMA_CM_EVENT_CONNECT_REQUEST:
                    child = CMID(creator=ev, listen_id=lid)
                    held.append(child)
                    qps[1].modify(*child.init_qp_attr(e.IBV_QPS_INIT))
                    child.accept(ConnParam(qp_num=qps[1].qp_num))
                ev.ack_cm_event()
                steps -= 1
            for qp in qps:
                op = r.choice(DATA_OPCODES)
                wr = SendWR(wr_id=2, opcode=op, num_sge=1, sg=[SGE(self.arena, 4096, mr.lkey)])
                wr.set_wr_rdma(mr.rkey, self.arena + 8192)
                try:
                    qp.post_send(wr)
                except PyverbsError:
                    pass
            cq.poll(r.randint(0, 8))

    # ---- connections ----

    def op_connect(self):
        ctx = self.pick('ctx')
        if not ctx:
            return
        live = [c for c in self.conns if c.state != 'closed']
        if len(live) >= 4:
            # The oldest goes, in whatever state it is.
            self.close_conn(live[0])
        r = self.rng
        # Half the connections carry valid traffic, so that data moves before whatever
        # ends it; the others get anything.
        valid = r.random() < 0.5
        plan = {'server': 'accept' if valid else
                          r.choices(['accept', 'reject', 'destroy'], [80, 15, 5])[0],
                'ird': r.choice([1, 4, 16] if valid else [0, 1, 4, 16, 128, 255]),
                'ord': r.choice([1, 4, 16] if valid else [0, 1, 4, 16, 128, 255]),
                'init': 'cm' if valid else r.choices(['cm', 'verbs', 'none'], [60, 20, 20])[0],
                'stale_qpn': r.randint(0, 1 << 24), 'valid': valid}
        c = Conn(self.next_conn, plan)
        self.next_conn += 1
        for side in (c.cli, c.srv):
            side.conn = c
            self.conn_objects(ctx, side, srq=side is c.srv and r.random() < 0.3)
        c.ch, c.fd = self.channel()
        c.cli.cmid = CMID(creator=c.ch, port_space=ce.RDMA_PS_TCP)
        self.conns.append(c)
        ai = AddrInfo(src=self.addr, dst=self.addr, dst_service=str(PORT),
                      port_space=ce.RDMA_PS_TCP)
        if self.outcome('rdma_resolve_addr', c.cli.cmid.resolve_addr, ai) is None:
            c.state = 'failed'

    def conn_objects(self, ctx, side, srq):
        """A connection end's PD, CQ, QP (perhaps on an SRQ), MRs and posted receives."""
        r, a = self.rng, self.attr
        pd = self.outcome('alloc_pd', PD, ctx.py)
        # Half the CQs raise completion events (never read), on a channel of their own.
        cc = self.outcome('create_comp_channel', CompChannel, ctx.py) if r.random() < 0.5 \
            else None
        cq = self.outcome('create_cq', CQ, ctx.py, r.choice([16, 64, 256]), None, cc or None)
        if cc:
            cc = self.add('cc', cc, [ctx])
        if not (pd and cq):
            return
        side.pd = self.add('pd', pd, [ctx])
        side.cq = self.add('cq', cq, [ctx, cc])
        if srq:
            srq = self.outcome('create_srq', SRQ, pd, SrqInitAttr(SrqAttr(max_wr=64, max_sge=2)))
            if srq:
                side.srq = self.add('srq', srq, [side.pd], pd=side.pd)
        caps = QPCap(max_send_wr=r.choice([4, 16, 64]),
                     max_recv_wr=0 if side.srq else r.choice([4, 16, 64]),
                     max_send_sge=r.randint(1, min(6, a.max_sge)),
                     max_recv_sge=r.randint(1, min(6, a.max_sge)),
                     max_inline_data=r.choice([0, 64]))
        side.qp = self.create_qp(side.pd, side.cq, side.cq, side.srq, e.IBV_QPT_RC, caps,
                                 r.randint(0, 1))
        side.max_sge = caps.max_send_sge
        for _ in range(r.randint(1, 3)):
            addr = self.arena + r.randrange(0, ARENA // 2, 64)
            length = r.choice([64, 4096, r.randint(1, 256 << 10)])
            acc = r.choice([RDMA_ACCESS, RDMA_ACCESS, e.IBV_ACCESS_LOCAL_WRITE,
                            e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_READ])
            mr = self.outcome('reg_mr', MR, pd, length, acc, address=addr)
            if mr:
                side.mrs.append(self.add('mr', mr, [side.pd], addr=addr, len=length,
                                         pd=side.pd, acc=acc))
        rq = side.srq or side.qp
        if not (rq and side.mrs):
            return
        for _ in range(r.randint(0, 8)):
            m = r.choice(side.mrs)
            sge = SGE(m.info['addr'], m.info['len'], m.py.lkey)
            self.outcome('post_recv' if rq.kind == 'qp' else 'post_srq_recv', rq.py.post_recv,
                         RecvWR(wr_id=self.next_id(), num_sge=1, sg=[sge]))

    def live_conn(self, states=('established',)):
        live = [c for c in self.conns if c.state in states]
        return self.rng.choice(live) if live else None

    def op_traffic(self):
        c = self.live_conn(('established', 'connecting', 'disconnected', 'failed'))
        if not c:
            return
        r = self.rng
        side = r.choice([c.cli, c.srv])
        for _ in range(r.randint(1, 6)):
            if c.plan['valid'] and r.random() < 0.9:
                self.valid_traffic(side)
            elif r.random() < 0.6:
                if side.qp and side.qp.alive:
                    self.post_send(side.qp, side.mrs, side.peer.mrs)
            else:
                rq = side.srq or side.qp
                if rq and rq.alive:
                    self.post_recv(rq, side.mrs)
        # Now and then the CQs are left to overflow, or armed for an event.
        for s in (c.cli, c.srv):
            if s.cq and s.cq.alive and r.random() < 0.8:
                self.poll(s.cq)
            if s.cq and s.cq.alive and r.random() < 0.2:
                self.outcome('req_notify_cq', s.cq.py.req_notify, r.random() < 0.5)

    def valid_traffic(self, side):
        """A Send (with a receive posted for it first), Write or Read within MRs that allow
        it, with keys that are right."""
        r, peer = self.rng, side.peer
        if not (side.qp and side.qp.alive and side.mrs and peer.mrs):
            return
        op = r.choice(DATA_OPCODES[:1] + DATA_OPCODES[2:])
        want = {e.IBV_WR_RDMA_WRITE: e.IBV_ACCESS_REMOTE_WRITE,
                e.IBV_WR_RDMA_READ: e.IBV_ACCESS_REMOTE_READ}.get(op, 0)
        rmrs = [m for m in peer.mrs if m.alive and m.info['acc'] & want == want]
        lmrs = [m for m in side.mrs if m.alive and (op != e.IBV_WR_RDMA_READ or
                                                     m.info['acc'] & e.IBV_ACCESS_LOCAL_WRITE)]
        if not (rmrs and lmrs):
            return
        lm, rm = r.choice(lmrs), r.choice(rmrs)
        n = r.choice([0, 1, r.randint(1, 64), r.randint(1, min(lm.info['len'], rm.info['len']))])
        n = min(n, lm.info['len'], rm.info['len'])
        loff, roff = r.randint(0, lm.info['len'] - n), r.randint(0, rm.info['len'] - n)
        if op == e.IBV_WR_SEND:
            rq = peer.srq or peer.qp
            if not (rq and rq.alive and rm.info['acc'] & e.IBV_ACCESS_LOCAL_WRITE):
                return
            sge = SGE(rm.info['addr'], rm.info['len'], rm.py.lkey)
            self.outcome('post_recv' if rq.kind == 'qp' else 'post_srq_recv', rq.py.post_recv,
                         RecvWR(wr_id=self.next_id(), num_sge=1, sg=[sge]))
        # The n bytes in up to four SGEs.
        cuts = sorted(r.randint(0, n) for _ in range(min(side.max_sge - 1,
                                                         r.choice([0, 0, 1, 3]))))
        bounds = [0] + cuts + [n]
        sg = [SGE(lm.info['addr'] + loff + a, b - a, lm.py.lkey)
              for a, b in zip(bounds, bounds[1:])]
        flags = e.IBV_SEND_SIGNALED | (e.IBV_SEND_SOLICITED if r.random() < 0.2 else 0)
        wr = SendWR(wr_id=self.next_id(), opcode=op, num_sge=len(sg), sg=sg, send_flags=flags)
        wr.set_wr_rdma(rm.py.rkey, rm.info['addr'] + roff)
        self.outcome('post_send valid', side.qp.py.post_send, wr)

    def op_disconnect(self):
        c = self.live_conn(('established', 'connecting', 'disconnected'))
        if not c:
            return
        side = self.rng.choice([c.cli, c.srv])
        if side.cmid:
            self.outcome('rdma_disconnect', side.cmid.disconnect)

    def op_destroy_conn(self):
        """Destroy one end of a connection, its cm_id or its verbs objects, in any state."""
        c = self.live_conn(('established', 'connecting', 'disconnected', 'failed', 'routing',
                            'resolving'))
        if not c:
            return
        r = self.rng
        side = r.choice([c.cli, c.srv])
        what = r.choice(['cmid', 'cmid', 'qp', 'cq', 'pd', 'mr'])
        if what == 'cmid':
            if side is c.cli and side.cmid:
                self.close_conn(c)
            elif side.cmid:
                self.outcome('rdma_destroy_id', side.cmid.close)
                side.cmid = None
        else:
            o = getattr(side, what) if what != 'mr' else (side.mrs[0] if side.mrs else None)
            if o and o.alive:
                self.destroy(o, {'qp': 'destroy_qp', 'cq': 'destroy_cq', 'pd': 'dealloc_pd',
                                 'mr': 'dereg_mr'}[what])

    def op_relisten(self):
        if self.rng.random() < 0.2:
            self.outcome('rdma_destroy_id', self.listener.close)
            self.listener = None
            self.outcome('rdma_listen', self.listen)

    def close_conn(self, c):
        """Both cm_ids destroyed, then the client's channel (rdma_cm frees it under any
        cm_id left on it)."""
        for s in (c.cli, c.srv):
            if s.cmid:
                if self.outcome('rdma_destroy_id', s.cmid.close) is None:
                    self.contract.append(f'rdma_destroy_id failed (op {self.ops})')
                    c.ch = None
                s.cmid = None
        if c.ch:
            c.ch.close()
            c.ch = None
        c.state = 'closed'

    # Operations that destroy an object of a kind: (kind, verb, chance).
    DESTROY = {'op_close_context': ('ctx', 'close_device', 0.3),
               'op_dealloc_pd': ('pd', 'dealloc_pd', 0.3),
               'op_destroy_cq': ('cq', 'destroy_cq', 0.3),
               'op_dealloc_mw': ('mw', 'dealloc_mw', 1),
               'op_destroy_qp': ('qp', 'destroy_qp', 0.5)}

    OPS = [  # (operation, weight)
        ('op_open_context', 2), ('op_close_context', 1), ('op_query', 4),
        ('op_alloc_pd', 4), ('op_dealloc_pd', 2), ('op_create_comp_channel', 1),
        ('op_create_cq', 5), ('op_destroy_cq', 2), ('op_cq', 6),
        ('op_create_srq', 3), ('op_srq', 4), ('op_reg_mr', 6), ('op_dereg_mr', 3),
        ('op_alloc_mw', 1), ('op_dealloc_mw', 1), ('op_create_qp', 8), ('op_destroy_qp', 3),
        ('op_modify_qp', 8), ('op_query_qp', 3), ('op_post', 10), ('op_spawn', 0.3),
        ('op_connect', 2), ('op_traffic', 14), ('op_disconnect', 1), ('op_destroy_conn', 1.5),
        ('op_relisten', 0.3), ('op_busy', 0.5),
    ]

    def run(self):
        deadline = time.monotonic() + self.args.seconds
        names = [n for n, _ in self.OPS]
        weights = [w for _, w in self.OPS]
        self.op_open_context()
        while time.monotonic() < deadline and (not self.args.ops or self.ops < self.args.ops):
            self.outcome('rdma_get_cm_event', self.pump, count_ok=False)
            name = self.rng.choices(names, weights)[0]
            self.ops += 1
            if self.args.verbose:
                print(f'op {self.ops}: {name}', flush=True)
            t0 = time.monotonic()
            if name in self.DESTROY:
                self.outcome(name, self.destroy_some, *self.DESTROY[name], count_ok=False)
            else:
                self.outcome(name, getattr(self, name), count_ok=False)
            t = time.monotonic() - t0
            if t > self.slowest[name][0]:
                self.slowest[name] = (t, self.ops)
            self.conns = [c for c in self.conns if c.state != 'closed']
        self.pump()
        for c in self.conns:
            self.close_conn(c)
        if self.listener:
            self.outcome('rdma_destroy_id', self.listener.close)
        for o in list(self.objs['ctx']):
            self.destroy(o, 'close_device')
        self.raw.close()
        if ctypes.string_at(self.rdonly, 1 << 16) != bytes(1 << 16):
            self.contract.append('data landed in read-only memory registered without write '
                                 'access')
        self.pump()
        self.srv_ch.close()

    def summary(self):
        print(f'fuzz: {self.ops} operations, {self.next_conn} connections')
        verbs = collections.defaultdict(list)
        for (verb, what), n in sorted(self.counts.items()):
            verbs[verb].append(f'{what} {n}')
        for verb in sorted(verbs):
            print(f'  {verb}: {", ".join(verbs[verb])}')
        slow = sorted(((t, n, op) for op, (t, n) in self.slowest.items()), reverse=True)[:3]
        print('fuzz: slowest: ' + ', '.join(f'{op} {t:.1f} s (op {n})' for t, n, op in slow))
        for c in self.contract:
            print(f'fuzz: FAIL: {c}')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--seed', type=int, default=None)
    ap.add_argument('--seconds', type=float, default=60)
    ap.add_argument('--ops', type=int, default=0, help='stop after this many operations')
    ap.add_argument('--verbose', action='store_true', help='print each operation')
    ap.add_argument('device')
    ap.add_argument('address')
    args = ap.parse_args()
    if args.seed is None:
        args.seed = random.SystemRandom().getrandbits(32)
    print(f'fuzz: seed {args.seed}, reproduce with: selftests/verbs/fuzz.py --seed {args.seed} '
          f'--seconds {args.seconds:g} {args.device} {args.address}', flush=True)
    # A crash, or a verb that never returns, shows where it happened.
    faulthandler.enable()
    faulthandler.dump_traceback_later(args.seconds + 45, exit=False)
    fz = Fuzzer(args)
    try:
        fz.run()
    finally:
        fz.summary()
        sys.stdout.flush()
    print(f'fuzz: done; replay exactly with --ops {fz.ops}')
    return 1 if fz.contract else 0


if __name__ == '__main__':
    sys.exit(main())
