#!/usr/bin/env python3
"""goodputd's Prometheus text file, read as monitoring reads it.

goodputd runs with $RUNTIME_DIRECTORY set, as systemd sets it, and writes
goodput.prom there from its start on. While a goodput-sim study runs the file is
read in a loop: every read is a whole, well-formed exposition (the rename
never shows half a file) and no temporary file is left behind. When the
study is done the file holds its trials by outcome (as `goodput trials`
counts them), its progress (1) and its best cost and goodput — the very
figures `goodput best --json` answers. Then Debian's prometheus-node-exporter,
its textfile collector pointed at a folder holding a symbolic link to the
file (goodputd(8)'s recipe), serves the same samples without a scrape error.
A metrics_file that is not an absolute .prom path is refused at start.

Usage: test-metrics.py GOODPUTD GOODPUT"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemonlib import Daemon, TestFailure, check, tiny_spec  # noqa: E402

goodputd, goodput = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? '
                    r'(-?[0-9.eE+-]+|NaN|[+-]Inf)$')


def parse(text):
    """The exposition format, strictly: every line a HELP, a TYPE or a sample
    of a family announced before it. {(name, labels): value}"""
    check(text.endswith("\n"), "the file does not end with a newline (half written?)")
    typed, samples = set(), {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            typed.add(line.split()[2])
            continue
        m = SAMPLE.match(line)
        check(m, "not a sample line: %r" % line)
        check(m.group(1) in typed, "sample before its # TYPE: %r" % line)
        check(m.group(1).startswith("goodput_"), "metric without the goodput_ prefix: %r" % line)
        samples[(m.group(1), m.group(2) or "")] = float(m.group(3))
    return samples


def value(samples, name, **labels):
    want = "{" + ",".join('%s="%s"' % kv for kv in labels.items()) + "}" if labels else ""
    for (n, l), v in samples.items():
        if n == name and (not labels or all('%s="%s"' % kv in l for kv in labels.items())):
            return v
    raise TestFailure("no sample %s%s" % (name, want))


def same(a, b):
    return abs(a - b) <= 1e-12 * abs(b)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_exporter(path, expect):
    exe = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    if not exe:
        print("SKIP: prometheus-node-exporter is not installed (scripts/debian-packages)", file=sys.stderr)
        sys.exit(77)
    textdir = tempfile.mkdtemp(prefix="goodput-textfile-")
    os.symlink(path, os.path.join(textdir, "goodput.prom"))
    port = free_port()
    log = open(os.path.join(textdir, "..", os.path.basename(textdir) + ".log"), "w")
    p = subprocess.Popen([exe, "--collector.disable-defaults", "--collector.textfile",
                          "--collector.textfile.directory=" + textdir, "--web.listen-address=127.0.0.1:%d" % port],
                         stdout=log, stderr=log)
    try:
        body = None
        for _ in range(100):
            try:
                body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5).read().decode()
                break
            except OSError:
                check(p.poll() is None, "node_exporter exited %s" % p.returncode)
                time.sleep(0.1)
        check(body is not None, "node_exporter did not answer")
        check(re.search(r"^node_textfile_scrape_error 0$", body, re.M),
              "node_exporter could not read the file:\n" + "\n".join(l for l in body.splitlines() if "textfile" in l))
        check('node_textfile_mtime_seconds{file="%s"}' % os.path.join(textdir, "goodput.prom") in body or
              "node_textfile_mtime_seconds{file=\"goodput.prom\"}" in body,
              "node_exporter has no mtime of goodput.prom")
        for line, v in expect:
            m = re.search("^" + re.escape(line) + r" (\S+)$", body, re.M)
            check(m, "node_exporter does not serve %s" % line)
            check(same(float(m.group(1)), v), "node_exporter: %s %s, goodputd wrote %r" % (line, m.group(1), v))
        n = len([l for l in body.splitlines() if l.startswith("goodput_")])
        print("prometheus-node-exporter (%s) serves %d goodput_ samples, node_textfile_scrape_error 0" % (exe, n))
    finally:
        p.terminate()
        p.wait(10)
        log.close()
        shutil.rmtree(textdir, ignore_errors=True)


def main():
    tmp = tempfile.mkdtemp(prefix="goodput-metrics-")
    rt = os.path.join(tmp, "run")
    os.mkdir(rt)
    path = os.path.join(rt, "goodput.prom")
    d = None
    try:
        d = Daemon(goodputd, goodput, tmp, env={"RUNTIME_DIRECTORY": rt}).start()
        with open(path) as f:
            first = parse(f.read())
        check(value(first, "goodput_daemon_state", state="idle") == 1, "not idle at start")
        check(value(first, "goodput_daemon_start_time_seconds") <= time.time(), "start time in the future")
        check(value(first, "goodput_daemon_resident_memory_bytes") > 1e6, "no resident memory")
        print("written at start: %d samples" % len(first))

        d.request({"command": "submit", "study": tiny_spec("m1", trials=4)})
        reads, inodes = 0, set()
        end = time.monotonic() + 60
        while time.monotonic() < end:
            with open(path) as f:
                inodes.add(os.fstat(f.fileno()).st_ino)
                s = parse(f.read())
            reads += 1
            try:
                if value(s, "goodput_study_info", study="m1", state="done") == 1:
                    break
            except TestFailure:
                pass
            time.sleep(0.01)
        check(reads > 10 and len(inodes) > 2, "%d reads saw %d versions of the file" % (reads, len(inodes)))
        check(sorted(os.listdir(rt)) == ["goodput.prom"], "left behind: %s" % os.listdir(rt))
        print("%d reads while study m1 ran, %d versions of the file, every one whole" % (reads, len(inodes)))

        best = json.loads(d.client("best", "--json", "m1", check_rc=0).stdout)["best"]
        trials = json.loads(d.client("trials", "--json", "m1", check_rc=0).stdout)["trials"]
        # the file has every digit (%.17g); cJSON may print 15 when they read
        # back within an epsilon: the same figure to 1e-12
        cost = value(s, "goodput_study_best_cost_per_million_tokens_dollars", study="m1")
        check(same(cost, best["cost_per_mtok"]), "cost %r, goodput best says %r" % (cost, best["cost_per_mtok"]))
        check(same(value(s, "goodput_study_best_goodput_tokens_per_second", study="m1"), best["max_goodput"]),
              "goodput")
        check(value(s, "goodput_study_best_measurements", study="m1") == best["measurements"], "measurements")
        for outcome in ("done", "infeasible", "failed"):
            n = sum(1 for t in trials if t["state"] == outcome)
            check(value(s, "goodput_study_trials", study="m1", outcome=outcome) == n,
                  "trials %s: file %r, goodput trials %d" % (outcome, value(s, "goodput_study_trials",
                                                                            study="m1", outcome=outcome), n))
        check(value(s, "goodput_study_progress_ratio", study="m1") == 1, "progress of a done study")
        print("study m1: cost $%.4f/Mtok, %d trials by outcome, as goodput best and trials answer" %
              (cost, len(trials)))

        node_exporter(path, [('goodput_study_best_cost_per_million_tokens_dollars{study="m1"}', cost),
                             ('goodput_study_progress_ratio{study="m1"}', 1.0)])
        check(d.stop() == 0, "goodputd exit code")

        cfg = {"metrics_file": "relative.prom"}
        bad = Daemon(goodputd, goodput, tmp, name="bad", config=cfg)
        bad.start(wait=False)
        rc = bad.proc.wait(20)
        check(rc != 0 and "metrics_file" in bad.log(), "a relative metrics_file: exit %d\n%s" % (rc, bad.log()))
        print("metrics_file \"relative.prom\" refused: %s" % bad.log().strip().splitlines()[-1])
        print("ok")
    except TestFailure as e:
        print("FAIL: %s" % e, file=sys.stderr)
        if d:
            d.stop()
        sys.exit(1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


main()
