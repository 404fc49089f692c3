#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Reports a scripts/tcg-profile.sh run: per driver, the guest kernel's instructions per
iteration (the second window less the first, over the iterations between them), by module
and by function, with the string instructions and divisions among them and the atomics
(which TCG runs through a helper), the memory accesses, the block exits TCG cannot chain
and the misses of its TLB and jump cache models; and, where the
run traced functions, the median instructions a vCPU executes from the entry of one traced
function to the next ("phases", as a critical path is drawn).

usage: report.py DIR DRIVERS ITERATIONS [TOP]
"""
import bisect
import collections
import re
import statistics
import subprocess
import sys


def symbols(path):
    """Sorted (address, name, module) of the text symbols of a kallsyms dump."""
    out = []
    for line in open(path):
        f = line.split()
        if len(f) >= 3 and f[1] in "tTwW":
            out.append((int(f[0], 16), f[2], f[3].strip("[]") if len(f) > 3 else "kernel"))
    out.sort()
    return out


def demangle(names):
    """Rust v0 names readable (binutils' c++filt knows them); others as they are."""
    names = sorted(set(names))
    done = subprocess.run(["c++filt", "-s", "rust"], input="\n".join(names),
                          capture_output=True, text=True).stdout.split("\n")
    return {n: re.sub(r"\[[0-9a-f]{16}\]", "", d.replace(" ", "")) for n, d in zip(names, done)}


def counts(path):
    """(address, instructions) of each block: (executions, string instructions and
    divisions, atomics, memory accesses, whether its exit looks the next block up, the
    models' TLB misses and jump cache misses)."""
    c = {}
    for line in open(path):
        v, n, e, s, d, *a = line.split()
        a = [int(x) for x in a] + [0] * (5 - len(a))
        c[(int(v, 16), int(n))] = (int(e), int(s) + int(d), a[0], a[1], a[2], a[3], a[4])
    return c


def report(d, drv, first, iters, top):
    syms = symbols(f"{d}/kallsyms.{drv}")
    addrs = [s[0] for s in syms]
    a, b = counts(f"{d}/counts.{first}"), counts(f"{d}/counts.{first + 1}")
    insns, special, modules = collections.Counter(), collections.Counter(), collections.Counter()
    atomics, blocks = collections.Counter(), 0.0
    accesses, lookups, misses = collections.Counter(), collections.Counter(), collections.Counter()
    jump_misses = collections.Counter()
    for key in set(a) | set(b):
        ea, eb = a.get(key, (0,) * 7), b.get(key, (0,) * 7)
        _, slow, atomic, _, lookup, _, _ = b.get(key) or a[key]
        execs = (eb[0] - ea[0]) / iters
        j = bisect.bisect_right(addrs, key[0]) - 1
        _, name, module = syms[j] if j >= 0 else (0, "?", "?")
        insns[name] += key[1] * execs
        modules[module] += key[1] * execs
        blocks += execs
        if slow:
            special[name] += slow * execs
        if atomic:
            atomics[module] += atomic * execs
            atomics[name] += atomic * execs
        accesses[module] += (eb[3] - ea[3]) / iters
        lookups[module] += lookup * execs
        if eb[6] - ea[6]:
            jump_misses[module] += (eb[6] - ea[6]) / iters
            jump_misses[name] += (eb[6] - ea[6]) / iters
        if eb[5] - ea[5]:
            misses[module] += (eb[5] - ea[5]) / iters
            misses[name] += (eb[5] - ea[5]) / iters
    if not insns:
        # --clock: nothing was counted, the traced entries carry host nanoseconds.
        print(f"{drv}:")
        phases(d, drv, first, syms, "host nanoseconds")
        phases(d, drv, first, syms, "host nanoseconds", across=True)
        return
    names = demangle(list(insns))
    print(f"{drv}: {sum(insns.values()):.0f} kernel instructions per iteration, in {blocks:.0f}"
          f" blocks, {sum(atomics[m] for m in modules):.1f} of them atomics")
    print("  instructions, memory accesses, block lookups (exits TCG cannot chain), TLB misses"
          " (--tlb), jump cache misses (--jump-cache) per module:")
    for module, v in modules.most_common(6):
        print(f"  {v:8.0f} {accesses[module]:8.0f} {lookups[module]:6.0f} {misses[module]:6.1f}"
              f" {jump_misses[module]:6.1f}  [{module}]")
    for name, v in insns.most_common(top):
        print(f"  {v:8.1f}  {names[name][:100]}")
    rows = [(v, n) for n, v in special.items() if v >= 0.5]
    if rows:
        print(f"  string instructions and divisions per iteration:")
        for v, n in sorted(rows, reverse=True)[:10]:
            print(f"  {v:8.1f}  {names[n][:100]}")
    rows = [(v, n) for n, v in atomics.items() if v >= 0.5 and n not in modules]
    if rows:
        print(f"  atomics per iteration ({', '.join(f'[{m}] {atomics[m]:.1f}' for m in modules)}):")
        for v, n in sorted(rows, reverse=True)[:top]:
            print(f"  {v:8.1f}  {names[n][:100]}")
    for title, c in (("TLB misses", misses), ("jump cache misses", jump_misses)):
        rows = [(v, n) for n, v in c.items() if v >= 0.2 and n not in modules]
        if rows:
            print(f"  {title} per iteration:")
            for v, n in sorted(rows, reverse=True)[:top]:
                print(f"  {v:8.1f}  {names[n][:100]}")
    phases(d, drv, first, syms, "instructions")


def phases(d, drv, first, syms, unit, across=False):
    """Median `unit` from each traced entry to the next on the same vCPU, or with `across`
    (a clock all vCPUs share) to the next on any vCPU: the steps of a round trip."""
    try:
        lines = open(f"{d}/trace.{first}").read().split("\n")
    except OSError:
        return
    by_addr = {a: n for a, n, _ in syms}
    names = demangle(by_addr.values())
    span = collections.defaultdict(list)
    last = {}
    for line in lines:
        f = line.split()
        if len(f) != 3:
            continue
        vcpu, addr, count = f[0], int(f[1], 16), int(f[2])
        if across:
            vcpu = "any"
        name = names.get(by_addr.get(addr, "?"), "?")
        if vcpu in last:
            span[(last[vcpu][0], name)].append(count - last[vcpu][1])
        last[vcpu] = (name, count)
    where = "any vCPU" if across else "one vCPU"
    print(f"  phases (median {unit} on {where} from one traced entry to the next):")
    rows = sorted(span.items(), key=lambda kv: -len(kv[1]))[:25]
    for (frm, to), v in rows:
        print(f"  {statistics.median(v):8.0f}  n={len(v):5d}  {frm[:45]} -> {to[:45]}")


def main():
    d, drivers, iters = sys.argv[1], sys.argv[2].split(), int(sys.argv[3])
    top = int(sys.argv[4]) if len(sys.argv) > 4 else 30
    for i, drv in enumerate(drivers):
        report(d, drv, 2 * i + 1, iters, top)


if __name__ == "__main__":
    main()
