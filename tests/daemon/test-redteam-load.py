#!/usr/bin/env python3
"""Red team, round two (issue 27 items 4, 5 and 8): each attack replayed
against real goodputd processes on a private socket and state directory,
and the defended outcome checked. Usage:
test-redteam-load.py GOODPUTD GOODPUT CASE."""

import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemonlib import SkipTest, TestFailure, check, read_json_line, run, tiny_spec  # noqa: E402


def vm_kib(pid, field):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def descendants(pid):
    out = []
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            kids = [int(c) for c in f.read().split()]
    except OSError:
        return out
    for k in kids:
        out.append(k)
        out += descendants(k)
    return out


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return ""


def timed(d, req, timeout=30):
    t0 = time.monotonic()
    r = d.request(req, timeout=timeout)
    return r, time.monotonic() - t0


def case_prompts(make, tmp):
    """Item 4: a real study of a million prompts (a captured production
    workload can be that large) froze goodputd: every arrival of the
    saturation run got its curl handle at once on the daemon's loop (5,000
    prompts: `status` 11.5 s, 99 MB; 1,000,000: 3.9 GB and growing). Now the
    probe runs in a process of its own and sends as room comes: `status` is
    answered at once all through the load point and goodputd's memory does
    not grow with the workload; a cancel ends the probe's process and the
    server."""
    d = make(verbose=False).start()
    pid = d.proc.pid
    base = vm_kib(pid, "VmRSS")
    spec = tiny_spec("million", trials=1)
    spec["workload"].update({"num_prompts": 1000000, "input_len": 128, "output_len": 16})
    spec["probe"]["request_timeout"] = 600
    r = d.request({"command": "submit", "study": spec})
    check(r["ok"], r)
    d.wait_phase(["probing"], seconds=120)
    probe_pid, probe_kib, worst, n = 0, 0, 0.0, 0
    end = time.monotonic() + 10
    while time.monotonic() < end:
        r, dt = timed(d, {"command": "status"})
        check(r["ok"] and r["current"] and r["current"]["phase"] == "probing", r)
        worst = max(worst, dt)
        n += 1
        for k in descendants(pid):
            if comm(k) == "goodput-probe":
                probe_pid, probe_kib = k, max(probe_kib, vm_kib(k, "VmRSS"))
        time.sleep(0.05)
    hwm = vm_kib(pid, "VmHWM")
    print("prompts: %d answers while a million-prompt load point ran, slowest %.3f s; goodputd RSS %d -> peak %d "
          "KiB; the probe's process %d KiB" % (n, worst, base, hwm, probe_kib))
    check(probe_pid > 0, "no probe process among goodputd's children: %s" %
          [(k, comm(k)) for k in descendants(pid)])
    # a bound a loaded 2-core machine under ASan meets (quiet: about 1 ms;
    # the 50 ms target is measured by the benchmark goodputd-prompts)
    check(worst < 1.0, "status took %.2f s while the load point ran" % worst)
    check(hwm - base < 50 * 1024, "goodputd grew from %d to %d KiB" % (base, hwm))
    kids = descendants(pid)
    r, dt = timed(d, {"command": "cancel", "study": "million"})
    check(r["ok"], r)
    end = time.monotonic() + 30
    while any(os.path.exists("/proc/%d" % k) and comm(k) not in ("", "zombie") for k in kids):
        check(time.monotonic() < end, "left behind after the cancel: %s" %
              [(k, comm(k)) for k in kids if os.path.exists("/proc/%d" % k)])
        time.sleep(0.05)
    st = d.wait_state("million", ["cancelled"], 30)
    print("prompts: cancel answered in %.3f s; study %s, nothing left running" % (dt, st["state"]))
    check(dt < 2.0, "cancel took %.2f s" % dt)


