#!/usr/bin/python3
"""Runs inside a throw-away systemd container (test-tune-systemd.sh): a
small `goodput tune` study with deploy.method "systemd" starts goodput-sim
as transient units on the container's system bus. The tuner is killed -9
while a trial's unit serves; that unit outlives it; `goodput tune --resume`
stops it by its recorded name and finishes the study; no goodput-* unit is
left. Prints "all checks passed" at the end.

Usage: tune-systemd-inner.py DIR RESULTS  (DIR holds goodput, goodput-sim, engines/)"""
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

DIR, RESULTS = sys.argv[1:3]
DB = os.path.join(RESULTS, "t.db")
ENV = dict(os.environ, PATH=DIR + ":/usr/bin:/bin")


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def rows(sql, *args):
    con = sqlite3.connect("file:%s?mode=ro" % DB, uri=True)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute(sql, args)]
    finally:
        con.close()


def units():
    out = subprocess.run(["systemctl", "list-units", "--all", "--no-legend", "--plain", "goodput-*"],
                         stdout=subprocess.PIPE, text=True).stdout
    return [l.split()[0] for l in out.splitlines() if l.strip()]


spec = {
    "name": "sd", "engine": "sim", "model": {"name": "llama-3.1-8b"}, "quantizations": ["fp8"],
    "gpu": {"type": "L40S", "count": 1, "price_per_gpu_hour": 0.99},
    "search_space": {"max_num_seqs": [32, 64], "max_num_batched_tokens": [2048], "quantization": ["fp8"]},
    "workload": {"dataset": "random", "input_len": 256, "output_len": 32, "range_ratio": 0.25,
                 "num_prompts": 24, "ignore_eos": True, "seed": 7},
    "sla": {"ttft_ms": 500, "tpot_ms": 50, "attainment": 0.9},
    "budget": {"max_trials": 3},
    "probe": {"tolerance": 0.25, "max_steps": 2, "request_timeout": 30, "max_rate": 16},
    "deploy": {"method": "systemd", "startup_timeout": 30, "stop_timeout": 5},
}
spec_path = os.path.join(RESULTS, "sd.json")
with open(spec_path, "w") as f:
    json.dump(spec, f)
base = [os.path.join(DIR, "goodput"), "tune", "--engines-dir", os.path.join(DIR, "engines"), "--db", DB,
        "--log-dir", os.path.join(RESULTS, "logs")]

proc = subprocess.Popen(base + [spec_path, "-q"], env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
victim = None
deadline = time.monotonic() + 40
while time.monotonic() < deadline and proc.poll() is None and not victim:
    time.sleep(0.1)
    try:
        r = rows("SELECT * FROM trials WHERE state = 'probing' AND server_unit IS NOT NULL")
    except sqlite3.OperationalError:
        continue
    victim = r[0] if r else None
if not victim:
    proc.kill()
    fail("never saw a trial probing with a recorded unit (tuner exit %s)" % proc.poll())
proc.send_signal(signal.SIGKILL)
proc.wait()
unit = victim["server_unit"]
if not unit.startswith("goodput-sd-") or unit not in units():
    fail("the unit %s of the killed tuner's trial is not loaded: %s" % (unit, units()))
state = subprocess.run(["systemctl", "is-active", unit], stdout=subprocess.PIPE, text=True).stdout.strip()
if state != "active":
    fail("unit %s is %s after the tuner was killed, expected active" % (unit, state))
print("tuner killed while %s served trial %d" % (unit, victim["seq"]), flush=True)

t0 = time.monotonic()
p = subprocess.run(base + ["--resume", "sd", "--json"], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                   text=True, timeout=120)
sys.stderr.write(p.stderr)
if p.returncode != 0:
    fail("--resume exited %d: %s" % (p.returncode, p.stdout))
out = json.loads(p.stdout)
if out["state"] != "done" or not out.get("best"):
    fail("study not done: %s" % out)
if "stopped the orphaned unit " + unit not in p.stderr:
    fail("--resume did not say it stopped the orphaned unit %s" % unit)
left = units()
if left:
    fail("units left behind: %s" % left)
ts = rows("SELECT * FROM trials ORDER BY seq")
for t in ts:
    if t["state"] not in ("done", "infeasible", "failed") or t["server_unit"]:
        fail("trial %d: state %s, unit %s" % (t["seq"], t["state"], t["server_unit"]))
    if t["state"] == "done" and not (t["deploy_seconds"] and t["deploy_seconds"] > 0):
        fail("trial %d: no deploy time" % t["seq"])
    with open(t["log_path"]) as f:
        if "starting unit goodput-sd-%d.service" % t["id"] not in f.read():
            fail("trial %d: its log does not show its unit" % t["seq"])
print("resumed in %.1f s: %d trials (%s), best $%.4f/Mtok; no unit left"
      % (time.monotonic() - t0, len(ts), ", ".join("%s/%s" % (t["kind"], t["state"]) for t in ts),
         out["best"]["cost_per_mtok"]))
print("all checks passed")
