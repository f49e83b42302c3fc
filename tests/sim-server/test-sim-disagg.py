#!/usr/bin/env python3
"""goodput-sim playing a disaggregated deployment, as its operator and its
clients see it: prefill and decode workers (vLLM's --kv-transfer-config
with NixlConnector, or SGLang's --disaggregation-mode) and the engine's
proxy in front (`goodput-sim proxy` with vLLM's toy_proxy_server.py flags,
`python3 -m sglang_router.launch_router --pd-disaggregation`), all real
processes on loopback.

  vllm      tokens stream through the proxy; the prefill worker answers the
            proxy with kv_transfer_params; the prefill worker counts the
            prompts, the decode worker the output tokens; a long prompt's
            KV crossing a slow link (--interconnect ethernet) shows in TTFT
            and not in the time per output token
  sglang    the same through SGLang's router; a decode worker refuses a
            request that did not come through the router
  failures  a prefill worker that is gone is a 502 naming it; a client that
            goes away mid-stream frees its request on the decode worker

Usage: test-sim-disagg.py GOODPUT_SIM CASE"""

import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from simclient import Sim, completion_body, token_chunks  # noqa: E402

EXE = BIN = None
NIXL = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def wait_health(sim, path, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            status, _, body = sim.request("GET", path, timeout=2)
            if status == 200:
                return body
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError("%s never answered 200" % path)


def vllm_worker(extra=()):
    return Sim(EXE, ["serve", "llama-3.1-8b", "--gpus", "4", "--load-time", "0.1", "--kv-transfer-config", NIXL,
                     *extra])


def sglang_worker(mode, extra=()):
    return Sim(os.path.join(BIN, "python3"), ["-m", "sglang.launch_server", "--model-path", "llama-3.1-8b",
                                               "--enable-metrics", "--load-time", "0.1", "--disaggregation-mode",
                                               mode, "--disaggregation-transfer-backend", "nixl", *extra])


def proxy(prefill, decode):
    args = ["proxy", "--prefiller-hosts"] + [w.host for w in prefill] + ["--prefiller-ports"] + \
        [str(w.port) for w in prefill] + ["--decoder-hosts"] + [w.host for w in decode] + \
        ["--decoder-ports"] + [str(w.port) for w in decode]
    p = Sim(EXE, args, ready=False)
    body = json.loads(wait_health(p, "/healthcheck"))
    check(body == {"status": "ok", "prefill_instances": len(prefill), "decode_instances": len(decode)}, body)
    # vLLM's proxy has no /health
    check(p.request("GET", "/health")[0] == 404, "the proxy answers /health")
    return p


def prompt(n):
    return " ".join("w%d" % (100 + i) for i in range(n))


def case_vllm():
    with vllm_worker() as pre, vllm_worker(["--interconnect", "ethernet"]) as dec:
        # the proxy's first leg, by hand: one token and where the KV is
        status, _, body = pre.request("POST", "/v1/completions",
                                      {"prompt": prompt(40), "max_tokens": 1,
                                       "kv_transfer_params": {"do_remote_decode": True}})
        kv = json.loads(body).get("kv_transfer_params", {})
        check(status == 200 and kv.get("do_remote_prefill") is True and kv.get("tp_size") == 1 and
              len(kv.get("remote_block_ids", [])) == 3, body)

        with proxy([pre], [dec]) as p:
            r = p.stream("/v1/completions", completion_body(prompt(64), 20))
            chunks = token_chunks(r["events"])
            check(r["status"] == 200 and r["done"] and len(chunks) == 20, r)
            # a long prompt: its KV (4,000 × 128 KiB) crosses 25 Gb/s Ethernet in ~0.35 s;
            # the decode steps after it are the decode worker's alone
            r = p.stream("/v1/completions", completion_body(prompt(4000), 30))
            chunks = token_chunks(r["events"])
            check(r["status"] == 200 and len(chunks) == 30, r)
            ttft = chunks[0][0] - r["sent"]
            tpot = (chunks[-1][0] - chunks[0][0]) / 29
            check(ttft > 0.3, "TTFT %.3f s: the KV transfer is missing" % ttft)
            check(tpot < 0.05, "TPOT %.3f s: decode steps are slow" % tpot)
            # a non-streaming client gets the decode worker's JSON
            status, headers, body = p.request("POST", "/v1/chat/completions",
                                              {"messages": [{"role": "user", "content": prompt(10)}],
                                               "max_tokens": 5, "ignore_eos": True})
            d = json.loads(body)
            check(status == 200 and d["usage"]["completion_tokens"] == 5, body)
        _, pm = pre.metrics()
        _, dm = dec.metrics()
        # the prefill worker saw every prompt (and sampled one token each), the decode worker the outputs
        check(pm["vllm:prompt_tokens_total"] >= 40 + 64 + 4000 + 10, pm.get("vllm:prompt_tokens_total"))
        check(pm["vllm:generation_tokens_total"] == 4, pm.get("vllm:generation_tokens_total"))
        check(dm["vllm:generation_tokens_total"] == 20 + 30 + 5, dm.get("vllm:generation_tokens_total"))


def case_sglang():
    with sglang_worker("prefill") as pre, sglang_worker("decode") as dec:
        # the decode worker serves what its router sends
        status, _, body = dec.request("POST", "/v1/completions", completion_body(prompt(10), 3, stream=False))
        check(status == 400 and b"router" in body, (status, body))
        r = Sim(os.path.join(BIN, "python3"), ["-m", "sglang_router.launch_router", "--pd-disaggregation",
                                               "--prefill", "http://%s:%d" % (pre.host, pre.port), "8998",
                                               "--decode", "http://%s:%d" % (dec.host, dec.port),
                                               "--host", "127.0.0.1"], ready=False)
        with r:
            wait_health(r, "/health")
            out = r.stream("/v1/completions", completion_body(prompt(200), 12))
            check(out["status"] == 200 and out["done"] and len(token_chunks(out["events"])) == 12, out)
        _, dm = dec.metrics()
        check(dm.get("sglang:generation_tokens_total") == 12, dm)


def case_failures():
    with vllm_worker() as dec:
        pre = vllm_worker()
        with proxy([pre], [dec]) as p:
            pre.stop()
            status, _, body = p.request("POST", "/v1/completions", completion_body(prompt(10), 3, stream=False))
            check(status == 502 and b"prefill worker http://" in body, (status, body))
        with vllm_worker() as pre2, proxy([pre2], [dec]) as p:
            # a client that goes away mid-stream: the decode worker drops its request
            c = p.conn()
            c.request("POST", "/v1/completions", body=json.dumps(completion_body(prompt(10), 5000)),
                      headers={"Content-Type": "application/json"})
            resp = c.getresponse()
            check(resp.status == 200 and resp.readline().startswith(b"data: "), "no stream")
            c.close()
            deadline = time.monotonic() + 10
            running = None
            while time.monotonic() < deadline:
                _, dm = dec.metrics()
                running = dm.get("vllm:num_requests_running")
                if running == 0:
                    break
                time.sleep(0.1)
            check(running == 0, "the decode worker still runs %r requests" % running)
            # and the proxy serves on
            status, _, body = p.request("POST", "/v1/completions", completion_body(prompt(10), 3, stream=False))
            check(status == 200, body)


CASES = {"vllm": case_vllm, "sglang": case_sglang, "failures": case_failures}


def main():
    global EXE, BIN
    EXE = os.path.abspath(sys.argv[1])
    BIN = tempfile.mkdtemp(prefix="goodput-sim-pd-")
    try:
        os.symlink(EXE, os.path.join(BIN, "python3"))
        CASES[sys.argv[2]]()
    except AssertionError as e:
        print("FAIL: %s: %s" % (sys.argv[2], e), file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(BIN, ignore_errors=True)
    print("ok: %s" % sys.argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
