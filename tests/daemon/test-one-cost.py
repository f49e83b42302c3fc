#!/usr/bin/env python3
"""One cost shown everywhere. A small dry-run study whose best is re-probed
(goodput tune --confirm 2), then the study's cost as goodput tune --json and
its summary, goodput report (JSON, Markdown, terminal), and goodputd's list
and best (JSON and text, by name and by model + engine) print it: the mean
of every measurement of the chosen configuration, with their count — what
the store holds, read back with sqlite3. A second study run by goodputd
itself (dry run) writes best files whose cost is that study's same figure.

Usage: test-one-cost.py GOODPUTD GOODPUT DEMO-SPEC.json"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemonlib import Daemon, TestFailure, check  # noqa: E402

goodputd, goodput, demo = sys.argv[1], sys.argv[2], sys.argv[3]


def run(*args):
    p = subprocess.run([goodput, *args], capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, "goodput %s: exit %d\n%s\n%s" % (" ".join(args), p.returncode, p.stdout, p.stderr))
    return p.stdout


def stored_cost(db, study):
    """The chosen configuration's measurements as the store holds them."""
    con = sqlite3.connect(db)
    try:
        costs = [r[0] for r in con.execute(
            "SELECT t.cost_per_mtok FROM trials t JOIN studies s ON s.id = t.study_id"
            " WHERE s.name = ? AND t.state = 'done' AND t.cost_per_mtok > 0 AND t.canonical_key ="
            " (SELECT canonical_key FROM trials WHERE id = s.best_trial_id) ORDER BY t.seq", (study,))]
    finally:
        con.close()
    check(costs, "study %s: no measurement of its chosen configuration" % study)
    return sum(costs) / len(costs), len(costs), min(costs)


def same(a, b, what):
    check(abs(a - b) <= 1e-12 * b, "%s: %r, the study's cost is %r" % (what, a, b))


def check_tune_and_report(db, out_dir, spec):
    out = json.loads(run("tune", "--db", db, "--dry-run", "--json", "--confirm", "2", "-q", spec))
    name = out["study"]
    mean, n, lowest = stored_cost(db, name)
    # the figure only means something when the best was measured more than once
    check(n >= 2 and lowest < mean, "the best was measured %d times: nothing to average" % n)
    money = "$%.4f" % mean

    same(out["best"]["cost_per_mtok"], mean, "tune --json")
    check(out["best"]["measurements"] == n, "tune --json: %s measurements, %d stored" % (out["best"], n))
    text = run("tune", "--resume", name, "--db", db, "--dry-run")
    check("cost:            %s per million tokens (mean of %d measurements" % (money, n) in text,
          "tune's summary lacks %s over %d:\n%s" % (money, n, text))

    rj = json.loads(run("report", "--db", db, name, "--out", out_dir, "--json"))
    same(rj["best"]["cost_per_mtok"], mean, "report --json")
    check(rj["best"]["measurements"] == n, "report --json: %s" % rj["best"])
    with open(rj["markdown"], encoding="utf-8") as f:
        md = f.read()
    check("%s per million tokens, the mean of %d measurements" % (money, n) in md,
          "the report's Markdown lacks %s over %d" % (money, n))
    text = run("report", "--db", db, name, "--out", out_dir)
    check("cost: %s/Mtok, the mean of %d measurements" % (money, n) in text,
          "report's summary lacks %s:\n%s" % (money, text))
    return name, mean, n


def check_daemon(d, name, mean, n):
    money = "$%.4f" % mean
    studies = {s["name"]: s for s in json.loads(d.client("list", "--json", check_rc=0).stdout)["studies"]}
    same(studies[name]["best_cost_per_mtok"], mean, "list --json")
    check(studies[name]["best_measurements"] == n, "list --json: %s" % studies[name])
    text = d.client("list", check_rc=0).stdout
    check(money in text, "goodput list lacks %s:\n%s" % (money, text))

    b = json.loads(d.client("best", name, "--json", check_rc=0).stdout)
    same(b["best"]["cost_per_mtok"], mean, "best --json")
    same(b["study"]["best_cost_per_mtok"], mean, "best --json (study)")
    check(b["best"]["measurements"] == n, "best --json: %s" % b["best"])
    text = d.client("best", name, check_rc=0).stdout
    check("cost:     %s/Mtok (mean of %d measurements" % (money, n) in text,
          "goodput best lacks %s over %d:\n%s" % (money, n, text))
    return b


def main():
    tmp = tempfile.mkdtemp(prefix="test-one-cost-")
    d = None
    try:
        with open(demo) as f:
            spec = json.load(f)
        spec["name"] = "one-cost"
        spec["budget"]["max_trials"] = 8
        path = os.path.join(tmp, "one-cost.json")
        with open(path, "w") as f:
            json.dump(spec, f)

        d = Daemon(goodputd, goodput, tmp, args=["--dry-run"])
        os.makedirs(d.state)
        db = os.path.join(d.state, "goodput.db")
        name, mean, n = check_tune_and_report(db, os.path.join(tmp, "report"), path)
        d.start()
        check_daemon(d, name, mean, n)
        b = json.loads(d.client("best", "--model", spec["model"]["name"], "--engine", spec["engine"], "--json",
                                check_rc=0).stdout)
        same(b["best"]["cost_per_mtok"], mean, "best --model --engine")

        # a study goodputd runs itself: its best files carry the same figure
        spec["name"] = "one-cost-d"
        with open(path, "w") as f:
            json.dump(spec, f)
        d.client("submit", path, check_rc=0)
        d.wait_state("one-cost-d", ["done"], seconds=300)  # dry-run planning under ASan is slow
        mean_d, n_d, _ = stored_cost(db, "one-cost-d")
        check(n_d >= 2, "goodputd's study measured its best %d times" % n_d)
        b = check_daemon(d, "one-cost-d", mean_d, n_d)
        with open(b["files"]["json"]) as f:
            bj = json.load(f)
        same(bj["cost_per_mtok"], mean_d, "the best file")
        check(bj["measurements"] == n_d, "the best file: %s measurements" % bj["measurements"])
        with open(b["files"]["env"]) as f:
            env = f.read()
        check("GOODPUT_COST_PER_MTOK=%.6g\n" % mean_d in env, "the best env file:\n" + env)
        print("one cost: %s over %d measurements (tune, report, list, best); goodputd's study %s over %d "
              "(best files too)" % ("$%.4f" % mean, n, "$%.4f" % mean_d, n_d))
    except TestFailure as e:
        print("FAIL: %s" % e, file=sys.stderr)
        if d:
            print(d.log(), file=sys.stderr)
        return 1
    finally:
        if d and d.proc:
            d.proc.terminate()
            d.proc.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
