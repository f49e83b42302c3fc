#!/usr/bin/env python3
"""goodput tune through each shipped engine profile, with goodput-sim in the
engine's place: the profile's own argv starts goodput-sim under the engine's
program name (a symlink first on $PATH, python3 for SGLang's module and
TensorRT-LLM's version command), so the exec deployer meets the engine's
flags, its health answers while loading, its /metrics names, its version
output and its out-of-memory words. A study of two configurations per
engine: one serves and is measured (with the profile's metric names read
into the load points), one does not start and is recorded infeasible with
its cause (and vLLM's suggested max_model_len). All servers take their GPU
in one ledger, as the sims of one host do.

Each engine also runs a newcomer's study (a plain two-knob space, the
baseline of the engine's defaults on by default) to its answer.

llama.cpp also runs an online study end to end, as a user with a real
llama-server would: engine_binary names the program (not on $PATH: the
version command uses it too), engine_args add fixed flags (the sim's own
load time, so that /health answers 503 "Loading model" for a while); every
trial waits out the loading, serves, is measured by the rate search with
sequential verdicts, reads llama.cpp's metric names, records the parsed
version and the exact launch command, and the next trial starts within 5 s
of the last one's end (teardown does not wait for the old port).

Usage: test-tune-dialects.py DIALECT GOODPUT GOODPUT_SIM SOURCE_ROOT"""

import glob
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile

DIALECT, GOODPUT, SIM, SRC = sys.argv[1:5]
TMP = tempfile.mkdtemp(prefix="goodput-tune-%s-" % DIALECT)
BIN = os.path.join(TMP, "bin")
LEDGER = os.path.join(TMP, "ledger")
ENV = dict(os.environ, GOODPUT_SIM_GPU_LEDGER=LEDGER)
ENV["PATH"] = BIN + os.pathsep + ENV.get("PATH", "")

# What each engine's study searches: the first configuration serves, the second does not start.
STUDIES = {
    "vllm": ("llama-3.1-8b", {"max_num_seqs": [32], "max_num_batched_tokens": [2048], "gpu_memory_utilization": [0.3],
                              "max_model_len": [4096, 131072]},
             "the KV cache for max_model_len does not fit; the engine suggests max_model_len "),
    "sglang": ("llama-3.1-8b", {"max_num_seqs": [32], "max_num_batched_tokens": [2048], "max_model_len": [4096],
                                "gpu_memory_utilization": [0.85, 0.15]},
               "no memory left for cache blocks or activations"),
    "tgi": ("llama-3.1-8b", {"max_num_seqs": [32], "max_num_batched_tokens": [4096], "max_model_len": [4096],
                             "gpu_memory_utilization": [0.9, 0.15]},
            "no memory left for cache blocks or activations"),
    "llamacpp": (os.path.join(TMP, "models", "llama-3.1-8b-Q8_0.gguf"), {"max_num_seqs": [8], "max_num_batched_tokens": [512],
                                                    "max_model_len": [4096, 131072]},
                 "the KV cache for max_model_len does not fit"),
    "trtllm": ("llama-3.1-8b", {"max_num_seqs": [32], "max_num_batched_tokens": [2048], "max_model_len": [4096]},
               None),
}
VERSIONS = {"vllm": "0.10.1.1", "llamacpp": "4748 (c392e5094)", "sglang": "0.4.6.post1", "tgi": "3.3.4",
            "trtllm": "1.0.0"}


def fail(msg):
    print("FAIL: %s: %s" % (DIALECT, msg), flush=True)
    sys.exit(1)


def study(name, model, space):
    s = {
        "name": name,
        "engine": DIALECT,
        "model": {"name": model},
        "gpu": {"type": "H100", "count": 1, "price_per_gpu_hour": 2.0},
        "search_space": space,
        "workload": {"dataset": "random", "input_len": 64, "output_len": 48, "num_prompts": 120, "ignore_eos": True,
                     "seed": 3},
        "scenario": "offline",
        "budget": {"max_trials": 4},
        "probe": {"max_steps": 2, "request_timeout": 60},
        "deploy": {"method": "exec", "startup_timeout": 60, "stop_timeout": 5},
        # The configurations above and nothing else: no baseline of the engine's defaults, and the one that
        # does not fit is deployed (no memory pre-flight, and the plain search: the model search knows the
        # engine would refuse it and never deploys it) so that the engine says why in its own words.
        "baseline": False,
        "search": {"preflight": False, "strategy": "plain"},
    }
    path = os.path.join(TMP, name + ".json")
    with open(path, "w") as f:
        json.dump(s, f)
    return path


