#!/usr/bin/env python3
"""goodput tune end to end, against real goodput-sim processes on loopback.

Usage: test-tune.py CASE GOODPUT GOODPUT_SIM TUNE_ORACLE SRCDIR

Cases:
  search    a small study finishes; the store holds every trial and load
            point; the chosen configuration's virtual-time cost is within 5 %
            of the best of the whole space (tune-oracle evaluates all of it)
  resume    kill -9 of the tuner mid-trial; --resume finishes the study with
            no trial lost or duplicated and no server left behind
  failures  weights that do not fit -> infeasible (oom), a server that hangs
            at start-up -> failed (startup_timeout), one that crashes
            mid-probe -> failed (crashed); each study still finishes
  dry-run   --dry-run finishes in seconds and agrees with the exhaustive
            virtual-time optimum
"""
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

CASE, GOODPUT, SIM, ORACLE, SRCDIR = sys.argv[1:6]
ENGINES = os.path.join(SRCDIR, "engines")
TMP = tempfile.mkdtemp(prefix="goodput-tune-")
ENV = dict(os.environ)
ENV["PATH"] = os.path.dirname(os.path.abspath(SIM)) + os.pathsep + ENV.get("PATH", "")


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def study(name, **over):
    """A light online study on llama-3.1-8b / L40S: ~40 req/s, 32-token replies."""
    s = {
        "name": name,
        "engine": "sim",
        "model": {"name": "llama-3.1-8b"},
        "quantizations": ["none", "fp8", "awq"],
        "gpu": {"type": "L40S", "count": 1, "price_per_gpu_hour": 0.99},
        "search_space": {
            "max_num_seqs": {"min": 16, "max": 128, "scale": "log2"},
            "max_num_batched_tokens": [1024, 2048],
            "quantization": ["fp8", "awq"],
            "max_model_len": [4096],
        },
        "workload": {"dataset": "random", "input_len": 256, "output_len": 32, "range_ratio": 0.25,
                     "num_prompts": 60, "ignore_eos": True, "seed": 7},
        "sla": {"ttft_ms": 500, "tpot_ms": 50, "attainment": 0.9},
        "scenario": "online",
        "budget": {"max_trials": 8},
        "probe": {"tolerance": 0.1, "max_steps": 5, "request_timeout": 30},
        "deploy": {"method": "exec", "startup_timeout": 60, "stop_timeout": 5},
        "search": {"seed": 1},
    }
    for k, v in over.items():
        s[k] = v
    path = os.path.join(TMP, name + ".json")
    with open(path, "w") as f:
        json.dump(s, f)
    return path


def tune(*args, check=True, timeout=540):
    cmd = [GOODPUT, "tune", "--engines-dir", ENGINES, "--log-dir", os.path.join(TMP, "logs")] + list(args)
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    dt = time.monotonic() - t0
    sys.stderr.write(p.stderr[-4000:])
    if check and p.returncode != 0:
        fail("%s exited %d:\n%s\n%s" % (" ".join(cmd), p.returncode, p.stdout, p.stderr[-2000:]))
    return p, dt


def db_rows(db, sql, *args):
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute(sql, args)]
    finally:
        con.close()


def study_row(db, name):
    rows = db_rows(db, "SELECT * FROM studies WHERE name = ?", name)
    if len(rows) != 1:
        fail("study %s: %d rows" % (name, len(rows)))
    return rows[0]


def trials(db, study_id):
    return db_rows(db, "SELECT * FROM trials WHERE study_id = ? ORDER BY seq", study_id)


def load_points(db, trial_id):
    return db_rows(db, "SELECT * FROM load_points WHERE trial_id = ? ORDER BY seq", trial_id)


def oracle(spec, engines=None):
    args = [ORACLE, spec] + ([engines] if engines else [])
    return json.loads(subprocess.check_output(args, env=ENV, text=True))


