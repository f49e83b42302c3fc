#!/usr/bin/env python3
"""test-probe-vllm-result.py — the file `goodput probe --save-result` writes
is the file `vllm bench serve --save-result` writes: every key of the
fixture (vllm-result-keys.json, the keys vLLM's serve.py writes) is there
with the type vLLM gives it, --save-detailed adds vLLM's per-request arrays
in seconds, request_goodput is null without --goodput, --metadata KEY=VALUE
adds keys, --result-dir/--result-filename place it, and without a name it
gets vLLM's file name.

usage: test-probe-vllm-result.py GOODPUT SSE-SERVER.PY VLLM-RESULT-KEYS.JSON
"""
import glob
import json
import math
import os
import re
import subprocess
import sys
import tempfile

goodput, server_py, keys_path = sys.argv[1], sys.argv[2], sys.argv[3]
tmp = tempfile.mkdtemp(prefix="goodput-probe-vllm-")
fixture = json.load(open(keys_path))
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)


def probe(*args):
    p = subprocess.run([goodput, "probe", *args], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def has_type(v, t):
    ok = {
        "string": lambda: isinstance(v, str),
        "null": lambda: v is None,
        "int": lambda: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
        "inf": lambda: v == "inf",
    }
    return any(ok[alt]() for alt in t.split("|"))


def check_vllm_keys(j, what):
    for key, t in fixture["always"].items():
        check(key in j, f"{what}: no {key!r}")
        if key in j:
            check(has_type(j[key], t), f"{what}: {key} = {j[key]!r} is not {t}")


server = subprocess.Popen([sys.executable, server_py, os.path.join(tmp, "server.log")],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
port = int(server.stdout.readline())
url = f"http://127.0.0.1:{port}"
# 30 ms to the first token, then 4 ms apart: easy to tell seconds from ms.
run = ["--base-url", url, "--model", "ok:30:4", "--num-prompts", "6", "--random-input-len", "16",
       "--random-output-len", "5", "--no-progress"]

try:
    # --save-result --result-dir --result-filename --save-detailed --metadata, as vLLM takes them.
    out_dir = os.path.join(tmp, "results", "run1")
    rc, out, err = probe(*run, "--save-result", "--result-dir", out_dir, "--result-filename", "r.json",
                         "--save-detailed", "--metadata", "version=0.3.3", "tp=1", "--metadata", "gpu=H100")
    check(rc == 0, f"run: exit {rc}: {err[-300:]}")
    path = os.path.join(out_dir, "r.json")
    check(os.path.exists(path), f"no {path}")
    j = json.load(open(path)) if os.path.exists(path) else {}
    check_vllm_keys(j, "result file")
    check(j.get("backend") == "openai" and j.get("endpoint_type") == "openai", f"backend {j.get('backend')}")
    check(j.get("model_id") == "ok:30:4" and j.get("tokenizer_id") == "ok:30:4", f"model_id {j.get('model_id')}")
    check(re.fullmatch(r"\d{8}-\d{6}", j.get("date", "")) is not None, f"date {j.get('date')!r}")
    check(j.get("num_prompts") == 6 and j.get("completed") == 6, f"num_prompts {j.get('num_prompts')}")
    check(j.get("request_rate") == "inf" and j.get("max_concurrency") is None, "traffic keys")
    check(j.get("request_goodput", 0) is None, f"request_goodput without --goodput: {j.get('request_goodput')!r}")
    check(j.get("version") == "0.3.3" and j.get("tp") == "1" and j.get("gpu") == "H100", "metadata keys")

    # The per-request arrays, in vLLM's units (seconds).
    for key in fixture["save_detailed"]:
        check(isinstance(j.get(key), list) and len(j[key]) == 6, f"--save-detailed: {key}")
    ttfts, itls = j.get("ttfts", []), j.get("itls", [])
    check(all(0.025 <= t < 5 for t in ttfts), f"ttfts in seconds: {ttfts}")
    check(abs(sum(ttfts) / max(len(ttfts), 1) * 1000 - j.get("mean_ttft_ms", -1)) < 1e-6,
          f"ttfts agree with mean_ttft_ms: {j.get('mean_ttft_ms')}")
    # Seconds, not ms: the server sent the tokens 4 ms apart, so the gaps
    # average a few thousandths. A starved client reads tokens together
    # (gaps of 0) and late (one long gap): only their mean is bounded, and
    # loosely — 0.5 s would be 500 in ms.
    gaps = [x for g in itls if isinstance(g, list) for x in g]
    check(all(isinstance(g, list) and len(g) == 4 for g in itls) and all(x >= 0 for x in gaps) and
          sum(gaps) / max(len(gaps), 1) < 0.5, f"itls: a list of 4 gaps in seconds per request: {itls[:2]}")
    check(j.get("output_lens") == [5] * 6 and j.get("input_lens") == [16] * 6, "input_lens, output_lens")
    check(j.get("errors") == [""] * 6, f"errors: {j.get('errors')}")

    # With --goodput, request_goodput is a number; --json prints the file's object.
    rc, out, err = probe(*run, "--goodput", "ttft:1000", "tpot:100", "--json", "--save-result",
                         os.path.join(tmp, "g.json"))
    j = json.loads(out) if rc == 0 else {}
    check_vllm_keys(j, "--json")
    check(isinstance(j.get("request_goodput"), float) and j["request_goodput"] > 0, "request_goodput with --goodput")
    check(json.load(open(os.path.join(tmp, "g.json"))) == j, "--save-result FILE holds the --json object")
    check("ttfts" not in j and "itls" not in j, "no per-request arrays without --save-detailed")

    # No name: vLLM's, {label or backend}-{rate}qps[-concurrency{N}]-{model}-{date}.json.
    names = os.path.join(tmp, "names")
    rc, out, err = probe(*run, "--save-result", "--result-dir", names, "--max-concurrency", "2")
    rc2, out2, err2 = probe(*run, "--save-result", "--result-dir", names, "--label", "mine",
                            "--request-rate", "50", "--endpoint", "/v1/chat/completions")
    files = sorted(os.path.basename(f) for f in glob.glob(os.path.join(names, "*.json")))
    check(rc == 0 and rc2 == 0 and len(files) == 2, f"named files: {files} {err[-200:]} {err2[-200:]}")
    check(any(re.fullmatch(r"openai-infqps-concurrency2-ok:30:4-\d{8}-\d{6}\.json", f) for f in files),
          f"default name with concurrency: {files}")
    check(any(re.fullmatch(r"mine-50\.0qps-ok:30:4-\d{8}-\d{6}\.json", f) for f in files),
          f"default name with a label and a rate: {files}")
    chat = [json.load(open(os.path.join(names, f))) for f in files if f.startswith("mine")]
    check(chat and chat[0].get("backend") == "openai-chat" and chat[0].get("label") == "mine"
          and chat[0].get("request_rate") == 50, "chat run: backend, label, request_rate")

    # Usage errors name the flag.
    rc, out, err = probe(*run, "--metadata", "novalue")
    check(rc == 2 and "--metadata" in err, f"bad --metadata: {rc} {err!r}")
    rc, out, err = probe(*run, "--save-result", "a.json", "--result-filename", "b.json")
    check(rc == 2 and "--result-filename" in err, f"two names: {rc} {err!r}")
finally:
    server.stdin.close()
    server.wait(timeout=10)

sys.exit(1 if failures else 0)
