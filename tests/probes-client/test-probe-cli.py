#!/usr/bin/env python3
"""test-probe-cli.py — `goodput probe` as a user runs it, against the test
server (sse-server.py) on loopback: the table and --json (vLLM's key names),
--save-result / --save-requests, failed requests counted, usage errors,
the API key kept out of every output, and --find-max-rate saying plainly
when the SLA always or never holds.

usage: test-probe-cli.py GOODPUT SSE-SERVER.PY
"""
import json
import os
import subprocess
import sys
import tempfile

goodput, server_py = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp(prefix="goodput-probe-cli-")
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)


def probe(*args, env=None):
    p = subprocess.run([goodput, "probe", *args], capture_output=True, text=True, timeout=120,
                       env={**os.environ, **(env or {})})
    return p.returncode, p.stdout, p.stderr


server = subprocess.Popen([sys.executable, server_py, os.path.join(tmp, "server.log")],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
port = int(server.stdout.readline())
url = f"http://127.0.0.1:{port}"
small = ["--num-prompts", "8", "--random-input-len", "16", "--random-output-len", "4", "--no-progress"]

try:
    rc, out, err = probe("--help")
    check(rc == 0 and "--find-max-rate" in out and "--random-input-len" in out, "--help")

    rc, out, err = probe("--bogus")
    check(rc == 2, f"unknown flag exits 2, got {rc}")
    rc, out, err = probe("--prompt-format", "xml", "--base-url", url)
    check(rc == 2 and "--prompt-format" in err and "xml" in err, f"bad --prompt-format: {err!r}")
    rc, out, err = probe("--base-url", "ftp://x", *small)
    check(rc == 2 and "--base-url" in err, f"bad --base-url: {rc} {err!r}")
    rc, out, err = probe("--header", "novalue", "--base-url", url, *small)
    check(rc == 2 and "--header" in err, f"bad --header: {err!r}")

    # A load point with the table, then with --json and the files.
    rc, out, err = probe("--base-url", url, "--model", "ok:5:1", "--request-rate", "50", *small,
                         "--sla", "ttft:1000,tpot:100")
    check(rc == 0 and "Serving Benchmark Result" in out and "Successful requests:" in out, f"table: {rc} {err}")
    res_path, req_path = os.path.join(tmp, "result.json"), os.path.join(tmp, "requests.jsonl")
    rc, out, err = probe("--base-url", url, "--model", "ok:5:1", "--request-rate", "50", *small, "--json",
                         "--save-result", res_path, "--save-requests", req_path, "--goodput", "ttft:1000", "tpot:100")
    check(rc == 0, f"--json run: {rc} {err}")
    j = json.loads(out)
    for key in ("completed", "mean_ttft_ms", "median_tpot_ms", "p99_itl_ms", "output_throughput",
                "request_throughput", "total_token_throughput", "request_goodput"):
        check(key in j, f"--json lacks {key}")
    check(j.get("completed") == 8 and j.get("failed", 0) == 0, f"8 completed: {j.get('completed')}")
    check(j.get("total_output_tokens") == 32, f"output tokens from usage: {j.get('total_output_tokens')}")
    check(j.get("mean_ttft_ms", 0) >= 5, "TTFT at least the server's 5 ms")
    check(json.load(open(res_path)) == j, "--save-result holds the --json result")
    lines = [json.loads(l) for l in open(req_path)]
    check(len(lines) == 8 and all(l["success"] and l["output_tokens"] == 4 and len(l["itl_ms"]) <= 3
                                  for l in lines), "--save-requests: 8 lines")

    # Failures are counted, never dropped (reasons and exit codes: test-probe-failures.py).
    rc, out, err = probe("--base-url", url, "--model", "500", *small, "--json")
    j = json.loads(out) if out else {}
    check(rc == 1 and j.get("failed") == 8 and j.get("completed") == 0, f"HTTP 500 counted: {rc} {j}")

    # The API key (flag or environment) appears in no output, even with -v.
    for extra, env in ((["--api-key", "SECRET-KEY-123"], {}), ([], {"OPENAI_API_KEY": "SECRET-KEY-123"})):
        p = subprocess.run([goodput, "-v", "probe", "--base-url", url, "--model", "ok", *small, *extra],
                           capture_output=True, text=True, env={**os.environ, **env})
        check(p.returncode == 0 and "SECRET-KEY-123" not in p.stdout + p.stderr, "API key not shown")

    # find-max-rate: a loose SLA always holds; an impossible one never does.
    rc, out, err = probe("--base-url", url, "--model", "ok:2:1", *small, "--find-max-rate", "--json",
                         "--sla", "ttft:5000,tpot:1000")
    j = json.loads(out) if rc == 0 else {}
    check(rc == 0 and j.get("search") == "client_limit" and j.get("max_request_rate", 0) > 0,
          f"always meets: {rc} {j.get('search')} {err}")
    rc, out, err = probe("--base-url", url, "--model", "ok:20:1", *small, "--find-max-rate",
                         "--sla", "ttft:1")
    check(rc == 3 and "never met the SLA" in out, f"never meets (exit 3): {rc} {out[-300:]} {err}")
finally:
    server.stdin.close()
    server.wait(timeout=10)

sys.exit(1 if failures else 0)
