#!/usr/bin/env python3
"""The live report as an engineer watches a night's study, in a headless
Chromium: goodputd runs a small study against real goodput-sim servers; while
it runs, the report it rewrites after every trial has its progress header and
reloads itself, and passes the page checks (pagecheck.py: no raw null/NaN,
axes fitted to their data, a best-so-far line that never rises); at the end
the final report has no header, draws the answer's load-step sweep, and
`goodput report NAME` asks goodputd for it. Screenshots of both are kept in
$GOODPUT_REPORT_SCREENSHOTS when set.

argv: goodputd goodput"""
import json
import os
import re
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "daemon"))
import daemonlib  # noqa: E402
import pagecheck  # noqa: E402
import browserlib as browser  # noqa: E402

goodputd, goodput = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])


def spec(name):
    # a budget from which the search keeps a deployment for the sweep
    s = daemonlib.tiny_spec(name, trials=10, max_wall="10m")
    s["search_space"] = {"max_num_seqs": {"min": 8, "max": 64, "scale": "log2"},
                         "max_num_batched_tokens": [1024, 2048], "tensor_parallel": [1]}
    s["quantizations"] = ["fp8"]
    s["baseline"] = False
    return s


def main():
    if not browser.have_chromium():
        print("chromium is not installed: skipping")
        return 77
    if not shutil.which("gnuplot"):
        print("gnuplot is not installed: skipping")
        return 77
    tmp = browser.TMP
    d = daemonlib.Daemon(goodputd, goodput, tmp, env={"GOODPUT_ENGINES_DIR": os.environ.get(
        "GOODPUT_ENGINES_DIR", os.path.join(HERE, "..", "..", "configs", "engines"))})
    try:
        d.start()
        name = "live"
        r = d.request({"command": "submit", "study": spec(name)})
        daemonlib.check(r.get("ok"), "submit: %s" % r)
        live = os.path.join(d.state, "reports", name, "report.html")
        # while it runs: a report written after two finished trials, still live
        snap = os.path.join(tmp, "live.html")
        end = time.monotonic() + 240
        while True:
            daemonlib.check(time.monotonic() < end, "no live report with two trials:\n" + d.log())
            st = d.request({"command": "list"})["studies"][0]["state"]
            daemonlib.check(st in ("queued", "running"), "the study ended before it was watched: " + st)
            html = open(live, encoding="utf-8").read() if os.path.exists(live) else ""
            m = re.search(r"deployments done</td><td>(\d+)", html)
            if m and int(m.group(1)) >= 2 and "Progress (study running" in html:
                with open(snap, "w", encoding="utf-8") as f:
                    f.write(html)
                break
            time.sleep(0.2)
        daemonlib.check('http-equiv="refresh"' in html, "the live report does not reload itself")
        try:
            browser.dom_checks(snap, None)
            browser.screenshot(snap, "live-report.png", 3000)
        except browser.PageError as e:
            daemonlib.check(False, "the live report: %s" % e)
        # the end: the final report, with the sweep
        d.wait_state(name, ["done"], 300)
        end = time.monotonic() + 60
        while time.monotonic() < end:
            html = open(live, encoding="utf-8").read() if os.path.exists(live) else ""
            if html and "Progress (study running" not in html:
                break
            time.sleep(0.2)
        daemonlib.check(html and "Progress (study running" not in html, "no final report")
        daemonlib.check("Load-step sweep, 8 rates" in html and "Sweet spot: " in html,
                        "the final report does not draw the answer's sweep")
        final = os.path.join(tmp, "final.html")
        shutil.copy(live, final)
        try:
            browser.dom_checks(final, 7)
            browser.screenshot(final, "final-report.png", 9000)
        except browser.PageError as e:
            daemonlib.check(False, "the final report: %s" % e)
        # goodput report NAME asks goodputd, which writes it and names it
        p = d.client("report", name, check_rc=0)
        path = p.stdout.strip().splitlines()[-1].split()[-1] if p.stdout.strip() else ""
        daemonlib.check(os.path.isfile(path) and path.endswith("report.html"),
                        "goodput report %s: %r" % (name, p.stdout))
        for problem in pagecheck.page_problems(open(path, encoding="utf-8").read(), 7):
            daemonlib.check(False, problem)
        d.stop()
    except daemonlib.TestFailure as e:
        print("FAIL:", e, file=sys.stderr)
        print("---- goodputd log ----\n" + d.log(), file=sys.stderr)
        return 1
    finally:
        if d.proc and d.proc.poll() is None:
            d.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("ok")
    return 0


sys.exit(main())
