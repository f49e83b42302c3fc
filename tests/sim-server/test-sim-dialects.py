#!/usr/bin/env python3
"""goodput-sim in each engine's dialect, as a client or an operator sees it:
real processes on port 0, started under the engines' program names (symlinks
to goodput-sim) or with --dialect, driven with the standard library.

Usage: test-sim-dialects.py GOODPUT_SIM SOURCE_ROOT CASE   (CASE: see CASES)"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from simclient import Sim, SimError, completion_body, token_chunks  # noqa: E402

EXE = SRC = BIN = None

# vLLM's bucket bounds (vllm/v1/metrics/loggers.py).
VLLM_TTFT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
             40.0, 80.0, 160.0, 640.0, 2560.0]
VLLM_TPOT = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
             80.0]
VLLM_LATENCY = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
                480.0, 960.0, 1920.0, 7680.0]

PROGRAMS = {"vllm": "vllm", "llamacpp": "llama-server", "tgi": "text-generation-launcher",
            "trtllm": "trtllm-serve", "sglang": "python3"}


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def program(name):
    """goodput-sim under an engine's program name."""
    return os.path.join(BIN, name)


def run(argv, timeout=60, env=None):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    return p.returncode, p.stdout, p.stderr


def profile(name):
    with open(os.path.join(SRC, "configs", "engines", name + ".json")) as f:
        return json.load(f)


def serve_args(dialect, model="llama-3.1-8b", extra=()):
    """The arguments the shipped profile gives the engine (model, host), plus extra."""
    if dialect == "vllm":
        a = ["serve", model]
    elif dialect == "llamacpp":
        a = ["--model", "/models/%s-Q8_0.gguf" % model, "--metrics"]
    elif dialect == "sglang":
        a = ["-m", "sglang.launch_server", "--model-path", model, "--enable-metrics"]
    elif dialect == "tgi":
        a = ["--model-id", model]
    else:
        a = ["serve", model, "--backend", "pytorch"]
    return a + ["--hostname" if dialect == "tgi" else "--host", "127.0.0.1"] + list(extra)


def start(dialect, extra=(), ready=True, env=None, model="llama-3.1-8b"):
    return Sim(program(PROGRAMS[dialect]), serve_args(dialect, model, extra) + ["--load-time", "0.2"], ready=ready,
               env=env)


