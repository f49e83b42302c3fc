#!/usr/bin/env python3
"""test-probe-sim.py — `goodput probe` against goodput-sim, checked against
the sim's own trace of when it sent every token (--trace, CLOCK_MONOTONIC
µs, the clock the probe uses):

* closed loop (--max-concurrency 1): request k is trace line k; the probe
  saw each first and last token after the sim sent it, as a rule (the
  median) within 50 ms, and never seconds later; TPOT agrees with the sim's
  send gaps; token counts agree;
* open loop at a rate: every request is accounted for and the output token
  totals agree; /metrics was scraped (the "server" figures are present);
* --find-max-rate: every load point of the search carries a sure verdict
  and stops sending once it has one (the sim received exactly the requests
  the load points report, with those of points the probe ran again because
  it lagged itself, clear ones far fewer than the cap), and reports
  the rate it actually sent.

usage: test-probe-sim.py GOODPUT GOODPUT-SIM
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from simlib import start_sim  # noqa: E402

goodput, sim = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp(prefix="goodput-probe-sim-")
failures = 0
slow = "vgpreload" in os.environ.get("LD_PRELOAD", "")
bound_usec = 50000 * (10 if slow else 1)


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)


def start_traced_sim(trace):
    return start_sim(sim, trace + ".log", "--trace", trace)


def stop_sim(server):
    # The trace is complete once the sim has exited.
    server.terminate()
    server.wait(timeout=10)


def probe(url, *args):
    p = subprocess.run([goodput, "probe", "--base-url", url, "--model", "llama-3.1-8b", "--no-progress", *args],
                       capture_output=True, text=True, timeout=240)
    if p.returncode != 0:
        print(p.stderr, file=sys.stderr)
    return p


def read_trace(trace):
    with open(trace) as f:
        return [json.loads(l) for l in f]


server = None
try:
    # Closed loop: one request at a time, in order.
    reqs_path = os.path.join(tmp, "requests.jsonl")
    trace = os.path.join(tmp, "trace1.jsonl")
    server, url = start_traced_sim(trace)
    p = probe(url, "--num-prompts", "20", "--random-input-len", "64", "--random-output-len", "12", "--ignore-eos",
              "--max-concurrency", "1", "--save-requests", reqs_path, "--json")
    check(p.returncode == 0, "closed-loop run")
    reqs = [json.loads(l) for l in open(reqs_path)]
    stop_sim(server)
    tr = read_trace(trace)
    check(len(reqs) == 20 and len(tr) == 20, f"20 requests, 20 traced: {len(reqs)}, {len(tr)}")
    worst, lags, tpot_errs = 0, [], []
    for r, t in zip(sorted(reqs, key=lambda r: r["index"]), tr):
        sent = [s for _, s in t["tokens"]]
        check(r["success"], f"request {r['index']}: {r.get('error')}")
        check(r["output_tokens"] == len(sent) == 12, f"tokens {r['output_tokens']} vs traced {len(sent)}")
        check(r["input_tokens"] == t["prompt_tokens"] == 64, f"prompt tokens {r['input_tokens']}")
        first = r["send_usec"] + r["ttft_ms"] * 1000 - sent[0]
        last = r["send_usec"] + r["e2el_ms"] * 1000 - sent[-1]
        # never before the sim sent it; a gross error (seconds) fails any one
        check(-1 <= first < 5e6 and -1 <= last < 5e6,
              f"request {r['index']}: first token seen {first:.0f} µs, last {last:.0f} µs after the sim sent it")
        worst = max(worst, first, last)
        lags += [first, last]
        sim_tpot = (sent[-1] - sent[0]) / (len(sent) - 1) / 1000
        tpot_errs.append(abs(r["tpot_ms"] - sim_tpot))
        check(r["send_usec"] <= t["arrival_usec"], "sent before the sim received it")
    # within bounds as a rule: a client starved of CPU on a loaded machine
    # reads some tokens late (a fact of the machine), so the medians are bounded
    lags.sort()
    tpot_errs.sort()
    check(lags and lags[len(lags) // 2] < bound_usec and tpot_errs[len(tpot_errs) // 2] < bound_usec / 10000,
          f"median lag behind the sim's sends {lags[len(lags) // 2] if lags else -1:.0f} µs, "
          f"median TPOT error {tpot_errs[len(tpot_errs) // 2] if tpot_errs else -1:.3f} ms")
    print(f"closed loop: worst lag behind the sim's send times {worst:.0f} µs", file=sys.stderr)

    # Open loop at a rate: everything accounted for, /metrics scraped.
    trace = os.path.join(tmp, "trace2.jsonl")
    server, url = start_traced_sim(trace)
    p = probe(url, "--num-prompts", "40", "--random-input-len", "128", "--random-output-len", "16",
              "--request-rate", "20", "--json")
    check(p.returncode == 0, "open-loop run")
    j = json.loads(p.stdout) if p.returncode == 0 else {}
    stop_sim(server)
    tr = read_trace(trace)
    if j.get("failed"):
        print(p.stdout, file=sys.stderr)
    # a starved client runs its point again (redone_requests says how many
    # requests the sim saw in the runs thrown away)
    check(j.get("completed") == 40 and len(tr) == 40 + j.get("redone_requests", 0),
          f"40 completed and traced: {j.get('completed')}, {len(tr)} (redone {j.get('redone_requests')})")
    kept = sorted(tr, key=lambda t: t["arrival_usec"])[-40:]  # the last run is the one reported
    check(j.get("total_output_tokens") == sum(len(t["tokens"]) for t in kept), "output tokens agree with the trace")
    check("server" in j and j["server"].get("num_requests_running_peak", 0) >= 1,
          f"/metrics scraped: {j.get('server')}")

    # The search: sequential load points.
    trace = os.path.join(tmp, "trace3.jsonl")
    server, url = start_traced_sim(trace)
    p = probe(url, "--num-prompts", "50", "--random-input-len", "128", "--random-output-len", "8",
              "--find-max-rate", "--goodput", "ttft:60", "tpot:20", "--max-point-requests", "1000", "--json")
    check(p.returncode == 0, "search run")
    j = json.loads(p.stdout) if p.returncode == 0 else {"load_points": []}
    stop_sim(server)
    tr = read_trace(trace)
    pts = j["load_points"]
    search = [lp for lp in pts if not lp.get("saturation")]
    check(len(search) >= 2, f"{len(search)} search points")
    # a point the probe ran again because it lagged itself (a loaded
    # machine) sent requests no load point counts: redone_requests
    reported, redone = sum(lp["num_prompts"] for lp in pts), j.get("redone_requests")
    check(isinstance(redone, int) and reported + redone == len(tr),
          f"the sim got {len(tr)} requests, the load points report {reported}, "
          f"{redone} more from {j.get('redone_load_points')} redone points")
    for lp in search:
        check(lp.get("verdict") in ("met", "missed", "undecided"), f"verdict {lp.get('verdict')}")
        check(lp["sla_met"] == (lp.get("verdict") == "met"), "sla_met follows the verdict")
        check(lp.get("verdict_confidence") == 0.95, f"confidence {lp.get('verdict_confidence')}")
        check(16 <= lp.get("verdict_requests", 0) <= lp["num_prompts"] <= 1000,
              f"verdict on {lp.get('verdict_requests')} of {lp['num_prompts']} requests (cap 1000)")
        check(lp.get("offered_rate") and 0.5 < lp["offered_rate"] / lp["request_rate"] < 2,
              f"offered {lp.get('offered_rate')} for {lp['request_rate']} req/s")
    # A verdict rests on at least 3 s of traffic: at these rates a clear point stops there, far below the cap.
    check(any(lp["num_prompts"] < 750 for lp in search), "a clear load point stopped early: "
          + ", ".join(f"{lp['request_rate']:.1f}/s: {lp['num_prompts']}" for lp in search))
    check(j.get("search") in ("found", "client_limit") and j.get("max_request_rate", 0) > 0,
          f"search {j.get('search')}: {j.get('search_reason')}")
finally:
    if server and server.poll() is None:
        stop_sim(server)

sys.exit(1 if failures else 0)