def tune(spec, db, expect=0):
    cmd = [GOODPUT, "tune", "--engines-dir", os.path.join(SRC, "configs", "engines"), "--log-dir",
           os.path.join(TMP, "logs"), "--db", db, "--confirm", "0", spec]
    p = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=600)
    sys.stderr.write(p.stderr[-3000:])
    if p.returncode != expect:
        fail("%s exited %d, not %d:\n%s" % (" ".join(cmd), p.returncode, expect, p.stderr[-2000:]))


def rows(db, sql, *args):
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute(sql, args)]
    finally:
        con.close()


def trials(db, name):
    return rows(db, "SELECT t.* FROM trials t JOIN studies s ON s.id = t.study_id WHERE s.name = ? ORDER BY t.seq",
                name)


def check_served(db, t):
    host = json.loads(t["host_json"] or "{}")
    if host.get("engine_version") != VERSIONS[DIALECT]:
        fail("trial %d: engine version %r, expected %r" % (t["seq"], host.get("engine_version"), VERSIONS[DIALECT]))
    points = rows(db, "SELECT * FROM load_points WHERE trial_id = ? ORDER BY seq", t["id"])
    if not points or not any(p["completed"] for p in points):
        fail("trial %d: no load point completed requests" % t["seq"])
    if DIALECT == "trtllm":
        return  # its /metrics is empty without enable_iter_perf_stats, which the profile does not set
    # The profile's metric names were read: the server's running batch and KV usage were seen.
    if not any((p["running_peak"] or 0) > 0 for p in points):
        fail("trial %d: no running requests read from /metrics: %r" % (t["seq"], [p["running_peak"] for p in points]))
    if not any((p["kv_usage_peak"] or 0) > 0 for p in points):
        fail("trial %d: no KV usage read from /metrics" % t["seq"])


