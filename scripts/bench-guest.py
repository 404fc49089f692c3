#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The guest side of "make bench": riw and siw side by side, one guest run.

Two network namespaces joined by a veth pair (192.0.2.1 and .2). For each pairing of
drivers (riw-riw, siw-siw, then riw against siw both ways) a device goes on each end, and
the same perftest matrix runs over rdma_cm (-R): ib_write_bw, ib_read_bw, ib_send_bw
(bandwidth and message rate) and ib_write_lat, ib_read_lat, ib_send_lat (typical latency)
at 64 B, 4 KiB and 64 KiB. iperf3 measures TCP over the same veth. Prints two tables:
riw-riw against siw-siw and TCP, then riw against siw. Two more tables take the tests the
bar is set on again, riw-riw, siw-siw and TCP taking turns for a few rounds, and compare
medians: the 64-byte latency tests (ten times the iterations) and 64 KiB bandwidth. Single
runs under TCG move too much to judge either by. A last table takes 64 KiB bandwidth by
FPDU size, in rounds as well: riw sending to siw and to riw with FPDUs of one TCP segment,
riw to riw with the larger FPDUs the two negotiate, and siw to siw.

Then the kernel's storage and file protocols, riw and siw taking turns for a few rounds,
fio with direct I/O: NVMe over RDMA (nvme-rdma to nvmet-rdma exporting a memory-backed
null_blk, on one device in the initial namespace, where both use rdma_cm) and NFSv4.2 over
RDMA (the client in the initial namespace, nfsd in namespace 1, a file in tmpfs), iSER
(open-iscsi to LIO, a file in tmpfs) and SMB Direct (cifs to ksmbd, a file in tmpfs), the
last two on one device in the initial namespace, as NVMe.

RIW_BENCH_ONLY=fpdu, nvme, nfs, iser or smb runs only that table; perftest only the perftest matrix
and its rounds.

Run in the first guest of two joined by a link (selftests/vm/pair.sh, RIW_PEER set), it
runs the perftest matrix riw-riw against siw-siw across the link instead, servers in the
peer guest, with iperf3 TCP across the same link, then the rounds taking turns (64-byte
latency and message rate, 64 KiB bandwidth).
"""
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import time

NS = ("bench-ns0", "bench-ns1")
# Across two guests: the server side is the peer guest, the client side this one.
PEER = os.environ.get("RIW_PEER")
SRV = PEER or "192.0.2.2"
NETDEVS = ("eth0", os.environ.get("RIW_LINK")) if PEER else ("veth1", "veth0")
SIZES = (64, 4096, 65536)
BW = ("ib_write_bw", "ib_read_bw", "ib_send_bw")
LAT = ("ib_write_lat", "ib_read_lat", "ib_send_lat")
ITERS_BW = int(os.environ.get("RIW_BENCH_ITERS_BW", "2000"))
ITERS_LAT = int(os.environ.get("RIW_BENCH_ITERS_LAT", "2000"))
# The rounds the latency bar is judged by run longer: a typical latency of 2000 round
# trips still moves by several percent from run to run under TCG.
ITERS_LAT_BAR = int(os.environ.get("RIW_BENCH_ITERS_LAT_BAR", "20000"))
ROUNDS = int(os.environ.get("RIW_BENCH_ROUNDS", "5"))
FPDU_ROUNDS = int(os.environ.get("RIW_BENCH_FPDU_ROUNDS", "3"))
FPDU_SEGMENTS = "/sys/module/riw/parameters/fpdu_segments"
port = 9000
# Seconds a perftest run may take.
PERFTEST_TIMEOUT = 120


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=True, check=True, **kw)


def setup():
    for ns in NS:
        sh(f"ip netns add {ns}")
    # Distinct interface indexes: siw binds a wildcard listen to the netdev's index in the
    # listener's namespace, where an equal index of the other end would collide.
    sh(f"ip -n {NS[0]} link add veth0 index 10 type veth peer name veth1 netns {NS[1]} index 20")
    sh(f"ip -n {NS[0]} addr add 192.0.2.1/24 dev veth0")
    sh(f"ip -n {NS[1]} addr add {SRV}/24 dev veth1")
    for i, ns in enumerate(NS):
        sh(f"ip -n {ns} link set lo up")
        sh(f"ip -n {ns} link set veth{i} up")
    # Fixed neighbours: a learned one is resolved the slow way for its first seconds
    # (an entry created by the peer's ARP request is STALE, then DELAY for 5 s), which
    # would tax whichever pairing runs first.
    addrs = ("192.0.2.1", SRV)
    macs = [json.loads(subprocess.run(f"ip -j -n {ns} link show veth{i}", shell=True,
                                      check=True, capture_output=True,
                                      text=True).stdout)[0]["address"]
            for i, ns in enumerate(NS)]
    for i, ns in enumerate(NS):
        sh(f"ip -n {ns} neigh replace {addrs[1 - i]} lladdr {macs[1 - i]} dev veth{i} "
           "nud permanent")
    sh("modprobe riw")
    sh("modprobe siw")


def setup_pair():
    """This guest's end of the link, with the peer's address as a fixed neighbour (see
    setup), and both drivers loaded in both guests."""
    link, addr = os.environ["RIW_LINK"], os.environ["RIW_LINK_ADDR"]
    sh(f"ip link set {link} up && ip addr add {addr} dev {link}")
    # The peer guest may still be booting.
    mac = subprocess.run(["python3", "selftests/vm/peer.py", "call", "--wait", "120", PEER,
                          "cat /sys/class/net/eth0/address"], check=True,
                         capture_output=True, text=True).stdout.strip()
    sh(f"ip neigh replace {PEER} lladdr {mac} dev {link} nud permanent")
    ours = json.loads(subprocess.run(f"ip -j link show {link}", shell=True, check=True,
                                     capture_output=True, text=True).stdout)[0]["address"]
    sh(in_server(f"ip neigh replace {addr.split('/')[0]} lladdr {ours} dev eth0 "
                 "nud permanent"))
    sh("modprobe riw && modprobe siw")
    sh(in_server("modprobe riw && modprobe siw"))


def in_server(cmd):
    """cmd as it runs on the server's side: in the peer guest, or in namespace 1."""
    if PEER:
        return f"python3 selftests/vm/peer.py call --timeout 300 {PEER} {shlex.quote(cmd)}"
    return f"ip netns exec {NS[1]} {cmd}"


