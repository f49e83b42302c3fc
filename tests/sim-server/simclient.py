"""simclient.py — a small client for goodput-sim's integration tests and
demos: starts a goodput-sim process on port 0, reads its "listening on" line,
and speaks HTTP/1.1 to it with the standard library only (http.client), so
the tests need no third-party package. Streaming reads record
time.monotonic() at each SSE event, which is CLOCK_MONOTONIC on Linux: the
same clock as the server's --trace timestamps."""

import http.client
import json
import os
import re
import select
import signal
import subprocess
import time

LISTEN_RE = re.compile(r"^goodput-sim: listening on http://([^\s]+):(\d+)$")


class SimError(Exception):
    pass


class Sim:
    """A running goodput-sim. Use as a context manager; always stopped."""

    def __init__(self, exe, args, ready=True, timeout=30.0, env=None):
        self.exe = exe
        self.args = list(args)
        self.proc = subprocess.Popen([exe] + self.args + ["--port", "0"], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env)
        self.host, self.port = None, None
        self.check_exit = True  # __exit__ requires a clean exit 0 (sanitizers report through it)
        deadline = time.monotonic() + timeout
        line = ""
        # Lines are split here from what the pipe holds: a buffered readline()
        # would read several lines ahead, and select() would not see them.
        fd, pending, eof = self.proc.stdout.fileno(), b"", False
        while time.monotonic() < deadline and not eof:
            if b"\n" not in pending:
                r, _, _ = select.select([fd], [], [], 0.2)
                if not r:
                    if self.proc.poll() is not None:
                        break
                    continue
                chunk = os.read(fd, 4096)
                eof = not chunk
                pending += chunk
            while b"\n" in pending:
                raw, pending = pending.split(b"\n", 1)
                line = raw.decode(errors="replace")
                m = LISTEN_RE.match(line)
                if m:
                    self.host, self.port = m.group(1), int(m.group(2))
                    break
            if self.port is not None:
                break
        if self.port is None:
            self.stop()
            raise SimError("goodput-sim did not report its port (last line %r, stderr %r)"
                           % (line, self.stderr_text()))
        if ready:
            self.wait_ready(timeout)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        rc = self.stop()
        if exc_type is None and self.check_exit and rc != 0:
            raise SimError("goodput-sim exited with %r after SIGTERM: %s" % (rc, self.stderr_text()[-2000:]))

    def stderr_text(self):
        if self.proc.poll() is None:
            return ""
        try:
            return self.proc.stderr.read()
        except ValueError:
            return ""

    def stop(self, sig=signal.SIGTERM, timeout=15.0):
        """Stops the process; returns its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout and not self.proc.stdout.closed:
            self.proc.stdout.close()
        return self.proc.returncode

    def conn(self, timeout=30.0):
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=30.0):
        """One request on a new connection: (status, headers dict, body bytes)."""
        c = self.conn(timeout)
        try:
            h = dict(headers or {})
            if isinstance(body, (dict, list)):
                body = json.dumps(body)
                h.setdefault("Content-Type", "application/json")
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            data = r.read()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, data
        finally:
            c.close()

    def get_json(self, path):
        status, _, data = self.request("GET", path)
        return status, json.loads(data) if data else None

    def wait_ready(self, timeout=30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SimError("goodput-sim exited with %d: %s" % (self.proc.returncode, self.stderr_text()))
            try:
                status, _, _ = self.request("GET", "/health", timeout=2)
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.02)
        raise SimError("goodput-sim not ready after %.0f s" % timeout)

    def metrics(self):
        """/metrics parsed into {name{labels}: value} and {name: value} (labels dropped, summed)."""
        status, _, data = self.request("GET", "/metrics")
        if status != 200:
            raise SimError("/metrics answered %d" % status)
        full, plain = {}, {}
        for line in data.decode().splitlines():
            if not line or line.startswith("#"):
                continue
            key, val = line.rsplit(" ", 1)
            full[key] = float(val)
            name = key.split("{", 1)[0]
            if "_bucket" not in name:
                plain[name] = plain.get(name, 0.0) + float(val)
        return full, plain

    def stream(self, path, body, timeout=60.0):
        """A streaming request: returns dict with status, sent (monotonic s),
        events [(t, text)] (each SSE data payload), and done (saw [DONE])."""
        c = self.conn(timeout)
        out = {"status": None, "events": [], "done": False, "sent": None, "headers": {}}
        try:
            out["sent"] = time.monotonic()
            c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
            r = c.getresponse()
            out["status"] = r.status
            out["headers"] = {k.lower(): v for k, v in r.getheaders()}
            if r.status != 200:
                out["body"] = r.read()
                return out
            while True:
                line = r.readline()
                if not line:
                    break
                t = time.monotonic()
                line = line.decode().rstrip("\r\n")
                if not line.startswith("data: "):
                    continue
                payload = line[6:]
                if payload == "[DONE]":
                    out["done"] = True
                    continue
                out["events"].append((t, payload))
        except (OSError, http.client.HTTPException) as e:
            out["error"] = repr(e)
        finally:
            c.close()
        return out


def token_chunks(events):
    """The decoded chunks that carry a token (choices non-empty)."""
    chunks = []
    for t, payload in events:
        d = json.loads(payload)
        if d.get("choices"):
            chunks.append((t, d))
    return chunks


def completion_body(prompt, max_tokens, stream=True, usage=False, **extra):
    b = {"prompt": prompt, "max_tokens": max_tokens, "stream": stream, "ignore_eos": True}
    if usage:
        b["stream_options"] = {"include_usage": True}
    b.update(extra)
    return b


def find_exe(argv, default_name="goodput-sim"):
    if len(argv) > 1:
        return argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(here, "..", "..", "build", "sim", default_name)
