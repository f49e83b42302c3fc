#!/usr/bin/env python3
"""Benchmark of goodputd: idle RSS and CPU, and `best` latency p50/p99 with
200 clients connected at once, each sending its query at the same moment
(ROUNDS times). Usage: bench-goodputd.py GOODPUTD GOODPUT [ROUNDS]."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemonlib import Daemon, check, tiny_spec  # noqa: E402
import importlib.util  # noqa: E402

spec = importlib.util.spec_from_file_location(
    "t", os.path.join(os.path.dirname(os.path.abspath(__file__)), "test-goodputd.py"))
t = importlib.util.module_from_spec(spec)
spec.loader.exec_module(t)


def proc_stat(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    with open("/proc/%d/status" % pid) as f:
        rss = [int(line.split()[1]) for line in f if line.startswith("VmRSS:")][0]
    return (int(fields[11]) + int(fields[12])) / ticks, rss


def bench(make, tmp):
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    d = make(name="bench", args=["--dry-run"], verbose=False).start()
    d.request({"command": "submit", "study": tiny_spec("b1", trials=4)})
    d.wait_state("b1", ["done"], 60)
    time.sleep(0.5)
    cpu0, _ = proc_stat(d.proc.pid)
    idle = 5.0 if rounds > 1 else 1.0
    time.sleep(idle)
    cpu1, rss = proc_stat(d.proc.pid)
    print("idle: RSS %.1f MB, CPU %.2f%% over %.0f s" % (rss / 1024, (cpu1 - cpu0) / idle * 100, idle))
    lat = []
    for _ in range(rounds):
        lat += t.query_many(d, 200, {"command": "best", "study": "b1"})
    lat.sort()
    p50, p99 = lat[len(lat) // 2] * 1e3, lat[int(len(lat) * 0.99)] * 1e3
    print("best, 200 concurrent clients x %d rounds: p50 %.2f ms, p99 %.2f ms" % (rounds, p50, p99))
    _, rss2 = proc_stat(d.proc.pid)
    print("RSS after the load: %.1f MB" % (rss2 / 1024))
    check(rss < 64 * 1024, "idle RSS %d kB" % rss)


if __name__ == "__main__":
    from daemonlib import run
    sys.exit(run({"bench": bench}, [sys.argv[0], sys.argv[1], sys.argv[2], "bench"]))