def in_client(cmd):
    return cmd if PEER else f"ip netns exec {NS[0]} {cmd}"


def devices(srv_drv, cli_drv):
    devices.up = f"{srv_drv} serving, {cli_drv} the client"
    sh(in_server(f"rdma link add bs0 type {srv_drv} netdev {NETDEVS[0]}"))
    sh(in_client(f"rdma link add bc0 type {cli_drv} netdev {NETDEVS[1]}"))


def no_devices():
    sh("rdma link delete bc0")
    sh(in_server("rdma link delete bs0"))


def listening(port):
    out = subprocess.run(in_server(f"ss -Htln sport = :{port}"), shell=True,
                         capture_output=True, text=True).stdout
    return out.strip() != ""


def pair(port, server, client, timeout=120):
    """Runs server on the server's side, then, once it listens on port, client on the
    client's; the client's output and the server's."""
    srv = subprocess.Popen(in_server(server), shell=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    end = time.monotonic() + 10
    while not listening(port) and time.monotonic() < end:
        time.sleep(0.1)
    try:
        cli = subprocess.run(in_client(client), shell=True,
                             capture_output=True, text=True, timeout=timeout)
        out = cli.stdout + cli.stderr
    except subprocess.TimeoutExpired:
        out = ""
    try:
        server_out = srv.communicate(timeout=10)[0]
    except subprocess.TimeoutExpired:
        srv.kill()
        server_out = srv.communicate()[0]
    return out, server_out


def perftest(tool, size, tries=2, iters=None):
    """(bandwidth MiB/s, message rate Mpps) or typical latency in us; None if it failed.
    A run that failed for a known reason not riw's or siw's is tried once more."""
    global port
    port += 1
    if iters is None:
        iters = ITERS_BW if tool.endswith("_bw") else ITERS_LAT
    opts = f"-R -p {port} -s {size} -n {iters} -F"
    out, server_out = pair(port, f"timeout {PERFTEST_TIMEOUT} {tool} -d bs0 {opts}",
                           f"timeout {PERFTEST_TIMEOUT} {tool} -d bc0 {opts} {SRV}")
    glitch = False
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 5 and re.fullmatch(r"\d+", f[0]) and f[0] == str(size):
            # A message rate too slow for the run to have ended within its timeout, or a
            # latency of zero, is perftest's clock under TCG, not the drivers.
            if tool.endswith("_bw"):
                value = float(f[3]), float(f[4])
                glitch = value[1] * 1e6 * PERFTEST_TIMEOUT < iters
            else:
                value = float(f[4])
                glitch = value == 0
            if not glitch:
                return value
    # perftest cannot time its TSC samples under TCG now and then, and now and then its
    # connection is refused although the server's port listens (siw's and riw's alike).
    if tries > 1 and (glitch or "Can't produce a report" in out or "Connection refused" in out
                      or "RDMA_CM_EVENT_REJECTED" in out):
        return perftest(tool, size, tries - 1, iters)
    sys.stderr.write(f"bench: {tool} {size} B failed ({devices.up}); the client:\n{out}\n"
                     f"the server:\n{server_out}\n")
    return None


def matrix():
    res = {}
    for size in SIZES:
        for tool in BW + LAT:
            res[(tool, size)] = perftest(tool, size)
    return res


def iperf3():
    global port
    port += 1
    out, _ = pair(port, f"timeout 60 iperf3 -s -1 -B {SRV} -p {port}",
                  f"timeout 60 iperf3 -c {SRV} -p {port} -t 5 -J")
    try:
        bps = json.loads(out)["end"]["sum_received"]["bits_per_second"]
        return bps / 8 / 2**20
    except (ValueError, KeyError):
        sys.stderr.write(f"bench: iperf3 failed:\n{out}\n")
        return None


RATE = ("ib_write_bw", "ib_send_bw")


def rounds():
    """Medians of 64-byte latency, 64 KiB bandwidth and 64-byte message rate, riw-riw,
    siw-siw and iperf3 taking turns: {(driver, tool): (median, runs)}, the rate under
    (driver, (tool, 64)), TCP under ("tcp", "iperf3")."""
    runs = {}
    for r in range(ROUNDS):
        # Each goes first every other round: what a run inherits from the one before it
        # (caches, TCG's translations and TLB) is then the same for both.
        for drv in ("riw", "siw") if r % 2 == 0 else ("siw", "riw"):
            devices(drv, drv)
            for tool in LAT + BW:
                v = (perftest(tool, 64, iters=ITERS_LAT_BAR) if tool in LAT
                     else perftest(tool, 65536))
                if v is not None:
                    runs.setdefault((drv, tool), []).append(v if tool in LAT else v[0])
            for tool in RATE:
                v = perftest(tool, 64)
                if v is not None:
                    runs.setdefault((drv, (tool, 64)), []).append(v[1])
            no_devices()
        v = iperf3()
        if v is not None:
            runs.setdefault(("tcp", "iperf3"), []).append(v)
    return {k: (statistics.median(v), v) for k, v in runs.items()}


def fpdu_rounds():
    """64 KiB bandwidth by who sends to whom and how large its FPDUs are:
    {(config, tool): [MiB/s per round]}. The sender is perftest's client for Write and
    Send, its server (the responder) for Read."""
    configs = (("riw-siw 1 seg", "riw", "siw", 1), ("riw-riw 1 seg", "riw", "riw", 1),
               ("riw-riw large", "riw", "riw", 0), ("siw-siw", "siw", "siw", 0))
    runs = {}
    for r in range(FPDU_ROUNDS):
        order = configs if r % 2 == 0 else configs[::-1]
        for name, sender, receiver, segments in order:
            # The operator's override of the negotiation: 1 keeps riw-riw to one segment.
            with open(FPDU_SEGMENTS, "w") as f:
                f.write(str(segments if receiver == "riw" else 0))
            for tool in BW:
                srv, cli = (sender, receiver) if tool == "ib_read_bw" else (receiver, sender)
                devices(srv, cli)
                v = perftest(tool, 65536)
                no_devices()
                if v is not None:
                    runs.setdefault((name, tool), []).append(v[0])
    with open(FPDU_SEGMENTS, "w") as f:
        f.write("0")
    return configs, runs


def fpdu_table(configs, runs):
    med = {k: statistics.median(v) for k, v in runs.items()}
    body = []
    for tool in BW:
        siw = med.get(("siw-siw", tool))
        row = [f"{tool} 64 KiB", "MiB/s"]
        for name, *_ in configs:
            row.append(fmt(med.get((name, tool)), ".1f"))
        for name, *_ in configs[:-1]:
            row.append(ratio(med.get((name, tool)), siw))
        body.append(tuple(row))
    names = [c[0] for c in configs]
    table(f"64 KiB bandwidth by FPDU size (sender-receiver), median of {FPDU_ROUNDS} rounds "
          "taking turns; '1 seg': every FPDU fits one TCP segment, 'large': FPDUs of up to "
          "11 segments, negotiated",
          ("test", "unit", *names, *[f"{n}/siw" for n in names[:-1]]), body)


NVME_NQN = "nqn.2026-11.dev.riw:bench"
NVME_ADDR = "198.51.100.1"
NVME_HOSTNQN = "nqn.2014-08.org.nvmexpress:uuid:0c8d5a52-3f5e-4f49-9d3c-2b8c1a6e7f10"
NVME_ROUNDS = int(os.environ.get("RIW_BENCH_NVME_ROUNDS", "3"))
NVME_SECONDS = int(os.environ.get("RIW_BENCH_NVME_SECONDS", "5"))
CFG = "/sys/kernel/config"
# (name, fio rw, block size, queue depth): IOPS for 4 KiB, MiB/s for 128 KiB, and the mean
# latency at queue depth 1 (see storage_rows).
NVME_JOBS = (("4 KiB randread QD1", "randread", "4k", 1),
             ("4 KiB randwrite QD1", "randwrite", "4k", 1),
             ("4 KiB randread QD16", "randread", "4k", 16),
             ("4 KiB randwrite QD16", "randwrite", "4k", 16),
             ("128 KiB read QD8", "read", "128k", 8),
             ("128 KiB write QD8", "write", "128k", 8))


def write(path, value):
    with open(path, "w") as f:
        f.write(str(value))


def nvme_setup():
    """A veth end in the initial namespace (nvme-rdma and nvmet-rdma use rdma_cm there
    only) and a memory-backed null_blk the target exports, so storage is not the limit."""
    if not os.path.ismount(CFG):
        sh(f"mount -t configfs none {CFG}")
    sh(f"ip link add nvb0 type veth peer name nvb1")
    sh(f"ip addr add {NVME_ADDR}/24 dev nvb0")
    sh("ip link set nvb0 up && ip link set nvb1 up")
    nb = f"{CFG}/nullb/riwbench"
    os.mkdir(nb)
    for k, v in (("memory_backed", 1), ("size", 512), ("blocksize", 4096),
                 ("submit_queues", 2), ("power", 1)):
        write(f"{nb}/{k}", v)
    return "/dev/riwbench"


def nvme_target(dev):
    sub, port = f"{CFG}/nvmet/subsystems/{NVME_NQN}", f"{CFG}/nvmet/ports/1"
    os.mkdir(sub)
    write(f"{sub}/attr_allow_any_host", 1)
    os.mkdir(f"{sub}/namespaces/1")
    write(f"{sub}/namespaces/1/device_path", dev)
    write(f"{sub}/namespaces/1/enable", 1)
    os.mkdir(port)
    for k, v in (("trtype", "rdma"), ("adrfam", "ipv4"), ("traddr", NVME_ADDR),
                 ("trsvcid", 4420)):
        write(f"{port}/addr_{k}", v)
    os.symlink(sub, f"{port}/subsystems/{NVME_NQN}")


def nvme_target_down():
    sub, port = f"{CFG}/nvmet/subsystems/{NVME_NQN}", f"{CFG}/nvmet/ports/1"
    os.unlink(f"{port}/subsystems/{NVME_NQN}")
    os.rmdir(port)
    write(f"{sub}/namespaces/1/enable", 0)
    os.rmdir(f"{sub}/namespaces/1")
    os.rmdir(sub)


def nvme_blockdev():
    for b in os.listdir("/sys/block"):
        try:
            with open(f"/sys/block/{b}/device/subsysnqn") as f:
                if f.read().strip() == NVME_NQN:
                    return f"/dev/{b}"
        except OSError:
            pass
    return None


def fio(dev, rw, bs, qd):
    out = subprocess.run(
        f"fio --name=b --filename={dev} --direct=1 --ioengine=libaio --rw={rw} --bs={bs} "
        f"--iodepth={qd} --numjobs=1 --time_based --runtime={NVME_SECONDS} --ramp_time=1 "
        "--norandommap --output-format=json", shell=True, capture_output=True, text=True)
    try:
        job = json.loads(out.stdout)["jobs"][0]
    except (ValueError, KeyError, IndexError):
        sys.stderr.write(f"bench: fio {rw} {bs} QD{qd} failed:\n{out.stdout}{out.stderr}\n")
        return None
    side = job["read" if "read" in rw else "write"]
    if side["io_bytes"] == 0 or job.get("error"):
        return None
    return {"iops": side["iops"], "bw": side["bw_bytes"] / 2**20,
            "lat": side["lat_ns"]["mean"] / 1000}


def storage_rounds(rounds, up, down, jobs):
    """{(driver, job): [fio results per round]}, riw and siw taking turns: `up(driver)`
    sets a driver's run up and returns the file fio works on (None if it failed),
    `down()` takes it down again."""
    runs = {}
    for r in range(rounds):
        for drv in ("riw", "siw") if r % 2 == 0 else ("siw", "riw"):
            target = up(drv)
            for name, rw, bs, qd in jobs:
                v = fio(target, rw, bs, qd) if target else None
                if v is not None:
                    runs.setdefault((drv, name), []).append(v)
            down()
    return runs


def nvme_rounds():
    nb = nvme_setup()

    def up(drv):
        sh(f"rdma link add nvb type {drv} netdev nvb0")
        nvme_target(nb)
        sh("modprobe nvme-rdma")
        sh(f"nvme connect -t rdma -a {NVME_ADDR} -s 4420 -n {NVME_NQN} "
           f"--hostnqn={NVME_HOSTNQN} --nr-io-queues=2 --queue-size=128 >/dev/null")
        end = time.monotonic() + 30
        while nvme_blockdev() is None and time.monotonic() < end:
            time.sleep(0.2)
        return nvme_blockdev()

    def down():
        sh(f"nvme disconnect -n {NVME_NQN} >/dev/null")
        nvme_target_down()
        sh("rdma link delete nvb")

    return storage_rounds(NVME_ROUNDS, up, down, NVME_JOBS)


def storage_rows(runs, jobs):
    """Rows of medians, riw against siw: IOPS for 4 KiB jobs, MiB/s for larger ones, and
    the mean latency (submission to completion) of queue depth 1 jobs."""
    body = []
    for name, _, bs, qd in jobs:
        r, s = runs.get(("riw", name), []), runs.get(("siw", name), [])
        shown = [("iops", "IOPS", ".0f") if bs == "4k" else ("bw", "MiB/s", ".1f")]
        if qd == 1:
            shown.append(("lat", "us", ".0f"))
        for key, unit, spec in shown:
            mr = statistics.median(x[key] for x in r) if r else None
            ms = statistics.median(x[key] for x in s) if s else None
            body.append((name, unit, fmt(mr, spec), fmt(ms, spec), ratio(mr, ms),
                         " ".join(f"{a[key]:{spec}}/{b[key]:{spec}}" for a, b in zip(r, s))))
    return body


def storage_table(title, runs, jobs):
    """A storage protocol's table: medians riw against siw, and each round's pair."""
    table(title, ("test", "unit", "riw", "siw", "riw/siw", "rounds (riw/siw)"),
          storage_rows(runs, jobs))


def nvme_table(runs):
    storage_table(f"NVMe over RDMA: nvme-rdma to nvmet-rdma and a memory-backed null_blk on one "
                  f"riw or siw device (initial namespace, loopback TCP), fio libaio direct, "
                  f"{NVME_SECONDS} s per job, median of {NVME_ROUNDS} rounds taking turns (us: "
                  "mean latency, ratio above 1 is riw slower)", runs, NVME_JOBS)


NFS_EXPORT = "/tmp/riw-bench-export"
NFS_MNT = "/tmp/riw-bench-mnt"
NFS_ROUNDS = int(os.environ.get("RIW_BENCH_NFS_ROUNDS", "3"))
# (name, fio rw, block size, queue depth): IOPS for 4 KiB, MiB/s for 1 MiB.
NFS_JOBS = (("4 KiB randread QD16", "randread", "4k", 16),
            ("4 KiB randwrite QD16", "randwrite", "4k", 16),
            ("1 MiB read QD4", "read", "1m", 4),
            ("1 MiB write QD4", "write", "1m", 4))


NFS_SRV = "203.0.113.2"


def in_ns1(cmd):
    """cmd in bench namespace 1's network only: mounts stay in the guest's namespace."""
    return f"nsenter --net=/run/netns/{NS[1]} {cmd}"


def nfs_setup():
    """A veth pair from the initial namespace (the client's: siw connects in the namespace
    of the connecting task, for the NFS client a kernel worker of the initial one) to
    namespace 1 (nfsd's), nfsd's state directory and its export, a tmpfs each."""
    # Distinct interface indexes, as in setup().
    sh(f"ip link add nfb0 index 30 type veth peer name nfb1 netns {NS[1]} index 40")
    sh("ip addr add 203.0.113.1/24 dev nfb0 && ip link set nfb0 up")
    sh(f"ip -n {NS[1]} addr add {NFS_SRV}/24 dev nfb1 && ip -n {NS[1]} link set nfb1 up")
    for d in (NFS_EXPORT, NFS_MNT, "/run/rpcbind"):
        os.makedirs(d, exist_ok=True)
    sh(f"mount -t tmpfs -o size=600m riw-bench {NFS_EXPORT}")
    sh("mount -t tmpfs riw-bench-nfs /var/lib/nfs && mkdir /var/lib/nfs/v4recovery && "
       "touch /var/lib/nfs/etab /var/lib/nfs/rmtab")
    sh(f"fallocate -l 256M {NFS_EXPORT}/file")
    sh(in_ns1("rpcbind -w"))


def nfs_server(up):
    if up:
        sh(in_ns1("mount -t nfsd nfsd /proc/fs/nfsd"))
        # fsid=0: the export is NFSv4's root too.
        sh(in_ns1("exportfs -o rw,no_root_squash,insecure,no_subtree_check,fsid=0 "
                  f"203.0.113.0/24:{NFS_EXPORT}"))
        sh(in_ns1("rpc.mountd"))
        sh(in_ns1("rpc.nfsd -G 10 -L 10 --rdma=20049 8"))
    else:
        sh(in_ns1("rpc.nfsd 0"))
        sh(in_ns1("exportfs -ua"))
        sh("pkill -x rpc.mountd; umount /proc/fs/nfsd")


def nfs_rounds():
    """NFSv4.2 over RDMA, riw and siw taking turns (see storage_rounds)."""
    nfs_setup()

    def up(drv):
        sh(f"ip netns exec {NS[1]} rdma link add nfbs type {drv} netdev nfb1")
        sh(f"rdma link add nfbc type {drv} netdev nfb0")
        nfs_server(True)
        sh(f"mount -t nfs -o vers=4.2,proto=rdma,port=20049 {NFS_SRV}:/ {NFS_MNT}")
        return f"{NFS_MNT}/file"

    def down():
        sh(f"umount {NFS_MNT}")
        nfs_server(False)
        sh("rdma link delete nfbc && rdma link delete nfbs")

    runs = storage_rounds(NFS_ROUNDS, up, down, NFS_JOBS)
    sh("pkill -x rpcbind; umount /var/lib/nfs")
    sh(f"umount {NFS_EXPORT}; ip link del nfb0")
    return runs


def nfs_table(runs):
    storage_table(f"NFS over RDMA: NFSv4.2 client to nfsd across a veth (riw-riw or siw-siw), "
                  f"fio libaio direct on a 256 MiB file in tmpfs, {NVME_SECONDS} s per job, "
                  f"median of {NFS_ROUNDS} rounds taking turns", runs, NFS_JOBS)


def bash(cmd):
    """cmd in bash, with selftests/'s helpers at hand (iser.sh, smb.sh); its output."""
    return subprocess.run(["bash", "-c", cmd], check=True, capture_output=True,
                          text=True).stdout


def initns_link(name, addr):
    """A veth pair NAME0/NAME1 in the initial namespace, ADDR on NAME0, for the protocols
    that use rdma_cm there only (target and initiator on one device over loopback TCP)."""
    sh(f"ip link add {name}0 type veth peer name {name}1")
    sh(f"ip addr add {addr}/24 dev {name}0 && ip link set {name}0 up && "
       f"ip link set {name}1 up")


ISER_IQN = "iqn.2026-11.dev.riw:bench"
ISER_ADDR = "198.51.100.33"
ISER_IMG = "/tmp/riw-bench-iser.img"
# (name, fio rw, block size, queue depth), as NFS_JOBS: IOPS for 4 KiB, MiB/s for 1 MiB.
ISER_JOBS = NFS_JOBS


def iser_rounds():
    """iSER: open-iscsi's initiator logged in to LIO's iSER target (targetcli, a 256 MiB
    file in tmpfs), both on one device, riw and siw taking turns (see storage_rounds)."""
    initns_link("isb", ISER_ADDR)
    bash(". selftests/iser.sh && iser_initiator_up iqn.2026-11.dev.riw:bench-initiator")
    where = f"{ISER_IQN} {ISER_ADDR} 3260"

    def up(drv):
        sh(f"rdma link add isbd type {drv} netdev isb0")
        bash(f". selftests/iser.sh && iser_target_up {where} {ISER_IMG} 256 && "
             f"iser_login {where}")
        return bash(". selftests/iser.sh && iser_disk").strip()

    def down():
        bash(f". selftests/iser.sh && iser_logout {where}; iser_target_down")
        sh("rdma link delete isbd")

    runs = storage_rounds(NFS_ROUNDS, up, down, ISER_JOBS)
    bash(". selftests/iser.sh && iser_initiator_down")
    sh(f"rm -f {ISER_IMG}; ip link del isb0")
    return runs


def iser_table(runs):
    storage_table(f"iSER: open-iscsi's iSER initiator to LIO's iSER target (a 256 MiB file in "
                  f"tmpfs) on one riw or siw device (initial namespace, loopback TCP), fio "
                  f"libaio direct, {NVME_SECONDS} s per job, median of {NFS_ROUNDS} rounds "
                  "taking turns", runs, ISER_JOBS)


SMB_ADDR = "198.51.100.65"
SMB_SHARE = "/tmp/riw-bench-share"
SMB_MNT = "/tmp/riw-bench-smb"
SMB_JOBS = NFS_JOBS


def smb_rounds():
    """SMB Direct: cifs mounting ksmbd's share (a 256 MiB file in tmpfs) with option rdma,
    both on one device, riw and siw taking turns (see storage_rounds)."""
    initns_link("smb", SMB_ADDR)
    for d in (SMB_SHARE, SMB_MNT):
        os.makedirs(d, exist_ok=True)
    sh(f"mount -t tmpfs -o size=600m riw-bench {SMB_SHARE}")
    sh(f"fallocate -l 256M {SMB_SHARE}/file")

    def up(drv):
        # ksmbd listens on SMB Direct's iWARP port when it starts with the device there.
        sh(f"rdma link add smbd type {drv} netdev smb0")
        bash(f". selftests/smb.sh && smb_server_up {SMB_SHARE} && timeout 30 bash -c "
             "'until ss -Hltn \"sport = :5445\" | grep -q .; do sleep 0.2; done' && "
             f"smb_mount {SMB_ADDR} {SMB_MNT}")
        return f"{SMB_MNT}/file"

    def down():
        sh(f"umount {SMB_MNT}")
        bash(". selftests/smb.sh && smb_server_down")
        sh("rdma link delete smbd")

    runs = storage_rounds(NFS_ROUNDS, up, down, SMB_JOBS)
    sh(f"umount {SMB_SHARE}; ip link del smb0")
    return runs


def smb_table(runs):
    storage_table(f"SMB Direct: cifs (SMB 3.1.1, option rdma) to ksmbd (a 256 MiB file in "
                  f"tmpfs) on one riw or siw device (initial namespace, loopback TCP), fio "
                  f"libaio direct, {NVME_SECONDS} s per job, median of {NFS_ROUNDS} rounds "
                  "taking turns", runs, SMB_JOBS)


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def ratio(a, b):
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}"