def prom(text):
    """{name{labels}: value} and {name: summed value} of a Prometheus page."""
    full, plain = {}, {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, val = line.rsplit(" ", 1)
        full[key] = float(val)
        name = key.split("{", 1)[0]
        plain[name] = plain.get(name, 0.0) + float(val)
    return full, plain


def buckets(full, name):
    """[(le, cumulative count)] of histogram name, in order."""
    out = []
    for key, val in full.items():
        m = re.match(re.escape(name) + r'_bucket\{(?:.*,)?le="([^"]+)"\}$', key)
        if m:
            out.append((float(m.group(1)), val))
    out.sort()
    return out


def requests(sim, prompts, outs):
    for p, n in zip(prompts, outs):
        r = sim.stream("/v1/completions", completion_body(" ".join("w%d" % (3000 + i) for i in range(p)), n))
        # llama.cpp ends with a chunk of its own: no text, the finish reason and usage
        tokens = [c for _, c in token_chunks(r["events"]) if c["choices"][0].get("text")]
        check(r["status"] == 200 and len(tokens) == n, "request %d/%d: %r" % (p, n, r))


# ---- cases ----

def case_versions():
    """--version as each engine prints it, and as the profiles' version commands ask it."""
    want = {
        "vllm": (["vllm", "--version"], "stdout", r"^0\.\d+\.\d+(\.\d+)?\n$"),
        "llamacpp": (["llama-server", "--version"], "stderr", r"^version: 4748 \(c392e5094\)\nbuilt with .* for "),
        "tgi": (["text-generation-launcher", "--version"], "stdout", r"^text-generation-launcher 3\.\d+\.\d+\n$"),
        "trtllm": (["python3", "-c", "import tensorrt_llm; print(tensorrt_llm.__version__)"], "stdout",
                   r"TensorRT-LLM version: 1\.\d+\.\d+\n1\.\d+\.\d+\n$"),
        "sglang": (["python3", "-c", "import sglang; print(sglang.__version__)"], "stdout", r"^0\.\d+\.\d+"),
    }
    for d, (argv, stream, pattern) in want.items():
        check(profile(d)["version_command"] == argv or d == "vllm",
              "%s: the profile's version command is %r" % (d, profile(d)["version_command"]))
        rc, out, err = run([program(argv[0])] + argv[1:])
        text = out if stream == "stdout" else err
        check(rc == 0 and re.search(pattern, text), "%s --version: rc %d, %s %r" % (d, rc, stream, text))
        rc, out, err = run([EXE, "--dialect", d, "--version"])
        check(rc == 0 and re.search(pattern, out + err) or d in ("sglang", "trtllm"),
              "--dialect %s --version: %r %r" % (d, out, err))
    rc, out, _ = run([EXE, "--version"])
    check(rc == 0 and out.startswith("goodput-sim "), "goodput-sim --version: %r" % out)


def case_health():
    """While loading: llama.cpp answers 503 "Loading model" on every route; the others refuse connections.
    Once ready, /health is 200 (llama.cpp: {"status":"ok"})."""
    for d in ["llamacpp", "vllm", "sglang", "tgi", "trtllm"]:
        with Sim(program(PROGRAMS[d]), serve_args(d) + ["--load-time", "1.0"], ready=False) as sim:
            if d == "llamacpp":
                for path in ["/health", "/v1/models"]:
                    status, _, body = sim.request("GET", path)
                    check(status == 503 and json.loads(body) == {"error": {"code": 503, "message": "Loading model",
                                                                         "type": "unavailable_error"}},
                          "llama.cpp %s while loading: %d %r" % (path, status, body))
            else:
                try:
                    status, _, _ = sim.request("GET", "/health", timeout=2)
                    check(False, "%s answered %d while loading" % (d, status))
                except ConnectionRefusedError:
                    pass
            sim.wait_ready(15)
            status, _, body = sim.request("GET", "/health")
            check(status == 200, "%s /health once ready: %d" % (d, status))
            if d == "llamacpp":
                check(json.loads(body) == {"status": "ok"}, "llama.cpp health body %r" % body)
            ready = profile(d)["health"]
            check(200 in ready.get("ready", [200]), "%s profile: 200 is not ready" % d)
            if d == "llamacpp":
                check(ready.get("loading") == [503], "llama.cpp profile: 503 is not loading")


HISTOGRAM_SERIES = ("prompt_length", "generation_length")


def series_present(d, plain, series, spec=False):
    """Every series the profile maps is on the page (a ratio: both parts; a histogram: its _count);
    speculative decoding's only when the engine speculates."""
    for s, names in series.items():
        if s.startswith("spec_") and not spec:
            continue
        names = names if isinstance(names, list) else [names]
        if s in HISTOGRAM_SERIES:
            names = [n + "_count" for n in names]
        found = [n for n in names if all(part.strip() in plain for part in n.split(" / "))]
        check(found, "%s: series %s (%r) not on /metrics" % (d, s, names))


def case_metrics():
    """Each engine's metric names, the ones its profile maps, and their values after a known load."""
    prompts, outs = [4, 9], [5, 3]
    for d in ["vllm", "sglang", "tgi", "llamacpp"]:
        # SGLang exports its length histograms with --collect-tokens-histogram (workload capture reads them)
        with start(d, ["--collect-tokens-histogram"] if d == "sglang" else []) as sim:
            requests(sim, prompts, outs)
            status, _, body = sim.request("GET", "/metrics")
            check(status == 200, "%s /metrics: %d" % (d, status))
            full, plain = prom(body.decode())
            series_present(d, plain, profile(d)["metrics"]["series"])
            gen = {"vllm": "vllm:generation_tokens_total", "sglang": "sglang:generation_tokens_total",
                   "llamacpp": "llamacpp:tokens_predicted_total", "tgi": "tgi_request_generated_tokens_sum"}[d]
            check(plain[gen] == sum(outs), "%s %s = %r, expected %d" % (d, gen, plain.get(gen), sum(outs)))
            prompt = {"vllm": "vllm:prompt_tokens_total", "sglang": "sglang:prompt_tokens_total",
                      "llamacpp": "llamacpp:prompt_tokens_total", "tgi": "tgi_request_input_length_sum"}[d]
            check(plain[prompt] == sum(prompts), "%s %s = %r" % (d, prompt, plain.get(prompt)))
            if d == "sglang":
                for name, values in [("sglang:prompt_tokens_histogram", prompts),
                                     ("sglang:generation_tokens_histogram", outs)]:
                    check(plain.get(name + "_count") == len(values) and plain.get(name + "_sum") == sum(values),
                          "sglang %s: %r" % (name, plain.get(name + "_count")))
            if d == "vllm":
                check(any(k.startswith('vllm:num_requests_running{model_name="llama-3.1-8b",engine="0"}')
                          for k in full), "vLLM's labels missing")
            if d == "tgi":
                check(all("{" not in k or "_bucket{le=" in k for k in full), "TGI's series carry labels")
    # Without their switches llama.cpp (501) and SGLang (404) serve no metrics.
    for d, extra_drop, status_want in [("llamacpp", "--metrics", 501), ("sglang", "--enable-metrics", 404)]:
        args = [a for a in serve_args(d) if a != extra_drop] + ["--load-time", "0"]
        with Sim(program(PROGRAMS[d]), args) as sim:
            status, _, _ = sim.request("GET", "/metrics")
            check(status == status_want, "%s /metrics without %s: %d" % (d, extra_drop, status))
    # TensorRT-LLM: JSON iteration statistics with enable_iter_perf_stats, Prometheus with return_perf_metrics.
    opts = os.path.join(tempfile.mkdtemp(prefix="sim-trt-"), "extra.yaml")
    with open(opts, "w") as f:
        f.write("enable_iter_perf_stats: true\nreturn_perf_metrics: true\nkv_cache_config:\n"
                "  free_gpu_memory_fraction: 0.5\n")
    with start("trtllm", ["--extra_llm_api_options", opts]) as sim:
        requests(sim, prompts, outs)
        status, _, body = sim.request("GET", "/metrics")
        stats = json.loads(body)
        check(status == 200 and isinstance(stats, list) and stats, "TRT-LLM /metrics: %d %r" % (status, body[:200]))
        last = stats[-1]
        for s, names in profile("trtllm")["metrics"]["series"].items():
            for n in (names if isinstance(names, list) else [names]):
                for part in n.split(" / "):
                    o = last
                    for k in part.strip().split("."):
                        o = o.get(k) if isinstance(o, dict) else None
                    check(isinstance(o, (int, float)), "TRT-LLM iteration stats lack %s: %r" % (part, last))
        check(last["kvCacheStats"]["tokensPerBlock"] == 32, "TRT-LLM block size")
        status, _, body = sim.request("GET", "/metrics")
        check(json.loads(body) == [], "TRT-LLM /metrics again: stats are handed out once, got %r" % body[:200])
        status, _, body = sim.request("GET", "/prometheus/metrics")
        full, plain = prom(body.decode())
        check(status == 200 and plain.get("trtllm_e2e_request_latency_seconds_count") == 2,
              "TRT-LLM /prometheus/metrics: %d %r" % (status, body[:300]))


def case_levers():
    """Data parallelism, speculative decoding and prefix caching in each engine's flags and metrics."""
    prompt = " ".join("w%d" % (3000 + i) for i in range(64))
    spec = '{"method": "draft_model", "model": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 3}'
    # vLLM: two engines behind one endpoint, each with its own labelled series; the draft's counters
    with start("vllm", ["--gpus", "2", "--data-parallel-size", "2", "--speculative-config", spec,
                        "--spec-acceptance", "0.7"]) as sim:
        # at once: the front end sends each to the engine with the fewest waiting x 4 + running
        results = [None] * 4

        def one(i):
            results[i] = sim.stream("/v1/completions", completion_body(prompt, 40))
        threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for r in results:
            check(r and r["status"] == 200 and len(token_chunks(r["events"])) == 40, "vLLM dp+spec request: %r" % r)
        status, _, body = sim.request("GET", "/metrics")
        full, plain = prom(body.decode())
        series_present("vllm", plain, profile("vllm")["metrics"]["series"], spec=True)
        for e in ("0", "1"):
            key = 'vllm:generation_tokens_total{model_name="llama-3.1-8b",engine="%s"}' % e
            check(full.get(key, 0) > 0, "vLLM engine %s served nothing: %r" % (e, full.get(key)))
        check(plain["vllm:generation_tokens_total"] == 160, "vLLM tokens %r" % plain["vllm:generation_tokens_total"])
        drafts, draft_toks = plain["vllm:spec_decode_num_drafts_total"], plain["vllm:spec_decode_num_draft_tokens_total"]
        acc = plain["vllm:spec_decode_num_accepted_tokens_total"]
        check(0 < acc < draft_toks <= 3 * drafts, "vLLM spec counters %r %r %r" % (drafts, draft_toks, acc))
        # every token is its step's bonus token or an accepted draft
        check(acc + drafts <= 160, "vLLM spec: %r accepted in %r drafts for 160 tokens" % (acc, drafts))
        pos = [sum(v for k, v in full.items() if k.startswith("vllm:spec_decode_num_accepted_tokens_per_pos_total")
                   and 'position="%d"' % p in k) for p in range(3)]
        check(pos[0] >= pos[1] >= pos[2] and sum(pos) == acc, "vLLM per-position counters %r, %r" % (pos, acc))
        # the prompt repeated: its blocks came from the prefix cache of the engine that had served it
        check(plain["vllm:prefix_cache_hits_total"] > 0, "vLLM prefix cache: no hits")
    # vLLM's names only: the sim's own spelling is refused as vLLM would
    rc, _, err = run([program("vllm")] + serve_args("vllm", extra=["--spec-method", "ngram", "--port", "0"]))
    check(rc == 2 and "unrecognized arguments: --spec-method" in err, "vLLM --spec-method: %d %s" % (rc, err))
    # more GPUs than the host has: refused at start-up
    rc, _, err = run([program("vllm")] + serve_args("vllm", extra=["--gpus", "1", "--data-parallel-size", "2",
                                                               "--load-time", "0", "--port", "0"]))
    check(rc == 1 and "data_parallel_size (2)" in err, "vLLM dp 2 on 1 GPU: %d %s" % (rc, err[-300:]))
    # vLLM without prefix caching: nothing is found
    with start("vllm", ["--no-enable-prefix-caching"]) as sim:
        for _ in range(2):
            requests(sim, [64], [4])
        _, _, body = sim.request("GET", "/metrics")
        full, plain = prom(body.decode())
        check(plain["vllm:prefix_cache_hits_total"] == 0, "vLLM without prefix caching hit %r"
              % plain["vllm:prefix_cache_hits_total"])
    # SGLang: --dp-size and EAGLE's flags; its gauge of the mean acceptance length
    with start("sglang", ["--gpus", "2", "--dp-size", "2", "--speculative-algorithm", "EAGLE",
                          "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                          "--speculative-num-draft-tokens", "4", "--collect-tokens-histogram"]) as sim:
        requests(sim, [64, 64], [40, 40])
        _, _, body = sim.request("GET", "/metrics")
        full, plain = prom(body.decode())
        series_present("sglang", plain, profile("sglang")["metrics"]["series"], spec=True)
        length = plain.get("sglang:spec_accept_length", 0)
        check(1 < length <= 4, "SGLang spec_accept_length %r" % length)
    # TGI: --speculate N is n-gram speculation; accepted
    with start("tgi", ["--speculate", "3"]) as sim:
        requests(sim, [16], [8])


def case_histograms():
    """vLLM's request histograms with vLLM's bucket bounds and exact counts after a known workload."""
    prompts, outs = [3, 7, 12, 40, 150], [1, 4, 9, 20, 60]
    with start("vllm", ["--max-model-len", "4096"]) as sim:
        requests(sim, prompts, outs)
        full, plain = sim.metrics()
        lens = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000]  # 1-2-5 up to max_model_len
        for name, values in [("vllm:request_prompt_tokens", prompts), ("vllm:request_generation_tokens", outs)]:
            b = buckets(full, name)
            check([le for le, _ in b] == lens + [float("inf")], "%s bounds %r" % (name, [le for le, _ in b]))
            check([c for _, c in b] == [sum(1 for v in values if v <= le) for le, _ in b], "%s counts %r" % (name, b))
            check(plain[name + "_count"] == len(values) and plain[name + "_sum"] == sum(values), "%s sum" % name)
        for name, bounds in [("vllm:time_to_first_token_seconds", VLLM_TTFT),
                             ("vllm:time_per_output_token_seconds", VLLM_TPOT),
                             ("vllm:e2e_request_latency_seconds", VLLM_LATENCY),
                             ("vllm:request_queue_time_seconds", VLLM_LATENCY),
                             ("vllm:request_inference_time_seconds", VLLM_LATENCY),
                             ("vllm:request_prefill_time_seconds", VLLM_LATENCY),
                             ("vllm:request_decode_time_seconds", VLLM_LATENCY)]:
            b = buckets(full, name)
            check([le for le, _ in b] == bounds + [float("inf")], "%s bounds" % name)
            want = sum(n - 1 for n in outs) if "per_output" in name else len(outs)
            check(plain[name + "_count"] == want and b[-1][1] == want, "%s count %r, expected %d"
                  % (name, plain.get(name + "_count"), want))
        check(plain["vllm:request_inference_time_seconds_sum"] <= plain["vllm:e2e_request_latency_seconds_sum"],
              "inference time above e2e")
        check(full['vllm:request_success_total{model_name="llama-3.1-8b",engine="0",finished_reason="length"}']
              == len(outs), "request_success_total")
        check(plain["vllm:prefix_cache_queries_total"] == sum(prompts), "prefix cache queries %r"
              % plain["vllm:prefix_cache_queries_total"])
        check('le="2560.0"' in sim.request("GET", "/metrics")[2].decode(), "bounds not written as Python does")
    # SGLang and TGI count the same requests in their own histograms.
    for d, names in [("sglang", ["sglang:time_to_first_token_seconds", "sglang:e2e_request_latency_seconds"]),
                     ("tgi", ["tgi_request_duration", "tgi_request_input_length", "tgi_request_generated_tokens"])]:
        with start(d) as sim:
            requests(sim, prompts, outs)
            _, _, body = sim.request("GET", "/metrics")
            full, plain = prom(body.decode())
            for n in names:
                check(plain.get(n + "_count") == len(outs), "%s %s_count %r" % (d, n, plain.get(n + "_count")))
            if d == "sglang":
                check(plain["sglang:inter_token_latency_seconds_count"] == sum(n - 1 for n in outs), "sglang ITL")


def case_quirks():
    """Streaming and request quirks: llama.cpp's usage in the last chunk and its refusal of best_of;
    TGI's input limit (422) and its concurrency limit (429)."""
    with start("llamacpp") as sim:
        r = sim.stream("/v1/completions", completion_body("a b c", 4, usage=True))
        chunks = [json.loads(p) for _, p in r["events"]]
        check(r["done"] and chunks[-1].get("usage") and chunks[-1]["choices"][0]["finish_reason"] == "length",
              "llama.cpp: usage not with the last choice: %r" % chunks[-2:])
        check(all(not c.get("usage") for c in chunks[:-1]), "llama.cpp: usage before the last chunk")
        check(chunks[-1]["usage"]["completion_tokens"] == 4, "llama.cpp usage %r" % chunks[-1]["usage"])
        status, _, body = sim.request("POST", "/v1/completions", dict(completion_body("a b", 2, stream=False),
                                                                     best_of=2))
        check(status == 500 and "best_of" in json.loads(body)["error"]["message"], "best_of: %d %r" % (status, body))
    with start("tgi", ["--max-input-tokens", "16", "--max-total-tokens", "64", "--max-batch-prefill-tokens", "64",
                       "--max-concurrent-requests", "1"]) as sim:
        status, _, body = sim.request("POST", "/v1/completions", completion_body("w " * 30, 2, stream=False))
        check(status == 422 and "must have less than 16 tokens" in body.decode(), "TGI long input: %d %r"
              % (status, body))
        import threading
        long_req = threading.Thread(target=sim.stream, args=("/v1/completions", completion_body("a b", 40)))
        long_req.start()
        time.sleep(0.1)
        status, _, body = sim.request("POST", "/v1/completions", completion_body("a b", 2, stream=False))
        long_req.join()
        check(status == 429 and "Model is overloaded" in body.decode(), "TGI over its limit: %d %r" % (status, body))
    # TGI's launcher validates its lengths before anything loads.
    rc, _, err = run([program("text-generation-launcher"), "--model-id", "llama-3.1-8b", "--max-input-tokens",
                      "4096", "--max-total-tokens", "4096", "--port", "0"])
    check(rc != 0 and "max_input_tokens must be < `max_total_tokens`" in err, "TGI lengths: rc %d %r" % (rc, err))
    # Each dialect refuses a flag it does not know, in its own words.
    for d, words in [("vllm", "unrecognized arguments"), ("llamacpp", "invalid argument"),
                     ("tgi", "unexpected argument"), ("trtllm", "No such option")]:
        rc, _, err = run([program(PROGRAMS[d])] + serve_args(d) + ["--no-such-flag", "--port", "0"])
        check(rc == 2 or (d == "llamacpp" and rc != 0), "%s unknown flag: rc %d" % (d, rc))
        check(words in err and "--no-such-flag" in err, "%s unknown flag wording: %r" % (d, err))


def case_ledger():
    """A GPU held by one sim of the host is busy for the next: it exits at once with CUDA's error and
    `GPU n busy`; other GPUs are free; the lock goes with the process."""
    ledger = tempfile.mkdtemp(prefix="sim-ledger-")
    env1 = dict(os.environ, CUDA_VISIBLE_DEVICES="1", GOODPUT_SIM_GPU_LEDGER=ledger)
    with Sim(EXE, ["--load-time", "0"], env=env1) as first:
        t0 = time.monotonic()
        rc, _, err = run([EXE, "--load-time", "0", "--port", "0"], env=env1, timeout=30)
        check(rc != 0 and "GPU 1 busy" in err and "CUDA-capable device(s) is/are busy or unavailable" in err,
              "second sim on GPU 1: rc %d %r" % (rc, err))
        check("held by pid %d" % first.proc.pid in err, "the holder is not named: %r" % err)
        check(time.monotonic() - t0 < 15, "the busy GPU was not refused at once")
        # TP 2 over GPUs 0,1: GPU 1 is held.
        env01 = dict(env1, CUDA_VISIBLE_DEVICES="0,1")
        rc, _, err = run([EXE, "--load-time", "0", "--tensor-parallel-size", "2", "--port", "0"], env=env01)
        check(rc != 0 and "GPU 1 busy" in err, "TP 2 over a held GPU: rc %d %r" % (rc, err))
        # The same through --gpu-ledger, in llama.cpp's words.
        rc, _, err = run([program("llama-server"), "-m", "llama-3.1-8b-Q4_K_M.gguf", "--gpu-ledger", ledger, "--port", "0"],
                         env=dict(os.environ, CUDA_VISIBLE_DEVICES="1"))
        check(rc != 0 and "GPU 1 busy" in err and err.startswith("ggml_cuda_init"), "llama.cpp busy: %r" % err)
        # GPU 0 is free.
        with Sim(EXE, ["--load-time", "0"], env=dict(env1, CUDA_VISIBLE_DEVICES="0")):
            pass
    # Released with the process: GPU 1 serves again.
    with Sim(EXE, ["--load-time", "0"], env=env1):
        pass
    # Without a ledger nothing is shared.
    with Sim(EXE, ["--load-time", "0"], env=dict(os.environ, CUDA_VISIBLE_DEVICES="1")):
        with Sim(EXE, ["--load-time", "0"], env=dict(os.environ, CUDA_VISIBLE_DEVICES="1")):
            pass
    shutil.rmtree(ledger)


def durations(text):
    """vLLM's start-up lines' durations."""
    found = {}
    for key, pattern in [("weights", r"Loading weights took ([0-9.]+) seconds"),
                         ("graphs", r"Graph capturing finished in ([0-9.]+) secs"),
                         ("init", r"init engine \(profile, create kv cache, warmup model\) took ([0-9.]+) seconds")]:
        m = re.search(pattern, text)
        check(m, "no %s line in %r" % (key, text[-3000:]))
        found[key] = float(m.group(1))
    return found


def case_startup():
    """The start-up model: the real-time start-up takes its phases' time and prints them as vLLM does;
    `simulate` reports the same start-up exactly in virtual time."""
    # 16.06 GB of llama-3.1-8b at 40 GB/s (0.40 s) + 0.6 s init + 0.3 s graphs = 1.30 s
    args = ["--startup-model", "--weights-read-gbps", "40", "--init-seconds", "0.6", "--graph-capture-seconds", "0.3"]
    t0 = time.monotonic()
    with Sim(EXE, args, ready=False) as sim:
        sim.wait_ready(20)
        dt = time.monotonic() - t0
        # not before its phases' time; later only as much as a loaded machine is slow
        check(1.3 <= dt < 15, "ready after %.2f s, expected 1.3 s" % dt)
        sim.proc.terminate()
        log = sim.proc.stdout.read()  # vLLM logs to stdout
        check(sim.proc.wait(10) == 0, "exit status")
    d = durations(log)
    check(abs(d["weights"] - 0.40) < 0.015, "weights line %r" % d)
    check(d["graphs"] == 0, "graphs line (whole seconds, as vLLM prints them) %r" % d)
    check(abs(d["init"] - 0.6) < 0.05, "init engine line %r" % d)

    def simulate(extra):
        rc, out, err = run([EXE, "simulate", "--model", "llama-3.1-8b", "--gpu", "H100", "--num-prompts", "4",
                            "--random-input-len", "32", "--random-output-len", "4", "--json"] + extra, timeout=120)
        check(rc == 0, "simulate: %r" % err)
        return json.loads(out)
    j = simulate(["--startup-model"])
    check(abs(j["startup"]["weights_gb"] - 16.06) < 0.05, "weights %r" % j["startup"])
    want = j["startup"]["weights_gb"] / 2.0 + 20 + 15
    check(abs(j["startup_seconds"] - want) < 1e-9, "virtual start-up %r, expected %r" % (j["startup_seconds"], want))
    j = simulate(["--startup-model", "--tensor-parallel-size", "2", "--gpus", "2", "--weights-read-gbps", "4",
                  "--init-seconds", "10", "--graph-capture-seconds", "5"])
    want = j["startup"]["weights_gb"] / 4.0 + 10 + 5 + 5
    check(abs(j["startup_seconds"] - want) < 1e-9, "TP 2 start-up %r, expected %r" % (j["startup_seconds"], want))
    check("startup_seconds" not in simulate([]), "start-up reported without --startup-model")


def case_llamacpp():
    """llama.cpp b4748 as a user meets it, compared with the real llama-server: --help with each flag's aliases
    and default (what the profile's defaults and check-engine read); /props with the slots and each slot's context
    (4096 tokens in all without -c, split between the slots); a prompt longer than its slot truncated, not refused
    (context shift is on); no layer on the GPU without --n-gpu-layers (CPU buffers in the log); a build without git
    saying "version: 0 (unknown)" on --version, in its log and in /props."""
    rc, out, _ = run([program("llama-server"), "--help"])
    for line in [r"^-np,   --parallel N +number of parallel sequences to decode \(default: 1\)$",
                 r"^-b,    --batch-size N +logical maximum batch size \(default: 2048\)$",
                 r"^-ub,   --ubatch-size N +physical maximum batch size \(default: 512\)$",
                 r"^-tb,   --threads-batch N +number of threads to use during batch",
                 r"^-fa,   --flash-attn +enable Flash Attention \(default: disabled\)$",
                 r"^-nocb, --no-cont-batching +disable continuous batching$",
                 r"^-ngl,  --gpu-layers, --n-gpu-layers N +number of layers to store in VRAM$"]:
        check(rc == 0 and re.search(line, out, re.M), "llama-server --help lacks %r:\n%s" % (line, out))
    with start("llamacpp", ["-np", "4", "--threads", "1", "-tb", "2", "-fa", "-nocb"]) as sim:
        status, _, body = sim.request("GET", "/props")
        props = json.loads(body)
        check(status == 200 and props["total_slots"] == 4 and props["default_generation_settings"]["n_ctx"] == 1024
              and props["build_info"] == "b4748-c392e5094" and props["model_path"].endswith("-Q8_0.gguf"),
              "/props %d %r" % (status, props))
        # 1500 prompt tokens in a slot of 1024: truncated to 988 (blocks of 512 dropped), still served
        r = sim.stream("/v1/completions", completion_body([1000 + i for i in range(1500)], 8, usage=True))
        chunks = [json.loads(p) for _, p in r["events"]]
        check(r["status"] == 200 and chunks[-1]["usage"]["prompt_tokens"] == 988
              and chunks[-1]["usage"]["completion_tokens"] == 8, "long prompt: %r" % chunks[-1:])
        status, _, body = sim.request("GET", "/metrics")
        check("# HELP llamacpp:requests_processing Number of requests processing." in body.decode(),
              "metrics HELP: %r" % body[:2000])
        sim.stop()
        log = sim.stderr_text()
    for want in ["load_tensors: offloaded 0/33 layers to GPU", "load_tensors:   CPU_Mapped model buffer size",
                 "llama_init_from_model: n_ctx         = 4096", "llama_init_from_model: n_ctx_per_seq = 1024",
                 "llama_init_from_model: n_batch       = 2048", "llama_init_from_model: n_ubatch      = 512",
                 "llama_init_from_model: flash_attn    = 1", "llama_kv_cache_init:          CPU KV buffer size"]:
        check(want in log, "the log lacks %r:\n%s" % (want, log[-3000:]))
    with start("llamacpp", ["-ngl", "999", "-c", "0", "-b", "256", "-ub", "512"]) as sim:
        status, _, body = sim.request("GET", "/props")
        check(json.loads(body)["default_generation_settings"]["n_ctx"] == 131072, "-c 0: %r" % body[:300])
        sim.stop()
        log = sim.stderr_text()
    for want in ["load_tensors: offloaded 33/33 layers to GPU", "llama_init_from_model: n_batch       = 256",
                 "llama_init_from_model: n_ubatch      = 256"]:
        check(want in log, "the log lacks %r:\n%s" % (want, log[-3000:]))
    env = dict(os.environ, GOODPUT_SIM_LLAMACPP_NO_GIT="1")
    rc, _, err = run([program("llama-server"), "--version"], env=env)
    check(rc == 0 and err.startswith("version: 0 (unknown)\n"), "--version without git: %r" % err)
    with start("llamacpp", env=env) as sim:
        status, _, body = sim.request("GET", "/props")
        check(json.loads(body)["build_info"] == "b0-unknown", "/props without git: %r" % body[-200:])
        sim.stop()
        check("build: 0 (unknown) with cc" in sim.stderr_text(), "the log without git")


def case_oom():
    """Each dialect's start-up failures: exit status 1 after the phase that finds them, in the engine's words."""
    cases = [
        ("vllm", ["serve", "llama-3.1-70b", "--gpu", "L40S"], "torch.OutOfMemoryError: CUDA out of memory"),
        ("vllm", ["serve", "llama-3.1-8b", "--gpu", "A100", "--max-model-len", "131072", "--gpu-memory-utilization",
                  "0.3"], "the estimated maximum model length is"),
        ("llamacpp", ["-m", "llama-3.1-8b-Q8_0.gguf", "--gpu", "L40S", "-c", "1048576", "-np", "8", "-ngl", "999"],
         "llama_kv_cache_init: failed to allocate buffer for kv cache"),
        ("llamacpp", ["-m", "llama-3.1-70b-F16.gguf", "--gpu", "L40S", "-ngl", "999"],
         "cudaMalloc failed: out of memory"),
        ("sglang", ["-m", "sglang.launch_server", "--model-path", "llama-3.1-8b", "--gpu", "L40S",
                    "--mem-fraction-static", "0.3"], "Not enough memory. Please try to increase --mem-fraction-static"),
        ("tgi", ["--model-id", "llama-3.1-70b", "--gpu", "L40S"], "Error: ShardCannotStart"),
        ("trtllm", ["serve", "llama-3.1-8b", "--gpu", "L40S", "--max_seq_len", "131072",
                    "--kv_cache_free_gpu_memory_fraction", "0.1", "--fail_fast_on_attention_window_too_large"],
         "Attention window too large to fit even a single sequence in the KV cache"),
    ]
    for d, args, words in cases:
        t0 = time.monotonic()
        rc, out, err = run([program(PROGRAMS[d])] + args + ["--load-time", "0.3", "--port", "0"])
        check(rc == 1 and words in err, "%s %s: rc %d, %r" % (d, " ".join(args), rc, err[-1500:]))
        check(time.monotonic() - t0 >= 0.05, "%s failed before anything loaded" % d)
    # SGLang and TensorRT-LLM (without fail-fast) serve a shorter context instead of refusing.
    with start("trtllm", ["--gpu", "L40S", "--max_seq_len", "131072", "--kv_cache_free_gpu_memory_fraction",
                          "0.05"]) as sim:
        status, _, _ = sim.request("GET", "/health")
        check(status == 200, "TRT-LLM without fail-fast did not start")


CASES = {"versions": case_versions, "health": case_health, "metrics": case_metrics,
         "histograms": case_histograms, "quirks": case_quirks, "ledger": case_ledger, "startup": case_startup,
         "oom": case_oom, "llamacpp": case_llamacpp, "levers": case_levers}


def main():
    global EXE, SRC, BIN
    EXE, SRC = os.path.abspath(sys.argv[1]), sys.argv[2]
    BIN = tempfile.mkdtemp(prefix="sim-dialects-")
    try:
        for name in ["vllm", "llama-server", "text-generation-launcher", "trtllm-serve", "python3"]:
            os.symlink(EXE, os.path.join(BIN, name))
        CASES[sys.argv[3]]()
    except (AssertionError, SimError) as e:
        print("FAIL: %s: %s" % (sys.argv[3], e), file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(BIN, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
