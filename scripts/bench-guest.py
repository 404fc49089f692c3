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

RIW_BENCH_ONLY=fpdu runs only that last table.
"""
import json
import os
import re
import statistics
import subprocess
import sys
import time

NS = ("bench-ns0", "bench-ns1")
SRV = "192.0.2.2"
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


def devices(srv_drv, cli_drv):
    sh(f"ip netns exec {NS[1]} rdma link add bs0 type {srv_drv} netdev veth1")
    sh(f"ip netns exec {NS[0]} rdma link add bc0 type {cli_drv} netdev veth0")


def no_devices():
    sh("rdma link delete bc0")
    sh("rdma link delete bs0")


def listening(port):
    out = subprocess.run(f"ip netns exec {NS[1]} ss -Htln sport = :{port}", shell=True,
                         capture_output=True, text=True).stdout
    return out.strip() != ""


def pair(port, server, client, timeout=120):
    """Runs server in namespace 1, then, once it listens on port, client in namespace 0;
    the client's output."""
    srv = subprocess.Popen(f"ip netns exec {NS[1]} {server}", shell=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    end = time.monotonic() + 10
    while not listening(port) and time.monotonic() < end:
        time.sleep(0.1)
    try:
        cli = subprocess.run(f"ip netns exec {NS[0]} {client}", shell=True,
                             capture_output=True, text=True, timeout=timeout)
        out = cli.stdout + cli.stderr
    except subprocess.TimeoutExpired:
        out = ""
    try:
        srv.wait(timeout=10)
    except subprocess.TimeoutExpired:
        srv.kill()
        srv.wait()
    return out


def perftest(tool, size, tries=2, iters=None):
    """(bandwidth MiB/s, message rate Mpps) or typical latency in us; None if it failed.
    A run that failed for a known reason not riw's or siw's is tried once more."""
    global port
    port += 1
    if iters is None:
        iters = ITERS_BW if tool.endswith("_bw") else ITERS_LAT
    opts = f"-R -p {port} -s {size} -n {iters} -F"
    out = pair(port, f"timeout 120 {tool} -d bs0 {opts}",
               f"timeout 120 {tool} -d bc0 {opts} {SRV}")
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 5 and re.fullmatch(r"\d+", f[0]) and f[0] == str(size):
            if tool.endswith("_bw"):
                return float(f[3]), float(f[4])
            return float(f[4])
    # perftest cannot time its TSC samples under TCG now and then, and now and then its
    # connection is refused although the server's port listens (siw's and riw's alike).
    if tries > 1 and ("Can't produce a report" in out or "Connection refused" in out
                      or "RDMA_CM_EVENT_REJECTED" in out):
        return perftest(tool, size, tries - 1, iters)
    sys.stderr.write(f"bench: {tool} {size} B failed:\n{out}\n")
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
    out = pair(port, f"timeout 60 iperf3 -s -1 -B {SRV} -p {port}",
               f"timeout 60 iperf3 -c {SRV} -p {port} -t 5 -J")
    try:
        bps = json.loads(out)["end"]["sum_received"]["bits_per_second"]
        return bps / 8 / 2**20
    except (ValueError, KeyError):
        sys.stderr.write(f"bench: iperf3 failed:\n{out}\n")
        return None


def rounds():
    """Medians of 64-byte latency and 64 KiB bandwidth, riw-riw, siw-siw and iperf3 taking
    turns: {(driver, tool): (median, runs)}, TCP under ("tcp", "iperf3")."""
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
    setup()
    if os.environ.get("RIW_BENCH_ONLY") == "fpdu":
        fpdu_table(*fpdu_rounds())
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
    fpdu_table(*fpdu_rounds())
    sh("modprobe -r riw siw")


if __name__ == "__main__":
    main()