def big_study(d, name, trials=136):
    """A finished dry-run study of about 136 trials, whose Markdown report
    takes the loop about 30 ms to build."""
    spec = tiny_spec(name, trials=trials)
    spec["search_space"] = {"max_num_seqs": {"min": 8, "max": 512, "scale": "linear", "step": 8},
                            "max_num_batched_tokens": {"min": 512, "max": 8192, "scale": "linear", "step": 512},
                            "tensor_parallel": [1]}
    spec["search"] = {"seed": 1, "strategy": "plain", "algorithm": "GN_DIRECT_L"}
    spec["budget"]["max_wall_time"] = "10h"
    r = d.request({"command": "submit", "study": spec})
    check(r["ok"], r)
    d.wait_state(name, ["done"], 300)
    n = len(d.request({"command": "trials", "study": name})["trials"])
    check(n > 100, "the study has %d trials" % n)
    return n


# A client that asks for expensive answers as fast as it can: each of N
# connections keeps DEPTH requests in flight (pipelined), every answer read.
FLOODER = r"""
import json, socket, sys, time
path, n, depth, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
reqs = [json.loads(a) for a in sys.argv[5:]]
conns = []
for i in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.setblocking(False)
    conns.append([s, b"", 0, i])
print("connected", flush=True)
end = time.monotonic() + secs
answers = 0
import selectors
sel = selectors.DefaultSelector()
for c in conns:
    sel.register(c[0], selectors.EVENT_READ, c)
def send(c):
    line = (json.dumps(reqs[c[3] % len(reqs)]) + "\n").encode()
    c[0].setblocking(True)
    c[0].sendall(line)
    c[0].setblocking(False)
    c[2] += 1
for c in conns:
    for _ in range(depth):
        send(c)
while time.monotonic() < end:
    for key, _ in sel.select(timeout=0.2):
        c = key.data
        try:
            data = c[0].recv(1 << 20)
        except BlockingIOError:
            continue
        if not data:
            sel.unregister(c[0])
            continue
        c[1] += data
        while b"\n" in c[1]:
            _, c[1] = c[1].split(b"\n", 1)
            answers += 1
            c[2] -= 1
            send(c)
print(answers, flush=True)
"""


def flood(d, uid, n, depth, secs, *reqs):
    """Starts a flooder as uid; returns the process (its stdout says how
    many answers it got)."""
    p = subprocess.Popen(["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups", "--",
                          sys.executable, "-c", FLOODER, d.sock, str(n), str(depth), str(secs)] +
                         [json.dumps(r) for r in reqs], stdout=subprocess.PIPE, text=True)
    check(p.stdout.readline().strip() == "connected", "the flooder did not connect")
    return p


def root_status(d, seconds):
    """Root asks status every 100 ms for SECONDS: the latencies, sorted."""
    lat = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        r, dt = timed(d, {"command": "status"}, timeout=60)
        check(r["ok"], r)
        lat.append(dt)
        time.sleep(0.1)
    return sorted(lat)


