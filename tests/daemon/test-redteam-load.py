#!/usr/bin/env python3
"""Red team, round two (issue 27 items 4, 5 and 8): each attack replayed
against real goodputd processes on a private socket and state directory,
and the defended outcome checked. Usage:
test-redteam-load.py GOODPUTD GOODPUT CASE."""

import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemonlib import TestFailure, check, run, tiny_spec  # noqa: E402


def vm_kib(pid, field):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def descendants(pid):
    out = []
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            kids = [int(c) for c in f.read().split()]
    except OSError:
        return out
    for k in kids:
        out.append(k)
        out += descendants(k)
    return out


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return ""


def timed(d, req, timeout=30):
    t0 = time.monotonic()
    r = d.request(req, timeout=timeout)
    return r, time.monotonic() - t0


def case_prompts(make, tmp):
    """Item 4: a real study of a million prompts (a captured production
    workload can be that large) froze goodputd: every arrival of the
    saturation run got its curl handle at once on the daemon's loop (5,000
    prompts: `status` 11.5 s, 99 MB; 1,000,000: 3.9 GB and growing). Now the
    probe runs in a process of its own and sends as room comes: `status` is
    answered at once all through the load point and goodputd's memory does
    not grow with the workload; a cancel ends the probe's process and the
    server."""
    d = make(verbose=False).start()
    pid = d.proc.pid
    base = vm_kib(pid, "VmRSS")
    spec = tiny_spec("million", trials=1)
    spec["workload"].update({"num_prompts": 1000000, "input_len": 128, "output_len": 16})
    spec["probe"]["request_timeout"] = 600
    r = d.request({"command": "submit", "study": spec})
    check(r["ok"], r)
    d.wait_phase(["probing"], seconds=120)
    probe_pid, probe_kib, worst, n = 0, 0, 0.0, 0
    end = time.monotonic() + 10
    while time.monotonic() < end:
        r, dt = timed(d, {"command": "status"})
        check(r["ok"] and r["current"] and r["current"]["phase"] == "probing", r)
        worst = max(worst, dt)
        n += 1
        for k in descendants(pid):
            if comm(k) == "goodput-probe":
                probe_pid, probe_kib = k, max(probe_kib, vm_kib(k, "VmRSS"))
        time.sleep(0.05)
    hwm = vm_kib(pid, "VmHWM")
    print("prompts: %d answers while a million-prompt load point ran, slowest %.3f s; goodputd RSS %d -> peak %d "
          "KiB; the probe's process %d KiB" % (n, worst, base, hwm, probe_kib))
    check(probe_pid > 0, "no probe process among goodputd's children: %s" %
          [(k, comm(k)) for k in descendants(pid)])
    # a bound a loaded 2-core machine under ASan meets (quiet: about 1 ms;
    # the 50 ms target is measured by the benchmark goodputd-prompts)
    check(worst < 1.0, "status took %.2f s while the load point ran" % worst)
    check(hwm - base < 50 * 1024, "goodputd grew from %d to %d KiB" % (base, hwm))
    kids = descendants(pid)
    r, dt = timed(d, {"command": "cancel", "study": "million"})
    check(r["ok"], r)
    end = time.monotonic() + 30
    while any(os.path.exists("/proc/%d" % k) and comm(k) not in ("", "zombie") for k in kids):
        check(time.monotonic() < end, "left behind after the cancel: %s" %
              [(k, comm(k)) for k in kids if os.path.exists("/proc/%d" % k)])
        time.sleep(0.05)
    st = d.wait_state("million", ["cancelled"], 30)
    print("prompts: cancel answered in %.3f s; study %s, nothing left running" % (dt, st["state"]))
    check(dt < 2.0, "cancel took %.2f s" % dt)


CASES = {
    "prompts": case_prompts,
}

if __name__ == "__main__":
    sys.exit(run(CASES, sys.argv))
