"""Helpers for goodputd's integration tests: start the daemon on a private
socket and state directory, talk raw JSON lines to it, run the `goodput`
client, listen for sd_notify datagrams. Standard library only."""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time


class TestFailure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise TestFailure(msg)


def tiny_spec(name, trials=3, window=None, max_wall="5m"):
    """A small study goodput-sim answers in seconds."""
    spec = {
        "name": name,
        "engine": "sim",
        "label": "test 128/16",
        "model": {"name": "llama-3.1-8b"},
        "quantizations": ["none", "fp8"],
        "gpu": {"type": "L40S", "count": 1, "price_per_gpu_hour": 0.99},
        "search_space": {
            "max_num_seqs": {"min": 8, "max": 64, "scale": "log2"},
            "max_num_batched_tokens": {"min": 512, "max": 2048, "scale": "log2"},
            "tensor_parallel": [1],
        },
        "workload": {"dataset": "random", "input_len": 128, "output_len": 16, "num_prompts": 24,
                     "ignore_eos": True, "seed": 7},
        "sla": {"ttft_ms": 2000, "tpot_ms": 100, "attainment": 0.9},
        "budget": {"max_trials": trials, "max_wall_time": max_wall},
        "probe": {"tolerance": 0.3, "max_steps": 3, "request_timeout": 30},
        "deploy": {"method": "exec", "startup_timeout": 30},
        "search": {"seed": 1, "algorithm": "LN_SBPLX"},
    }
    if window:
        spec["window"] = window
    return spec


class Notify:
    """A datagram socket to pass as NOTIFY_SOCKET, drained by a thread (a
    full queue would block the sender, as it would block on systemd)."""

    def __init__(self, path):
        import threading
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.1)
        self.messages = []
        self.lock = threading.Lock()
        self.running = True
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self):
        while self.running:
            try:
                data = self.sock.recv(65536).decode()
            except socket.timeout:
                continue
            except OSError:
                return
            with self.lock:
                self.messages.extend(data.split("\n"))

    def collect(self, seconds):
        time.sleep(seconds)

    def snapshot(self):
        with self.lock:
            return list(self.messages)

    def wait_for(self, prefix, seconds):
        end = time.monotonic() + seconds
        while True:
            if any(m.startswith(prefix) for m in self.snapshot()):
                return True
            if time.monotonic() >= end:
                return False
            time.sleep(0.05)

    def close(self):
        self.running = False
        self.thread.join()
        self.sock.close()


