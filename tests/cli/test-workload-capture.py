#!/usr/bin/env python3
"""test-workload-capture.py — `goodput workload capture` against goodput-sim
serving a known workload, checked against what the probe actually sent (its
--save-requests lines), not against the distribution it was drawn from:

* the probe drives the sim with lognormal prompt lengths and a two-level
  rate (a rate profile run at 1728 day-seconds per second: 25 s at 4 req/s,
  25 s at 8 req/s) while the capture reads /metrics every second for 58 s;
* input and output length means within 5 %, the Kolmogorov–Smirnov distance
  at the histogram's bucket bounds at most 0.05, the mean rate within 5 %,
  the burstiness within 20 % of the sent arrivals' own, measured on the
  capture's intervals;
* --from-log on the --save-requests file replays the workload exactly:
  `goodput workload generate` gives every request's lengths and arrival
  offset as sent;
* a study on the captured block and one on the sent lengths (virtual time)
  pick the same best configuration, or one within 2 % of its cost.

usage: test-workload-capture.py GOODPUT GOODPUT-SIM ENGINES-DIR
"""
import json
import math
import os
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from simlib import start_sim  # noqa: E402

goodput, sim, engines = sys.argv[1], sys.argv[2], sys.argv[3]
tmp = tempfile.mkdtemp(prefix="goodput-capture-")
failures = 0


def check(cond, what):
    global failures
    print(("ok:   " if cond else "FAIL: ") + what, file=sys.stderr)
    if not cond:
        failures += 1


def path(name):
    return os.path.join(tmp, name)


def run(*args, **kw):
    p = subprocess.run([goodput, *args], capture_output=True, text=True, timeout=kw.get("timeout", 300))
    if p.returncode != 0:
        print(" ".join(args), "->", p.returncode, p.stderr, file=sys.stderr)
    return p


def first_difference_burstiness(counts):
    """The capture's estimator (probes/capture.c): 1 / F, F the dispersion
    from successive differences, over the intervals from the first with a
    request to the last."""
    while counts and counts[0] == 0:
        counts = counts[1:]
    while counts and counts[-1] == 0:
        counts = counts[:-1]
    m = len(counts)
    mean = sum(counts) / m
    var = sum((counts[i] - counts[i - 1]) ** 2 for i in range(1, m)) / (2 * (m - 1))
    return mean / var


def cdf_at_bounds_ks(hist, lengths):
    total = sum(hist["count"])
    lengths = sorted(lengths)
    cum, k, ks = 0, 0, 0.0
    for le, c in zip(hist["le"], hist["count"]):
        cum += c
        while k < len(lengths) and lengths[k] <= le:
            k += 1
        ks = max(ks, abs(cum / total - k / len(lengths)))
    return ks


workload = {
    "input_len_dist": "lognormal", "input_len": 400, "input_len_std": 0.6,
    "output_len_dist": "uniform", "output_len": 24, "range_ratio": 0.1,
    "rate_profile": [["00:00", 4], ["12:00", 8]], "rate_profile_speed": 1728,
    "num_prompts": 300, "ignore_eos": True, "seed": 11,
}
with open(path("sent-spec.json"), "w") as f:
    json.dump(workload, f)

server = None
try:
    server, url = start_sim(sim, path("sim.log"), "--gpu", "L40S")
    capture = subprocess.Popen([goodput, "workload", "capture", "--metrics-url", url + "/metrics", "--interval", "1s",
                                "--duration", "58s", "-o", path("captured.json")],
                               stdout=subprocess.DEVNULL, stderr=open(path("capture.err"), "w"))
    time.sleep(1.5)
    p = run("probe", "--base-url", url, "--model", "llama-3.1-8b", "--no-progress", "--workload",
            path("sent-spec.json"), "--save-requests", path("sent.jsonl"), "--json")
    check(p.returncode == 0, "the probe drove the sim")
    capture.wait(timeout=120)
    check(capture.returncode == 0, "capture exited 0")
    with open(path("capture.err")) as f:
        progress = f.read()
    check(progress.count(" req/s ") >= 50, f"a progress line per interval ({progress.count(' req/s ')})")
finally:
    if server:
        server.terminate()
        server.wait(timeout=10)

sent = sorted((json.loads(l) for l in open(path("sent.jsonl"))), key=lambda r: r["send_usec"])
cap = json.load(open(path("captured.json")))
got = cap["captured"]
check(got["arrivals_from"] == "running + waiting + finished", "arrivals from the engine's gauges")
check(all(r["success"] for r in sent) and len(sent) == 300, f"300 requests sent and served ({len(sent)})")
check(got["requests"] == len(sent), f"every request captured ({got['requests']} of {len(sent)})")

