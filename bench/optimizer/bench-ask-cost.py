#!/usr/bin/env python3
"""bench-ask-cost.py — what one ask of the model search costs: the CPU time
of the planning process (the child the runner forks for each ask) and the
wall time the runner waited for it, over whole dry-run studies.

Each study spec runs once with `goodput tune --dry-run` (the model search,
its default strategy; --max-trials caps the budget), and every ask's log
line — "model PHASE (W s, C s CPU): ..." — is read. Per study: the asks,
the CPU time per ask (median, mean, p90, max, total), the wall time per ask
(median, max: the machine's load stretches it), and the wall time of the
whole dry run. --parallel N asks for N trials at a time.

Usage: bench-ask-cost.py GOODPUT SPEC.json... [--max-trials N] [--parallel N]
                         [--engines-dir DIR] [--runs N] [--json]
Exits 1 when a run fails."""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ASK = re.compile(r": (model|twin) [a-z]+[^(]*\(([0-9.]+) s, ([0-9.]+|nan) s CPU\)")


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = min(len(xs) - 1, max(0, int(round(p / 100 * (len(xs) - 1)))))
    return xs[k]


def run(goodput, spec, args):
    with tempfile.TemporaryDirectory(prefix="bench-ask-cost.") as tmp:
        with open(spec) as f:
            s = json.load(f)
        s.setdefault("budget", {})["max_trials"] = args.max_trials
        path = os.path.join(tmp, "study.json")
        with open(path, "w") as f:
            json.dump(s, f)
        cmd = [goodput, "tune", "--dry-run", "--db", os.path.join(tmp, "t.db"), "--parallel", str(args.parallel)]
        if args.engines_dir:
            cmd += ["--engines-dir", args.engines_dir]
        cmd.append(path)
        t0 = time.monotonic()
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp, timeout=7200)
        wall = time.monotonic() - t0
        if p.returncode != 0:
            sys.exit("%s failed (%d):\n%s" % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
        asks = [(float(m.group(2)), float(m.group(3))) for m in ASK.finditer(p.stderr)]
        return s.get("label", s.get("name", spec)), asks, wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("goodput")
    ap.add_argument("specs", nargs="+")
    ap.add_argument("--max-trials", type=int, default=40)
    ap.add_argument("--parallel", type=int, default=1)
    ap.add_argument("--engines-dir")
    ap.add_argument("--runs", type=int, default=1, help="runs of each study (the CPU figures pool them)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    args.goodput = os.path.abspath(args.goodput)
    args.specs = [os.path.abspath(s) for s in args.specs]
    if args.engines_dir:
        args.engines_dir = os.path.abspath(args.engines_dir)
    rows = []
    for spec in args.specs:
        cpu, wall, walls, label = [], [], [], spec
        for _ in range(args.runs):
            label, asks, w = run(args.goodput, spec, args)
            cpu += [c for _, c in asks if c == c]
            wall += [x for x, _ in asks]
            walls.append(w)
        rows.append({"study": label, "asks": len(wall) / args.runs,
                     "cpu_median": statistics.median(cpu) if cpu else float("nan"),
                     "cpu_mean": statistics.mean(cpu) if cpu else float("nan"),
                     "cpu_p90": pct(cpu, 90), "cpu_max": max(cpu) if cpu else float("nan"),
                     "cpu_total": sum(cpu) / args.runs,
                     "wall_median": statistics.median(wall) if wall else float("nan"),
                     "wall_max": max(wall) if wall else float("nan"),
                     "run_wall": statistics.median(walls)})
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print("| study | asks | CPU per ask: median | mean | p90 | max | CPU per study | wall per ask: median | max "
          "| dry run |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print("| %s | %.0f | %.2f s | %.2f s | %.2f s | %.2f s | %.1f s | %.1f s | %.1f s | %.0f s |" % (
            r["study"], r["asks"], r["cpu_median"], r["cpu_mean"], r["cpu_p90"], r["cpu_max"], r["cpu_total"],
            r["wall_median"], r["wall_max"], r["run_wall"]))


if __name__ == "__main__":
    main()
