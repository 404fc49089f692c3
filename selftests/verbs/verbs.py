#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The pyverbs part of riw_verbs.sh: verbs objects through stock libibverbs and its soft-iWARP
provider, on a riw or a siw device.

  verbs.py list                         the subtest names and descriptions, one a line
  verbs.py run DEVICE DRIVER [NAME...]  run the subtests (all without NAME)
  verbs.py hold DEVICE READYFILE        create objects, write READYFILE, sleep until killed
  verbs.py churn DEVICE READYFILE       create and destroy objects until killed
  verbs.py counts DEVICE [--pid PID] TYPE=N...
                                        `rdma resource show` lists N objects of each TYPE on
                                        DEVICE (owned by PID if given)

`run` prints one line "RESULT pass|fail|xfail|skip NAME [reason]" per subtest; any other line
is diagnostics. DRIVER (riw or siw) only selects the expected failures: where siw deviates from
what riw must do, the check still runs and reports "xfail" on siw (with the reason).
Limits come from ibv_query_device at run time, never from a table.
"""

import errno
import json
import os
import subprocess
import sys
import time
import traceback
import ctypes

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsError, PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
from pyverbs.wr import RecvWR, SGE

LOCAL_WRITE = e.IBV_ACCESS_LOCAL_WRITE
REMOTE_WRITE = e.IBV_ACCESS_REMOTE_WRITE
REMOTE_READ = e.IBV_ACCESS_REMOTE_READ
REMOTE_ATOMIC = e.IBV_ACCESS_REMOTE_ATOMIC

STATE_NAMES = {e.IBV_QPS_RESET: 'RESET', e.IBV_QPS_INIT: 'INIT', e.IBV_QPS_RTR: 'RTR',
               e.IBV_QPS_RTS: 'RTS', e.IBV_QPS_SQD: 'SQD', e.IBV_QPS_SQE: 'SQE',
               e.IBV_QPS_ERR: 'ERROR'}


class Failed(Exception):
    pass


class Skipped(Exception):
    pass


class Env:
    """What every subtest gets: the device, its limits, the driver under test."""

    def __init__(self, dev, driver):
        self.dev = dev
        self.driver = driver
        self.ctx = Context(name=dev)
        self.attr = self.ctx.query_device()
        self.failures = []
        self.xfails = []

    def check(self, cond, msg, xfail_on=None):
        """A check: failures are collected so that one run shows every deviation. xfail_on is
        (driver, why): on that driver a failure is expected and reported as xfail."""
        if cond:
            return True
        if xfail_on and xfail_on[0] == self.driver:
            print(f'XFAIL: {msg} ({xfail_on[1]})')
            self.xfails.append(xfail_on[1])
        else:
            print(f'FAIL: {msg}')
            self.failures.append(msg)
        return False


def errno_name(n):
    return errno.errorcode.get(n, str(n)) if n else 'success'


def attempt(fn, *args, **kwargs):
    """Run fn; return (errno, object). A created object is closed unless the caller keeps it."""
    try:
        return 0, fn(*args, **kwargs)
    except PyverbsRDMAError as ex:
        return ex.error_code, None


def expect_errno(env, want, what, fn, *args, xfail_on=None, **kwargs):
    """fn must fail with one of the errnos in want (an int or a tuple)."""
    want = (want,) if isinstance(want, int) else tuple(want)
    got, obj = attempt(fn, *args, **kwargs)
    if obj is not None:
        obj.close()
    print(f'{what}: {errno_name(got)}')
    return env.check(got in want, f'{what}: got {errno_name(got)}, want '
                     f'{" or ".join(errno_name(w) for w in want)}', xfail_on)


def rc_qp(pd, cq, send_wr=4, recv_wr=4, send_sge=1, recv_sge=1, inline=0, srq=None,
          qp_type=e.IBV_QPT_RC):
    cap = QPCap(max_send_wr=send_wr, max_recv_wr=0 if srq else recv_wr, max_send_sge=send_sge,
                max_recv_sge=0 if srq else recv_sge, max_inline_data=inline)
    return QP(pd, QPInitAttr(qp_type=qp_type, scq=cq, rcq=cq, srq=srq, cap=cap))


def query_state(qp):
    attr, _ = qp.query(e.IBV_QP_STATE)
    return attr.qp_state


def modify_state(qp, state, access=None):
    attr = QPAttr(qp_state=state)
    mask = e.IBV_QP_STATE
    if access is not None:
        attr.qp_access_flags = access
        mask |= e.IBV_QP_ACCESS_FLAGS
    qp.modify(attr, mask)


def resources(dev, kind):
    """The `rdma resource show KIND` entries of device dev."""
    out = subprocess.run(['rdma', '-j', 'resource', 'show', kind], check=True,
                         capture_output=True, text=True).stdout
    return [r for r in json.loads(out or '[]') if r.get('ifname') == dev]


# ---- subtests ----

def t_device(env):
    """ibv_query_device answers and its limits are sane"""
    a = env.attr
    for k in ('max_qp', 'max_qp_wr', 'max_sge', 'max_cq', 'max_cqe', 'max_mr', 'max_pd',
              'max_srq', 'max_srq_wr', 'max_srq_sge', 'max_mr_size'):
        print(f'{k} {getattr(a, k)}')
        env.check(getattr(a, k) > 0, f'{k} is 0')
    port = env.ctx.query_port(1)
    env.check(port.state == e.IBV_PORT_ACTIVE, f'port state {port.state}')


def t_objects(env):
    """create, query and destroy one of each object type"""
    with PD(env.ctx) as pd:
        cq = CQ(env.ctx, 100)
        env.check(cq.cqe >= 100, f'CQ of 100 has {cq.cqe} entries')
        # The provider has no query_srq: verbs_raw.c queries SRQs with the raw command.
        srq = SRQ(pd, SrqInitAttr(SrqAttr(max_wr=10, max_sge=2)))
        qp = rc_qp(pd, cq, send_wr=10, recv_wr=20, send_sge=2, recv_sge=3)
        attr, init = qp.query(0x1fffff)
        print(f'QP {qp.qp_num}: state {STATE_NAMES.get(attr.qp_state)} '
              f'send_wr {init.cap.max_send_wr} recv_wr {init.cap.max_recv_wr} '
              f'send_sge {init.cap.max_send_sge} recv_sge {init.cap.max_recv_sge} '
              f'inline {init.cap.max_inline_data}')
        # iWARP QPs start in Idle, which siw and iw_cxgb4 report as INIT.
        env.check(attr.qp_state == e.IBV_QPS_INIT, f'new QP in state {attr.qp_state}')
        env.check(init.cap.max_send_wr >= 10 and init.cap.max_recv_wr >= 20 and
                  init.cap.max_send_sge >= 2 and init.cap.max_recv_sge >= 3,
                  'QP query shows less than was asked for')
        env.check(init.qp_type == e.IBV_QPT_RC, f'QP type {init.qp_type}')
        sqp = rc_qp(pd, cq, srq=srq)
        _, sinit = sqp.query(e.IBV_QP_CAP)
        env.check(sinit.cap.max_recv_wr == 0,
                  f'QP on an SRQ reports max_recv_wr {sinit.cap.max_recv_wr}')
        mr = MR(pd, 65536, LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ)
        env.check(mr.length == 65536 and mr.lkey != 0 and mr.rkey != 0,
                  f'MR length {mr.length} lkey {mr.lkey:#x} rkey {mr.rkey:#x}')
        # The provider writes receives into the mmapped rings.
        sge = SGE(mr.buf, 64, mr.lkey)
        qp.post_recv(RecvWR(wr_id=1, num_sge=1, sg=[sge]))
        srq.post_recv(RecvWR(wr_id=2, num_sge=1, sg=[sge]))
        for obj in (mr, sqp, qp, srq, cq):
            obj.close()


def t_loop_context(env):
    """100 user contexts opened and closed"""
    for _ in range(100):
        with Context(name=env.dev) as ctx:
            PD(ctx).close()


def t_loop_pd_cq_srq(env):
    """1,000 PDs, 1,000 CQs and 300 SRQs created and destroyed"""
    for _ in range(10):
        pds = [PD(env.ctx) for _ in range(100)]
        cqs = [CQ(env.ctx, 1 + 7 * i) for i in range(100)]
        srqs = [SRQ(pds[i], SrqInitAttr(SrqAttr(max_wr=1 + i, max_sge=1 + i % 6)))
                for i in range(30)]
        for obj in srqs + cqs + pds:
            obj.close()


def t_loop_qp(env):
    """1,000 QPs (with RQ or on an SRQ) created and destroyed, 100 at a time, and counted"""
    sge = min(env.attr.max_sge, 6)
    with PD(env.ctx) as pd:
        cq = CQ(env.ctx, 64)
        srq = SRQ(pd, SrqInitAttr(SrqAttr(max_wr=64, max_sge=1)))
        for rnd in range(10):
            qps = []
            for i in range(100):
                qps.append(rc_qp(pd, cq, send_wr=1 + (i * 37) % 128, recv_wr=1 + (i * 11) % 64,
                                 send_sge=1 + i % sge, recv_sge=1 + (i // 2) % sge,
                                 srq=srq if i % 4 == 3 else None))
            if rnd == 0:
                mine = [q for q in resources(env.dev, 'qp') if q.get('pid') == os.getpid()]
                env.check(len(mine) == 100,
                          f'rdma resource show qp lists {len(mine)} QPs of this process, want 100')
                nums = {q['lqpn'] for q in mine}
                env.check(nums == {q.qp_num for q in qps},
                          'rdma resource show qp: QP numbers differ from the QPs created')
            for q in qps:
                q.close()
        srq.close()
        cq.close()


def t_loop_mr(env):
    """1,000 MRs of legal access flags and various sizes registered and deregistered"""
    access = [0, LOCAL_WRITE, REMOTE_READ, LOCAL_WRITE | REMOTE_WRITE,
              LOCAL_WRITE | REMOTE_READ, LOCAL_WRITE | REMOTE_READ | REMOTE_WRITE]
    with PD(env.ctx) as pd:
        for rnd in range(10):
            mrs = [MR(pd, 4096 * (1 + i % 16), access[i % len(access)]) for i in range(100)]
            if rnd == 0:
                mine = [m for m in resources(env.dev, 'mr') if m.get('pid') == os.getpid()]
                env.check(len(mine) == 100,
                          f'rdma resource show mr lists {len(mine)} MRs of this process, want 100')
                env.check(sorted(m['mrlen'] for m in mine) == sorted(m.length for m in mrs),
                          'rdma resource show mr: lengths differ from the MRs registered')
            for m in mrs:
                m.close()


def t_qp_max_wr(env):
    """QP send and receive queues: max_qp_wr accepted, max_qp_wr + 1 refused (EINVAL)"""
    m = env.attr.max_qp_wr
    with PD(env.ctx) as pd, CQ(env.ctx, 16) as cq:
        got, qp = attempt(rc_qp, pd, cq, send_wr=m, recv_wr=m)
        env.check(got == 0, f'QP with {m} send and receive WRs: {errno_name(got)}')
        if qp:
            qp.close()
        expect_errno(env, errno.EINVAL, f'max_send_wr {m + 1}', rc_qp, pd, cq, send_wr=m + 1)
        expect_errno(env, errno.EINVAL, f'max_recv_wr {m + 1}', rc_qp, pd, cq, recv_wr=m + 1)
        expect_errno(env, errno.EINVAL, 'max_send_wr 2^31', rc_qp, pd, cq, send_wr=1 << 31)


def t_qp_max_sge(env):
    """QP SGE counts: max_sge accepted, max_sge + 1 refused (EINVAL)"""
    m = env.attr.max_sge
    with PD(env.ctx) as pd, CQ(env.ctx, 16) as cq:
        got, qp = attempt(rc_qp, pd, cq, send_sge=m, recv_sge=m)
        env.check(got == 0, f'QP with {m} send and receive SGEs: {errno_name(got)}')
        if qp:
            qp.close()
        expect_errno(env, errno.EINVAL, f'max_send_sge {m + 1}', rc_qp, pd, cq, send_sge=m + 1)
        expect_errno(env, errno.EINVAL, f'max_recv_sge {m + 1}', rc_qp, pd, cq, recv_sge=m + 1)
        expect_errno(env, errno.EINVAL, 'max_send_sge 256', rc_qp, pd, cq, send_sge=256)


def t_qp_max_inline(env):
    """QP inline data: the limit a QP reports is accepted, one byte more refused (EINVAL)"""
    with PD(env.ctx) as pd, CQ(env.ctx, 16) as cq:
        with rc_qp(pd, cq) as qp:
            _, init = qp.query(e.IBV_QP_CAP)
            lim = init.cap.max_inline_data
        print(f'max_inline_data reported {lim}')
        got, qp = attempt(rc_qp, pd, cq, inline=lim)
        env.check(got == 0, f'QP with max_inline_data {lim}: {errno_name(got)}')
        if qp:
            qp.close()
        expect_errno(env, errno.EINVAL, f'max_inline_data {lim + 1}', rc_qp, pd, cq,
                     inline=lim + 1)
        expect_errno(env, errno.EINVAL, 'max_inline_data 1 MiB', rc_qp, pd, cq, inline=1 << 20)


def t_qp_type(env):
    """only RC QPs: UC and UD refused"""
    with PD(env.ctx) as pd, CQ(env.ctx, 16) as cq:
        for name, t in (('UC', e.IBV_QPT_UC), ('UD', e.IBV_QPT_UD)):
            expect_errno(env, (errno.EOPNOTSUPP, errno.EINVAL), f'{name} QP', rc_qp, pd, cq,
                         qp_type=t)


def t_cq_max_cqe(env):
    """CQ size: max_cqe accepted (when the ring fits in 16 MiB), max_cqe + 1 refused (EINVAL)"""
    m = env.attr.max_cqe
    if m * 32 <= 16 << 20:
        got, cq = attempt(CQ, env.ctx, m)
        env.check(got == 0, f'CQ of max_cqe {m}: {errno_name(got)}')
        if cq:
            cq.close()
    else:
        print(f'max_cqe {m}: a ring of {m * 32 >> 20} MiB, not tried')
    expect_errno(env, errno.EINVAL, f'CQ of {m + 1}', CQ, env.ctx, m + 1)
    expect_errno(env, errno.EINVAL, 'CQ of 2^31 - 1', CQ, env.ctx, (1 << 31) - 1)


def t_srq_limits(env):
    """SRQ sizes: max_srq_wr and max_srq_sge accepted, one more refused (EINVAL)"""
    mw, ms = env.attr.max_srq_wr, env.attr.max_srq_sge
    with PD(env.ctx) as pd:
        got, srq = attempt(SRQ, pd, SrqInitAttr(SrqAttr(max_wr=mw, max_sge=ms)))
        env.check(got == 0, f'SRQ of {mw} WRs and {ms} SGEs: {errno_name(got)}')
        if srq:
            srq.close()
        expect_errno(env, errno.EINVAL, f'SRQ max_wr {mw + 1}', SRQ, pd,
                     SrqInitAttr(SrqAttr(max_wr=mw + 1, max_sge=1)))
        expect_errno(env, errno.EINVAL, f'SRQ max_sge {ms + 1}', SRQ, pd,
                     SrqInitAttr(SrqAttr(max_wr=4, max_sge=ms + 1)))
        expect_errno(env, errno.EINVAL, 'SRQ srq_limit above max_wr', SRQ, pd,
                     SrqInitAttr(SrqAttr(max_wr=4, max_sge=1, srq_limit=4096)))


def t_mr_access(env):
    """MR access flags: legal combinations registered, remote atomics accepted (granted as
    nothing, as siw and iw_cxgb4 do), remote write or atomics without local write refused
    (EINVAL)"""
    legal = {'local read only': 0, 'LOCAL_WRITE': LOCAL_WRITE, 'REMOTE_READ': REMOTE_READ,
             'LOCAL_WRITE|REMOTE_READ': LOCAL_WRITE | REMOTE_READ,
             'LOCAL_WRITE|REMOTE_WRITE': LOCAL_WRITE | REMOTE_WRITE,
             'LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ': LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ,
             'LOCAL_WRITE|REMOTE_ATOMIC': LOCAL_WRITE | REMOTE_ATOMIC,
             'all four, as qperf and libfabric ask':
                 LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC}
    illegal = {'REMOTE_WRITE': REMOTE_WRITE, 'REMOTE_WRITE|REMOTE_READ': REMOTE_WRITE | REMOTE_READ,
               'REMOTE_ATOMIC': REMOTE_ATOMIC}
    with PD(env.ctx) as pd:
        for name, acc in legal.items():
            got, mr = attempt(MR, pd, 8192, acc)
            print(f'{name}: {errno_name(got)}')
            env.check(got == 0, f'MR {name}: {errno_name(got)}')
            if mr:
                if acc & (REMOTE_READ | REMOTE_WRITE):
                    env.check(mr.rkey != 0, f'MR {name}: rkey 0')
                mr.close()
        for name, acc in illegal.items():
            expect_errno(env, errno.EINVAL, f'MR {name}', MR, pd, 8192, acc)


libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
PROT_NONE, PROT_READ = 0, 1
MAP_PRIVATE, MAP_ANONYMOUS, MAP_NORESERVE = 0x02, 0x20, 0x4000


def reserve(length, prot):
    addr = libc.mmap(None, length, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
    if addr in (None, ctypes.c_void_p(-1).value):
        raise Skipped(f'cannot reserve {length} bytes of address space')
    return addr


def t_mr_size(env):
    """an MR one byte over max_mr_size refused (EINVAL or ENOMEM) before pinning anything"""
    m = env.attr.max_mr_size
    if m >= (1 << 47):
        raise Skipped(f'max_mr_size {m:#x} is beyond the address space')
    length = m + 1
    addr = reserve(length + 4096, PROT_NONE)
    try:
        with PD(env.ctx) as pd:
            expect_errno(env, (errno.EINVAL, errno.ENOMEM), f'MR of {length:#x} bytes', MR, pd,
                         length, LOCAL_WRITE, address=addr)
    finally:
        libc.munmap(addr, length + 4096)


def t_mr_memory(env):
    """MRs over memory that cannot back them: unmapped (EFAULT), read-only with write access"""
    with PD(env.ctx) as pd:
        addr = reserve(1 << 20, PROT_NONE)
        libc.munmap(addr, 1 << 20)
        expect_errno(env, (errno.EFAULT, errno.EINVAL), 'MR over unmapped memory', MR, pd,
                     1 << 20, LOCAL_WRITE, address=addr)
        addr = reserve(1 << 16, PROT_READ)
        try:
            expect_errno(env, (errno.EFAULT, errno.EACCES, errno.EPERM),
                         'LOCAL_WRITE MR over read-only memory', MR, pd, 1 << 16,
                         LOCAL_WRITE, address=addr)
            got, mr = attempt(MR, pd, 1 << 16, 0, address=addr)
            env.check(got == 0, f'read-only MR over read-only memory: {errno_name(got)}')
            if mr:
                mr.close()
        finally:
            libc.munmap(addr, 1 << 16)


def t_qp_states(env):
    """QP state machine: the transitions iWARP allows succeed and query shows them"""
    acc = LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ
    with PD(env.ctx) as pd, CQ(env.ctx, 16) as cq, rc_qp(pd, cq) as qp:
        steps = [(e.IBV_QPS_INIT, acc, (e.IBV_QPS_INIT,)),
                 (e.IBV_QPS_INIT, LOCAL_WRITE, (e.IBV_QPS_INIT,)),
                 (e.IBV_QPS_ERR, None, (e.IBV_QPS_ERR,)),
                 (e.IBV_QPS_RESET, None, (e.IBV_QPS_RESET, e.IBV_QPS_INIT)),
                 (e.IBV_QPS_INIT, acc, (e.IBV_QPS_INIT,)),
                 (e.IBV_QPS_ERR, None, (e.IBV_QPS_ERR,))]
        for to, access, want in steps:
            before = STATE_NAMES[query_state(qp)]
            what = f'{before} -> {STATE_NAMES[to]}' + (f' access {access:#x}' if access else '')
            got, _ = attempt(modify_state, qp, to, access)
            now = query_state(qp)
            print(f'{what}: {errno_name(got)}, now {STATE_NAMES.get(now)}')
            xf = None
            if before == 'ERROR' and to == e.IBV_QPS_RESET:
                xf = ('siw', 'siw accepts ERROR -> RESET but leaves the QP in ERROR')
            env.check(got == 0 and now in want, f'{what}: {errno_name(got)}, state '
                      f'{STATE_NAMES.get(now)}', xf)
            if now == e.IBV_QPS_ERR and to != e.IBV_QPS_ERR:
                break


SIW_SILENT = 'siw returns success and leaves the state as it was'

FORBIDDEN = [
    # (name, start path, target, siw deviation)
    ('INIT -> RTS without a connection', [e.IBV_QPS_INIT], e.IBV_QPS_RTS, None),
    ('INIT -> SQD', [e.IBV_QPS_INIT], e.IBV_QPS_SQD, SIW_SILENT),
    ('INIT -> SQE', [e.IBV_QPS_INIT], e.IBV_QPS_SQE, SIW_SILENT),
    ('ERROR -> RTS', [e.IBV_QPS_ERR], e.IBV_QPS_RTS, SIW_SILENT),
    ('ERROR -> SQD', [e.IBV_QPS_ERR], e.IBV_QPS_SQD, SIW_SILENT),
    ('ERROR -> SQE', [e.IBV_QPS_ERR], e.IBV_QPS_SQE, SIW_SILENT),
    ('to an undefined state (8)', [e.IBV_QPS_INIT], 8, None),
]


def t_qp_forbidden(env):
    """QP transitions iWARP forbids refused with EINVAL, the state unchanged"""
    with PD(env.ctx) as pd, CQ(env.ctx, 16) as cq:
        for name, path, to, siw in FORBIDDEN:
            with rc_qp(pd, cq) as qp:
                for st in path:
                    modify_state(qp, st, LOCAL_WRITE if st == e.IBV_QPS_INIT else None)
                before = query_state(qp)
                xf = ('siw', siw) if siw else None
                ok = expect_errno(env, errno.EINVAL, name, modify_state, qp, to, xfail_on=xf)
                now = query_state(qp)
                if ok or not siw:
                    env.check(now == before, f'{name}: state went from '
                              f'{STATE_NAMES.get(before)} to {STATE_NAMES.get(now)}')


TESTS = [
    ('device', t_device),
    ('objects', t_objects),
    ('loop_context', t_loop_context),
    ('loop_pd_cq_srq', t_loop_pd_cq_srq),
    ('loop_qp', t_loop_qp),
    ('loop_mr', t_loop_mr),
    ('qp_max_wr', t_qp_max_wr),
    ('qp_max_sge', t_qp_max_sge),
    ('qp_max_inline', t_qp_max_inline),
    ('qp_type', t_qp_type),
    ('cq_max_cqe', t_cq_max_cqe),
    ('srq_limits', t_srq_limits),
    ('mr_access', t_mr_access),
    ('mr_size', t_mr_size),
    ('mr_memory', t_mr_memory),
    ('qp_states', t_qp_states),
    ('qp_forbidden', t_qp_forbidden),
]


def desc(fn):
    return ' '.join(fn.__doc__.split())


def run(dev, driver, names):
    env = Env(dev, driver)
    for name, fn in TESTS:
        if names and name not in names:
            continue
        print(f'--- {name}: {desc(fn)}')
        env.failures, env.xfails = [], []
        start = time.monotonic()
        try:
            fn(env)
            status = 'fail' if env.failures else 'xfail' if env.xfails else 'pass'
            why = '; '.join(sorted(set(env.xfails))) if status == 'xfail' else ''
        except Skipped as ex:
            status, why = 'skip', str(ex)
        except (PyverbsError, OSError, subprocess.SubprocessError, ValueError) as ex:
            traceback.print_exc(file=sys.stdout)
            status, why = 'fail', ''
        print(f'({time.monotonic() - start:.1f} s)')
        print(f'RESULT {status} {name} {why}'.rstrip(), flush=True)
    env.ctx.close()


# ---- processes to kill ----

HOLD = {'pd': 2, 'cq': 3, 'qp': 4, 'srq': 1, 'mr': 5, 'ctx': 1}


def hold(dev, ready):
    """Objects of every type, receives posted, then wait to be killed."""
    ctx = Context(name=dev)
    pds = [PD(ctx) for _ in range(HOLD['pd'])]
    cqs = [CQ(ctx, 32) for _ in range(HOLD['cq'])]
    srq = SRQ(pds[0], SrqInitAttr(SrqAttr(max_wr=16, max_sge=1)))
    mrs = [MR(pds[i % 2], 4096 * (i + 1), LOCAL_WRITE | REMOTE_WRITE) for i in range(HOLD['mr'])]
    qps = [rc_qp(pds[i % 2], cqs[i % 3], srq=srq if i == 3 else None) for i in range(HOLD['qp'])]
    sge = SGE(mrs[0].buf, 64, mrs[0].lkey)
    for qp in qps[:3]:
        qp.post_recv(RecvWR(wr_id=7, num_sge=1, sg=[SGE(mrs[qp.qp_num % 2].buf, 64,
                                                         mrs[qp.qp_num % 2].lkey)]))
        modify_state(qp, e.IBV_QPS_INIT, LOCAL_WRITE)
    srq.post_recv(RecvWR(wr_id=8, num_sge=1, sg=[sge]))
    modify_state(qps[2], e.IBV_QPS_ERR)
    with open(ready + '.tmp', 'w') as f:
        f.write(f'{os.getpid()}\n')
    os.rename(ready + '.tmp', ready)
    while True:
        time.sleep(60)


def churn(dev, ready):
    """Create and destroy objects as fast as possible until killed."""
    ctx = Context(name=dev)
    open(ready, 'w').close()
    held = []
    i = 0
    while True:
        pd = PD(ctx)
        cq = CQ(ctx, 16)
        qp = rc_qp(pd, cq)
        mr = MR(pd, 4096, LOCAL_WRITE)
        held.append((qp, mr, cq, pd))
        if len(held) > 20:
            for obj in held.pop(0):
                obj.close()
        i += 1


def counts(dev, args):
    pid = None
    want = {}
    while args:
        a = args.pop(0)
        if a == '--pid':
            pid = int(args.pop(0))
        else:
            k, v = a.split('=')
            want[k] = int(v)
    ok = True
    for kind, n in want.items():
        rows = resources(dev, kind)
        owners = sorted({(r.get('pid'), r.get('comm')) for r in rows})
        good = len(rows) == n and (pid is None or all(r.get('pid') == pid for r in rows))
        print(f'{kind}: {len(rows)} (want {n}{f" of pid {pid}" if pid else ""}) owners {owners}')
        ok &= good
    return 0 if ok else 1


def main(argv):
    if len(argv) >= 1 and argv[0] == 'list':
        for name, fn in TESTS:
            print(f'{name} {desc(fn)}')
        return 0
    if len(argv) >= 3 and argv[0] == 'run':
        run(argv[1], argv[2], argv[3:])
        return 0
    if len(argv) == 3 and argv[0] == 'hold':
        hold(argv[1], argv[2])
    if len(argv) == 3 and argv[0] == 'churn':
        churn(argv[1], argv[2])
    if len(argv) >= 2 and argv[0] == 'counts':
        return counts(argv[1], argv[2:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
