#!/usr/bin/env python3
"""Benchmark: goodputd while a real study of many prompts runs its
saturation load point against goodput-sim (size 0: an idle goodputd, the
machine's own share of the latency). For each workload size, RUNS times: a fresh goodputd, one study (128-token prompts, 16-token replies,
the tiny test space), `status` asked every 50 ms for SECONDS once the
probe runs; printed: status p50/p99/max, goodputd's and the probe
process's peak RSS (VmHWM), the probe's and the server's RSS at the end, then the spread over the
runs. Machine state: the load average before and after.

Usage: bench-prompts.py GOODPUTD GOODPUT [--sizes 5000,50000,1000000]
[--runs 3] [--seconds 15] [--check-status-ms MS] [--check-rss-mb MB]"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "daemon"))
from daemonlib import Daemon, tiny_spec  # noqa: E402


def kib(pid, field):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def descendants(pid):
    out = []
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            kids = [int(c) for c in f.read().split()]
    except OSError:
        return out
    for k in kids:
        out.append(k)
        out += descendants(k)
    return out


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return "?"


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100.0 * len(xs)))]


def one_run(args, n):
    tmp = tempfile.mkdtemp(prefix="bench-prompts-")
    d = Daemon(args.goodputd, args.goodput, tmp, verbose=False).start()
    try:
        if n > 0:  # 0: an idle goodputd, the machine's own share of the latency
            spec = tiny_spec("p%d" % n, trials=1)
            spec["workload"].update({"num_prompts": n, "input_len": 128, "output_len": 16})
            spec["probe"]["request_timeout"] = 600
            r = d.request({"command": "submit", "study": spec})
            if not r.get("ok"):
                raise SystemExit("submit: %s" % r)
            d.wait_phase(["probing"], seconds=300)
        lat = []
        end = time.monotonic() + args.seconds
        while time.monotonic() < end:
            t0 = time.monotonic()
            r = d.request({"command": "status"}, timeout=300)
            lat.append((time.monotonic() - t0) * 1e3)
            time.sleep(0.05)
        kids = {comm(k): kib(k, "VmRSS") for k in descendants(d.proc.pid)}
        probe_hwm = max([kib(k, "VmHWM") for k in descendants(d.proc.pid) if comm(k) == "goodput-probe"] or [0])
        return {
            "p50": pct(lat, 50), "p99": pct(lat, 99), "max": max(lat), "n": len(lat),
            "hwm_mb": kib(d.proc.pid, "VmHWM") / 1024.0,
            "probe_mb": kids.get("goodput-probe", 0) / 1024.0,
            "probe_hwm_mb": probe_hwm / 1024.0,
            "server_mb": max([v for k, v in kids.items() if k != "goodput-probe"] or [0]) / 1024.0,
        }
    finally:
        d.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("goodputd")
    ap.add_argument("goodput")
    ap.add_argument("--sizes", default="0,5000,50000,1000000")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--check-status-ms", type=float, default=0)
    ap.add_argument("--check-rss-mb", type=float, default=0)
    args = ap.parse_args()
    args.goodputd, args.goodput = os.path.abspath(args.goodputd), os.path.abspath(args.goodput)
    print("machine: %d cores, load average before %s" % (os.cpu_count(), " ".join(
        "%.2f" % x for x in os.getloadavg())))
    failed = False
    for n in [int(x) for x in args.sizes.split(",")]:
        runs = []
        for i in range(args.runs):
            r = one_run(args, n)
            runs.append(r)
            print("%9d prompts, run %d: status p50 %.2f ms, p99 %.2f ms, max %.2f ms (%d asked over %.0f s); "
                  "goodputd peak RSS %.1f MB; probe process peak RSS %.1f MB (%.1f MB at the end), server %.1f MB" %
                  (n, i + 1, r["p50"], r["p99"], r["max"], r["n"], args.seconds, r["hwm_mb"], r["probe_hwm_mb"],
                   r["probe_mb"], r["server_mb"]), flush=True)
        for key, label in (("p99", "status p99 ms"), ("max", "status max ms"), ("hwm_mb", "goodputd peak MB"),
                           ("probe_hwm_mb", "probe process peak MB")):
            v = [r[key] for r in runs]
            print("%9d prompts: %s median %.2f (min %.2f, max %.2f over %d runs)" %
                  (n, label, statistics.median(v), min(v), max(v), len(v)))
        if args.check_status_ms and max(r["max"] for r in runs) > args.check_status_ms:
            print("FAIL: a status took more than %g ms" % args.check_status_ms)
            failed = True
        if args.check_rss_mb and max(r["hwm_mb"] for r in runs) > args.check_rss_mb:
            print("FAIL: goodputd's peak RSS above %g MB" % args.check_rss_mb)
            failed = True
    print("machine: load average after %s" % " ".join("%.2f" % x for x in os.getloadavg()))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
