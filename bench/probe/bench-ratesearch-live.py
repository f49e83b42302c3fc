#!/usr/bin/env python3
"""bench-ratesearch-live.py — `goodput probe --find-max-rate` against a real
goodput-sim server with jitter (--jitter 0.15: log-normal step times, five
times the default), sequential load points against fixed counts, in real
time.

For each method the probe runs --searches times with its own --seed (its
arrival sequence and prompts) against one server. The truth is the largest
rate whose attainment over long runs reaches the target, from
`goodput-sim simulate` on the same engine flags (the server's own model in
virtual time: 16 seeds x 4,000 requests, pooled; bisection to 0.1 %). Printed
per method: how often the answer lies within ±5 % of the truth, the mean
answer/truth, the load points after the saturation run, and the requests and
wall seconds per search (saturation run included).

usage: bench-ratesearch-live.py GOODPUT GOODPUT-SIM [--searches N] [--methods sequential,fixed:100,...]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "lib"))
from simlib import start_sim  # noqa: E402

ENGINE = ["--model", "llama-3.1-8b", "--gpu", "H100", "--max-num-seqs", "64"]
WORKLOAD = ["--random-input-len", "256", "--random-output-len", "16", "--random-range-ratio", "0.5"]
SLA = "ttft:150 tpot:25"
TARGET = 0.9
ENGINE += ["--jitter", "0.15"]


def simulate_attainment(sim, rate, seeds, n):
    good = total = 0
    for s in range(seeds):
        p = subprocess.run([sim, "simulate", *ENGINE, *WORKLOAD, "--num-prompts", str(n),
                            "--request-rate", str(rate), "--seed", str(1000 + s), "--goodput", *SLA.split(),
                            "--json"], capture_output=True, text=True, check=True)
        j = json.loads(p.stdout)
        good += j["attainment"] * j["num_prompts"]
        total += j["num_prompts"]
    return good / total


def truth(sim, seeds, n):
    p = subprocess.run([sim, "simulate", *ENGINE, *WORKLOAD, "--num-prompts", "400",
                        "--seed", "1000", "--json"], capture_output=True, text=True, check=True)
    x_sat = json.loads(p.stdout)["request_throughput"]
    lo, hi = x_sat / 100, x_sat * 1.2
    while hi > lo * 1.001:
        mid = math.sqrt(lo * hi)
        if simulate_attainment(sim, mid, seeds, n) >= TARGET:
            lo = mid
        else:
            hi = mid
    return lo, x_sat


def search(goodput, url, method, seed):
    args = [goodput, "probe", "--base-url", url, "--model", "llama-3.1-8b", "--no-progress", "--json",
            "--find-max-rate", "--goodput", *SLA.split(), "--seed", str(seed), *WORKLOAD]
    if method == "sequential":
        args += ["--num-prompts", "200"]
    else:
        args += ["--verdict", "fixed", "--num-prompts", method.split(":")[1]]
    t0 = time.monotonic()
    p = subprocess.run(args, capture_output=True, text=True)
    secs = time.monotonic() - t0
    if p.returncode not in (0, 3):
        sys.exit(f"probe failed ({p.returncode}): {p.stderr[-500:]}")
    j = json.loads(p.stdout)
    points = [lp for lp in j["load_points"] if not lp.get("saturation")]
    return j["max_request_rate"], len(points), sum(lp["num_prompts"] for lp in j["load_points"]), secs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("goodput")
    ap.add_argument("sim")
    ap.add_argument("--searches", type=int, default=10)
    ap.add_argument("--methods", default="sequential,fixed:100,fixed:200")
    ap.add_argument("--truth-seeds", type=int, default=16)
    ap.add_argument("--truth-requests", type=int, default=4000)
    a = ap.parse_args()

    R, x_sat = truth(a.sim, a.truth_seeds, a.truth_requests)
    tmp = tempfile.mkdtemp(prefix="goodput-bench-rs-")
    server, url = start_sim(a.sim, f"{tmp}/sim.log", *ENGINE)
    try:
        print(f"truth: {R:.2f} req/s ({R / x_sat:.2f} x saturation); goodput-sim {' '.join(ENGINE)} "
              f"SLA {SLA} @ {TARGET:.0%}")
        print("| method | placed within ±5 % | answer/truth | load points | requests | wall s |")
        print("| --- | --- | --- | --- | --- | --- |")
        for m in a.methods.split(","):
            rows = [search(a.goodput, url, m, s) for s in range(1, a.searches + 1)]
            placed = sum(abs(r[0] / R - 1) <= 0.05 for r in rows)
            mean = lambda k: sum(r[k] for r in rows) / len(rows)
            print(f"| {m.replace(':', ' ')} | {placed}/{len(rows)} | {mean(0) / R:.3f} | {mean(1):.1f} | "
                  f"{mean(2):.0f} | {mean(3):.0f} |", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