ins = [r["input_tokens"] for r in sent]
outs = [r["output_tokens"] for r in sent]
for what, lengths, key in (("input", ins, "input_len"), ("output", outs, "output_len")):
    mean = sum(lengths) / len(lengths)
    check(abs(cap[key] / mean - 1) <= 0.05, f"{what} mean {cap[key]:.1f} vs sent {mean:.1f}")
    ks = cdf_at_bounds_ks(cap[key + "_histogram"], lengths)
    check(ks <= 0.05, f"{what} KS at the bucket bounds {ks:.4f}")

span = (sent[-1]["send_usec"] - sent[0]["send_usec"]) / 1e6
sent_rate = (len(sent) - 1) / span
check(abs(got["mean_rate"] / sent_rate - 1) <= 0.05, f"mean rate {got['mean_rate']:.3f} vs sent {sent_rate:.3f}/s")

# The sends on the capture's intervals.
ends = [e for e, _ in got["intervals"]]
counts = [0] * len(ends)
for r in sent:
    t = r["timestamp"]
    for i, e in enumerate(ends):
        if t <= e and (i == 0 or t > ends[i - 1]):
            counts[i] += 1
            break
sent_k = first_difference_burstiness(counts)
check(abs(got["burstiness"] / sent_k - 1) <= 0.20,
      f"burstiness {got['burstiness']:.3f} vs the sends' {sent_k:.3f} on the same intervals")

# --from-log replays the log exactly.
p = run("workload", "capture", "--from-log", path("sent.jsonl"), "-o", path("replay.json"))
check(p.returncode == 0, "capture --from-log")
p = run("workload", "generate", path("replay.json"))
gen = [json.loads(l) for l in p.stdout.splitlines()]
t0 = sent[0]["send_usec"]
same = len(gen) == len(sent) and all(
    (g["input_len"], g["output_len"], g["arrival_usec"]) == (s["input_tokens"], s["output_tokens"], s["send_usec"] - t0)
    for g, s in zip(gen, sent))
check(same, f"--from-log reproduces the {len(sent)} requests: lengths and arrival offsets")

# Studies in virtual time: the captured block against the lengths as sent.
base = json.load(open(os.path.join(engines, "..", "studies", "demo-sim-llama8b-l40s.json")))


def study(name, block, pin=None):
    s = json.loads(json.dumps(base))
    s["name"] = name
    w = {k: v for k, v in block.items()}
    w.update({"num_prompts": 1500, "ignore_eos": True, "seed": 7})
    s["workload"] = w
    s["search_space"]["max_model_len"] = [8192]
    s["budget"] = {"max_trials": 30}
    if pin:
        # one configuration, measured as the study measures its answer
        s["search_space"] = {k: [v] for k, v in pin.items()}
        s["quantizations"] = [pin["quantization"]]
        s["budget"] = {"max_trials": 3}
    s["probe"] = {"tolerance": 0.01, "max_steps": 12, "request_timeout": 30}
    with open(path("study-" + name + ".json"), "w") as f:
        json.dump(s, f)
    p = run("tune", "--dry-run", "--db", path("studies.db"), "--engines-dir", engines, "--json", "-q",
            path("study-" + name + ".json"), timeout=600)
    check(p.returncode == 0, f"study {name} ran")
    return json.loads(p.stdout)


sent_block = {"input_len_dist": "samples", "output_len_dist": "samples", "samples_path": path("sent.jsonl"),
              "arrival": "poisson"}
a = study("sent", sent_block)
b = study("captured", cap)
ka, kb = a["best"]["knobs"], b["best"]["knobs"]
if ka == kb:
    check(True, f"the same best configuration {ka}")
else:
    # The captured study's best as the sent study measured it (its mean, as the store counts a cost).
    db = sqlite3.connect(path("studies.db"))
    costs = [c for knobs, c in db.execute(
        "SELECT t.knobs, t.cost_per_mtok FROM trials t JOIN studies s ON s.id = t.study_id"
        " WHERE s.name = 'sent.dry-run' AND t.state = 'done' AND t.cost_per_mtok IS NOT NULL")
        if json.loads(knobs) == kb]
    if not costs:
        # the sent study's search never deployed it: measure it there alone
        costs = [study("sent-pinned", sent_block, pin=kb)["best"]["cost_per_mtok"]]
    cost = sum(costs) / len(costs)
    check(cost <= a["best"]["cost_per_mtok"] * 1.02,
          f"captured best {kb} costs {cost} on the sent workload, best there {a['best']['cost_per_mtok']:.4f}")
print(f"sent: {ka} ${a['best']['cost_per_mtok']:.4f}/Mtok; captured: {kb} ${b['best']['cost_per_mtok']:.4f}/Mtok",
      file=sys.stderr)

sys.exit(1 if failures else 0)
