#!/usr/bin/env python3
"""A real (dry-run) study reported: `goodput tune --dry-run` on the demo spec,
then `goodput report`; the numbers in the report equal the store's."""
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile

goodput, spec = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp(prefix="test-report-tune-")
try:
    db = os.path.join(tmp, "t.db")
    subprocess.run([goodput, "tune", "--db", db, "--dry-run", "--max-trials", "6", spec], check=True,
                   capture_output=True, timeout=400)
    con = sqlite3.connect(db)
    name, = con.execute("select name from studies").fetchone()
    n_trials, = con.execute("select count(*) from trials").fetchone()
    # the study's cost: the mean of every measurement of the chosen configuration
    cost, = con.execute("select avg(t.cost_per_mtok) from trials t join studies s on s.id = t.study_id"
                        " where t.state = 'done' and t.cost_per_mtok is not null and t.canonical_key ="
                        " (select canonical_key from trials where id = s.best_trial_id)").fetchone()
    con.close()
    p = subprocess.run([goodput, "report", "--db", db, name, "--out", os.path.join(tmp, "out"), "--json"],
                       check=True, capture_output=True, text=True, timeout=120)
    j = json.loads(p.stdout)
    if j["trials"] != n_trials:
        sys.exit(f"FAIL: {j['trials']} trials reported, {n_trials} stored")
    if cost is not None and abs(j["best"]["cost_per_mtok"] - cost) > 1e-9 * cost:
        sys.exit(f"FAIL: best cost {j['best']['cost_per_mtok']} != {cost}")
    html = open(j["html"], encoding="utf-8").read()
    trials = html[html.index('<h2 id="trials">'):html.index('<h2 id="landscape">')]
    if len(re.findall(r"<tr[^>]*>\s*<td>", trials)) != n_trials:
        sys.exit("FAIL: not every trial is in the table")
    # how it ended, in words a user reads, not a warning box; nothing on stderr
    if "Study message" in html or not re.search(r"<p>The study ended (when|once)", html):
        sys.exit("FAIL: the report does not say in words why the study ended")
    if p.stderr.strip():
        sys.exit("FAIL: report wrote to stderr: " + p.stderr)
    if shutil.which("gnuplot") and j["plots"] != 7:
        sys.exit(f"FAIL: {j['plots']} plots drawn, expected 7: {p.stderr}")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
print("ok")
