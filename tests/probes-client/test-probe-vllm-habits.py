#!/usr/bin/env python3
"""test-probe-vllm-habits.py — command lines from vLLM's benchmarking docs
run unchanged with `goodput probe`, and vLLM's result file reads as vLLM's.

Four `vllm bench serve` command lines as vLLM's documentation prints them
(docs/benchmarking/cli.md and docs/cli/README.md), with `vllm bench serve`
replaced by `goodput probe` and only the placeholders the docs ask the reader
to fill in (the data path, server-host, server-port) filled in. They target
the docs' ports (8000, 9001), so the test runs in a network namespace of its
own (`unshare --net`, loopback only) where those ports are free, with
goodput-sim serving the docs' model names there. Each must:
  - run (exit 0), with one "note:" line naming the flags that mean nothing
    here (--tokenizer, --trust-remote-code, --temperature, ...);
  - with --save-result, write the file where vLLM would, which a reader
    written the way vLLM's own tooling reads these files (json.load, then
    the keys by name, typed as vLLM writes them: floats for rates and
    latencies, ints for counts, per-request lists of equal length,
    generated_texts, input_lens as the prompts' lengths) reads unchanged.
Also: a dead port prints the reasons, not a table of zeros; a usage error
does not end in ": Invalid argument"; --backend of another kind is refused
by name.

usage: test-probe-vllm-habits.py GOODPUT GOODPUT-SIM
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

goodput, sim = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])

# The docs' ports must be ours: a network namespace with only loopback.
if os.environ.get("GOODPUT_TEST_NETNS") != "1":
    unshare = shutil.which("unshare")
    if not unshare or os.geteuid() != 0:
        print("SKIP: needs root and unshare for a network namespace of its own", file=sys.stderr)
        sys.exit(77)
    env = dict(os.environ, GOODPUT_TEST_NETNS="1")
    r = subprocess.run([unshare, "--net", sys.executable, *sys.argv], env=env)
    sys.exit(r.returncode)
if subprocess.run(["ip", "link", "set", "lo", "up"]).returncode != 0:
    print("SKIP: cannot bring loopback up in the namespace", file=sys.stderr)
    sys.exit(77)

tmp = tempfile.mkdtemp(prefix="goodput-vllm-habits-")
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)


def start_sim(port, name):
    log_path = tempfile.mktemp(prefix=f"sim-{port}-", suffix=".log", dir=tmp)
    with open(log_path, "a") as log:
        p = subprocess.Popen([sim, "--port", str(port), "--served-model-name", name, "--fixed-itl-ms", "1"],
                             stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if "Application startup complete" in open(log_path).read():
            return p
        if p.poll() is not None:
            break
        time.sleep(0.05)
    p.kill()
    raise RuntimeError("goodput-sim did not start: " + open(log_path).read())


def run(cmdline, cwd):
    p = subprocess.run([goodput, "probe", *cmdline], capture_output=True, text=True, timeout=240, cwd=cwd)
    return p.returncode, p.stdout, p.stderr


# The docs' data files, small: ShareGPT conversations and custom JSONL prompts.
sharegpt = os.path.join(tmp, "ShareGPT_V3_unfiltered_cleaned_split.json")
json.dump([{"id": f"c{i}", "conversations": [
    {"from": "human", "value": " ".join(["tell me about the sea"] * (3 + i % 4))},
    {"from": "gpt", "value": " ".join(["the sea is wide and deep"] * (2 + i % 3))}]} for i in range(40)],
          open(sharegpt, "w"))
custom = os.path.join(tmp, "data.jsonl")
with open(custom, "w") as f:
    for i in range(100):
        f.write(json.dumps({"prompt": " ".join(["a short prompt"] * (4 + i % 5))}) + "\n")


def vllm_reader(path):
    """Reads a result file as vLLM's tools do: json.load and keys by name,
    each as vLLM writes it. Returns what was wrong (empty: nothing)."""
    wrong = []
    d = json.load(open(path))
    floats = ["duration", "request_throughput", "output_throughput", "total_token_throughput",
              "max_output_tokens_per_s", "mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms",
              "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "median_itl_ms", "p99_itl_ms",
              "burstiness"]
    ints = ["completed", "failed", "total_input_tokens", "total_output_tokens", "num_prompts"]
    for k in floats:
        if type(d.get(k)) is not float:
            wrong.append(f"{k} is {type(d.get(k)).__name__} {d.get(k)!r}, vLLM writes a float")
    for k in ints:
        if type(d.get(k)) is not int:
            wrong.append(f"{k} is {type(d.get(k)).__name__}, vLLM writes an int")
    rate = d.get("request_rate")
    if not (rate == "inf" or type(rate) is float):
        wrong.append(f"request_rate {rate!r}: vLLM writes a float or \"inf\"")
    for k in ["date", "backend", "endpoint_type"]:
        if not isinstance(d.get(k), str):
            wrong.append(f"{k} missing")
    if "input_lens" in d:
        n = len(d["input_lens"])
        for k in ["output_lens", "ttfts", "itls", "generated_texts", "errors"]:
            if not isinstance(d.get(k), list) or len(d[k]) != n:
                wrong.append(f"{k}: not a list of {n}")
        if not all(type(x) is int and x > 0 for x in d["input_lens"]):
            wrong.append(f"input_lens are not the prompts' lengths: {d['input_lens'][:5]}")
        done = [i for i, e in enumerate(d["errors"]) if not e]
        # vLLM counts the input of the requests that completed
        if sum(d["input_lens"][i] for i in done) != d["total_input_tokens"]:
            wrong.append(f"sum(input_lens) != total_input_tokens {d['total_input_tokens']}")
        if not all(type(t) is float for t in d["ttfts"]):
            wrong.append("ttfts are not floats")
        if not all(isinstance(d["generated_texts"][i], str) and d["generated_texts"][i] for i in done):
            wrong.append("generated_texts are empty for completed requests")
        # vLLM's own sums: output tokens and the mean TTFT from the lists
        if sum(d["output_lens"]) != d["total_output_tokens"]:
            wrong.append("sum(output_lens) != total_output_tokens")
        if done and abs(sum(d["ttfts"][i] for i in done) / len(done) * 1000 - d["mean_ttft_ms"]) > 0.01:
            wrong.append("mean of ttfts != mean_ttft_ms")
    return wrong


docs = [
    # docs/benchmarking/cli.md, "ShareGPT dataset"
    ("sharegpt", 8000, "NousResearch/Hermes-3-Llama-3.1-8B",
     ["--backend", "vllm", "--model", "NousResearch/Hermes-3-Llama-3.1-8B", "--endpoint", "/v1/completions",
      "--dataset-name", "sharegpt", "--dataset-path", sharegpt, "--num-prompts", "10"], None),
    # docs/benchmarking/cli.md, "Custom dataset"
    ("custom", 9001, "meta-llama/Llama-3.1-8B-Instruct",
     ["--port", "9001", "--save-result", "--save-detailed", "--backend", "vllm", "--model",
      "meta-llama/Llama-3.1-8B-Instruct", "--endpoint", "/v1/completions", "--dataset-name", "custom",
      "--dataset-path", custom, "--custom-skip-chat-template", "--num-prompts", "80", "--max-concurrency", "1",
      "--temperature=0.3", "--top-p=0.75", "--result-dir", "./log/"], "log"),
    # docs/benchmarking/cli.md, "Results Visualization": vLLM's own plots
    ("plots", 8000, "meta-llama/Llama-3.1-8B-Instruct",
     ["--backend", "vllm", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--endpoint", "/v1/completions",
      "--dataset-name", "sharegpt", "--dataset-path", sharegpt, "--num-prompts", "20", "--plot-timeline",
      "--timeline-itl-thresholds", "2,5", "--plot-dataset-stats", "--save-result"], "."),
    # docs/cli/README.md, "bench serve"
    ("cli-guide", 8000, "meta-llama/Llama-3.2-1B-Instruct",
     ["--model", "meta-llama/Llama-3.2-1B-Instruct", "--host", "127.0.0.1", "--port", "8000",
      "--random-input-len", "32", "--random-output-len", "4", "--num-prompts", "5"], None),
]

try:
    for name, port, model, cmd, result_dir in docs:
        server = start_sim(port, model)
        try:
            cwd = os.path.join(tmp, name)
            os.makedirs(cwd)
            rc, out, err = run(cmd, cwd)
            check(rc == 0, f"{name}: exit {rc}: {err[-600:]}")
            check("Successful requests" in out, f"{name}: no result table: {out[-400:]}")
            ignored = [l for l in err.splitlines() if l.startswith("note:")]
            check(len(ignored) <= 1, f"{name}: more than one note line: {ignored}")
            if "--temperature=0.3" in cmd:
                check(ignored and "--temperature" in ignored[0] and "--top-p" in ignored[0],
                      f"{name}: the note does not name the sampling flags: {ignored}")
            if "--plot-timeline" in cmd:
                check(ignored and all(f in ignored[0] for f in
                                      ("--plot-timeline", "--timeline-itl-thresholds", "--plot-dataset-stats")),
                      f"{name}: the note does not name the plot flags: {ignored}")
            if "--custom-skip-chat-template" in cmd:
                check(ignored and "--custom-skip-chat-template" in ignored[0], f"{name}: note {ignored}")
            if result_dir:
                files = glob.glob(os.path.join(cwd, result_dir, "*.json"))
                check(len(files) == 1, f"{name}: result files {files}")
                for f in files:
                    base = os.path.basename(f)
                    mid = "-concurrency1-" if "--max-concurrency" in cmd else "-"
                    check(base.startswith("vllm-infqps" + mid + "Llama-3.1-8B-Instruct-"),
                          f"{name}: vLLM's file name, got {base}")
                    wrong = vllm_reader(f)
                    check(not wrong, f"{name}: vLLM's reader: {wrong}")
                    d = json.load(open(f))
                    n = int(cmd[cmd.index("--num-prompts") + 1])
                    check(d["backend"] == "vllm" and d["num_prompts"] == n and d["completed"] == n,
                          f"{name}: backend {d['backend']}, {d['completed']}/{d['num_prompts']}")
                    check(d["tokenizer_id"] == "meta-llama/Llama-3.1-8B-Instruct", f"tokenizer_id {d['tokenizer_id']}")
        finally:
            server.kill()
            server.wait()

    # --json of the same: request_rate and burstiness as floats
    server = start_sim(8000, "m")
    try:
        rc, out, err = run(["--model", "m", "--request-rate", "20", "--num-prompts", "6", "--random-input-len", "8",
                            "--random-output-len", "3", "--save-detailed", "--json", "--tokenizer", "x/y",
                            "--trust-remote-code"], tmp)
        d = json.loads(out) if rc == 0 else {}
        check(type(d.get("request_rate")) is float and d.get("request_rate") == 20.0 and
              type(d.get("burstiness")) is float, f"rate/burstiness {d.get('request_rate')!r} {d.get('burstiness')!r}")
        check(d.get("tokenizer_id") == "x/y", f"tokenizer_id {d.get('tokenizer_id')}")
        check("note:" in err and "--tokenizer" in err and "--trust-remote-code" in err, f"the note: {err}")
        path = os.path.join(tmp, "r.json")
        json.dump(d, open(path, "w"))
        check(not vllm_reader(path), f"--json read as vLLM's: {vllm_reader(path)}")
    finally:
        server.kill()
        server.wait()

    # Nothing completed: the reasons, no table of zeros.
    rc, out, err = run(["--port", "8123", "--num-prompts", "4", "--random-input-len", "8", "--random-output-len", "2",
                        "--no-progress"], tmp)
    check(rc == 1, f"dead port: exit {rc}")
    check("Successful requests" not in out and "0.00" not in out, f"dead port printed a table: {out}")
    check("connection refused ×4" in err, f"dead port: the reason: {err}")

    # Usage errors say what was wrong, without strerror's words.
    for args in (["--request-rate", "fast"], ["--backend", "openai-audio"], ["--no-such-flag"]):
        rc, out, err = run(args, tmp)
        check(rc == 2, f"{args}: exit {rc}")
        check("Invalid argument" not in err and err.strip(), f"{args}: {err!r}")
    rc, out, err = run(["--backend", "openai-audio"], tmp)
    check("openai-audio" in err, f"--backend refusal names the value: {err}")
finally:
    shutil.rmtree(tmp, ignore_errors=True)

print("probe-vllm-habits:", "ok" if failures == 0 else f"{failures} failures")
sys.exit(1 if failures else 0)
