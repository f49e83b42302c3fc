#!/usr/bin/env python3
"""goodputd watching a production endpoint for drift.

goodput-sim stands for production; goodputd (--dry-run, so the study it is
compared with is tuned in seconds) watches its /metrics every 4 s against a
study tuned for chat-like traffic (256 prompt, 128 output tokens). The
watch is added by a reload (SIGHUP) once the study is done.

* The probe drives chat traffic for 16 s: no interval drifts, no flag.
* The probe switches to RAG-like traffic (3000/200) for the same time: drift
  is flagged within three watch intervals of the switch, and a re-tune of
  the study on the captured traffic is queued — into a window that is
  closed now, so it waits there — its workload the captured RAG shape.
* `goodput status` and the metrics file show the drift; the store holds
  the hour's traffic, and the study's report sets it beside the workload
  the study was tuned for.

Usage: test-watch.py GOODPUTD GOODPUT GOODPUT-SIM"""
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from simlib import start_sim  # noqa: E402

goodputd, goodput, sim = (os.path.abspath(a) for a in sys.argv[1:4])
INTERVAL = 4.0
PHASE = 16.0  # seconds of each kind of traffic


def drive(url, inp, out, seconds, rate=5):
    return subprocess.Popen([goodput, "probe", "--base-url", url, "--model", "llama-3.1-8b", "--no-progress",
                             "--random-input-len", str(inp), "--random-output-len", str(out), "--ignore-eos",
                             "--request-rate", str(rate), "--num-prompts", str(int(seconds * rate)), "--seed", "3"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def watch_status(d):
    w = d.request({"command": "status"}).get("watch", [])
    check(len(w) == 1, "status has one watch: %r" % w)
    return w[0]


def closed_window():
    """A daily window two hours from now: closed for the test's minute."""
    t = time.localtime(time.time() + 2 * 3600)
    u = time.localtime(time.time() + 3 * 3600)
    return "%02d:%02d-%02d:%02d" % (t.tm_hour, t.tm_min, u.tm_hour, u.tm_min)


def main():
    tmp = tempfile.mkdtemp(prefix="goodputd-watch-")
    os.chmod(tmp, 0o755)
    server, url = start_sim(sim, os.path.join(tmp, "sim.log"))
    prom = os.path.join(tmp, "goodput.prom")
    d = Daemon(goodputd, goodput, tmp, args=["--dry-run"], config={"metrics_file": prom})
    probes = []
    try:
        d.start()
        spec = tiny_spec("chat")
        spec["workload"].update({"input_len": 256, "output_len": 128})
        r = d.request({"command": "submit", "study": spec})
        check(r.get("ok"), "submit: %r" % r)
        d.wait_state("chat", ["done"])
        window = closed_window()
        cfg = {"metrics_file": prom,
               "watch": [{"metrics_url": url + "/metrics", "study": "chat", "interval": INTERVAL,
                          "min_requests": 5, "consecutive": 2, "retune": "queue", "window": window}]}
        with open(d.config, "w") as f:
            json.dump(cfg, f)
        d.proc.send_signal(1)  # SIGHUP: the watch starts

        # Chat traffic: judged, never flagged.
        probes.append(drive(url, 256, 128, PHASE))
        start = time.monotonic()
        judged = 0
        while time.monotonic() - start < PHASE:
            w = watch_status(d)
            check(not w["flagged"], "chat traffic flagged: %r\n%s" % (w, d.log()))
            if w.get("drift") is not None:
                judged += 1
                check(w["drift"] <= 0.05, "chat traffic drifts %.3f from the chat study" % w["drift"])
            time.sleep(0.5)
        check(judged > 0, "the chat traffic was never judged: %r\n%s" % (watch_status(d), d.log()))
        probes[-1].wait(60)
        w = watch_status(d)
        print("chat for %.0f s: drift %s, not flagged (%d scrapes)" % (PHASE, w["drift"], w["scrapes"]))

        # RAG traffic: flagged within three intervals.
        at_switch = watch_status(d)["scrapes"]
        probes.append(drive(url, 3000, 200, PHASE, rate=4))
        flagged_after = None
        start = time.monotonic()
        while time.monotonic() - start < PHASE + 2 * INTERVAL:
            w = watch_status(d)
            if w["flagged"]:
                flagged_after = w["scrapes"] - at_switch
                break
            time.sleep(0.2)
        check(flagged_after is not None, "RAG traffic never flagged: %r\n%s" % (watch_status(d), d.log()))
        check(flagged_after <= 3, "flagged %d intervals after the switch" % flagged_after)
        print("RAG: flagged %d intervals after the switch, drift %.2f (input %.2f, output %.2f)" %
              (flagged_after, w["drift"], w["input_ks"], w["output_ks"]))

        # The re-tune is queued into its window, on the captured traffic.
        retune = w.get("retune_study", "")
        check(retune.startswith("chat-retune-"), "no re-tune queued: %r" % w)
        s = d.wait_state(retune, ["queued"], seconds=10)
        st = d.request({"command": "status"})
        check(st["state"] == "waiting", "the re-tune does not wait for its window: %r" % st["state"])
        db = sqlite3.connect(os.path.join(d.state, "goodput.db"))
        (text,) = db.execute("SELECT spec FROM studies WHERE name = ?", (retune,)).fetchone()
        wl = json.loads(text)
        check(wl["window"] == window, "the re-tune's window %r" % wl.get("window"))
        wl = wl["workload"]
        check(wl["input_len_dist"] == "histogram" and abs(wl["input_len"] / 3000 - 1) < 0.05 and
              abs(wl["output_len"] / 200 - 1) < 0.05,
              "the re-tune's workload is not the RAG traffic: %r" % {k: wl.get(k) for k in
                                                                     ("input_len", "output_len")})
        check(wl["num_prompts"] == spec["workload"]["num_prompts"] and "captured" in wl,
              "the study's own counts kept, what was captured recorded")
        print("re-tune %s queued in %s: input %.0f, output %.0f tokens" % (s["name"], window, wl["input_len"],
                                                                          wl["output_len"]))

        # status, the metrics file and the store say it.
        p = d.client("status", check_rc=0)
        check("DRIFT FLAGGED: re-tune queued as " + retune in p.stdout, "goodput status:\n" + p.stdout)
        time.sleep(1.5)
        with open(prom) as f:
            text = f.read()
        check('goodput_watch_drift_flagged{watch="%s/metrics",study="chat"} 1' % url in text,
              "the metrics file:\n" + text[-2000:])
        rows = db.execute("SELECT requests, input_mean, shape FROM traffic_shapes WHERE watch = ? AND study = 'chat'",
                          (url + "/metrics",)).fetchall()
        check(rows and rows[-1][0] > 0 and rows[-1][2], "no hour of traffic in the store: %r" % rows)
        print("status, metrics file and store (%d hour rows) show it" % len(rows))
        db.close()
        d.stop()

        # The report: production's lengths and rate beside the tuned-for workload.
        out = os.path.join(tmp, "report")
        p = subprocess.run([goodput, "report", "--db", os.path.join(d.state, "goodput.db"), "chat", "--out", out],
                           capture_output=True, text=True, timeout=120)
        check(p.returncode == 0, "goodput report: %s" % p.stderr)
        with open(os.path.join(out, "report.md")) as f:
            md = f.read()
        check("## Production traffic" in md and "input length, KS distance at the buckets" in md,
              "the report has no production section:\n" + md[-3000:])
        check("Drift was flagged" in md, "the report does not say drift was flagged")
        if shutil.which("gnuplot"):
            check(os.path.exists(os.path.join(out, "plot-production.svg")), "no production plot")
        print("the report sets production beside the tuned-for workload")
    finally:
        for p in probes:
            if p.poll() is None:
                p.kill()
                p.wait()
        d.stop()
        server.terminate()
        server.wait(10)


try:
    main()
except TestFailure as e:
    print("FAIL:", e, file=sys.stderr)
    sys.exit(1)
