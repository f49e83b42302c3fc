#!/usr/bin/env python3
"""Offline queries: `goodput list|best|trials --db FILE` read the store with
no daemon and answer exactly what goodputd answers on its socket (--json
compared key for key), `trials --csv` and `export --format csv|json` hold
every trial and load point the store holds (counted with Python's sqlite3
through the SQL views trial_results and load_points_v), and all of them
read safely while goodputd writes: a real goodput-sim study runs while the
offline commands read its database in a loop, every read succeeds, none
takes the writers' lock, and the study finishes.

Usage: test-offline.py GOODPUTD GOODPUT"""
import csv
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemonlib import Daemon, TestFailure, check, tiny_spec  # noqa: E402

goodputd, goodput = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])


def run(*args, rc=0):
    p = subprocess.run([goodput, *args], capture_output=True, text=True, timeout=60)
    check(p.returncode == rc, "goodput %s: exit %d, expected %d\n%s\n%s" %
          (" ".join(args), p.returncode, rc, p.stdout, p.stderr))
    return p


def view_counts(db, study):
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    try:
        trials = con.execute("SELECT count(*) FROM trial_results WHERE study = ?", (study,)).fetchone()[0]
        points = con.execute("SELECT count(*) FROM load_points_v WHERE study = ?", (study,)).fetchone()[0]
        bare = con.execute("SELECT count(*) FROM trial_results t WHERE study = ? AND NOT EXISTS"
                           " (SELECT 1 FROM load_points_v l WHERE l.study = t.study AND l.trial_seq = t.seq)",
                           (study,)).fetchone()[0]
        version = con.execute("SELECT engine_version FROM trial_results WHERE study = ? AND chosen",
                              (study,)).fetchone()
    finally:
        con.close()
    return trials, points, bare, version


def compare_answers(d, db, name):
    """The daemon's answer and the offline one: the same object."""
    for args in (["list"], ["best", name], ["trials", name],
                 ["best", "--model", "llama-3.1-8b", "--engine", "sim"]):
        online = json.loads(d.client(args[0], "--json", *args[1:], check_rc=0).stdout)
        offline = json.loads(run(args[0], "--db", db, "--json", *args[1:]).stdout)
        check(online == offline, "%s: the daemon's answer and --db's differ:\n%s\n%s" %
              (" ".join(args), json.dumps(online, sort_keys=True), json.dumps(offline, sort_keys=True)))
    text = run("best", "--db", db, name).stdout
    check("cost:" in text and "engine:" in text, "best --db:\n" + text)
    print("list, best (by name, by model + engine) and trials: --db answers as goodputd does")


def check_exports(db, name):
    trials, points, bare, version = view_counts(db, name)
    check(trials >= 2 and points >= 2, "too little to compare: %d trials, %d load points" % (trials, points))

    rows = list(csv.DictReader(io.StringIO(run("trials", "--db", db, "--csv", name).stdout)))
    check(len(rows) == trials, "trials --csv: %d rows, the view has %d" % (len(rows), trials))
    check({"max_num_seqs", "max_num_batched_tokens", "quantization", "cost_per_mtok"} <= set(rows[0]),
          "trials --csv columns: %s" % list(rows[0]))
    tj = json.loads(run("trials", "--db", db, "--json", name).stdout)["trials"]
    for r, t in zip(rows, tj):
        check(int(r["seq"]) == t["seq"] and int(r["max_num_seqs"]) == t["knobs"]["max_num_seqs"],
              "trials --csv row %s differs from --json %s" % (r, t))
        if t["cost_per_mtok"] is not None:
            check(abs(float(r["cost_per_mtok"]) - t["cost_per_mtok"]) <= 1e-12 * t["cost_per_mtok"],
                  "cost: csv %s, json %s" % (r["cost_per_mtok"], t["cost_per_mtok"]))

    x = json.loads(run("export", name, "--db", db).stdout)
    check(len(x["trials"]) == trials, "export json: %d trials" % len(x["trials"]))
    n_lp = sum(len(t["load_points"]) for t in x["trials"])
    check(n_lp == points, "export json: %d load points, the view has %d" % (n_lp, points))
    lp = next(p for t in x["trials"] for p in t["load_points"])
    check("p99_ttft_ms" in lp and "phase" in lp and "sla_met" in lp, "export json load point: %s" % lp)
    check(x["best"]["engine_version"] == (version[0] if version else None), "export json best: %s" % x["best"])
    check(x["spec"]["name"] == name, "export json spec: %s" % x["spec"])

    rows = list(csv.DictReader(io.StringIO(run("export", name, "--db", db, "--format", "csv").stdout)))
    check(len(rows) == points + bare, "export csv: %d rows, %d load points + %d trials without" %
          (len(rows), points, bare))
    check({"trial_seq", "max_num_seqs", "request_rate", "p99_tpot_ms", "engine_version"} <= set(rows[0]),
          "export csv columns: %s" % list(rows[0]))
    run("export", name, "--db", db, "--format", "xml", rc=2)
    run("trials", "--db", db, "--csv", "--json", name, rc=2)
    print("trials --csv: %d rows; export: %d trials, %d load points (json), %d lines (csv); the views agree" %
          (trials, len(x["trials"]), n_lp, len(rows)))