def pgid_alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def check_store(db, name, want_state="done"):
    st = study_row(db, name)
    if st["state"] != want_state:
        fail("study %s is %s, expected %s (%s)" % (name, st["state"], want_state, st["message"]))
    ts = trials(db, st["id"])
    if not ts:
        fail("no trials stored")
    seqs = [t["seq"] for t in ts]
    if seqs != list(range(1, len(ts) + 1)):
        fail("trial seqs are not 1..n: %s" % seqs)
    keys = [(t["canonical_key"], t["kind"]) for t in ts]
    if len(set(keys)) != len(keys):
        fail("duplicated trials: %s" % keys)
    for t in ts:
        if t["state"] not in ("done", "infeasible", "failed"):
            fail("trial %d left in state %s" % (t["seq"], t["state"]))
        if t["server_pgid"]:
            fail("trial %d still records server pgid %s" % (t["seq"], t["server_pgid"]))
        lps = load_points(db, t["id"])
        if t["state"] == "done":
            if not lps:
                fail("trial %d is done but has no load points" % t["seq"])
            if not (t["cost_per_mtok"] and t["cost_per_mtok"] > 0 and t["max_goodput"] > 0):
                fail("trial %d is done without a cost: %s" % (t["seq"], t))
    return st, ts


def case_search():
    spec = study("search")
    db = os.path.join(TMP, "search.db")
    p, dt = tune(spec, "--db", db, "--json")
    out = json.loads(p.stdout)
    st, ts = check_store(db, "search")
    best = db_rows(db, "SELECT * FROM trials WHERE id = ?", st["best_trial_id"])
    if not best:
        fail("no best trial recorded")
    best = best[0]
    if out["best"]["trial_id"] != best["id"]:
        fail("--json best %s differs from the store's %s" % (out["best"]["trial_id"], best["id"]))
    if "goodput-sim" not in out["best"]["command"]:
        fail("no command line in the summary: %s" % out["best"])
    o = oracle(spec)
    costs = {c["key"]: c.get("cost") for c in o["configs"]}
    chosen = costs.get(best["canonical_key"])
    if chosen is None:
        fail("the chosen %s has no virtual-time cost" % best["canonical_key"])
    ratio = chosen / o["best_cost"]
    print("search: %d trials in %.0f s; chosen %s: $%.4f/Mtok in virtual time, optimum %s $%.4f (x%.3f)"
          % (len(ts), dt, best["canonical_key"], chosen, o["best_key"], o["best_cost"], ratio))
    if ratio > 1.05:
        fail("chosen configuration is %.1f%% worse than the optimum" % ((ratio - 1) * 100))


def case_resume():
    spec = study("resume", budget={"max_trials": 4},
                 search_space={"max_num_seqs": [32, 64], "max_num_batched_tokens": [2048],
                               "quantization": ["fp8", "awq"], "max_model_len": [4096]})
    db = os.path.join(TMP, "resume.db")
    cmd = [GOODPUT, "tune", "--engines-dir", ENGINES, "--log-dir", os.path.join(TMP, "logs"), spec, "--db", db, "-q"]
    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    victim = None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
        try:
            rows = db_rows(db, "SELECT t.* FROM trials t JOIN studies s ON s.id = t.study_id "
                               "WHERE s.name = 'resume' AND t.state = 'probing' AND t.seq >= 2")
        except sqlite3.OperationalError:
            continue
        if rows and rows[0]["server_pgid"]:
            # a load point or two into the trial
            n = len(load_points(db, rows[0]["id"]))
            if n >= 1:
                victim = rows[0]
                break
    if victim is None:
        proc.kill()
        proc.wait()
        fail("never saw a second trial probing")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    pgid = victim["server_pgid"]
    if not pgid_alive(pgid):
        fail("the server of trial %d died with the tuner: no orphan to clean up" % victim["seq"])
    before = trials(db, study_row(db, "resume")["id"])
    p, dt = tune("--resume", "resume", "--db", db)
    if pgid_alive(pgid):
        fail("the orphaned server (pgid %d) is still running after --resume" % pgid)
    st, ts = check_store(db, "resume")
    redone = [t for t in ts if t["id"] == victim["id"]]
    if not redone or redone[0]["state"] not in ("done", "infeasible", "failed"):
        fail("the interrupted trial was not redone: %s" % redone)
    for b in before:
        if b["state"] in ("done", "infeasible", "failed"):
            a = [t for t in ts if t["id"] == b["id"]][0]
            if a["finished_usec"] != b["finished_usec"]:
                fail("finished trial %d was run again" % b["seq"])
    for t in ts:
        if t["server_pgid"] and pgid_alive(t["server_pgid"]):
            fail("server of trial %d left running" % t["seq"])
    print("resume: killed during trial %d (pgid %d); resumed run finished %d trials in %.0f s"
          % (victim["seq"], pgid, len(ts), dt))