def online_llamacpp(db):
    """The gated test's online study (tests/runner/test-llamacpp.sh) with goodput-sim as llama-server: a CPU host,
    the shipped profile, a plain two-knob space, the baseline of llama.cpp's defaults, one thread, long prompts and
    short answers, a TTFT bound a few service times wide and a TPOT bound that a slot's decode holds alone but not
    beside another slot's prefill (llama.cpp puts a prompt's chunk in the same step as the other slots' decode),
    points capped in time.

    As with the real server: the baseline deploys 1 slot and -b 2048 without --n-gpu-layers; the rate search runs
    (points miss the SLA, trials measure several rates); --parallel 2 misses on its TPOT tail; a point still
    undecided at its cap carries its cap and 90 % interval and the progress output says "at the cap"; no point runs
    past its cap; the answer lists the defaults it leaves unset as flags; no trial waits for the one before it to
    let go of its port."""
    prog = os.path.join(TMP, "opt", "llama.cpp", "bin", "llama-server")
    os.makedirs(os.path.dirname(prog))
    os.symlink(os.path.abspath(SIM), prog)
    s = json.load(open(study("llamacpp-online", os.path.join(TMP, "models", "llama-3.1-8b-Q8_0.gguf"),
                             {"max_num_seqs": [1, 2], "max_num_batched_tokens": [512, 2048]})))
    del s["baseline"], s["search"]
    # the sim's one slot: a 2048-token prompt and 8 tokens in ~75 ms, a decode step ~4.5 ms alone and ~10 ms
    # beside another slot's prompt
    s.update({"scenario": "online", "sla": {"ttft_ms": 150, "tpot_ms": 8, "attainment": 0.9},
              "gpu": {"type": "cpu", "cores": 2, "price_per_core_hour": 0.02},
              "model": {"name": s["model"]["name"], "max_model_len": 2304},
              "workload": {"dataset": "random", "input_len": 2048, "output_len": 8, "num_prompts": 40,
                           "ignore_eos": True, "seed": 3},
              "budget": {"max_trials": 3, "max_wall_time": "10m", "min_configurations": 3},
              "probe": {"max_steps": 4, "tolerance": 0.1, "request_timeout": 60, "max_point_seconds": 3},
              "engine_binary": prog, "engine_args": ["--threads", "1", "--load-time", "1.5"]})
    spec = os.path.join(TMP, "llamacpp-online.json")
    with open(spec, "w") as f:
        json.dump(s, f)
    cmd = [GOODPUT, "tune", "--engines-dir", os.path.join(SRC, "configs", "engines"), "--log-dir",
           os.path.join(TMP, "logs"), "--db", db, "--confirm", "0", "--json", spec]
    proc = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=600)
    sys.stderr.write(proc.stderr[-3000:])
    if proc.returncode not in (0, 3):
        fail("online study exited %d: %s" % (proc.returncode, proc.stderr[-2000:]))
    capped, missed, multi, tpot_missed, tpot_held = [], 0, 0, 0, 0
    ts = trials(db, "llamacpp-online")
    if len(ts) < 2 or any(t["state"] not in ("done", "infeasible") for t in ts):
        fail("online: %r" % [(t["state"], t["failure_message"]) for t in ts])
    base = [t for t in ts if t["kind"] == "baseline"]
    if not base or json.loads(base[0]["knobs"]) != {"max_num_seqs": 1, "max_num_batched_tokens": 2048,
                                                    "max_model_len": 2304}:
        fail("online: the baseline is not llama.cpp's defaults: %r" % [(t["kind"], t["knobs"]) for t in ts])
    for t in ts:
        check_served(db, t)
        launch = json.loads(t["launch"])
        if launch["argv"][0] != prog or launch["argv"][-4:] != ["--threads", "1", "--load-time", "1.5"]:
            fail("trial %d launched as %r" % (t["seq"], launch["argv"]))
        if "--n-gpu-layers" in launch["argv"]:
            fail("trial %d: a CPU study's server got --n-gpu-layers: %r" % (t["seq"], launch["argv"]))
        if not (t["deploy_seconds"] and t["deploy_seconds"] >= 1.4):
            fail("trial %d ready after %r s: the 503s while loading were not waited out" % (t["seq"],
                                                                                          t["deploy_seconds"]))
        if "sweep" in t["kind"]:
            # the answer's load-step sweep: 8 points judged afterwards, no verdict
            sweep = rows(db, "SELECT phase FROM load_points WHERE trial_id = ?", t["id"])
            if [p["phase"] for p in sweep] != ["sweep"] * 8:
                fail("sweep %d: load points %s" % (t["seq"], [p["phase"] for p in sweep]))
            continue
        points = [json.loads(p["result"]) for p in
                  rows(db, "SELECT result FROM load_points WHERE trial_id = ? AND phase = 'search'", t["id"])]
        if not points or any(p.get("verdict") not in ("met", "missed", "undecided") for p in points):
            fail("trial %d: search load points without a sequential verdict" % t["seq"])
        multi += len(points) >= 2
        parallel = json.loads(t["knobs"])["max_num_seqs"]
        # every point of the search ended by its cap of 3 s (what was still out then was cut); 2 s: the loop's
        # timers on a loaded machine
        for p in points:
            if p["duration"] > 3 + 2:
                fail("trial %d: a load point ran %.1f s, past its cap of 3 s" % (t["seq"], p["duration"]))
            if p["verdict"] == "undecided" and (p.get("cap") not in ("seconds", "requests")
                                                or len(p.get("attainment_ci") or []) != 2):
                fail("trial %d: undecided at the cap without its cap and interval: %r" % (t["seq"], p))
            missed += not p["sla_met"]
            # a slot decoding beside another's prompt: the TPOT tail past the bound
            tpot_missed += parallel == 2 and not p["sla_met"] and p["p90_tpot_ms"] > 8
            tpot_held += parallel == 1 and p["p90_tpot_ms"] <= 8
        capped.extend(p for p in points if p.get("cap"))
    if not capped:
        fail("online: no load point reached its time cap: the verdict at the cap went untested")
    if not any(p["verdict"] == "undecided" for p in capped):
        fail("online: no point undecided at its cap: the verdict from what was measured went untested")
    if not re.search(r"load point [0-9]+[^:]*: [0-9.]+ req/s.* good; (met|missed) at the cap: [0-9.]+ %, 90 % CI",
                     proc.stderr):
        fail("online: the progress output does not say which points were judged at their cap")
    if not missed or not multi:
        fail("online: %d points missed, %d trials measured several rates: the rate search did not run" %
             (missed, multi))
    if 2 in [json.loads(t["knobs"])["max_num_seqs"] for t in ts] and not tpot_missed:
        fail("online: no --parallel 2 point missed on its TPOT tail")
    if not tpot_held:
        fail("online: one slot never held its TPOT within 8 ms: nothing interleaves with its decode")
    if proc.returncode == 0:
        best = json.loads(proc.stdout)["best"]
        if "--ubatch-size 512" not in best.get("engine_defaults", ""):
            fail("online: the answer lacks llama.cpp's defaults as flags: %r" % best)
        if "--parallel" not in best["command"] or "--n-gpu-layers" in best["command"]:
            fail("online: the answer's command %r" % best["command"])
    gaps = [(b["started_usec"] - a["finished_usec"]) / 1e6 for a, b in zip(ts, ts[1:])]
    if max(gaps) >= 5:
        fail("gaps between trials %r s: the teardown waited" % gaps)
    print("llamacpp online: %d trials, ready after %s s, gaps between trials %s s; %d points missed (%d of "
          "--parallel 2 on its TPOT tail), %d at their cap, e.g. %s"
          % (len(ts), ", ".join("%.1f" % t["deploy_seconds"] for t in ts), ", ".join("%.2f" % g for g in gaps),
             missed, tpot_missed, len(capped), "%s at %.3g req/s: %.1f %%, 90 %% CI %.0f-%.0f %%" % (
                 capped[0]["cap"], capped[0]["request_rate"], capped[0]["attainment"] * 100,
                 capped[0]["attainment_ci"][0] * 100, capped[0]["attainment_ci"][1] * 100)))


