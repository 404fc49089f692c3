#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The second guest of a two-guest run (selftests/vm/pair.sh): it runs the first guest's
commands, sent over the link between them.

  peer.py serve NETDEV ADDR/PREFIX     in the peer guest: ADDR on NETDEV, then run each
                                       command that comes to ADDR:PORT, each as it comes
                                       (several at a time), until told to stop
  peer.py call [--timeout S] [--wait S] ADDR COMMAND
                                       in the first guest: run COMMAND (a bash command
                                       line) in the peer at ADDR, print its output (stdout
                                       and stderr) and exit with its status; 124 if it ran
                                       past S seconds (killed, with what it started);
                                       --wait retries for S seconds while the peer is not
                                       up yet
  peer.py stop ADDR                    the peer stops serving (its guest then powers off)

Commands run with bash in the repository's top directory, in a process group of their own;
background work must redirect its output, or the call waits for it. The link carries
nothing else than what the guests send each other: the addresses are from the
documentation ranges.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

PORT = 7999
STOP = "\0stop"


def serve(netdev, addr):
    subprocess.run(["ip", "link", "set", netdev, "up"], check=True)
    subprocess.run(["ip", "addr", "add", addr, "dev", netdev], check=True)
    host = addr.split("/")[0]
    stop = threading.Event()
    with socket.create_server((host, PORT), backlog=16) as srv:
        srv.settimeout(1)
        print(f"peer: serving on {host}:{PORT}", flush=True)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except socket.timeout:
                continue
            threading.Thread(target=answer, args=(conn, stop), daemon=True).start()
    return 0


def answer(conn, stop):
    """One call: a command runs while others may (a server and its client's checks)."""
    with conn:
        try:
            req = json.loads(conn.makefile("r").readline())
        except (OSError, ValueError):
            return
        if req.get("cmd") == STOP:
            stop.set()
            conn.sendall(b'{"rc": 0, "out": ""}\n')
            return
        rc, out = run(req.get("cmd", ""), float(req.get("timeout", 60)))
        try:
            conn.sendall(json.dumps({"rc": rc, "out": out}).encode() + b"\n")
        except OSError:
            pass


def run(cmd, timeout):
    p = subprocess.Popen(["bash", "-c", cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out.decode(errors="replace")
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        return 124, out.decode(errors="replace") + f"\npeer: killed after {timeout:g} s\n"


def call(addr, cmd, timeout, wait):
    deadline = time.monotonic() + wait
    while True:
        try:
            conn = socket.create_connection((addr, PORT), timeout=5)
            break
        except OSError as e:
            if time.monotonic() >= deadline:
                print(f"peer: cannot reach {addr}:{PORT}: {e}", file=sys.stderr)
                return 125
            time.sleep(1)
    with conn:
        conn.settimeout(timeout + 30)
        conn.sendall(json.dumps({"cmd": cmd, "timeout": timeout}).encode() + b"\n")
        try:
            line = conn.makefile("r").readline()
        except OSError as e:
            print(f"peer: no answer from {addr}: {e}", file=sys.stderr)
            return 125
    if not line:
        print(f"peer: {addr} closed without an answer", file=sys.stderr)
        return 125
    reply = json.loads(line)
    sys.stdout.write(reply["out"])
    return reply["rc"]


def main(argv):
    if len(argv) == 3 and argv[0] == "serve":
        return serve(argv[1], argv[2])
    if len(argv) == 2 and argv[0] == "stop":
        return call(argv[1], STOP, 10, 0)
    if argv and argv[0] == "call":
        opts, rest = {"--timeout": 60.0, "--wait": 0.0}, argv[1:]
        while rest and rest[0] in opts and len(rest) > 1:
            opts[rest[0]] = float(rest[1])
            rest = rest[2:]
        if len(rest) == 2:
            return call(rest[0], rest[1], opts["--timeout"], opts["--wait"])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
