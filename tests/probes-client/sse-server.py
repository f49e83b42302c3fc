#!/usr/bin/env python3
"""sse-server.py — a small OpenAI-style streaming server for the probe
client's tests, standard library only.

It prints its port on the first line of stdout, then serves HTTP/1.1 with
keep-alive on 127.0.0.1. The behaviour of a request is chosen by its
"model" field, "MODE[:TTFT_MS[:ITL_MS]]":

  ok        stream max_tokens tokens, TTFT_MS then ITL_MS apart (absolute
            deadlines), a usage chunk of its own, [DONE]
  beside    as ok, usage beside the last token's choices, no [DONE]
  die       two tokens, then the connection is dropped mid-stream
  500       HTTP 500 with a JSON error body
  garbage   HTTP 200, then an event that is not JSON
  big       HTTP 200, then one event of 256 KiB
  hang      HTTP 200, one token, then nothing
  errevent  one token, then an error event
  strict    as ok, but 400 when the body has any field beyond the basic ones
  empty     HTTP 200, a role-only chunk and [DONE]: no content at all
  flaky     as ok, but every second request the server sees gets HTTP 500

Every token's send time (CLOCK_MONOTONIC µs, just before the write) is appended to the log file given as argv[1], one JSON line per
request: {"key": first prompt id or the text's first word, "sends": [...]}.
GET /metrics serves vLLM-named gauges (404 with --no-metrics; /metrics?delay_ms=N
answers N ms late, as an engine busy with a step); GET /stats
reports how many connections were accepted. With --api-key K every request
must carry "Authorization: Bearer K".
"""
import asyncio
import json
import sys
import time

BASIC = {"model", "prompt", "messages", "max_tokens", "stream", "stream_options"}


def now_usec():
    return time.monotonic_ns() // 1000


class State:
    def __init__(self, log, metrics, api_key):
        self.log = log
        self.metrics = metrics
        self.api_key = api_key
        self.connections = 0
        self.running = 0
        self.preemptions = 0
        self.requests = 0