def newcomer(db):
    """A newcomer's study, as the README shows it: the shipped profile, a plain space of the two batch knobs, the
    baseline on by default. The baseline deploys the engine's defaults (the profile's; none named: no flag at all),
    and the answer lists the defaults of the knobs it does not set as flags."""
    model = os.path.join(TMP, "models", "llama-3.1-8b-Q8_0.gguf") if DIALECT == "llamacpp" else "llama-3.1-8b"
    chunk = [4096, 8192] if DIALECT == "tgi" else [512, 2048]
    s = json.load(open(study("newcomer-" + DIALECT, model, {"max_num_seqs": [2, 4], "max_num_batched_tokens": chunk})))
    del s["baseline"], s["search"]
    s["budget"] = {"max_trials": 2}
    s["workload"]["num_prompts"] = 24
    spec = os.path.join(TMP, "newcomer.json")
    with open(spec, "w") as f:
        json.dump(s, f)
    cmd = [GOODPUT, "tune", "--engines-dir", os.path.join(SRC, "configs", "engines"), "--log-dir",
           os.path.join(TMP, "logs"), "--db", db, "--confirm", "0", "--json", spec]
    # llama.cpp built from a source tarball says "version: 0 (unknown)": the binary names it instead
    env = dict(ENV, GOODPUT_SIM_LLAMACPP_NO_GIT="1") if DIALECT == "llamacpp" else ENV
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        fail("newcomer study exited %d: %s" % (p.returncode, p.stderr[-2000:]))
    out = json.loads(p.stdout)
    ts = trials(db, "newcomer-" + DIALECT)
    base = [t for t in ts if t["kind"] == "baseline"]
    if len(base) != 1 or base[0]["state"] != "done":
        fail("newcomer: no measured baseline: %r" % [(t["kind"], t["state"], t["failure_message"]) for t in ts])
    knobs = json.loads(base[0]["knobs"])
    want = {"vllm": {"max_num_seqs": 1024, "max_num_batched_tokens": 8192},
            "llamacpp": {"max_num_seqs": 1, "max_num_batched_tokens": 2048},
            "trtllm": {"max_num_seqs": 2048, "max_num_batched_tokens": 8192}}.get(DIALECT, {})
    if any(knobs.get(k) != v for k, v in want.items()):
        fail("newcomer: the baseline deployed %r, not the engine's defaults %r" % (knobs, want))
    if DIALECT == "llamacpp" and "--ubatch-size 512" not in out["best"].get("engine_defaults", ""):
        fail("newcomer: the answer does not show llama.cpp's defaults as flags: %r" % out["best"])
    version = json.loads(base[0]["host_json"] or "{}").get("engine_version") or ""
    if DIALECT == "llamacpp" and not re.match(r"^0 \(unknown; llama-server of [0-9]+ bytes built 20[0-9-]+ [0-9:]+ UTC\)$",
                                              version):
        fail("newcomer: a build without git recorded as %r" % version)
    print("newcomer %s: baseline %s, answer %s, engine defaults %r" % (DIALECT, knobs, out["best"]["knobs"],
                                                                        out["best"].get("engine_defaults")))