def rows(a, b, tcp):
    """Table rows comparing result sets a and b (and a against TCP)."""
    out = []
    for tool in BW:
        for size in SIZES:
            ra, rb = a[(tool, size)], b[(tool, size)]
            bwa, bwb = (ra or (None, None))[0], (rb or (None, None))[0]
            mra, mrb = (ra or (None, None))[1], (rb or (None, None))[1]
            out.append((f"{tool} {size} B", "MiB/s", fmt(bwa, ".1f"), fmt(bwb, ".1f"),
                        ratio(bwa, bwb), ratio(bwa, tcp) if tcp else ""))
            if size == 64:
                out.append((f"{tool} {size} B", "Mpps", fmt(mra, ".4f"), fmt(mrb, ".4f"),
                            ratio(mra, mrb), ""))
    for tool in LAT:
        for size in SIZES:
            la, lb = a[(tool, size)], b[(tool, size)]
            # Lower is better: the ratio stays a/b (below 1 is riw faster).
            out.append((f"{tool} {size} B", "us", fmt(la, ".1f"), fmt(lb, ".1f"),
                        ratio(la, lb), ""))
    return out


def table(title, head, body):
    widths = [max(len(str(r[i])) for r in [head] + body) for i in range(len(head))]
    print(f"\n{title}\n")
    line = lambda r: "| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)) + " |"
    print(line(head))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in body:
        print(line(r))


