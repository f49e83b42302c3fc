#!/usr/bin/env python3
"""goodputd against a careless operator and a hostile local user: real daemon
processes on a private socket and state directory. Usage:
test-goodputd-harden.py GOODPUTD GOODPUT CASE."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemonlib import SkipTest, check, read_json_line, run, tiny_spec  # noqa: E402


def timed_status(d, limit=2.0):
    t0 = time.monotonic()
    r = d.request({"command": "status"}, timeout=limit + 1)
    dt = time.monotonic() - t0
    check(r["ok"] and dt < limit, "status took %.2f s: %s" % (dt, r))
    return r


def case_lock(make, tmp):
    """One daemon per state directory: a second goodputd on it exits at once
    naming the first one's pid, and so does a `goodput tune` on its
    database; readers need no lock; after a kill -9 the lock is free."""
    a = make(name="a", args=["--dry-run"]).start()
    a.request({"command": "submit", "study": tiny_spec("l1", trials=2)})
    a.wait_state("l1", ["done"], 60)
    b = make(name="b", args=["--dry-run"])
    b.state = a.state
    t0 = time.monotonic()
    b.start(wait=False)
    rc = b.proc.wait(10)
    want = "another goodputd (pid %d) uses this state directory" % a.proc.pid
    check(rc == 1 and want in b.log(), "second daemon: exit %s after %.1f s:\n%s" % (rc, time.monotonic() - t0, b.log()))
    check(not os.path.exists(b.sock), "the second daemon left a socket")

    db = os.path.join(a.state, "goodput.db")
    spec = os.path.join(tmp, "l2.json")
    with open(spec, "w") as f:
        json.dump(tiny_spec("l2"), f)
    p = subprocess.run([a.goodput, "tune", "--dry-run", "--db", db, spec], capture_output=True, text=True,
                       timeout=30, env=a.env)
    check(p.returncode == 1 and ("goodputd (pid %d) is writing to it" % a.proc.pid) in p.stderr, p.stderr)
    p = subprocess.run([a.goodput, "report", "--db", db, "--markdown", "l1"], capture_output=True, text=True,
                       timeout=60, env=a.env)
    check(p.returncode == 0 and "l1" in p.stdout, "a reader is refused: " + p.stderr)
    check(timed_status(a)["state"] == "idle", "the first daemon still serves")

    a.stop(sig=signal.SIGKILL)
    b.start()
    check(b.request({"command": "list"})["studies"][0]["name"] == "l1", "the successor sees the study")


def case_fifo(make, tmp):
    """A FIFO named where a file is expected (a dataset, an engine profile)
    is refused without blocking the loop: status answers at once, the
    watchdog keeps being pinged."""
    d = make(args=["--dry-run"]).start()
    fifo = os.path.join(tmp, "prompts.jsonl")
    os.mkfifo(fifo)
    spec = tiny_spec("f1", trials=2)
    spec["workload"]["dataset"] = "custom"
    spec["workload"]["dataset_path"] = fifo
    r = d.request({"command": "submit", "study": spec})
    if r["ok"]:
        st = d.wait_state("f1", ["failed", "done"], 30)
        trials = d.request({"command": "trials", "study": "f1"})["trials"]
        msgs = [st.get("message") or ""] + [t.get("failure_message") or "" for t in trials]
        check(any("not a regular file (a FIFO)" in m for m in msgs), (st, trials))
    else:
        check("not a regular file (a FIFO)" in r["error"], r)
    timed_status(d)

    spec = tiny_spec("f2")
    spec["engine"] = fifo
    r = d.request({"command": "submit", "study": spec})
    check(not r["ok"] and "not a regular file (a FIFO)" in r["error"], r)
    timed_status(d)


HOLDER = r"""
import socket, sys, time
path, n = sys.argv[1], int(sys.argv[2])
held, refused = [], 0
for _ in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.settimeout(0.3)
    try:
        data = s.recv(4096)
    except socket.timeout:
        data = None
    if data is None:
        held.append(s)
    elif b"too many connections" in data:
        refused += 1
        s.close()
print(len(held), refused, flush=True)
sys.stdin.read()
"""


def hold(d, uid, n):
    """Runs a client as uid that opens n connections and keeps those that
    were accepted until told to go; returns (process, held, refused)."""
    p = subprocess.Popen(["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups", "--",
                          sys.executable, "-c", HOLDER, d.sock, str(n)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    held, refused = (int(x) for x in p.stdout.readline().split())
    return p, held, refused


def case_caps(make, tmp):
    """An unprivileged uid that tries to hold every connection slot gets its
    per-uid share; several such uids together cannot take the slots kept for
    root and the socket group: root is always answered."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        raise SkipTest("needs root and setpriv to connect as other uids")
    d = make(args=["--dry-run", "--socket-mode", "0666"],
             config={"limits": {"max_connections": 40, "max_connections_per_uid": 8, "reserved_connections": 10,
                                "idle_timeout": 60}}).start()
    holders = []
    try:
        p, held, refused = hold(d, 65534, 50)
        holders.append(p)
        check(held == 8 and refused == 42, "one uid held %d, refused %d (cap 8)" % (held, refused))
        with d.connect() as s:
            s.sendall(b'{"command": "status"}\n')
            check(read_json_line(s)["ok"], "root answered")
        for uid in (65533, 65532, 65531, 65530):
            p, h, r = hold(d, uid, 8)
            holders.append(p)
            held += h
        check(held == 30, "unprivileged uids hold %d of 40 slots, 10 are reserved" % held)
        conns = []
        for _ in range(10):
            conns.append(d.connect())
        for c in conns:
            c.sendall(b'{"command": "status"}\n')
            check(read_json_line(c)["ok"], "root answered in a reserved slot")
        with d.connect() as s:
            s.settimeout(5)
            check(b"too many connections (40)" in s.recv(4096), "the 41st connection is refused")
        for c in conns:
            c.close()
    finally:
        for p in holders:
            p.stdin.close()
            p.wait(10)
    timed_status(d)


CASES = {
    "caps": case_caps,
    "lock": case_lock,
    "fifo": case_fifo,
}

if __name__ == "__main__":
    sys.exit(run(CASES, sys.argv))