def main():
    os.makedirs(BIN)
    # a server on this host must find its checkpoint: llama.cpp's is a file
    os.makedirs(os.path.join(TMP, "models"))
    open(os.path.join(TMP, "models", "llama-3.1-8b-Q8_0.gguf"), "w").close()
    for name in ["vllm", "llama-server", "text-generation-launcher", "trtllm-serve", "python3"]:
        os.symlink(os.path.abspath(SIM), os.path.join(BIN, name))
    db = os.path.join(TMP, "goodput.db")
    model, space, cause = STUDIES[DIALECT]
    tune(study(DIALECT, model, space), db)
    ts = trials(db, DIALECT)
    served = [t for t in ts if t["state"] == "done"]
    if not served:
        fail("no trial served: %r" % [(t["state"], t["failure_message"]) for t in ts])
    for t in served:
        check_served(db, t)
    if cause:
        oom = [t for t in ts if t["state"] == "infeasible"]
        if len(oom) != 1 or cause not in (oom[0]["failure_message"] or ""):
            fail("expected one infeasible trial saying %r: %r" % (cause, [(t["state"], t["failure_message"]) for t in ts]))
        print("%s: %s" % (DIALECT, oom[0]["failure_message"].splitlines()[0]))
    else:
        # TensorRT-LLM serves a shorter context instead of refusing: its failure here is the weights, and
        # with nothing else to try the study ends with no feasible configuration (exit 3).
        tune(study("trtllm-70b", "llama-3.1-70b", space), db, expect=3)
        ts = trials(db, "trtllm-70b")
        if [t["state"] for t in ts] != ["infeasible"] or \
                "out of memory: the weights do not fit" not in (ts[0]["failure_message"] or ""):
            fail("70B on one H100: %r" % [(t["state"], t["failure_message"]) for t in ts])
    # Every server took its GPU in the ledger and let it go.
    if not os.path.exists(os.path.join(LEDGER, "gpu0.lock")):
        fail("no server took GPU 0 in the ledger %s: %r" % (LEDGER, os.listdir(LEDGER) if os.path.isdir(LEDGER)
                                                               else None))
    newcomer(db)
    if DIALECT == "llamacpp":
        online_llamacpp(db)
        logs = "".join(open(f, errors="replace").read() for f in glob.glob(os.path.join(TMP, "logs", "**", "*"),
                                                                          recursive=True) if os.path.isfile(f))
        if "--ctx-size 32768" not in logs:
            fail("no --ctx-size 32768 (8 slots x 4096) in the server logs")
    print("ok: %s, %d trials" % (DIALECT, len(ts)))
    shutil.rmtree(TMP, ignore_errors=True)


if __name__ == "__main__":
    main()