def main():
    if PEER:
        return main_pair()
    setup()
    if os.environ.get("RIW_BENCH_ONLY") == "fpdu":
        fpdu_table(*fpdu_rounds())
        sh("modprobe -r riw siw")
        return
    only = os.environ.get("RIW_BENCH_ONLY")
    if only == "nvme":
        nvme_table(nvme_rounds())
    elif only == "nfs":
        nfs_table(nfs_rounds())
    elif only == "iser":
        iser_table(iser_rounds())
    elif only == "smb":
        smb_table(smb_rounds())
    if only in ("nvme", "nfs", "iser", "smb"):
        sh("modprobe -r riw siw")
        return
    results = {}
    for srv_drv, cli_drv in (("riw", "riw"), ("siw", "siw"), ("riw", "siw"), ("siw", "riw")):
        devices(srv_drv, cli_drv)
        results[(srv_drv, cli_drv)] = matrix()
        no_devices()
    tcp = iperf3()
    medians = rounds()
    print(f"\nriw and siw over one veth pair (release kernel, QEMU TCG, 2 vCPUs); "
          f"perftest -R, {ITERS_BW} iterations (bw), {ITERS_LAT} (lat); iperf3 TCP "
          f"{fmt(tcp, '.1f')} MiB/s")
    table("riw-riw against siw-siw (ratio above 1: riw better for bandwidth and rate, "
          "worse for latency)",
          ("test", "unit", "riw-riw", "siw-siw", "riw/siw", "riw/TCP"),
          rows(results[("riw", "riw")], results[("siw", "siw")], tcp))
    both = rows(results[("riw", "siw")], results[("siw", "riw")], None)
    table("riw against siw (server-client)",
          ("test", "unit", "riw-siw", "siw-riw", "ratio", ""), both)
    median_tables(medians)
    if only == "perftest":
        sh("modprobe -r riw siw")
        return
    fpdu_table(*fpdu_rounds())
    nvme_table(nvme_rounds())
    nfs_table(nfs_rounds())
    iser_table(iser_rounds())
    smb_table(smb_rounds())
    sh("modprobe -r riw siw")