async def read_request(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    body = b""
    n = int(headers.get("content-length", "0"))
    if n:
        body = await reader.readexactly(n)
    return method, path, headers, body


def respond(writer, status, body, ctype="application/json"):
    reason = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 500: "Internal Server Error"}
    writer.write(
        f"HTTP/1.1 {status} {reason.get(status, 'X')}\r\nContent-Type: {ctype}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )


def chunk(data):
    b = data.encode()
    return b"%x\r\n%s\r\n" % (len(b), b)


def event(obj):
    return chunk("data: " + (obj if isinstance(obj, str) else json.dumps(obj)) + "\n\n")


def token(chat, i, usage=None):
    if chat:
        c = {"choices": [{"index": 0, "delta": {"content": f" t{i}"}, "finish_reason": None}]}
    else:
        c = {"choices": [{"index": 0, "text": f" t{i}", "finish_reason": None}]}
    if usage is not None:
        c["usage"] = usage
    return event(c)


async def stream(state, writer, req, chat, path):
    model = str(req.get("model", "ok"))
    parts = model.split(":")
    mode = parts[0]
    ttft = float(parts[1]) / 1000 if len(parts) > 1 else 0.0
    itl = float(parts[2]) / 1000 if len(parts) > 2 else 0.0
    n = int(req.get("max_tokens", 16))
    if chat:
        key = req["messages"][0]["content"].split()[0]
    elif isinstance(req.get("prompt"), list):
        key = req["prompt"][0]
    else:
        key = str(req.get("prompt", "")).split()[0]
    ntok = len(req["prompt"]) if isinstance(req.get("prompt"), list) else 0

    if mode == "flaky":
        state.requests += 1
        if state.requests % 2 == 0:
            mode = "500"
        else:
            mode = "ok"
    if mode == "500":
        respond(writer, 500, b'{"object":"error","message":"internal failure","code":500}')
        return True
    if mode == "strict" and set(req) - BASIC:
        respond(writer, 400, json.dumps({"error": {"message": f"unknown fields {sorted(set(req) - BASIC)}"}}).encode())
        return True
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
    sends = []
    state.running += 1
    try:
        if mode == "garbage":
            writer.write(event("<html>not json</html>"))
            await writer.drain()
        elif mode == "big":
            writer.write(event('{"choices":[{"text":"' + "x" * 262144 + '"}]}'))
            await writer.drain()
        elif mode == "empty":
            writer.write(event({"choices": [{"index": 0, "delta": {"role": "assistant"}}]}) + event("[DONE]"))
            await writer.drain()
        else:
            t0 = time.monotonic()
            last = n if mode in ("ok", "beside", "strict") else (1 if mode in ("hang", "errevent") else 2)
            for i in range(last):
                due = t0 + ttft + i * itl
                delay = due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                usage = {"prompt_tokens": ntok, "completion_tokens": n} if mode == "beside" and i == last - 1 else None
                sends.append(now_usec())
                writer.write(token(chat, i, usage))
                await writer.drain()
            # Logged before the response ends, so the client never finishes first.
            state.log.write(json.dumps({"key": key, "sends": sends, "path": path}) + "\n")
            state.log.flush()
            if mode == "die":
                writer.transport.abort()
                return False
            if mode == "hang":
                await asyncio.sleep(3600)
            if mode == "errevent":
                writer.write(event({"error": {"message": "engine died", "code": 500}}))
            if mode in ("ok", "strict"):
                writer.write(event({"choices": [], "usage": {"prompt_tokens": ntok, "completion_tokens": n}}))
                writer.write(event("[DONE]"))
        writer.write(b"0\r\n\r\n")
        await writer.drain()
    finally:
        state.running -= 1
    return True


async def handle(state, reader, writer):
    state.connections += 1
    try:
        while True:
            try:
                method, path, headers, body = await read_request(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                break
            if state.api_key and headers.get("authorization") != "Bearer " + state.api_key:
                respond(writer, 401, b'{"error":{"message":"bad api key"}}')
            elif method == "GET" and path.split("?")[0] == "/metrics":
                if not state.metrics:
                    respond(writer, 404, b"not found", "text/plain")
                else:
                    # ?delay_ms=N: answer N ms late, as an engine that answers between its steps
                    if "?delay_ms=" in path:
                        await asyncio.sleep(int(path.split("?delay_ms=")[1]) / 1000)
                    state.preemptions += 1
                    text = (
                        "# TYPE vllm:num_requests_running gauge\n"
                        f'vllm:num_requests_running{{model_name="m"}} {state.running}\n'
                        'vllm:num_requests_waiting{model_name="m"} 0\n'
                        'vllm:gpu_cache_usage_perc{model_name="m"} 0.5\n'
                        f'vllm:num_preemptions_total{{model_name="m"}} {state.preemptions}\n'
                    )
                    respond(writer, 200, text.encode(), "text/plain; version=0.0.4")
            elif method == "GET" and path == "/stats":
                respond(writer, 200, json.dumps({"connections": state.connections}).encode())
            elif method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
                if headers.get("x-require") and headers.get("x-require") != "yes":
                    respond(writer, 400, b'{"error":{"message":"x-require"}}')
                    continue
                req = json.loads(body)
                if not await stream(state, writer, req, path.endswith("chat/completions"), path):
                    break
            else:
                respond(writer, 404, b"not found", "text/plain")
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def main():
    args = sys.argv[1:]
    log = open(args[0], "a")
    api_key = None
    if "--api-key" in args:
        api_key = args[args.index("--api-key") + 1]
    state = State(log, "--no-metrics" not in args, api_key)
    server = await asyncio.start_server(lambda r, w: handle(state, r, w), "127.0.0.1", 0, backlog=1024)
    print(server.sockets[0].getsockname()[1], flush=True)
    # Exit when the test closes our stdin (or dies).
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    loop.add_reader(sys.stdin.fileno(), lambda: done.done() or done.set_result(None))
    await done


if __name__ == "__main__":
    asyncio.run(main())