def case_starve(make, tmp):
    """Item 5: 32 Markdown `report` requests at a time from uid 65534 (30 ms
    each for a 136-trial study) made root's `status` wait 10.5 s. Now
    expensive answers are kept per store version and every uid but root's
    has a budget of the loop's time: while uid 65534 floods, root waits at
    most for the answer in progress, not for the flooder's queue, and the
    flooder still gets answers. The bound is what this machine takes: root's
    status with nobody flooding, plus four of the slowest answer the
    flooder asks for (a starved machine builds a report in 300 ms and more;
    the flood's queue was 128 of them). Against a running study, whose
    answers cannot be kept, the flooder must have been held to its budget."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        raise SkipTest("needs root and setpriv to connect as another uid")
    d = make(args=["--dry-run", "--socket-mode", "0666"]).start()
    n = big_study(d, "big")

    def flooded(what, reqs, throttled):
        # the slowest answer the flooder will ask for, made afresh (a kept
        # one costs nothing), and root's status with nobody flooding
        base = root_status(d, 2)
        slowest = 0.0
        for req in reqs:
            slowest = max(slowest, timed(d, req, timeout=60)[1])
        p = flood(d, 65534, 32, 4, 8, *reqs)
        try:
            time.sleep(1)
            lat = root_status(d, 5)
        finally:
            out, _ = p.communicate(timeout=60)
        answers = int(out.split()[-1])
        bound = max(1.0, base[-1] + 4 * slowest)
        print("starve: %s: the slowest answer asked for %.1f ms, root's status alone max %.1f ms; while uid 65534 "
              "flooded (%d answers in 8 s) root's status p50 %.1f ms, max %.1f ms over %d (bound %.0f ms)" %
              (what, slowest * 1e3, base[-1] * 1e3, answers, lat[len(lat) // 2] * 1e3, lat[-1] * 1e3, len(lat),
               bound * 1e3))
        check(lat[-1] < bound, "root's status took %.2f s while another uid flooded" % lat[-1])
        check(answers > 0, "the flooder got no answer at all")
        # kept answers cost nothing; answers made afresh, every few ms,
        # put the flooder past its budget (goodputd -v says so)
        told = d.log().count("uid 65534 is past its budget")
        check(told or not throttled, "uid 65534 was never held to its budget of the loop's time")

    print("starve: %d trials" % n)
    # a finished study: its answers are kept while the store is unchanged
    flooded("finished study", [{"command": "report", "study": "big"}, {"command": "trials", "study": "big"}], False)
    # studies that write a trial every few milliseconds: kept answers go
    # stale at once, so each uid's budget of the loop's time does the work.
    # One such study converges in under a second on a quiet machine (271
    # trials), before the flood began; 24 in the queue keep the store
    # changing for about 20 s there, longer where the machine is slower.
    # (Slower trials would not do: at 1000 requests a trial a loaded
    # machine wrote too seldom for the flood's answers to go stale.)
    for i in range(24):
        spec = tiny_spec("busy%d" % i, trials=400)
        spec["search_space"] = {"max_num_seqs": {"min": 8, "max": 512, "scale": "linear", "step": 8},
                                "max_num_batched_tokens": {"min": 512, "max": 8192, "scale": "linear", "step": 512},
                                "tensor_parallel": [1]}
        spec["search"] = {"seed": 2 + i, "strategy": "plain", "algorithm": "GN_DIRECT_L"}
        spec["budget"]["max_wall_time"] = "10h"
        check(d.request({"command": "submit", "study": spec})["ok"], "submit busy%d" % i)
    d.wait_state("busy0", ["running"], 60)
    flooded("a study running", [{"command": "report", "study": "big"}, {"command": "report", "study": "busy0"},
                                {"command": "trials", "study": "busy0"}], True)
    busy = [s["state"] for s in d.request({"command": "list"})["studies"] if s["name"].startswith("busy")]
    check("running" in busy or "queued" in busy,
          "the busy studies ended before the flood did (%s): the case needs them longer" % busy)


# Each connection asks status: a held one is answered, a refused one is
# told "too many connections" and closed (no timeout decides which: a
# starved goodputd may be slow to say either).
HOLDER = r"""
import json, socket, sys
path, n = sys.argv[1], int(sys.argv[2])
held, refused = [], 0
for _ in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.settimeout(60)
    try:
        s.sendall(b'{"command": "status"}\n')
    except OSError:
        pass  # refused and closed before the request went: its answer is still there to read
    data = b""
    while b"\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    if json.loads(data.split(b"\n")[0]).get("ok"):
        held.append(s)
    else:
        refused += 1
        s.close()
