#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Reports a scripts/tcg-profile.sh --perf run: per driver, the shares of the samples of the
run's steady part (the span of the tool's own samples, its first and last tenth left out)
by process, by object and by symbol, side by side; then the call chains to the symbol
asked for, as perf reports them.

usage: perf-report.py DIR TOOL DRIVER...
"""
import collections
import re
import signal
import sys

SAMPLE = re.compile(r"^\s*(\S.*?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+[0-9a-f]+\s+(.*?)\s+\((\S*)\)$")


def steady(path, tool):
    rows = []
    for line in open(path, errors="replace"):
        m = SAMPLE.match(line)
        if m:
            comm, _, cpu, t, sym, dso = m.groups()
            dso = dso.rsplit("/", 1)[-1]
            rows.append((comm, float(t), sym if sym != "[unknown]" else f"[{dso}]", dso))
    busy = sorted(t for comm, t, _, _ in rows if comm == tool)
    if not busy:
        return []
    lo, hi = busy[len(busy) // 10], busy[len(busy) * 9 // 10]
    return [r for r in rows if lo <= r[1] <= hi]


def main():
    out, tool, drivers = sys.argv[1], sys.argv[2], sys.argv[3:]
    runs = {d: steady(f"{out}/samples.{d}", tool) for d in drivers}
    for title, key, top in (("process", 0, 6), ("object", 3, 8), ("symbol", 2, 40)):
        shares = {}
        for d, rows in runs.items():
            c = collections.Counter(r[key] for r in rows)
            shares[d] = {k: 100 * v / max(len(rows), 1) for k, v in c.items()}
        names = sorted({k for s in shares.values() for k in s},
                       key=lambda k: -max(s.get(k, 0) for s in shares.values()))
        print(f"% of samples by {title} "
              + " ".join(f"{d}(n={len(runs[d])})" for d in drivers))
        for k in names[:top]:
            print("  " + " ".join(f"{shares[d].get(k, 0):6.2f}" for d in drivers) + "  " + k[:100])
    for d in drivers:
        print(f"{d}: call chains to the symbol asked for, in % of all samples")
        for line in open(f"{out}/callers.{d}", errors="replace"):
            if line.strip() and not line.startswith("#"):
                print("  " + line.rstrip()[:140])


signal.signal(signal.SIGPIPE, signal.SIG_DFL)
main()