def case_failures():
    base_space = {"max_num_seqs": [32], "max_num_batched_tokens": [2048], "quantization": ["fp8"],
                  "max_model_len": [4096]}
    light = {"dataset": "random", "input_len": 256, "output_len": 32, "range_ratio": 0.25,
             "num_prompts": 40, "ignore_eos": True, "seed": 7}
    cases = [
        ("oom", {"gpu_memory_utilization": {"values": [0.9, 0.1], "categorical": True}}, "infeasible", "oom"),
        ("hang", {"startup": ["normal", "hang"]}, "failed", "startup_timeout"),
        ("crash", {"crash": ["never", "early"]}, "failed", "crashed"),
    ]
    for name, extra, want_state, want_failure in cases:
        space = dict(base_space)
        space.update(extra)
        spec = study("fail-" + name, engine="sim-faults", search_space=space, workload=light,
                     budget={"max_trials": 4},
                     deploy={"method": "exec", "startup_timeout": 4, "stop_timeout": 5})
        db = os.path.join(TMP, "fail-%s.db" % name)
        p, dt = tune(spec, "--db", db)
        st, ts = check_store(db, "fail-" + name)
        bad = [t for t in ts if t["failure_class"] == want_failure]
        good = [t for t in ts if t["state"] == "done"]
        if not bad or any(t["state"] != want_state for t in bad):
            fail("%s: no trial recorded as %s/%s: %s" % (name, want_state, want_failure,
                                                          [(t["state"], t["failure_class"]) for t in ts]))
        if not good:
            fail("%s: the search did not go on to a measured trial" % name)
        if not st["best_trial_id"] or st["best_trial_id"] not in [t["id"] for t in good]:
            fail("%s: best trial is not a measured one" % name)
        other = [t for t in ts if t["state"] != "done" and t["failure_class"] != want_failure]
        if other:
            fail("%s: unexpected failures %s" % (name, [(t["state"], t["failure_class"], t["failure_message"]) for t in other]))
        print("failures/%s: %d trials in %.0f s; %s: %s" % (name, len(ts), dt, want_failure,
                                                           (bad[0]["failure_message"] or "")[:100].replace("\n", " ")))


def case_dry_run():
    spec = os.path.join(SRCDIR, "..", "..", "configs", "studies", "demo-sim-llama8b-l40s.json")
    db = os.path.join(TMP, "dry.db")
    p, dt = tune(spec, "--db", db, "--dry-run", "--json", timeout=60)
    out = json.loads(p.stdout)
    st, ts = check_store(db, "demo-sim-llama8b-l40s.dry-run")
    if any(not t["kind"].startswith("dry-run") for t in ts):
        fail("dry-run trials not marked: %s" % [t["kind"] for t in ts])
    best = db_rows(db, "SELECT * FROM trials WHERE id = ?", st["best_trial_id"])[0]
    o = oracle(spec)
    n = len(o["configs"])
    costs = {c["key"]: c.get("cost") for c in o["configs"]}
    ratio = costs[best["canonical_key"]] / o["best_cost"]
    print("dry-run: %d trials over a space of %d in %.2f s; chosen x%.3f of the optimum %s"
          % (len(ts), n, dt, ratio, o["best_key"]))
    if dt > 30:
        fail("dry run took %.1f s" % dt)
    if ratio > 1.05:
        fail("dry run chose a configuration %.1f%% worse than the optimum" % ((ratio - 1) * 100))
    if out["best"]["cost_per_mtok"] <= 0:
        fail("no cost in --json")


{"search": case_search, "resume": case_resume, "failures": case_failures, "dry-run": case_dry_run}[CASE]()
shutil.rmtree(TMP, ignore_errors=True)
print("ok")
