#!/usr/bin/env python3
"""test-probe-cap.py — a load point's cap bounds its wall time, against
goodput-sim in llama.cpp's dialect (one slot, one thread: a 2048-token
prompt takes ~60 ms): a point sent at ~6× what the slot serves, capped at
2 s, stops sending at the cap and cuts the requests that can no longer meet
the SLA — queued past the TTFT bound — by closing their connections; the
server drops them (it processed only the prompts of the requests that
completed), the point ends within a few seconds of its cap, although the
queue it built would have taken the server ~10 s more, and its verdict
comes from what was measured: the cut requests count as not good, and
neither as completed nor as failed by the server.

usage: test-probe-cap.py GOODPUT GOODPUT-SIM
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

goodput, sim = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp(prefix="goodput-probe-cap-")
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)


def start_llama_server():
    """goodput-sim as llama-server on a free port, ready once it says it entered its main loop."""
    log_path = os.path.join(tmp, "sim.log")
    with open(log_path, "a") as log:
        server = subprocess.Popen([sim, "--dialect", "llamacpp", "--port", "0", "--model",
                                   "/models/llama-3.1-8b-Q8_0.gguf", "--metrics", "--parallel", "1", "--threads", "1",
                                   "--load-time", "0.2"], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and server.poll() is None:
        text = open(log_path).read()
        if "starting the main loop" in text and "listening on " in text:
            return server, text.split("listening on ")[1].split()[0]
        time.sleep(0.05)
    server.kill()
    server.wait()
    sys.exit("goodput-sim did not start:\n" + open(log_path).read())


def prompts_processed():
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        prom = r.read().decode()
    m = re.search(r"^llamacpp:prompt_tokens_total ([0-9.e+]+)$", prom, re.M)
    return float(m.group(1)) / 2048 if m else -1


server, url = start_llama_server()
try:
    p = subprocess.run([goodput, "probe", "--base-url", url, "--model", "llama-3.1-8b", "--random-input-len", "2048",
                        "--random-output-len", "8", "--ignore-eos", "--num-prompts", "400", "--request-rate", "100",
                        "--sla", "ttft:1000,tpot:30", "--max-point-seconds", "2", "--no-progress", "--json"],
                       capture_output=True, text=True, timeout=120)
    j = json.loads(p.stdout) if p.stdout.strip() else {}
    # every request cut (a sim the machine starves answers none in time) is a
    # point where every request failed: exit 1, as the probe documents
    check(p.returncode == 0 or (p.returncode == 1 and j.get("completed") == 0),
          "probe exited %d: %s" % (p.returncode, p.stderr[-2000:]))
    prompts = prompts_processed()
    # a queue the server kept would go on being prefilled (a prompt per ~60 ms)
    time.sleep(2)
    prompts_later = prompts_processed()
    sent, done, cut = j["num_prompts"], j["completed"], j.get("cut_at_cap", 0)
    print("sent %d in the 2 s cap, %d completed, %d cut, %d failed; the server processed %.0f prompts; the point "
          "took %.2f s, %.1f %% good" % (sent, done, cut, j["failed"], prompts, j["duration"], j["attainment"] * 100))
    check(150 <= sent <= 260, "the point sent %d requests in 2 s at 100 req/s: the cap did not stop the sending" % sent)
    check(cut >= sent / 2, "only %d of %d requests cut: the queue ran on past the cap" % (cut, sent))
    check(j["failed"] == 0 and done + cut == sent, "completed %d + cut %d + failed %d != sent %d" %
          (done, cut, j["failed"], sent))
    # the queue left at the cap holds ~10 s of the slot's work: the point ends well before it would drain
    check(j["duration"] < 2 + 6, "the point took %.2f s with a cap of 2 s" % j["duration"])
    # the server dropped the requests whose connections closed: nothing more is prefilled once the point
    # ended (but those its slot took before it saw the close: it looks once a second), and not every
    # request sent was (a client the machine starves cuts some late: those the slot had already taken
    # are prefilled, so the bound is not the completed ones)
    # (a second suite beside this one: +4 of 42 left in the queue; a server
    # that kept its queue prefills a prompt per ~60 ms, ~30 in those 2 s)
    check(0 < prompts < sent and prompts_later <= prompts + max(3, (sent - prompts) / 4),
          "the server processed %.0f prompts for %d completed requests, %.0f two seconds later: the cut "
          "requests were not dropped" % (prompts, done, prompts_later))
    check(not j["sla_met"] and abs(j["attainment"] * sent - round(j["attainment"] * sent)) < 1e-6
          and j["attainment"] * sent <= done, "the verdict counts the cut requests as not good: %r" % j["attainment"])
    check(any("cut at the load point's cap" in k for k in j.get("failure_reasons", {})),
          "the point does not say why requests were cut: %r" % j.get("failure_reasons"))
finally:
    server.terminate()
    server.wait(timeout=10)
sys.exit(1 if failures else 0)
