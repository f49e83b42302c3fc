#!/usr/bin/env python3
"""`goodput report`, `plan` and `compare` on synthetic studies (make-study),
checked as a user would: the best configuration and its cost, every trial in
the table, gnuplot's SVG well-formed and inlined, the SLA bounds drawn in the
latency plot, no network fetch in the page, plan's arithmetic and compare's
verdicts. With --browser: the page in a headless Chromium (no console errors,
no network requests, plots in the DOM, a screenshot)."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

goodput, make_study = sys.argv[1], sys.argv[2]
browser = "--browser" in sys.argv[3:]
tmp = tempfile.mkdtemp(prefix="test-report-cli-")
db = os.path.join(tmp, "t.db")
SVG_NS = "{http://www.w3.org/2000/svg}"


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def run(*args, rc=0):
    p = subprocess.run([goodput, *args], capture_output=True, text=True, timeout=120)
    if p.returncode != rc:
        fail(f"goodput {' '.join(args)}: exit {p.returncode}, expected {rc}\n{p.stdout}\n{p.stderr}")
    return p


subprocess.run([make_study, db], check=True, timeout=60)
out = os.path.join(tmp, "out")
have_gnuplot = shutil.which("gnuplot") is not None


def report_checks():
    j = json.loads(run("report", "--db", db, "before", "--out", out, "--json").stdout)
    best = j["best"]
    # the mean of its two measurements (250 and 240 tokens/s)
    cost = (0.99 / (250 * 3600) * 1e6 + 0.99 / (240 * 3600) * 1e6) / 2
    if abs(best["cost_per_mtok"] - cost) > 1e-9 * cost or best["measurements"] != 2:
        fail(f"best cost {best['cost_per_mtok']} over {best['measurements']} != {cost} over 2")
    if best["knobs"] != {"max_num_seqs": 32, "max_num_batched_tokens": 1024, "quantization": "fp8",
                         "tensor_parallel": 1}:
        fail(f"best knobs {best['knobs']}")
    if "--max-num-seqs 32" not in best["launch_command"]:
        fail("launch command lacks the knobs: " + best["launch_command"])
    html = open(j["html"], encoding="utf-8").read()
    md = open(j["markdown"], encoding="utf-8").read()

    # every trial in the table (8 rows in the trials section), the best marked
    trials = html[html.index('<h2 id="trials">'):html.index('<h2 id="landscape">')]
    rows = re.findall(r"<tr[^>]*>\s*<td>", trials)
    if len(rows) != 8:
        fail(f"{len(rows)} trial rows, expected 8")
    for msg in ["CUDA out of memory (trial 4)", "not even 0.5 req/s met the SLA", "server exited with status 1"]:
        if msg not in trials:
            fail("trials table lacks " + msg)
    if '<tr class="best"><td>3 ★</td>' not in trials:
        fail("best trial not marked")

    # no network: no scripts, no external references; http only in xmlns
    if re.search(r"<script|<link|<img|<iframe|@import", html, re.I):
        fail("the page loads something")
    for m in re.finditer(r"https?://[^\s\"'<>)]*", html):
        before = html[max(0, m.start() - 16):m.start()]
        if "xmlns" not in before:
            fail("external URL in the page: " + m.group(0))
    if re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", html, re.I):
        fail("a src/href fetches")

    svgs = re.findall(r"<svg.*?</svg>", html, re.S)
    files = sorted(f for f in os.listdir(out) if f.endswith(".svg"))
    if not have_gnuplot:
        if svgs or j["plots"] != 0 or "tables only" not in html:
            fail("without gnuplot the report must be table-only and say so")
        return
    names = ["workload", "latency", "landscape", "progress", "pareto", "server", "gantt"]
    if len(svgs) != 7 or j["plots"] != 7 or files != sorted(f"plot-{n}.svg" for n in names):
        fail(f"{len(svgs)} inline SVGs, {j['plots']} plots, files {files}: expected 7")
    # where the wall time went: the time to the answer, and the trials per GPU
    if "Time to the answer: " not in html or "GPUs were busy" not in html:
        fail("the report does not give the time to the answer")
    gantt = open(os.path.join(out, "plot-gantt.svg"), encoding="utf-8").read()
    if "Trials over wall time" not in gantt or "answer" not in gantt:
        fail("the Gantt plot lacks its title or the answer's mark")
    ids = set()
    for s in svgs:
        root = ET.fromstring(s)  # well-formed, or this raises
        if root.tag != SVG_NS + "svg":
            fail("inline plot root is " + root.tag)
        for e in root.iter():
            i = e.get("id")
            if i:
                if i in ids:
                    fail("duplicate id across plots: " + i)
                ids.add(i)
    for f in files:
        root = ET.parse(os.path.join(out, f)).getroot()
        if root.tag != SVG_NS + "svg":
            fail(f + " is not SVG")
        if f not in md:
            fail("markdown does not reference " + f)
    lat = open(os.path.join(out, "plot-latency.svg"), encoding="utf-8").read()
    for t in ["SLA: ttft &lt;= 2000 ms for 90% of requests", "SLA: tpot &lt;= 100 ms for 90% of requests",
              "max goodput 250 tokens/s", "TTFT percentiles", "TPOT percentiles"]:
        if t not in lat:
            fail("latency plot lacks " + t)
    land = open(os.path.join(out, "plot-landscape.svg"), encoding="utf-8").read()
    for t in ["quantization fp8, tp 1", "quantization none, tp 2", "1.1", "4.58"]:
        if t not in land:
            fail("landscape lacks " + t)


def other_checks():
    p = run("report", "--db", db, "nothing-meets", "--out", os.path.join(tmp, "none"))
    if "no configuration met the SLA" not in p.stdout:
        fail("nothing-meets summary: " + p.stdout)
    html = open(os.path.join(tmp, "none", "report.html"), encoding="utf-8").read()
    if "No configuration met the SLA: of 3 trials" not in html:
        fail("nothing-meets page does not say so")
    run("report", "--db", db, "no-such", rc=1)
    run("report", "--db", db, rc=2)

    # plan: 20 req/s × 1.2 / 4 req/s = 6 replicas of 1 GPU, $5.94/h, 2 hosts of 4
    plan = json.loads(run("plan", "--db", db, "before", "--rate", "20", "--json").stdout)
    if (plan["replicas"], plan["gpus"], plan["hosts"]) != (6, 6, 2) or abs(plan["usd_per_hour"] - 5.94) > 1e-9:
        fail(f"plan {plan}")
    plan = json.loads(run("plan", "--db", db, "before", "--tokens-per-second", "1000", "--headroom", "0",
                          "--json").stdout)
    if plan["replicas"] != 4:
        fail(f"plan tokens {plan}")
    p = run("plan", "--db", db, "nothing-meets", "--rate", "1", rc=1)
    if "no configuration met the SLA" not in p.stderr:
        fail("plan without a best: " + p.stderr)
    run("plan", "--db", db, "before", "--rate", "1", "--tokens-per-second", "1", rc=2)
    run("plan", "--db", db, "before", rc=2)

    p = run("compare", "--db", db, "before", "after")
    # A's cost: the mean of its best's two measurements (250 and 240 tokens/s); B's one at 500
    for t in ["a different configuration won in B", "cost change: -51.0%", "NO LONGER MEETS THE SLA"]:
        if t not in p.stdout:
            fail("compare before after lacks " + t + ":\n" + p.stdout)
    c = json.loads(run("compare", "--db", db, "before", "after-other", "--json").stdout)
    if c["old_best"] != "not_measured":
        fail(f"compare before after-other: {c}")
    if "not measured in B" not in run("compare", "--db", db, "before", "after-other").stdout:
        fail("compare does not say the old best was not measured")
    for cmd in ["report", "plan", "compare"]:
        if "Usage: goodput " + cmd not in run(cmd, "--help").stdout:
            fail(cmd + " --help")


def browser_checks():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("chromium is not installed: skipping")
        sys.exit(77)
    if not have_gnuplot:
        fail("gnuplot is needed for the plots the browser test checks")
    j = json.loads(run("report", "--db", db, "before", "--out", out, "--json").stdout)
    url = "file://" + os.path.abspath(j["html"])
    shot = os.path.join(tmp, "report.png")
    base = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--enable-logging=stderr", "--v=0",
            # every name but localhost fails to resolve, so any fetch shows in the log
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost"]

    def chrome(*extra):
        ud = tempfile.mkdtemp(prefix="ud-", dir=tmp)
        p = subprocess.run(base + ["--user-data-dir=" + ud, *extra, url], capture_output=True, text=True,
                           timeout=180)
        if p.returncode != 0:
            fail(f"chromium exit {p.returncode}: {p.stderr[-2000:]}")
        return p

    p = chrome("--dump-dom")
    dom = p.stdout
    if len(re.findall(r"<svg", dom)) != 7 or 'id="plot-latency"' not in dom or "All trials" not in dom:
        fail("the DOM lacks the plots or the trials")
    log = p.stderr
    for bad in ["CONSOLE", "Uncaught", "ERR_NAME_NOT_RESOLVED", "net::ERR_", "Refused to"]:
        for line in log.splitlines():
            if bad in line and "dbus" not in line:
                fail("chromium log: " + line)
    p = chrome("--hide-scrollbars", "--window-size=1280,2400", "--screenshot=" + shot)
    with open(shot, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or os.path.getsize(shot) < 20000:
        fail("no screenshot")
    w, h = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    if (w, h) != (1280, 2400):
        fail(f"screenshot is {w}x{h}")
    keep = os.environ.get("GOODPUT_REPORT_SCREENSHOT")
    if keep:
        shutil.copy(shot, keep)


try:
    if browser:
        browser_checks()
    else:
        report_checks()
        other_checks()
finally:
    shutil.rmtree(tmp, ignore_errors=True)
print("ok")
