#!/usr/bin/env python3
"""bench-parallel.py — the time to a trusted answer, one trial at a time
against trials side by side, on the virtual clock of a dry run with the
start-up model on (weights read at 2 GB/s, engine init, graph capture).

For each study spec and strategy (the model search — the default —, the
plain search, the twin) the study runs twice with `goodput tune --dry-run --startup-model`: --parallel 1 and
--parallel auto. The store's trials (with their virtual start and end times)
give the timeline; tune-oracle gives every configuration's cost in virtual
time, so the optimum is known. The figures:

  time to a confirmed answer within 2 % — the first moment (a trial's end)
      at which the study's answer so far (the configuration with the lowest
      mean measured cost, as store_study_best chooses before the study ends)
      has been measured at least twice and its true cost is within 2 % of
      the optimum ("never" when that does not happen);
  time to the study's answer — from the first trial's start to the end of
      the final answer's last measurement (what `goodput tune` prints);
  the answer's true cost against the optimum.

Usage: bench-parallel.py GOODPUT TUNE_ORACLE SPEC.json... [--strategies model,plain,twin]
                         [--max-trials N] [--engines-dir DIR] [--check-speedup SPEC=X ...]
Prints a Markdown table; exits 1 when a --check-speedup bound (on the time to
the study's answer, what `goodput tune` prints) is missed or a side-by-side
answer is more than 1 % dearer than the one-at-a-time one."""
import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile


def run_study(goodput, spec, db, parallel, max_trials, engines_dir):
    cmd = [goodput, "tune", "--dry-run", "--startup-model", "-q", "--json", "--db", db, "--parallel", parallel]
    if engines_dir:
        cmd += ["--engines-dir", engines_dir]
    if max_trials:
        cmd += ["--max-trials", str(max_trials)]
    cmd.append(spec)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=3600)
    if p.returncode != 0:
        sys.exit("%s failed (%d):\n%s" % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
    return json.loads(p.stdout)


def timeline(db):
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    rows = con.execute("SELECT seq, kind, canonical_key, state, cost_per_mtok, started_usec, finished_usec, gpus"
                       " FROM trials ORDER BY seq").fetchall()
    con.close()
    return [dict(r) for r in rows]


def figures(trials, truth, optimum):
    start = min(t["started_usec"] for t in trials if t["started_usec"])
    done = sorted((t for t in trials if t["finished_usec"]), key=lambda t: (t["finished_usec"], t["seq"]))
    meas = {}
    tta2 = None
    for t in done:
        if t["state"] == "done" and t["cost_per_mtok"] and t["cost_per_mtok"] > 0:
            meas.setdefault(t["canonical_key"], []).append(t["cost_per_mtok"])
        if not meas:
            continue
        # the answer so far: the lowest mean, ties to the one measured first
        key = min(meas, key=lambda k: sum(meas[k]) / len(meas[k]))
        if tta2 is None and len(meas[key]) >= 2 and truth.get(key, float("inf")) <= optimum * 1.02:
            tta2 = (t["finished_usec"] - start) / 1e6
    end = max(t["finished_usec"] for t in done)
    gpu_seconds = 0.0
    for t in done:
        n = len(t["gpus"].split(",")) if t["gpus"] else 1
        gpu_seconds += n * (t["finished_usec"] - t["started_usec"]) / 1e6
    return tta2, (end - start) / 1e6, gpu_seconds


def hms(s):
    if s is None:
        return "never"
    s = int(round(s))
    return "%d h %02d min" % (s // 3600, s // 60 % 60) if s >= 3600 else "%d min %02d s" % (s // 60, s % 60)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("goodput")
    ap.add_argument("oracle")
    ap.add_argument("specs", nargs="+")
    ap.add_argument("--strategies", default="model,plain")
    ap.add_argument("--max-trials", type=int, default=0)
    ap.add_argument("--engines-dir", help="engine profiles (default: goodput's)")
    ap.add_argument("--check-speedup", action="append", default=[],
                    help="NAME=X: the parallel study of spec NAME (file name without .json) reaches its answer "
                         "(the time `goodput tune` prints) at least X times sooner, for every strategy")
    a = ap.parse_args()
    checks = {}
    for c in a.check_speedup:
        name, x = c.split("=")
        checks[name] = float(x)
    failed = []
    print("| study | strategy | trials (serial / side by side) | to a confirmed answer within 2 % (serial → side by side) | to the study's answer | speed-up | answer vs optimum (serial / side by side) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory(prefix="bench-parallel-") as tmp:
        for spec in a.specs:
            name = os.path.basename(spec)[:-5] if spec.endswith(".json") else os.path.basename(spec)
            oracle = json.loads(subprocess.run([a.oracle, spec] + ([a.engines_dir] if a.engines_dir else []), stdout=subprocess.PIPE, check=True, text=True,
                                               stderr=subprocess.DEVNULL).stdout)
            truth = {c["key"]: c["cost"] for c in oracle["configs"] if "cost" in c}
            optimum = oracle["best_cost"]
            base = json.load(open(spec))
            for strategy in a.strategies.split(","):
                spec_s = spec
                if strategy != "model":
                    base_t = dict(base, name=base["name"] + "-" + strategy, search={"strategy": strategy})
                    spec_s = os.path.join(tmp, name + "-" + strategy + ".json")
                    json.dump(base_t, open(spec_s, "w"))
                res = {}
                for par in ("1", "auto"):
                    db = os.path.join(tmp, "%s-%s-%s.db" % (name, strategy, par))
                    summary = run_study(a.goodput, spec_s, db, par, a.max_trials, a.engines_dir)
                    trials = timeline(db)
                    tta2, total, gpu_s = figures(trials, truth, optimum)
                    key = summary["best"]["knobs"] if "best" in summary else None
                    answer_key = None
                    con = sqlite3.connect(db)
                    row = con.execute("SELECT t.canonical_key FROM studies s JOIN trials t ON t.id = s.best_trial_id").fetchone()
                    con.close()
                    answer_key = row[0] if row else None
                    res[par] = dict(trials=len(trials), tta2=tta2, total=summary["best"].get("time_to_answer_seconds") if key else None,
                                    regret=truth.get(answer_key, float("inf")) / optimum - 1)
                s, p = res["1"], res["auto"]
                speed = s["total"] / p["total"] if s["total"] and p["total"] else None
                print("| %s | %s | %d / %d | %s → %s | %s → %s | %s | %+.1f %% / %+.1f %% |" % (
                    name, strategy, s["trials"], p["trials"], hms(s["tta2"]), hms(p["tta2"]),
                    hms(s["total"]), hms(p["total"]), "%.1f×" % speed if speed else "—",
                    s["regret"] * 100, p["regret"] * 100))
                sys.stdout.flush()
                if name in checks and (speed is None or speed < checks[name]):
                    failed.append("%s/%s: speed-up %s, wanted %.1f×" % (name, strategy, speed, checks[name]))
                if (1 + p["regret"]) > (1 + s["regret"]) * 1.01:
                    failed.append("%s/%s: side by side answered %.1f %% dearer than one at a time" %
                                  (name, strategy, ((1 + p["regret"]) / (1 + s["regret"]) - 1) * 100))
    if failed:
        sys.exit("\n".join(failed))


if __name__ == "__main__":
    main()
