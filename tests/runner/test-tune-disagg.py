#!/usr/bin/env python3
"""goodput tune with deploy.shape "both": aggregated or disaggregated, and how.

Usage: test-tune-disagg.py CASE GOODPUT GOODPUT_SIM TUNE_ORACLE SRCDIR [GOODPUTD]

Cases:
  dry-run   in virtual time on an emulated 8xH100 host, Llama-3.1-70B FP8: a
            long-prompt workload (4,000 in / 200 out) under a tight TPOT
            (20 ms) picks a disaggregated shape, a short-prompt chat workload
            (256 / 256) under a loose SLA picks aggregated; each answer is
            the exhaustive grid's best shape within 5 % of its cost (the
            oracle evaluates every configuration as the dry run does), and
            the gain per GPU lies in DistServe's range (disaggregation
            against chunked prefill 1.6-1.8x, against vLLM without it
            4.3x; the aggregated engine ahead where latency binds little)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

CASE, GOODPUT, SIM, ORACLE, SRCDIR = sys.argv[1:6]
GOODPUTD = sys.argv[6] if len(sys.argv) > 6 else None
ENGINES = os.path.join(SRCDIR, "..", "..", "configs", "engines")
TMP = tempfile.mkdtemp(prefix="goodput-pd-")
ENV = dict(os.environ, GOODPUT_ENGINES_DIR=os.path.abspath(ENGINES))


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def write_spec(name, spec):
    path = os.path.join(TMP, name + ".json")
    with open(path, "w") as f:
        json.dump(spec, f)
    return path


def study_8xh100(name, workload, sla):
    """Llama-3.1-70B FP8 on 8 H100s, both shapes: one server of TP 2 or 4 with
    1, 2 or 4 replicas and chunks of 256 to 8192 tokens; or 1-3 prefill
    workers of TP 2 or 4 and 1-2 decode workers of TP 2 or 4."""
    return {
        "name": name,
        "engine": "sim",
        "model": {"name": "llama-3.1-70b"},
        "quantizations": ["fp8"],
        "gpu": {"type": "H100", "count": 8, "price_per_gpu_hour": 3.0},
        "search_space": {
            "tensor_parallel": [2, 4],
            "data_parallel": [1, 2, 4],
            "max_num_batched_tokens": {"min": 256, "max": 8192, "scale": "log2"},
            "max_num_seqs": [256],
            "prefill_workers": [1, 2, 3],
            "prefill_tensor_parallel": [2, 4],
            "decode_workers": [1, 2],
            "decode_tensor_parallel": [2, 4],
            "prefill_max_num_batched_tokens": [8192],
            "decode_max_num_seqs": [256],
        },
        "workload": dict(workload, dataset="random", ignore_eos=True, seed=1),
        "sla": sla,
        "budget": {"max_trials": 40},
        "probe": {"tolerance": 0.03},
        "deploy": {"shape": "both"},
    }


def tune_dry(spec_path, db):
    p = subprocess.run([GOODPUT, "tune", "--dry-run", "--json", "-q", "--no-report", "--db", db, spec_path],
                       capture_output=True, text=True, env=ENV, timeout=600)
    check(p.returncode == 0, "tune failed (%d): %s" % (p.returncode, p.stderr[-2000:]))
    return json.loads(p.stdout)


def oracle(spec_path):
    p = subprocess.run([ORACLE, spec_path, ENGINES], capture_output=True, text=True, env=ENV, timeout=600)
    check(p.returncode == 0, "tune-oracle failed: %s" % p.stderr)
    return json.loads(p.stdout)


def shape_of_key(key):
    return "disaggregated" if "shape=disaggregated" in key else "aggregated"


def best_of_shape(grid, shape):
    costs = [c["cost"] for c in grid["configs"] if c.get("cost") and c["cost"] > 0 and
             shape_of_key(c["key"]) == shape]
    return min(costs) if costs else None


def one(name, workload, sla, want):
    spec = write_spec(name, study_8xh100(name, workload, sla))
    out = tune_dry(spec, os.path.join(TMP, name + ".db"))
    grid = oracle(spec)
    best = out["best"]
    check(best["knobs"]["shape"] == want, "%s: the answer is %s: %s" % (name, best["knobs"]["shape"], best))
    check(shape_of_key(grid["best_key"]) == want, "%s: the grid's best is %s" % (name, grid["best_key"]))
    check(best["cost_per_mtok"] <= grid["best_cost"] * 1.05,
          "%s: the answer costs $%.4f/Mtok, the grid's best $%.4f" % (name, best["cost_per_mtok"],
                                                                       grid["best_cost"]))
    other = "aggregated" if want == "disaggregated" else "disaggregated"
    gain = best_of_shape(grid, other) / best_of_shape(grid, want)
    # the answer says which shape won, by how much, with the other's best beside it
    sh = best.get("shape")
    check(sh and sh["winner"] == want and sh["other"] == other and sh.get("other_best"),
          "%s: no shape comparison in the answer: %s" % (name, best))
    check(abs(sh["gain"] - sh["other_cost_per_mtok"] / sh["cost_per_mtok"]) < 1e-9, sh)
    print("%s: %s wins, %.2fx per GPU in the grid (%.2fx in the answer); $%.4f vs $%.4f/Mtok"
          % (name, want, gain, sh["gain"], grid["best_cost"], best_of_shape(grid, other)))
    return gain, sh["gain"]


def case_dry_run():
    gain, answer_gain = one("pd-long", {"input_len": 4000, "output_len": 200, "num_prompts": 120},
                            {"ttft_ms": 3000, "tpot_ms": 20, "attainment": 0.9}, "disaggregated")
    # DistServe (OSDI '24) sec. 6.2: long prompts, tight TPOT: 1.8x chunked prefill, 4.3x vLLM
    check(1.2 <= gain <= 4.3, "long prompts: disaggregation gains %.2fx per GPU" % gain)
    check(answer_gain >= 1.2, "the answer's comparison: %.2fx" % answer_gain)
    gain, _ = one("pd-chat", {"input_len": 256, "output_len": 256, "num_prompts": 240},
                  {"ttft_ms": 2000, "tpot_ms": 100, "attainment": 0.9}, "aggregated")
    # sec. 7: where latency binds little, chunked prefill keeps every GPU busy
    check(gain >= 1.1, "short chat: aggregated gains only %.2fx per GPU" % gain)


CASES = {"dry-run": case_dry_run}


def main():
    try:
        CASES[CASE]()
    except AssertionError as e:
        print("FAIL: %s: %s" % (CASE, e), file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    print("ok: %s" % CASE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
