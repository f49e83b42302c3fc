#!/usr/bin/env python3
"""test-probe-failures.py — `goodput probe` says why requests failed and
exits accordingly: each class of failure is listed as one reason with its
count ("connection refused ×8", "HTTP 500 ×8: <first line of the body>",
"TLS: wrong version number ×8", "timeout after 1 s ×8"), in the table, in
--json ("failure_reasons") and on stderr; every request failing exits 1,
some failing exits 0; --find-max-rate exits 1 for a server that fails
requests and 3 for one that answers but never meets the SLA.

usage: test-probe-failures.py GOODPUT SSE-SERVER.PY
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading

goodput, server_py = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp(prefix="goodput-probe-failures-")
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)


def probe(*args):
    # a starved listener (a second suite beside this one: load 50) may take
    # more than the client's 10 s to connect: that is the machine, not the
    # class under test, so such a run is made again
    for _ in range(3):
        p = subprocess.run([goodput, "probe", *args], capture_output=True, text=True, timeout=120)
        if "connect timeout after" not in p.stderr + p.stdout:
            break
    return p.returncode, p.stdout, p.stderr


def plain_listener():
    """Answers anything with a plain-HTTP 400 (so https to it is not TLS)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)

    # each connection on a thread of its own: one client slow to send its
    # hello (a starved machine) must not hold the others' answers past the
    # client's 10 s connect timeout, as a serial loop did (4 of 8 under
    # ASan beside a second suite)
    def answer(c):
        try:
            c.recv(4096)
            c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        except OSError:
            pass
        c.close()

    def serve():
        while True:
            try:
                c, _ = s.accept()
            except OSError:
                return
            threading.Thread(target=answer, args=(c,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return s


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


server = subprocess.Popen([sys.executable, server_py, os.path.join(tmp, "server.log")],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
port = int(server.stdout.readline())
url = f"http://127.0.0.1:{port}"
plain = plain_listener()
small = ["--num-prompts", "8", "--random-input-len", "16", "--random-output-len", "4", "--no-progress"]

try:
    # Every request failing, one class at a time: its reason, its count, exit 1,
    # and no table (of zeros).
    classes = [
        ("connection refused", ["--base-url", f"http://127.0.0.1:{free_port()}"], "connection refused ×8"),
        ("HTTP 500", ["--base-url", url, "--model", "500"],
         'HTTP 500 ×8: {"object":"error","message":"internal failure","code":500}'),
        ("TLS", ["--base-url", f"https://127.0.0.1:{plain.getsockname()[1]}"], "TLS: wrong version number ×8"),
        ("timeout", ["--base-url", url, "--model", "hang", "--request-timeout", "1"], "timeout after 1 s ×8"),
        ("mid-response", ["--base-url", url, "--model", "die:0:5"], "connection failed mid-response"),
    ]
    for name, args, line in classes:
        rc, out, err = probe(*args, *small)
        check(rc == 1, f"{name}: every request failed exits 1, got {rc}: {err[-300:]}")
        check("Successful requests" not in out and "0.00" not in out,
              f"{name}: nothing completed, yet a table of zeros: {out[-400:]}")
        check("every request failed" in err and line in err, f"{name}: stderr lacks the reason: {err[-400:]}")
        rc, out, err = probe(*args, *small, "--json")
        j = json.loads(out) if out.strip() else {}
        reasons = j.get("failure_reasons", {})
        check(rc == 1 and j.get("failed") == 8 and sum(reasons.values()) == 8 and len(reasons) == 1,
              f"{name}: --json failure_reasons {reasons} (exit {rc})")

    # Some requests failing: listed, but the probe itself succeeded.
    rc, out, err = probe("--base-url", url, "--model", "flaky", *small)
    check(rc == 0, f"half failed exits 0, got {rc}: {err[-300:]}")
    check("HTTP 500 ×4: " in out and "Failed requests:" in out, f"half failed, the table: {out[-500:]}")

    # No failure: no reasons, an empty failure_reasons.
    rc, out, err = probe("--base-url", url, "--model", "ok", *small, "--json")
    j = json.loads(out) if rc == 0 else {}
    check(rc == 0 and j.get("failure_reasons") == {} and "Failed requests by reason" not in out,
          f"no failure: {rc} {j.get('failure_reasons')}")

    # --find-max-rate: a server that fails every request is broken (1), not slow ...
    rc, out, err = probe("--base-url", url, "--model", "500", *small, "--find-max-rate", "--sla", "ttft:1000")
    check(rc == 1 and "failed every request" in out and "HTTP 500 ×8" in err,
          f"search, server fails: exit {rc}: {out[-300:]} {err[-300:]}")
    rc, out, err = probe("--base-url", url, "--model", "500", *small, "--find-max-rate", "--sla", "ttft:1000",
                         "--json")
    j = json.loads(out) if out.strip() else {}
    check(j.get("search") == "server_failed", f"search, server fails: --json search {j.get('search')}")
    # ... one that answers half the requests fast fails them (1) ...
    rc, out, err = probe("--base-url", url, "--model", "flaky", *small, "--find-max-rate", "--sla", "ttft:1000")
    check(rc == 1 and "The server failed requests" in out, f"search, server fails half: exit {rc}: {out[-400:]}")
    # ... and one that answers every request too slowly never meets the SLA (3).
    rc, out, err = probe("--base-url", url, "--model", "ok:20:1", *small, "--find-max-rate", "--sla", "ttft:1")
    check(rc == 3 and "never met the SLA" in out and "SLA was never met" in err,
          f"search, SLA never met: exit {rc}: {out[-300:]} {err[-200:]}")
finally:
    server.stdin.close()
    server.wait(timeout=10)
    plain.close()

sys.exit(1 if failures else 0)