def read_while_writing(d, db, name):
    """Offline reads in a loop while goodputd runs a real study on the file."""
    d.request({"command": "submit", "study": tiny_spec(name, trials=3)})
    reads = 0
    deadline = time.monotonic() + 120
    seen_running = False
    while time.monotonic() < deadline:
        st = d.request({"command": "list"})
        state = next(s["state"] for s in st["studies"] if s["name"] == name)
        seen_running = seen_running or state == "running"
        for args in (["trials", "--db", db, "--csv", name], ["list", "--db", db, "--json"],
                     ["best", "--db", db, "--json", name]):
            p = subprocess.run([goodput, *args], capture_output=True, text=True, timeout=30)
            # best has nothing to say until a trial met the SLA: that is an answer, not a failure
            ok = p.returncode == 0 or (args[0] == "best" and "no configuration that met" in p.stdout)
            check(ok, "goodput %s while goodputd writes: exit %d\n%s\n%s" %
                  (" ".join(args), p.returncode, p.stdout, p.stderr))
            reads += 1
        if state in ("done", "failed"):
            break
        time.sleep(0.1)
    check(state == "done", "study %s: %s" % (name, state))
    check(seen_running, "the reads never overlapped the running study")
    log = d.log()
    check("another goodputd" not in log and "database is locked" not in log, "the daemon saw a lock:\n" + log)
    print("%d offline reads while goodputd ran study %s: all answered, the study finished" % (reads, name))
    # a real study records the engine's version; the best and the view name it
    version = view_counts(db, name)[3]
    sim = os.path.join(os.path.dirname(os.path.dirname(goodputd)), "sim", "goodput-sim")
    sim_version = subprocess.run([sim, "--version"], capture_output=True, text=True).stdout.split()[-1]
    check(version and version[0] == sim_version, "trial_results.engine_version: %r, goodput-sim --version: %s" %
          (version, sim_version))
    text = run("best", "--db", db, name).stdout
    check("engine:   sim, version %s," % sim_version in text, "best --db names no engine version:\n" + text)
    md = run("report", "--db", db, "--markdown", name).stdout
    check("engine version (as measured) | %s" % sim_version in md, "the report names no engine version:\n" + md[:3000])
    print("the best of %s was measured on %s (goodput best --db and the report say so)" % (name, version[0]))


def main():
    tmp = tempfile.mkdtemp(prefix="goodput-offline-")
    d = None
    try:
        d = Daemon(goodputd, goodput, tmp, args=["--dry-run"]).start()
        db = os.path.join(d.state, "goodput.db")
        d.request({"command": "submit", "study": tiny_spec("off1", trials=6)})
        d.wait_state("off1", ["done"], 180)
        compare_answers(d, db, "off1")
        check_exports(db, "off1")
        check(d.stop() == 0, "goodputd exit code")

        # The same store with no daemon at all.
        p = subprocess.run([goodput, "list", "--socket", d.sock], capture_output=True, text=True, timeout=30)
        check(p.returncode == 1, "list through the socket with no daemon: exit %d" % p.returncode)
        check("off1" in run("list", "--db", db).stdout, "list --db without a daemon")
        run("best", "--db", db, "off1")
        run("trials", "--db", os.path.join(tmp, "missing.db"), "off1", rc=1)
        print("no daemon: list/best --db answer, the socket does not")

        d = Daemon(goodputd, goodput, tmp, name="w").start()
        read_while_writing(d, os.path.join(d.state, "goodput.db"), "off2")
        check(d.stop() == 0, "goodputd exit code")
        print("ok")
    except TestFailure as e:
        print("FAIL: %s" % e, file=sys.stderr)
        if d:
            d.stop()
        sys.exit(1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


main()