class Daemon:
    def __init__(self, goodputd, goodput, tmp, name="d", args=(), env=None, config=None, verbose=True):
        self.goodputd = goodputd
        self.goodput = goodput
        self.tmp = tmp
        self.sock = os.path.join(tmp, name + ".sock")
        self.state = os.path.join(tmp, name + "-state")
        self.log_path = os.path.join(tmp, name + ".log")
        self.args = list(args)
        self.env = dict(os.environ)
        sim_dir = os.path.join(os.path.dirname(os.path.dirname(goodputd)), "sim")
        self.env["PATH"] = sim_dir + ":" + self.env.get("PATH", "")
        self.env.pop("NOTIFY_SOCKET", None)
        self.env.pop("LISTEN_FDS", None)
        if env:
            self.env.update(env)
        self.config = None
        if config is not None:
            self.config = os.path.join(tmp, name + ".json")
            with open(self.config, "w") as f:
                json.dump(config, f)
        self.verbose = verbose
        self.proc = None

    def argv(self):
        a = [self.goodputd, "--socket", self.sock, "--state-dir", self.state] + (["-v"] if self.verbose else []) + self.args
        if self.config:
            a += ["--config", self.config]
        return a

    def start(self, prefix=(), wait=True):
        self.logf = open(self.log_path, "a")
        self.proc = subprocess.Popen(list(prefix) + self.argv(), stdout=self.logf, stderr=self.logf,
                                     env=self.env)
        if wait:
            self.wait_socket()
        return self

    def wait_socket(self, seconds=20):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise TestFailure("goodputd exited with %s:\n%s" % (self.proc.returncode, self.log()))
            try:
                self.request({"command": "status"}, timeout=2)
                return
            except (OSError, TestFailure):
                time.sleep(0.05)
        raise TestFailure("goodputd did not answer on %s:\n%s" % (self.sock, self.log()))

    def log(self):
        try:
            with open(self.log_path) as f:
                return f.read()[-6000:]
        except OSError:
            return ""

    def connect(self, timeout=10):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(self.sock)
        return s

    def request(self, obj, timeout=10):
        with self.connect(timeout) as s:
            line = obj if isinstance(obj, (bytes, bytearray)) else (json.dumps(obj) + "\n").encode()
            s.sendall(line)
            return read_json_line(s)

    def client(self, *args, user=None, check_rc=None):
        argv = [self.goodput] + list(args[:1]) + ["--socket", self.sock] + list(args[1:])
        if user:
            argv = ["setpriv"] + user + ["--"] + argv
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=self.env)
        if check_rc is not None and p.returncode != check_rc:
            raise TestFailure("%s: exit %d, expected %d\nstdout: %s\nstderr: %s" %
                              (" ".join(argv), p.returncode, check_rc, p.stdout, p.stderr))
        return p

    def wait_state(self, study, states, seconds=120):
        end = time.monotonic() + seconds
        last = None
        while time.monotonic() < end:
            r = self.request({"command": "list"})
            for s in r.get("studies", []):
                if s["name"] == study:
                    last = s["state"]
                    if last in states:
                        return s
            check(self.proc.poll() is None, "goodputd exited:\n" + self.log())
            time.sleep(0.1)
        raise TestFailure("study %s: state %s, waited for %s\n%s" % (study, last, states, self.log()))

    def wait_phase(self, phases, min_trial=1, seconds=120):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            r = self.request({"command": "status"})
            cur = r.get("current")
            if cur and cur["phase"] in phases and cur["trial"] >= min_trial:
                return cur
            time.sleep(0.05)
        raise TestFailure("no phase %s:\n%s" % (phases, self.log()))

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise TestFailure("goodputd did not stop in %ss:\n%s" % (timeout, self.log()))
        if getattr(self, "logf", None):
            self.logf.close()
            self.logf = None
        self.check_sanitizers()
        return self.proc.returncode if self.proc else None

    def check_sanitizers(self):
        text = self.log()
        check("Sanitizer" not in text and "runtime error:" not in text, "sanitizer report:\n" + text)


def read_json_line(s, limit=64 << 20):
    buf = b""
    while b"\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            raise TestFailure("connection closed without an answer (got %r)" % buf[:200])
        buf += chunk
        if len(buf) > limit:
            raise TestFailure("answer too long")
    return json.loads(buf.split(b"\n", 1)[0])


def trials_ok(trials, expect_final=True):
    """No trial lost or duplicated: seqs 1..n, (kind, knobs) unique, all final."""
    seqs = [t["seq"] for t in trials]
    check(seqs == list(range(1, len(trials) + 1)), "trial seqs not contiguous: %s" % seqs)
    keys = [(t["kind"], json.dumps(t["knobs"], sort_keys=True)) for t in trials]
    check(len(set(keys)) == len(keys), "duplicate trials: %s" % keys)
    if expect_final:
        bad = [(t["seq"], t["state"]) for t in trials if t["state"] not in ("done", "infeasible", "failed")]
        check(not bad, "trials not final: %s" % bad)


def pgid_alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def run(cases, argv):
    """argv: goodputd goodput case"""
    goodputd, goodput, case = os.path.abspath(argv[1]), os.path.abspath(argv[2]), argv[3]
    tmp = tempfile.mkdtemp(prefix="goodputd-test-")
    os.chmod(tmp, 0o755)
    daemons = []

    def make(*a, **kw):
        d = Daemon(goodputd, goodput, tmp, *a, **kw)
        daemons.append(d)
        return d

    try:
        cases[case](make, tmp)
    except TestFailure as e:
        print("FAIL:", e, file=sys.stderr)
        for d in daemons:
            print("---- %s log ----\n%s" % (d.sock, d.log()), file=sys.stderr)
        return 1
    except SkipTest as e:
        print("SKIP:", e)
        return 77
    finally:
        for d in daemons:
            if d.proc and d.proc.poll() is None:
                d.proc.send_signal(signal.SIGTERM)
                try:
                    d.proc.wait(30)
                except subprocess.TimeoutExpired:
                    d.proc.kill()
                    d.proc.wait()
        reports = [d.log() for d in daemons if "Sanitizer" in d.log() or "runtime error:" in d.log()]
        subprocess.run(["rm", "-rf", tmp])
        if reports:
            print("FAIL: sanitizer report:\n" + reports[0], file=sys.stderr)
            return 1
    print("ok")
    return 0


class SkipTest(Exception):
    pass