print(len(held), refused, flush=True)
sys.stdin.read()
"""


def hold(d, uid, gid, n):
    """n connections as uid (primary group gid); returns (process, held)."""
    p = subprocess.Popen(["setpriv", "--reuid=%d" % uid, "--regid=%d" % gid, "--clear-groups", "--",
                          sys.executable, "-c", HOLDER, d.sock, str(n)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    held, _ = (int(x) for x in p.stdout.readline().split())
    return p, held


def case_slots(make, tmp):
    """Item 5: unprivileged users fill every slot but the reserved ones, and
    members of the socket group the reserved ones: root was refused, though
    the code says every slot is open to root. Now root (and goodputd's own
    uid) always get in, on a few connections beyond the total."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        raise SkipTest("needs root and setpriv to connect as other uids")
    d = make(args=["--dry-run", "--socket-mode", "0666"],
             config={"socket_group": "daemon",
                     "limits": {"max_connections": 40, "max_connections_per_uid": 8, "reserved_connections": 10,
                                "idle_timeout": 60}}).start()
    holders, users, group = [], 0, 0
    try:
        for uid in (65534, 65533, 65532, 65531):
            p, h = hold(d, uid, 65534, 8)
            holders.append(p)
            users += h
        for uid in (65520, 65519):
            p, h = hold(d, uid, 1, 8)  # primary group: the socket group
            holders.append(p)
            group += h
        check(users == 30 and group == 10, "users hold %d, the socket group %d (of 40)" % (users, group))
        conns = [d.connect() for _ in range(2)]
        for c in conns:
            c.sendall(b'{"command": "status"}\n')
            r = read_json_line(c)
            check(r["ok"], "root was refused with every slot held by others: %s" % r)
        print("slots: users hold %d and the socket group %d of 40 slots; root got %d connections and was answered" %
              (users, group, len(conns)))
        # a few only: root past its extra slots is refused like anyone
        more = [d.connect() for _ in range(6)]
        refused = 0
        for c in more:
            c.settimeout(2)
            try:
                c.sendall(b'{"command": "status"}\n')
                refused += "too many connections" in read_json_line(c).get("error", "")
            except (OSError, TestFailure):
                refused += 1  # told so and closed before the request went
        check(refused >= 2, "root took %d connections beyond the total" % (8 - refused))
        for c in conns + more:
            c.close()
    finally:
        for p in holders:
            p.stdin.close()
            p.wait(10)


def raw(d, line):
    """Sends one raw request line; returns the parsed answer."""
    with d.connect() as s:
        s.sendall(line)
        return read_json_line(s)


def case_nul(make, tmp):
    """Item 8: a \\u0000 in a name cut it short, so "victim\\u0000x"
    resolved to the study "victim" (a cancel of one name reached another).
    Now any string holding \\u0000 is refused with an error that says so,
    and the study named "victim" is untouched."""
    d = make(args=["--dry-run"]).start()
    spec = tiny_spec("victim", trials=50)
    spec["window"] = "03:00-03:01"  # queued, waiting for its window: a cancel would show
    check(d.request({"command": "submit", "study": spec})["ok"], "submit")
    for cmd in ("best", "trials", "cancel", "report"):
        r = raw(d, b'{"command": "%s", "study": "victim\\u0000x"}\n' % cmd.encode())
        check(not r["ok"] and "\\u0000" in r["error"] and "NUL" in r["error"], (cmd, r))
    spec = tiny_spec("evil", trials=1)
    line = json.dumps({"command": "submit", "study": spec}).replace('"evil"', '"evil\\u0000 --flag"')
    r = raw(d, line.encode() + b"\n")
    check(not r["ok"] and "\\u0000" in r["error"], r)
    names = [s["name"] for s in d.request({"command": "list"})["studies"]]
    st = [s for s in d.request({"command": "list"})["studies"] if s["name"] == "victim"][0]
    check(names == ["victim"] and st["state"] != "cancelled", (names, st))
    # an escaped backslash before u0000 is text, not a NUL: an ordinary unknown name
    r = raw(d, b'{"command": "best", "study": "victim\\\\u0000x"}\n')
    check(not r["ok"] and "no study named" in r["error"], r)
    print("nul: best, trials, cancel, report and submit with \\u0000 refused: %s" % r["error"])


