#!/usr/bin/env python3
"""bench-capped-search.py — the rate search with points capped in time, as a
wall-time budget makes them on a slow engine, against a hand-run bisection
with fixed 40-request points, on one server: goodput-sim as llama-server
(one slot, one thread: a 2048-token prompt in ~60 ms, so a 1 s cap holds
about as many requests as a 150 s cap on a CPU server at 0.1 req/s).

For each seed (its arrival sequence and prompts, the same for both): a
bisection of 40-request points (met: at least 36 good) down to a bracket
5 % wide, and `goodput probe --find-max-rate --max-point-seconds 1`. Prints
the search's answer (rate asked, and sent) against the bisection's bracket,
and how many answers land within 25 % of it. Real time (~1 min a seed):
run it alone; figures on a loaded machine are loaded figures.

usage: bench-capped-search.py GOODPUT GOODPUT-SIM [--seeds N] [--cap S]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("goodput")
ap.add_argument("sim")
ap.add_argument("--seeds", type=int, default=3)
ap.add_argument("--cap", default="1")
a = ap.parse_args()
tmp = tempfile.mkdtemp(prefix="goodput-capped-search-")
WORKLOAD = ["--model", "llama-3.1-8b", "--random-input-len", "2048", "--random-output-len", "8", "--ignore-eos"]
SLA = ["--sla", "ttft:200,tpot:30", "--attainment", "0.9"]


def start():
    log_path = os.path.join(tmp, "sim.log")
    with open(log_path, "a") as log:
        server = subprocess.Popen([a.sim, "--dialect", "llamacpp", "--port", "0", "--model",
                                   "/models/llama-3.1-8b-Q8_0.gguf", "--metrics", "--parallel", "1", "--threads", "1",
                                   "--load-time", "0.2"], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and server.poll() is None:
        text = open(log_path).read()
        if "starting the main loop" in text and "listening on " in text:
            return server, text.split("listening on ")[1].split()[0]
        time.sleep(0.05)
    server.kill()
    sys.exit("goodput-sim did not start:\n" + open(log_path).read())


def probe(url, *args):
    p = subprocess.run([a.goodput, "probe", "--base-url", url, *WORKLOAD, *SLA, "--no-progress", "--json", *args],
                       capture_output=True, text=True, timeout=600)
    if p.returncode not in (0, 3):
        sys.exit("goodput probe exited %d: %s" % (p.returncode, p.stderr[-2000:]))
    return json.loads(p.stdout)


def bisect(url, seed, lo, hi):
    def met(r):
        return probe(url, "--num-prompts", "40", "--seed", str(seed), "--request-rate", "%.4f" % r, "--verdict",
                     "fixed")["attainment"] >= 0.9
    if not met(lo) or met(hi):
        return None
    while hi / lo > 1.05:
        m = (lo * hi) ** 0.5
        if met(m):
            lo = m
        else:
            hi = m
    return lo, hi


server, url = start()
within = 0
try:
    for seed in range(1, a.seeds + 1):
        b = bisect(url, seed, 2, 30)
        s = probe(url, "--num-prompts", "40", "--seed", str(seed), "--find-max-rate", "--max-point-seconds", a.cap)
        ask, sent = s.get("max_request_rate") or 0, s.get("max_offered_rate") or 0
        if b:
            ratio = ask / b[0]
            within += abs(ratio - 1) <= 0.25
            print("seed %d: bisection [%.2f, %.2f] req/s; search (%s, %d points, cap %s s): %.2f asked (%.2f sent), "
                  "%+.0f %%" % (seed, b[0], b[1], s["search"], s["num_load_points"], a.cap, ask, sent,
                               (ratio - 1) * 100), flush=True)
        else:
            print("seed %d: the bisection's bounds 2-30 req/s do not bracket the max rate" % seed)
finally:
    server.terminate()
    server.wait(timeout=10)
print("%d of %d answers within 25 %% of the bisection" % (within, a.seeds))