def main_pair():
    """The matrix and the rounds across the link between two guests."""
    setup_pair()
    results = {}
    for drv in ("riw", "siw"):
        devices(drv, drv)
        results[drv] = matrix()
        no_devices()
    tcp = iperf3()
    medians = rounds()
    print(f"\nriw and siw across a virtio-net link between two guests (release kernel, QEMU "
          f"TCG, one vCPU each), perftest -R, {ITERS_BW} iterations (bw), {ITERS_LAT} (lat); "
          f"iperf3 TCP {fmt(tcp, '.1f')} MiB/s")
    table("riw-riw against siw-siw across the link (ratio above 1: riw better for bandwidth "
          "and rate, worse for latency)",
          ("test", "unit", "riw-riw", "siw-siw", "riw/siw", "riw/TCP"),
          rows(results["riw"], results["siw"], tcp))
    median_tables(medians)
    sh("modprobe -r riw siw")


def median_tables(medians):
    """The rounds' medians: 64-byte latency, 64 KiB bandwidth against TCP."""
    none = (None, [])
    body = []
    for tool in LAT:
        (mr, vr), (ms, vs) = medians.get(("riw", tool), none), medians.get(("siw", tool), none)
        body.append((f"{tool} 64 B", "us", fmt(mr, ".1f"), fmt(ms, ".1f"), ratio(mr, ms),
                     " ".join(f"{a:.1f}/{b:.1f}" for a, b in zip(vr, vs))))
    table(f"64-byte latency, riw-riw and siw-siw taking turns, median of {ROUNDS} rounds "
          f"of {ITERS_LAT_BAR} iterations (ratio above 1: riw slower)",
          ("test", "unit", "riw-riw", "siw-siw", "riw/siw", "rounds (riw/siw)"), body)
    mt, vt = medians.get(("tcp", "iperf3"), none)
    body = []
    for tool in BW:
        (mr, vr), (ms, vs) = medians.get(("riw", tool), none), medians.get(("siw", tool), none)
        body.append((f"{tool} 64 KiB", "MiB/s", fmt(mr, ".1f"), fmt(ms, ".1f"), fmt(mt, ".1f"),
                     ratio(mr, ms), ratio(mr, mt), ratio(mr, max(vt, default=None)),
                     " ".join(f"{a:.0f}/{b:.0f}/{c:.0f}" for a, b, c in zip(vr, vs, vt))))
    # TCP moves most of all under TCG: its best round is the stricter yardstick.
    table(f"64 KiB bandwidth, riw-riw, siw-siw and TCP taking turns, median of {ROUNDS} "
          "rounds",
          ("test", "unit", "riw-riw", "siw-siw", "TCP", "riw/siw", "riw/TCP",
           "riw/best TCP", "rounds (riw/siw/TCP)"), body)
    body = []
    for tool in RATE:
        (mr, vr), (ms, vs) = (medians.get(("riw", (tool, 64)), none),
                              medians.get(("siw", (tool, 64)), none))
        body.append((f"{tool} 64 B", "Mpps", fmt(mr, ".3f"), fmt(ms, ".3f"), ratio(mr, ms),
                     " ".join(f"{a:.3f}/{b:.3f}" for a, b in zip(vr, vs))))
    table(f"64-byte message rate, riw-riw and siw-siw taking turns, median of {ROUNDS} "
          f"rounds of {ITERS_BW} messages (ratio above 1: riw faster)",
          ("test", "unit", "riw-riw", "siw-siw", "riw/siw", "rounds (riw/siw)"), body)


if __name__ == "__main__":
    main()