def case_damaged(make, tmp):
    """Item 8: a database with one garbage page let goodputd start, and then
    every request that read the page failed ("database disk image is
    malformed"). Now goodputd refuses it at start, saying it is damaged and
    how to save what it holds, and leaves the file as it was; so does
    `goodput tune` on it."""
    d = make(args=["--dry-run"]).start()
    check(d.request({"command": "submit", "study": tiny_spec("a", trials=8)})["ok"], "submit")
    d.wait_state("a", ["done"], 240)  # eight dry-run trials: the model search plans slowly under ASan
    d.stop()
    db = os.path.join(d.state, "goodput.db")
    with open(db, "r+b") as f:
        f.seek(4096 * 3)  # a page of the trials' tables
        f.write(bytes((i * 151 + 7) % 256 for i in range(4096)))
    with open(db, "rb") as f:
        before = f.read()
    d2 = make(name="d2", args=["--dry-run"])
    d2.state = d.state
    d2.start(wait=False)
    try:
        rc = d2.proc.wait(60)
    except subprocess.TimeoutExpired:
        raise TestFailure("goodputd started on a damaged database:\n" + d2.log())
    log = d2.log()
    check(rc != 0 and "the database is damaged" in log and "quick_check" in log and db in log and ".recover" in log,
          "exit %s:\n%s" % (rc, log))
    with open(db, "rb") as f:
        check(f.read() == before, "the damaged file was changed")
    spec = os.path.join(tmp, "s.json")
    with open(spec, "w") as f:
        json.dump(tiny_spec("b", trials=1), f)
    p = subprocess.run([d.goodput, "tune", spec, "--db", db, "--dry-run"], capture_output=True, text=True,
                       timeout=60, env=d.env)
    check(p.returncode != 0 and "the database is damaged" in p.stderr, (p.returncode, p.stderr[-500:]))
    print("damaged: goodputd exit %d: %s" % (rc, [line for line in log.splitlines() if "damaged" in line][-1]))


def case_sparse_log(make, tmp):
    """Item 8: a request log of two lines made `goodput workload capture
    --from-log` run for 31 s: their times decades apart, the span was
    binned into millions of empty 15 s intervals. Now a sparse log gets a
    few wide intervals (at most 4 per request) and the block says how wide."""
    log = os.path.join(tmp, "two.jsonl")
    with open(log, "w") as f:
        f.write('{"input_len": 100, "output_len": 20, "t": 0}\n')
        f.write('{"input_len": 200, "output_len": 30, "t": 1700000000}\n')
    goodput = os.path.abspath(sys.argv[2])
    for extra in ([], ["--shape"]):
        t0 = time.monotonic()
        p = subprocess.run([goodput, "workload", "capture", "--from-log", log] + extra, capture_output=True, text=True,
                           timeout=120)
        dt = time.monotonic() - t0
        check(p.returncode == 0, p.stderr)
        block = json.loads(p.stdout)
        interval = block["captured"]["interval_s"]
        check(interval >= 1700000000 / 64, "interval %s s for two requests 54 years apart" % interval)
        print("sparse-log: capture --from-log %s took %.2f s, intervals of %.0f s" % (" ".join(extra), dt, interval))


def http_exchange(addr, raw_request, timeout=10):
    """Sends one raw HTTP request on a new connection; returns what came
    back before the server closed it (b"" when it closed without a word)."""
    import socket
    s = socket.create_connection(addr, timeout=timeout)
    try:
        s.sendall(raw_request)
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            out += chunk
        return out
    finally:
        s.close()


