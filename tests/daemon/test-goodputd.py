#!/usr/bin/env python3
"""Integration tests of goodputd: real daemon processes on a private socket
and state directory, talked to through raw JSON lines and the `goodput`
client. Usage: test-goodputd.py GOODPUTD GOODPUT CASE."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemonlib import (SkipTest, check, pgid_alive, read_json_line, run, tiny_spec,  # noqa: E402
                       trials_ok, Notify, TestFailure)


def case_protocol(make, tmp):
    """Every command over raw JSON lines, on a dry-run study."""
    d = make(args=["--dry-run"]).start()
    r = d.request({"command": "status"})
    check(r["ok"] and r["state"] == "idle" and r["queue"] == [] and r["current"] is None, r)
    check(d.request({"command": "list"}) == {"ok": True, "studies": []}, "empty list")

    r = d.request({"command": "submit", "study": tiny_spec("p1", trials=4), "id": 7})
    check(r["ok"] and r["id"] == 7 and r["study"]["name"] == "p1" and r["position"] == 1, r)
    r = d.request({"command": "submit", "study": tiny_spec("p1")})
    check(not r["ok"] and "exists already" in r["error"], r)
    bad = tiny_spec("p2")
    bad["workload"]["input_len"] = 0
    r = d.request({"command": "submit", "study": bad})
    check(not r["ok"] and "workload.input_len" in r["error"], r)
    bad = tiny_spec("p3")
    bad["engine"] = "no-such-engine"
    r = d.request({"command": "submit", "study": bad})
    check(not r["ok"] and "no-such-engine" in r["error"], r)

    d.wait_state("p1", ["done"], 180)
    r = d.request({"command": "best", "study": "p1"})
    check(r["ok"] and r["final"] and r["best"]["cost_per_mtok"] > 0 and "max_num_seqs" in r["best"]["knobs"], r)
    for suffix in (".json", ".env", ".cmd"):
        check(os.path.exists(os.path.join(d.state, "best", "p1" + suffix)), "best file " + suffix)
    with open(os.path.join(d.state, "best", "p1.env")) as f:
        env = f.read()
    check("GOODPUT_MAX_NUM_SEQS=" in env and "GOODPUT_QUANTIZATION=" in env, env)
    with open(os.path.join(d.state, "best", "p1.json")) as f:
        bj = json.load(f)
    check(bj["command"][0] == "goodput-sim" and bj["knobs"] == r["best"]["knobs"], bj)

    r2 = d.request({"command": "best", "model": "llama-3.1-8b", "engine": "sim"})
    check(r2["ok"] and r2["study"]["name"] == "p1", r2)
    r2 = d.request({"command": "best", "model": "llama-3.1-8b", "engine": "sim", "label": "other"})
    check(not r2["ok"] and "no finished study" in r2["error"], r2)
    r = d.request({"command": "trials", "study": "p1"})
    check(r["ok"] and len(r["trials"]) >= 4, r)
    trials_ok(r["trials"])

    # Errors name what was wrong; the connection stays usable.
    with d.connect() as s:
        for line, want in ((b"{\"command\": \"fly\"}\n", "unknown command"),
                           (b"{\"command\": \"trials\"}\n", "study: missing"),
                           (b"{\"command\": \"best\", \"study\": \"nope\"}\n", "no study named"),
                           (b"{\"command\": \"status\", \"extra\": 1}\n", "extra: unknown key"),
                           (b"[1, 2]\n", "expected a JSON object"),
                           (b"{\"command\": \"status\"} trailing\n", "unexpected data"),
                           (b"{\"command\": \"cancel\", \"study\": \"p1\"}\n", "has finished")):
            s.sendall(line)
            r = read_json_line(s)
            check(not r["ok"] and want in r["error"], (line, r))
        # Pipelined requests are answered in order, ids echoed.
        s.sendall(b"".join(b'{"command": "status", "id": %d}\n' % i for i in range(50)))
        buf = b""
        while buf.count(b"\n") < 50:
            buf += s.recv(1 << 20)
        ids = [json.loads(x)["id"] for x in buf.split(b"\n") if x]
        check(ids == list(range(50)), ids)


def case_client(make, tmp):
    """The goodput client's commands: tables, --json, exit codes."""
    d = make(args=["--dry-run"])
    p = d.client("status")
    check(p.returncode == 1 and "cannot connect to goodputd" in p.stderr, p.stderr)
    d.start()
    spec_path = os.path.join(tmp, "c1.json")
    with open(spec_path, "w") as f:
        json.dump(tiny_spec("c1", trials=3), f)
    p = d.client("submit", spec_path, check_rc=0)
    check("submitted study c1" in p.stdout, p.stdout)
    d.wait_state("c1", ["done"], 180)
    p = d.client("list", check_rc=0)
    check("c1" in p.stdout and "done" in p.stdout and "NAME" in p.stdout, p.stdout)
    p = d.client("best", "c1", check_rc=0)
    check("knobs:" in p.stdout and "$" in p.stdout and "c1.env" in p.stdout, p.stdout)
    p = d.client("best", "--json", "--model", "llama-3.1-8b", "--engine", "sim", check_rc=0)
    check(json.loads(p.stdout)["study"]["name"] == "c1", p.stdout)
    p = d.client("trials", "c1", check_rc=0)
    check(p.stdout.count("dry-run") + p.stdout.count("baseline") >= 3, p.stdout)
    p = d.client("status", "--json", check_rc=0)
    check(json.loads(p.stdout)["state"] == "idle", p.stdout)
    p = d.client("best", "nope", check_rc=1)
    check("no study named" in p.stderr, p.stderr)
    p = d.client("trials", check_rc=2)
    for cmd in ("submit", "status", "list", "best", "trials", "cancel", "pause", "resume"):
        p = d.client(cmd, "--help", check_rc=0)
        check("Usage: goodput " + cmd in p.stdout and "--socket" in p.stdout, p.stdout)

    # pause/resume/cancel on a study that waits for its window (never now).
    now = time.localtime()
    a = (now.tm_hour * 60 + now.tm_min + 120) % 1440
    b = (a + 60) % 1440
    win = "%02d:%02d-%02d:%02d" % (a // 60, a % 60, b // 60, b % 60)
    with open(spec_path, "w") as f:
        json.dump(tiny_spec("c2", window=win), f)
    d.client("submit", spec_path, check_rc=0)
    time.sleep(0.3)
    p = d.client("status", check_rc=0)
    check("waiting for its window" in p.stdout, p.stdout)
    p = d.client("pause", check_rc=0)
    check("c2: paused" in p.stdout, p.stdout)
    time.sleep(0.3)
    check(d.request({"command": "status"})["state"] == "paused", "paused")
    p = d.client("resume", check_rc=0)
    check("c2: queued" in p.stdout, p.stdout)
    p = d.client("cancel", "c2", check_rc=0)
    check("cancelled" in p.stdout, p.stdout)
    check(d.stop() == 0, "exit code")


def case_robust(make, tmp):
    """Junk, over-long lines, idle and departing clients, a connection flood:
    the daemon keeps answering and the study is unaffected."""
    d = make(args=["--dry-run"], config={"limits": {"idle_timeout": 1, "max_connections": 40}}).start()
    d.request({"command": "submit", "study": tiny_spec("r1", trials=6)})

    idle = [d.connect() for _ in range(5)]                    # silent clients
    half = d.connect()
    half.sendall(b'{"command": "sta')                          # leaves mid-line
    half.close()
    with d.connect() as s:                                     # binary junk
        s.sendall(os.urandom(4096).replace(b"\n", b" ") + b"\n")
        r = read_json_line(s)
        check(not r["ok"], r)
        s.sendall(b'{"command": "status"}\n')
        check(read_json_line(s)["ok"], "usable after junk")
    with d.connect(30) as s:                                   # over-long line (limit 1 MiB)
        try:
            s.sendall(b"x" * (1100 * 1024))
        except (BrokenPipeError, ConnectionResetError):
            pass
        r = read_json_line(s)
        check(not r["ok"] and "longer than" in r["error"], r)
    # A flood beyond max_connections: the extra ones are told and closed.
    flood = []
    refused = 0
    for _ in range(45):
        c = d.connect()
        flood.append(c)
    time.sleep(0.3)
    for c in flood:
        c.settimeout(0.2)
        try:
            data = c.recv(4096)
            if b"too many connections" in data:
                refused += 1
        except socket.timeout:
            pass
    check(refused >= 5, "refused %d of 45 (limit 40, 5 idle already)" % refused)
    for c in flood:
        c.close()
    # Silent clients are dropped after the idle timeout with a reason; one
    # that keeps asking is not, however long it stays.
    with d.connect() as busy:
        for _ in range(8):                                     # 2.4 s, over twice the timeout
            busy.sendall(b'{"command": "status"}\n')
            r = read_json_line(busy)
            check(r["ok"], "a busy client is served: %s" % r)
            time.sleep(0.3)
    for c in idle:
        c.settimeout(5)
        data = c.recv(4096)
        check(b"idle timeout" in data, data)
        c.close()
    check(d.request({"command": "status"})["ok"], "still serving")
    st = d.wait_state("r1", ["done"], 180)
    check(st["state"] == "done", st)
    trials_ok(d.request({"command": "trials", "study": "r1"})["trials"])


def case_permission(make, tmp):
    """SO_PEERCRED: an unprivileged uid may read but not change state; a
    member of socket_group may."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        raise SkipTest("needs root and setpriv to run a client as another uid")
    group = "users"
    d = make(args=["--dry-run", "--socket-mode", "0666"], config={"socket_group": group}).start()
    nobody = ["--reuid=65534", "--regid=65534", "--clear-groups"]
    member = ["--reuid=65534", "--regid=65534", "--groups=100"]
    spec_path = os.path.join(tmp, "perm.json")
    with open(spec_path, "w") as f:
        json.dump(tiny_spec("perm", trials=2), f)
    os.chmod(spec_path, 0o644)
    p = d.client("status", user=nobody, check_rc=0)
    check("goodputd" in p.stdout, p.stdout)
    p = d.client("submit", spec_path, user=nobody, check_rc=1)
    check("permission denied" in p.stderr and "uid 65534" in p.stderr, p.stderr)
    p = d.client("cancel", "perm", user=nobody, check_rc=1)
    check("permission denied" in p.stderr, p.stderr)
    p = d.client("pause", user=nobody, check_rc=1)
    check(d.request({"command": "list"})["studies"] == [], "nothing was queued")
    # Unprivileged peers get the small line limit.
    p = d.client("submit", spec_path, user=member, check_rc=0)
    d.wait_state("perm", ["done"], 180)
    p = d.client("best", "perm", user=nobody, check_rc=0)
    p = d.client("report", "--markdown", "perm", user=nobody, check_rc=0)
    p = d.client("report", "perm", user=nobody, check_rc=1)
    check("permission denied" in p.stderr, p.stderr)


def case_notify(make, tmp):
    """READY=1 after start-up, STATUS= on phase changes, WATCHDOG=1 at half of
    WATCHDOG_USEC, STOPPING=1 on SIGTERM, RELOADING on SIGHUP."""
    n = Notify(os.path.join(tmp, "notify.sock"))
    d = make(args=["--dry-run"], env={"NOTIFY_SOCKET": n.path, "WATCHDOG_USEC": "400000"})
    d.start(wait=False)
    check(n.wait_for("READY=1", 20), "no READY=1: %s" % n.snapshot())
    check(os.path.exists(d.sock), "READY=1 before the socket exists")
    d.wait_socket()
    n.collect(0.6)
    check(sum(1 for m in n.snapshot() if m == "WATCHDOG=1") >= 2, "watchdog pings: %s" % n.snapshot())
    d.request({"command": "submit", "study": tiny_spec("n1", trials=3)})
    d.wait_state("n1", ["done"], 180)
    n.collect(0.3)
    statuses = [m for m in n.snapshot() if m.startswith("STATUS=")]
    check(any("trial" in m for m in statuses), statuses)
    check(any("idle" in m for m in statuses), statuses)
    d.proc.send_signal(signal.SIGHUP)
    check(n.wait_for("RELOADING=1", 5), "no RELOADING=1 on SIGHUP")
    d.proc.send_signal(signal.SIGTERM)
    check(n.wait_for("STOPPING=1", 10), "no STOPPING=1: %s" % n.snapshot()[-5:])
    check(d.stop() == 0, "exit code")
    check(not os.path.exists(d.sock), "own socket removed on exit")
    n.close()


def case_stall(make, tmp):
    """GOODPUTD_DEBUG_STALL_SECONDS: SIGUSR1 stalls the loop, so the watchdog
    pings stop for that long (what the nspawn test turns into a restart), and
    resume afterwards."""
    n = Notify(os.path.join(tmp, "notify.sock"))
    d = make(args=["--dry-run"], env={"NOTIFY_SOCKET": n.path, "WATCHDOG_USEC": "200000",
                                     "GOODPUTD_DEBUG_STALL_SECONDS": "2"})
    d.start()
    check(n.wait_for("READY=1", 20), "no READY=1")
    n.collect(0.5)
    d.proc.send_signal(signal.SIGUSR1)
    time.sleep(0.3)  # the last ping before the stall may still arrive
    before = sum(1 for m in n.snapshot() if m == "WATCHDOG=1")
    n.collect(1.2)
    during = sum(1 for m in n.snapshot() if m == "WATCHDOG=1") - before
    check(during == 0, "%d watchdog pings during the stall" % during)
    d.wait_socket(10)
    n.collect(0.6)
    after = sum(1 for m in n.snapshot() if m == "WATCHDOG=1") - before
    check(after >= 2, "watchdog pings did not resume: %d" % after)
    check("stalling the loop" in d.log(), d.log())
    check(d.stop() == 0, "exit code")
    n.close()


def case_activate(make, tmp):
    """Socket activation through systemd-socket-activate, with NOTIFY_SOCKET."""
    tool = shutil.which("systemd-socket-activate")
    if not tool:
        raise SkipTest("systemd-socket-activate is not installed (package systemd)")
    n = Notify(os.path.join(tmp, "notify.sock"))
    d = make(args=["--dry-run"], env={"NOTIFY_SOCKET": n.path, "WATCHDOG_USEC": "2000000"})
    act = os.path.join(tmp, "activated.sock")
    prefix = [tool, "-l", act, "-E", "NOTIFY_SOCKET", "-E", "WATCHDOG_USEC", "-E", "PATH", "-E", "GOODPUT_ENGINES_DIR"]
    d.start(prefix=prefix, wait=False)
    d.sock = act
    time.sleep(0.3)
    d.wait_socket()  # the first connection starts goodputd
    check(n.wait_for("READY=1", 20), "no READY=1 under socket activation: %s" % n.snapshot())
    check("listening on the socket systemd passed" in d.log(), d.log())
    d.request({"command": "submit", "study": tiny_spec("a1", trials=2)})
    d.wait_state("a1", ["done"], 180)
    p = d.client("best", "a1", check_rc=0)
    check(d.stop() == 0, "exit code")
    check(os.path.exists(act), "a passed socket is not unlinked by goodputd")
    n.close()


def wait_probing(d, study, min_trial):
    cur = d.wait_phase(["probing"], min_trial=min_trial, seconds=120)
    check(cur["study"] == study, cur)
    return cur


def case_restart(make, tmp):
    """SIGTERM mid-trial (real goodput-sim servers): the trial is torn down and
    marked interrupted, no server is left; after a restart the study resumes
    and finishes with no trial lost or duplicated."""
    d = make(name="rs").start()
    d.request({"command": "submit", "study": tiny_spec("rs", trials=3)})
    cur = wait_probing(d, "rs", 2)
    check(d.stop() == 0, "exit code after SIGTERM")
    trials = trials_from_db(d, "rs")
    interrupted = [t for t in trials if t["state"] == "interrupted"]
    check(len(interrupted) == 1 and interrupted[0]["seq"] == cur["trial"], trials)
    check(no_sim_running(d), "a goodput-sim server survived the stop")
    d.start()
    d.wait_state("rs", ["done"], 240)
    trials = d.request({"command": "trials", "study": "rs"})["trials"]
    trials_ok(trials)
    check(any(t["seq"] == cur["trial"] and t["state"] == "done" for t in trials), "interrupted trial redone")
    check(d.request({"command": "best", "study": "rs"})["ok"], "best after restart")


def case_crash(make, tmp):
    """kill -9 mid-trial: the orphaned server is killed on restart (by its
    recorded process group) and the study finishes without loss or repeats."""
    d = make(name="cr").start()
    d.request({"command": "submit", "study": tiny_spec("cr", trials=3)})
    cur = wait_probing(d, "cr", 1)
    pgid = cur_pgid(d, "cr")
    check(pgid and pgid_alive(pgid), "the server under test runs (pgid %s)" % pgid)
    d.stop(sig=signal.SIGKILL)
    check(pgid_alive(pgid), "the orphan outlives a kill -9 of goodputd")
    d.start()
    deadline = time.monotonic() + 20
    while pgid_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    check(not pgid_alive(pgid), "orphaned server (pgid %d) still running after the restart" % pgid)
    d.wait_state("cr", ["done"], 240)
    trials = d.request({"command": "trials", "study": "cr"})["trials"]
    trials_ok(trials)
    check(len(trials) >= 3, trials)


def trials_from_db(d, study):
    """Reads the trials with the sqlite3 module (the daemon is stopped; WAL)."""
    import sqlite3
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(d.state, "goodput.db"), uri=True)
    rows = db.execute("select t.seq, t.state from trials t join studies s on s.id = t.study_id "
                      "where s.name = ? order by t.seq", (study,)).fetchall()
    db.close()
    return [{"seq": r[0], "state": r[1]} for r in rows]


def cur_pgid(d, study):
    import sqlite3
    for _ in range(50):
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(d.state, "goodput.db"), uri=True)
        row = db.execute("select t.server_pgid from trials t join studies s on s.id = t.study_id "
                         "where s.name = ? and t.server_pgid > 0 order by t.seq desc limit 1",
                         (study,)).fetchone()
        db.close()
        if row:
            return row[0]
        time.sleep(0.1)
    return None


def no_sim_running(d):
    out = subprocess.run(["pgrep", "-f", "--", "--served-model-name llama-3.1-8b"], capture_output=True,
                         text=True).stdout.split()
    for pid in out:
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                pass
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if d.state.encode() in f.read():
                    return False
        except OSError:
            pass
    # Only servers started by this daemon carry its log dir in their fds.
    for pid in out:
        try:
            for fd in os.listdir("/proc/%s/fd" % pid):
                if os.readlink("/proc/%s/fd/%s" % (pid, fd)).startswith(d.state):
                    return False
        except OSError:
            pass
    return True


def case_concurrent(make, tmp):
    """200 clients at once query `best` while a real study runs: all answered."""
    import selectors
    d = make(name="cc", verbose=False).start()
    d.request({"command": "submit", "study": tiny_spec("cc", trials=6)})
    d.wait_phase(["probing"], min_trial=1, seconds=120)
    deadline = time.monotonic() + 120
    while not d.request({"command": "best", "study": "cc"})["ok"]:
        check(time.monotonic() < deadline, "no best yet")
        time.sleep(0.2)
    lat = query_many(d, 200, {"command": "best", "study": "cc"})
    lat.sort()
    print("best under 200 concurrent clients: p50 %.2f ms, p99 %.2f ms, max %.2f ms" %
          (lat[len(lat) // 2] * 1e3, lat[int(len(lat) * 0.99)] * 1e3, lat[-1] * 1e3))
    # A kept answer is never stale: polled while the study goes on, `best`
    # gives the cost `list` works out afresh, unless the study changed during
    # the question (`list` asked before and after).
    def listed():
        for st in d.request({"command": "list"})["studies"]:
            if st["name"] == "cc":
                return (st["state"], st["best_cost_per_mtok"], st["best_measurements"])
        check(False, "cc is not listed")
    seen = set()
    deadline = time.monotonic() + 240
    while True:
        check(time.monotonic() < deadline, "cc did not finish within 240 s; compared %s" % seen)
        before = listed()
        r = d.request({"command": "best", "study": "cc"})
        after = listed()
        if before == after and before[1] is not None:
            got = (r["study"]["state"], r["study"]["best_cost_per_mtok"], r["study"]["best_measurements"])
            check(r["ok"] and got == before and r["final"] == (before[0] == "done"),
                  "a kept answer is stale: %s, list says %s" % (got, before))
            seen.add(before)
        if after[0] == "done" and before == after:
            break
        time.sleep(0.05)
    # the comparison ran while the study ran and once it was done
    check({st for st, _, _ in seen} == {"running", "done"}, "answers compared only in states %s" % seen)
    print("best followed the study through %d distinct answers" % len(seen))
    d.wait_state("cc", ["done"], 240)


def query_many(d, n, req):
    """Connects n clients, sends one request on each at once, returns the
    latencies (send → full answer) in seconds; every answer must be ok."""
    import selectors
    sel = selectors.DefaultSelector()
    socks = []
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(d.sock)
        s.setblocking(False)
        socks.append(s)
    line = (json.dumps(req) + "\n").encode()
    start = {}
    for s in socks:
        start[s] = time.monotonic()
        s.send(line)
        sel.register(s, selectors.EVENT_READ, b"")
    lat = []
    bufs = {s: b"" for s in socks}
    deadline = time.monotonic() + 60
    while len(lat) < n:
        check(time.monotonic() < deadline, "only %d of %d answered" % (len(lat), n))
        for key, _ in sel.select(1):
            s = key.fileobj
            data = s.recv(1 << 16)
            check(data, "closed without an answer")
            bufs[s] += data
            if b"\n" in bufs[s]:
                lat.append(time.monotonic() - start[s])
                check(json.loads(bufs[s].split(b"\n")[0])["ok"], bufs[s][:200])
                sel.unregister(s)
                s.close()
    return lat


def case_report(make, tmp):
    """`report`: the Markdown at once; with html the files written by a child
    process while the daemon keeps answering; answers stay in order."""
    d = make(args=["--dry-run"]).start()
    d.request({"command": "submit", "study": tiny_spec("rp1", trials=3)})
    # while it runs: status names the live report and an ETA once a trial is in
    live = os.path.join(d.state, "reports", "rp1", "report.html")
    seen_report = seen_eta = False
    end = time.monotonic() + 60
    while time.monotonic() < end:
        cur = d.request({"command": "status"}).get("current") or {}
        seen_report |= cur.get("report") == live
        seen_eta |= isinstance(cur.get("eta_seconds"), (int, float))
        if d.request({"command": "list"})["studies"][0]["state"] == "done":
            break
        time.sleep(0.05)
    d.wait_state("rp1", ["done"], 180)
    check(seen_report, "status never named the live report " + live)
    # the report is rewritten at the study's end: final, without the live header
    end = time.monotonic() + 30
    while time.monotonic() < end and not (os.path.exists(live) and "Progress (study running" not in open(live).read()):
        time.sleep(0.1)
    check(os.path.exists(live), "no report written at the study's end")
    html = open(live).read() if os.path.exists(live) else ""
    check('http-equiv="refresh"' not in html and "rp1" in html, "the final report still reloads itself")
    r = d.request({"command": "report", "study": "rp1", "id": 3})
    check(r["ok"] and r["id"] == 3 and r["study"] == "rp1" and "rp1" in r["markdown"] and "|" in r["markdown"], r)
    r = d.request({"command": "report", "study": "nope"})
    check(not r["ok"] and "no study named" in r["error"], r)
    r = d.request({"command": "report"})
    check(not r["ok"] and "study: missing" in r["error"], r)
    r = d.request({"command": "report", "study": "rp1", "html": "yes"})
    check(not r["ok"] and "html: expected true or false" in r["error"], r)

    # html: deferred; the same connection's next request waits, others do not.
    with d.connect(120) as s:
        s.sendall(b'{"command": "report", "study": "rp1", "html": true, "id": 1}\n'
                  b'{"command": "status", "id": 2}\n')
        t0 = time.monotonic()
        check(d.request({"command": "status"})["ok"], "another client is answered meanwhile")
        buf = b""
        while buf.count(b"\n") < 2:
            chunk = s.recv(65536)
            check(chunk, "closed before both answers: %r" % buf[:300])
            buf += chunk
        first, second = [json.loads(x) for x in buf.split(b"\n")[:2]]
    print("html report answered in %.2f s" % (time.monotonic() - t0))
    check(first["ok"] and first["id"] == 1 and first["html"].endswith("/reports/rp1/report.html"), first)
    check(second["ok"] and second["id"] == 2, second)
    check(os.path.exists(first["html"]), first["html"])
    with open(first["html"]) as f:
        html = f.read()
    check("rp1" in html and "<html" in html.lower(), html[:300])
    if shutil.which("gnuplot"):
        check("<svg" in html, "no inline plots although gnuplot is installed")

    # The client: --socket asks the daemon; without it the --db file is read.
    p = d.client("report", "--markdown", "rp1", check_rc=0)
    check("rp1" in p.stdout and "|" in p.stdout, p.stdout[:300])
    p = d.client("report", "rp1", check_rc=0)
    check("report: " + first["html"] in p.stdout, p.stdout)
    p = d.client("report", "nope", check_rc=1)
    check("no study named" in p.stderr, p.stderr)
    p = subprocess.run([d.goodput, "report", "--db", os.path.join(d.state, "goodput.db"), "--markdown", "rp1"],
                       capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and "rp1" in p.stdout, p.stderr)
    # goodput's global --socket before the verb, and $GOODPUT_SOCKET, as for list/best/trials
    p = subprocess.run([d.goodput, "--socket", d.sock, "report", "rp1"], capture_output=True, text=True,
                       timeout=60, env=d.env)
    check(p.returncode == 0 and "report: " + first["html"] in p.stdout, f"--socket before report: {p.stderr}")
    p = subprocess.run([d.goodput, "--socket=" + d.sock, "list"], capture_output=True, text=True, timeout=60,
                       env=d.env)
    check(p.returncode == 0 and "rp1" in p.stdout, f"--socket= before list: {p.stderr}")
    p = subprocess.run([d.goodput, "report", "--markdown", "rp1"], capture_output=True, text=True, timeout=60,
                       env=dict(d.env, GOODPUT_SOCKET=d.sock))
    check(p.returncode == 0 and "rp1" in p.stdout, f"$GOODPUT_SOCKET: {p.stderr}")
    # no daemon there: the error names the socket and says how to read a store
    p = subprocess.run([d.goodput, "--socket", os.path.join(d.state, "none.sock"), "report", "rp1"],
                       capture_output=True, text=True, timeout=60, env=d.env)
    check(p.returncode == 1 and "none.sock" in p.stderr and "--db FILE" in p.stderr, f"no daemon: {p.stderr}")
    # A client that leaves while its report is written does not hurt anyone.
    s = d.connect()
    s.sendall(b'{"command": "report", "study": "rp1", "html": true}\n')
    s.close()
    time.sleep(0.2)
    check(d.request({"command": "status"})["ok"], "still serving")
    check(d.stop() == 0, "exit code")


def case_units(make, tmp):
    """systemd-analyze verify passes with no output on every unit; the
    service's hardening score is printed."""
    if not shutil.which("systemd-analyze"):
        raise SkipTest("systemd-analyze is not installed")
    build_units = os.environ["GOODPUT_UNITS_BUILD"]
    src_units = os.environ["GOODPUT_UNITS_SRC"]
    goodputd = os.path.abspath(sys.argv[1])
    goodput = os.path.abspath(sys.argv[2])
    names = []
    for d, files in ((build_units, ("goodputd.service", "goodput-resume.service", "goodput-pause.service")),
                     (src_units, ("goodputd.socket", "goodput-resume.timer", "goodput-pause.timer"))):
        for f in files:
            with open(os.path.join(d, f)) as src:
                text = src.read()
            # The installed paths do not exist here: point at the build.
            lines = []
            for line in text.splitlines():
                if line.startswith("ExecStart=") and line.endswith("/goodputd"):
                    line = "ExecStart=" + goodputd
                elif line.startswith("ExecStart=") and "/goodput " in line:
                    line = "ExecStart=" + goodput + " " + line.split("/goodput ", 1)[1]
                lines.append(line)
            with open(os.path.join(tmp, f), "w") as dst:
                dst.write("\n".join(lines) + "\n")
            names.append(f)
    p = subprocess.run(["systemd-analyze", "verify"] + names, cwd=tmp, capture_output=True, text=True)
    check(p.returncode == 0 and p.stdout == "" and p.stderr == "",
          "systemd-analyze verify:\n%s%s" % (p.stdout, p.stderr))
    p = subprocess.run(["systemd-analyze", "security", "--offline=yes", "--threshold=30",
                        "goodputd.service"], cwd=tmp, capture_output=True, text=True)
    score = [l for l in p.stdout.splitlines() if "Overall exposure" in l]
    print(score[0] if score else p.stdout[-300:])
    check(p.returncode == 0, "security exposure above 3.0:\n" + p.stdout[-2000:] + p.stderr)


def parallel_spec(name, trials):
    spec = tiny_spec(name, trials=trials)
    spec["gpu"] = {"type": "L40S", "devices": [0, 1, 2, 3], "price_per_gpu_hour": 0.99}
    spec["budget"]["parallel"] = "auto"
    return spec


def wait_side_by_side(d, n, seconds=120):
    """Until status lists n trials holding GPUs; returns the status."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        r = d.request({"command": "status"})
        cur = r.get("current")
        held = [t for t in (cur or {}).get("trials", []) if t["gpus"]]
        if len(held) >= n:
            return r
        time.sleep(0.05)
    raise TestFailure("never %d trials in flight:\n%s" % (n, d.log()))


def server_pgids(d, study):
    import sqlite3
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(d.state, "goodput.db"), uri=True)
    rows = db.execute("select t.server_pgid from trials t join studies s on s.id = t.study_id "
                      "where s.name = ? and t.server_pgid > 0", (study,)).fetchall()
    db.close()
    return [r[0] for r in rows]


def case_parallel(make, tmp):
    """Trials side by side on a 4-GPU host: status lists every trial in flight
    with its GPUs, phase and knobs, and STATUS= summarises them; a pause with
    several in flight tears them all down and a resume continues; kill -9
    with several in flight, then a restart: every orphan killed, every trial
    redone, none duplicated, the study finishes."""
    n = Notify(os.path.join(tmp, "notify.sock"))
    d = make(name="par", env={"NOTIFY_SOCKET": n.path}).start()
    d.request({"command": "submit", "study": parallel_spec("par", trials=12)})
    r = wait_side_by_side(d, 3)
    trials = r["current"]["trials"]
    gpus = [t["gpus"] for t in trials if t["gpus"]]
    check(len(set(gpus)) == len(gpus), "two trials on one GPU: %s" % trials)
    for t in trials:
        check(t["phase"] in ("waiting", "deploying", "quality-check", "probing", "teardown") and t["knobs"]
              and t["trial"] >= 1, t)
    check(r["current"]["gpus_total"] == 4 and r["current"]["gpus_busy"] >= 3, r["current"])
    check(n.wait_for("STATUS=trials ", 20), "no STATUS= summary of several trials: %s" % n.snapshot()[-5:])
    for _ in range(50):  # while several are in flight
        p = d.client("status", check_rc=0)
        if p.stdout.count(" on GPU ") >= 2:
            break
    check(p.stdout.count(" on GPU ") >= 2, "goodput status does not list the trials in flight:\n%s" % p.stdout)
    check(any("/4 GPUs" in m for m in n.snapshot()), n.snapshot()[-5:])

    # pause with several in flight: all torn down; resume continues
    check(d.request({"command": "pause", "study": "par"})["ok"], "pause")
    d.wait_phase(["paused"], min_trial=0, seconds=60)
    check(no_sim_running(d), "a server survived the pause")
    check(d.request({"command": "resume", "study": "par"})["ok"], "resume")
    wait_side_by_side(d, 2)

    # kill -9 with several in flight
    pgids = []
    deadline = time.monotonic() + 60
    while len(pgids) < 2 and time.monotonic() < deadline:
        pgids = server_pgids(d, "par")
        time.sleep(0.05)
    check(len(pgids) >= 2, "fewer than 2 servers recorded: %s" % pgids)
    d.stop(sig=signal.SIGKILL)
    in_flight = [t for t in trials_from_db(d, "par") if t["state"] in ("deploying", "probing", "pending")]
    check(len(in_flight) >= 2, "killed with %s in flight" % in_flight)
    d.start()
    deadline = time.monotonic() + 20
    while any(pgid_alive(p) for p in pgids) and time.monotonic() < deadline:
        time.sleep(0.1)
    check(not any(pgid_alive(p) for p in pgids), "orphaned servers still running: %s" % pgids)
    d.wait_state("par", ["done"], 300)
    trials = d.request({"command": "trials", "study": "par"})["trials"]
    trials_ok(trials)
    for t in in_flight:
        check(any(u["seq"] == t["seq"] and u["state"] in ("done", "infeasible", "failed") for u in trials),
              "trial %d in flight at the kill was not redone" % t["seq"])
    check(d.stop() == 0, "exit code")
    n.close()


CASES = {
    "protocol": case_protocol,
    "client": case_client,
    "robust": case_robust,
    "permission": case_permission,
    "notify": case_notify,
    "activate": case_activate,
    "restart": case_restart,
    "crash": case_crash,
    "concurrent": case_concurrent,
    "units": case_units,
    "report": case_report,
    "stall": case_stall,
    "parallel": case_parallel,
}

if __name__ == "__main__":
    sys.exit(run(CASES, sys.argv))
