#!/usr/bin/env python3
"""test-probe-lag.py — the probe's own lateness, against goodput-sim: an
open-loop load point of `goodput probe --request-rate R --json` records how
late the client itself sent its requests (client_lag_p95_ms). A probe
starved of CPU (stopped with SIGSTOP for 200 ms every 400 ms, as a probe
beside too many others would be) sends late: its load points are run again
(redone_load_points), and what it finally records says it lagged. Left
alone, it lags by a few milliseconds at most and redoes nothing. At a slow
rate (a CPU engine's, seconds between arrivals) a lag of 120 ms is a small
part of the gaps: the point stands, its lag recorded.

usage: test-probe-lag.py GOODPUT GOODPUT-SIM
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from simlib import start_sim  # noqa: E402

goodput, sim = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp(prefix="goodput-probe-lag-")


def fail(msg):
    print("FAIL:", msg, file=sys.stderr)
    sys.exit(1)


def probe(url, starve, rate=20, prompts=80, stop_s=0.2, run_s=0.2):
    cmd = [goodput, "probe", "--base-url", url, "--model", "llama-3.1-8b", "--no-progress", "--num-prompts",
           str(prompts), "--random-input-len", "128", "--random-output-len", "16", "--ignore-eos", "--request-rate",
           str(rate), "--json"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stop = threading.Event()

    def starver():
        while not stop.is_set() and p.poll() is None:
            time.sleep(run_s)
            try:
                p.send_signal(signal.SIGSTOP)
                time.sleep(stop_s)
                p.send_signal(signal.SIGCONT)
            except ProcessLookupError:
                return

    t = threading.Thread(target=starver, daemon=True)
    if starve:
        t.start()
    try:
        out, err = p.communicate(timeout=240)
    finally:
        stop.set()
        if starve:
            t.join()
        if p.poll() is None:
            p.send_signal(signal.SIGCONT)
            p.kill()
    if p.returncode != 0:
        fail("goodput probe exited %d: %s" % (p.returncode, err[-1000:]))
    return json.loads(out)


server, url = start_sim(sim, os.path.join(tmp, "sim.log"), "--gpu", "L40S")
try:
    quiet = probe(url, False)
    lag = quiet.get("client_lag_p95_ms")
    if lag is None:
        fail("an open-loop load point without client_lag_p95_ms: %s" % sorted(quiet))
    if quiet["redone_load_points"] != 0 or lag > 20:
        fail("a probe left alone redid %d load points, lag p95 %.1f ms" % (quiet["redone_load_points"], lag))
    starved = probe(url, True)
    lag_s = starved.get("client_lag_p95_ms")
    if starved["redone_load_points"] != 2:
        fail("a starved probe redid %d load points (lag p95 %s ms), not 2" % (starved["redone_load_points"], lag_s))
    if lag_s is None or lag_s <= 20:
        fail("a starved probe recorded no lag: %s" % lag_s)
    # each discarded run sent all its 80 requests to the server
    if starved.get("redone_requests") != 160 or quiet.get("redone_requests") != 0:
        fail("redone_requests: %s starved (not 160), %s left alone (not 0)"
             % (starved.get("redone_requests"), quiet.get("redone_requests")))
    # 0.3 req/s, 3.3 s apart on average: stopped 120 ms of every 160 ms, the lag is no starved client's
    slow = probe(url, True, rate=0.3, prompts=6, stop_s=0.12, run_s=0.04)
    lag_slow = slow.get("client_lag_p95_ms")
    if slow["redone_load_points"] != 0 or lag_slow is None or lag_slow <= 20:
        fail("at 0.3 req/s a probe stopped 120 ms in 160 redid %d load points, lag p95 %s ms (want 0, over 20)"
             % (slow["redone_load_points"], lag_slow))
    print("left alone: client lag p95 %.2f ms, none redone; starved: %d redone, lag p95 %.0f ms; at 0.3 req/s: "
          "none redone, lag p95 %.0f ms" % (lag, starved["redone_load_points"], lag_s, lag_slow))
finally:
    server.terminate()
    server.wait(timeout=10)
print("ok")