def case_sim_limit(make, tmp):
    """Item 8: goodput-sim closed connections past --max-connections with no
    HTTP status at all; a real server answers. vLLM's (uvicorn) answers
    past --limit-concurrency with 503 "Service Unavailable" (text/plain)
    and closes: goodput-sim now does so too, counts it, and serves again
    once the streams are done."""
    import socket
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
    from simlib import start_sim
    sim = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(sys.argv[1]))), "sim", "goodput-sim")
    server, url = start_sim(sim, os.path.join(tmp, "sim.log"), "--load-time", "0", "--max-connections", "8",
                            "--idle-timeout", "60")
    try:
        host, port = url.split("//")[1].split(":")
        addr = (host, int(port))
        body = json.dumps({"model": "llama-3.1-8b", "prompt": "hello", "max_tokens": 4000, "stream": True,
                           "ignore_eos": True}).encode()
        post = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n" % len(body)) + body
        busy = []
        for _ in range(8):  # every slot streaming a long reply
            c = socket.create_connection(addr, timeout=10)
            c.sendall(post)
            check(c.recv(4096).startswith(b"HTTP/1.1 200"), "a stream did not start")
            busy.append(c)
        out = http_exchange(addr, post)
        head = out.split(b"\r\n\r\n", 1)[0].lower()
        check(out.startswith(b"HTTP/1.1 503") and out.endswith(b"Service Unavailable") and
              b"content-type: text/plain; charset=utf-8" in head and b"connection: close" in head,
              "past the limit: %r" % out[:300])
        out = http_exchange(addr, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        check(out.startswith(b"HTTP/1.1 503"), "/health past the limit: %r" % out[:200])
        for c in busy:
            c.close()
        deadline = time.monotonic() + 10
        while True:
            out = http_exchange(addr, b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            if out.startswith(b"HTTP/1.1 200"):
                break
            check(time.monotonic() < deadline, "not serving again after the streams closed: %r" % out[:200])
            time.sleep(0.1)
        metrics = http_exchange(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        counted = [line for line in metrics.decode(errors="replace").splitlines() if 'reason="over_limit"' in line]
        check(counted and int(counted[0].split()[-1]) >= 2, "503s counted: %s" % counted)
        print("sim-limit: past --max-connections 8: HTTP 503 Service Unavailable, connection closed; served again")
    finally:
        server.kill()
        server.wait()


def case_report_link(make, tmp):
    """Item 8: reports/<study> made a symbolic link to another folder was
    followed: goodputd wrote report.html and its plots wherever the link
    pointed, with its own rights. Now the link is refused, nothing is
    written through it, and the report is written once it is gone."""
    d = make(args=["--dry-run"]).start()
    check(d.request({"command": "submit", "study": tiny_spec("rl", trials=2)})["ok"], "submit")
    d.wait_state("rl", ["done"], 60)
    reports = os.path.join(d.state, "reports")
    # the study's final report may still be being written: wait for it, then swap in a link
    end = time.monotonic() + 30
    while not os.path.exists(os.path.join(reports, "rl", "report.html")) or descendants(d.proc.pid):
        check(time.monotonic() < end, "the study's final report was not written")
        time.sleep(0.1)
    shutil.rmtree(os.path.join(reports, "rl"))
    target = os.path.join(tmp, "elsewhere")
    os.mkdir(target)
    os.symlink(target, os.path.join(reports, "rl"))
    r = d.request({"command": "report", "study": "rl", "html": True}, timeout=60)
    check(not r["ok"] and "symbolic link" in r["error"], r)
    check(os.listdir(target) == [], "written through the link: %s" % os.listdir(target))
    # reports/ itself a link: refused as well
    os.unlink(os.path.join(reports, "rl"))
    os.rename(reports, reports + ".real")
    os.symlink(reports + ".real", reports)
    r = d.request({"command": "report", "study": "rl", "html": True}, timeout=60)
    check(not r["ok"] and "symbolic link" in r["error"], r)
    check(not os.path.exists(os.path.join(reports + ".real", "rl")), "written through reports/ as a link")
    os.unlink(reports)
    os.rename(reports + ".real", reports)
    r = d.request({"command": "report", "study": "rl", "html": True}, timeout=60)
    check(r["ok"] and os.path.isfile(os.path.join(reports, "rl", "report.html")), r)
    print("report-link: a link at reports/rl or reports/ refused (%s); written once gone" % r.get("html"))


CASES = {
    "prompts": case_prompts,
    "starve": case_starve,
    "slots": case_slots,
    "nul": case_nul,
    "damaged": case_damaged,
    "sparse-log": case_sparse_log,
    "sim-limit": case_sim_limit,
    "report-link": case_report_link,
}

if __name__ == "__main__":
    sys.exit(run(CASES, sys.argv))
