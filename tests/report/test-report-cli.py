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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import browserlib  # noqa: E402
import pagecheck  # noqa: E402

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
    p = run("report", "--db", db, "before", "--out", out, "--json")
    # a study that never used goodputd's watch says nothing of production traffic
    if p.stderr.strip():
        fail("report wrote to stderr: " + p.stderr)
    j = json.loads(p.stdout)
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

    # every trial in the table (9 rows in the trials section: the sweep too), the best marked
    trials = html[html.index('<h2 id="trials">'):html.index('<h2 id="landscape">')]
    rows = re.findall(r"<tr[^>]*>\s*<td>", trials)
    if len(rows) != 9:
        fail(f"{len(rows)} trial rows, expected 9")
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
              "sweet spot: 250 tokens/s at 4 req/s", "Load-step sweep, 8 rates", "TTFT percentiles",
              "TPOT percentiles"]:
        if t not in lat:
            fail("latency plot lacks " + t)
    # every cost the figures show is the study's one cost: the best's cell is
    # the mean of its two measurements, as the verdict says
    land = open(os.path.join(out, "plot-landscape.svg"), encoding="utf-8").read()
    for t in ["quantization fp8, tp 1", "quantization none, tp 2", "%.4f" % cost, "4.5833"]:
        if t not in land:
            fail("landscape lacks " + t)
    prog = open(os.path.join(out, "plot-progress.svg"), encoding="utf-8").read()
    if "the answer: $%.4f/Mtok" % cost not in prog:
        fail("the progress plot does not mark the answer at the study's cost")
    if "$%.4f per million tokens" % cost not in html:
        fail("the verdict does not give the study's cost")
    # axes fitted to the data, best so far never rising, no raw null/NaN
    for problem in pagecheck.page_problems(html, 7):
        fail(problem)


def other_checks():
    p = run("report", "--db", db, "nothing-meets", "--out", os.path.join(tmp, "none"))
    if "no configuration met the SLA" not in p.stdout:
        fail("nothing-meets summary: " + p.stdout)
    html = open(os.path.join(tmp, "none", "report.html"), encoding="utf-8").read()
    if "No configuration met the SLA: of 3 trials" not in html:
        fail("nothing-meets page does not say so")
    # no sweep: the rate search's points, close to its answer, fill their axes
    run("report", "--db", db, "clustered", "--out", os.path.join(tmp, "clustered"))
    html = open(os.path.join(tmp, "clustered", "report.html"), encoding="utf-8").read()
    if "The rate search&#39;s 3 load points" not in html and "The rate search's 3 load points" not in html:
        fail("the clustered study's curve is not its rate search's 3 load points")
    for problem in pagecheck.page_problems(html):
        fail("clustered: " + problem)
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


def checker_fails_what_it_should():
    """The page checks can fail: an axis from 0 to 45 for data at 35-43, a
    rising best-so-far line, a raw null."""
    meta = ('<metadata class="goodput-axes">[{"panel":"p","log_y":false,"categorical":false,"x":[0,45],'
            '"data_x":[35,43],"y":[0,1],"data_y":[0.1,0.9],"y2":[1,-1],"data_y2":[9e307,-9e307],'
            '"marks_y":[],"marks_y2":[]}]</metadata>')
    if not pagecheck.axis_problems("<svg><title>t</title>" + meta + "</svg>"):
        fail("the axis check passes data that fill 18 % of their axis")
    rising = ("<svg><title>Search progress</title>" + meta.replace("[0,45]", "[34,44]") +
              "<path stroke='" + pagecheck.BEST_SO_FAR_RGB + "'  d='M10,200 L20,200 L20,150 L30,150'/></svg>")
    if not any("rises" in p for p in pagecheck.best_so_far_problems(rising)):
        fail("the best-so-far check passes a rising line")
    if not pagecheck.raw_values("<p>host: null</p>") or not pagecheck.raw_values("<td>NaN</td>"):
        fail("the raw-value check passes null and NaN")


def browser_checks():
    if not browserlib.have_chromium():
        print("chromium is not installed: skipping")
        sys.exit(77)
    if not have_gnuplot:
        fail("gnuplot is needed for the plots the browser test checks")
    checker_fails_what_it_should()
    j = json.loads(run("report", "--db", db, "before", "--out", out, "--json").stdout)
    try:
        dom = browserlib.dom_checks(j["html"], 7)
        if 'id="plot-latency"' not in dom:
            fail("the DOM lacks the latency plot")
        browserlib.screenshot(j["html"], "report.png")
    except browserlib.PageError as e:
        fail(str(e))


try:
    if browser:
        browser_checks()
    else:
        report_checks()
        other_checks()
finally:
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(browserlib.TMP, ignore_errors=True)
print("ok")
