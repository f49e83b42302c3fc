#!/usr/bin/python3
"""bench-disagg.py — aggregated or disaggregated, and how: the DistServe
comparisons on an emulated 8xH100 host (Llama-3.1-70B FP8), in virtual time.

Two workloads, each a study of both serving shapes (deploy.shape "both"):
  long   4,000 in / 200 out, TTFT 3 s, TPOT 20 ms (a tight TPOT): DistServe's
         case for disaggregation;
  chat   256 in / 256 out, TTFT 2 s, TPOT 100 ms (a loose SLA): where the
         aggregated engine keeps every GPU busy.
For each seed (the workload's requests and the search's seed), `goodput
tune --dry-run` runs the study; the exhaustive grid of the same space and
requests (tune-oracle: every configuration evaluated as the dry run does)
says which shape truly wins and by how much per GPU; and Optuna's TPE
sampler (Debian's python3-optuna, as a practitioner runs it:
TPESampler(multivariate=True, group=True), the shape a categorical and each
shape's knobs asked only under it) gets the same number of deployments as
goodput used, and then 20, each answered with the grid's cost.
Then the SLA is scaled (0.5x to 2x both bounds) and the grid's best of
each shape per GPU printed: the DistServe figure of goodput against the
SLA's tightness.

Usage: bench-disagg.py GOODPUT TUNE_ORACLE ENGINES_DIR [--seeds N] [--no-scale]
Prints Markdown tables; exits 1 when a study answers the wrong shape."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

WORKLOADS = {
    "long": ({"input_len": 4000, "output_len": 200, "num_prompts": 120},
             {"ttft_ms": 3000, "tpot_ms": 20, "attainment": 0.9}, "disaggregated"),
    "chat": ({"input_len": 256, "output_len": 256, "num_prompts": 240},
             {"ttft_ms": 2000, "tpot_ms": 100, "attainment": 0.9}, "aggregated"),
}


def spec_of(name, workload, sla, seed):
    return {
        "name": name, "engine": "sim", "model": {"name": "llama-3.1-70b"}, "quantizations": ["fp8"],
        "gpu": {"type": "H100", "count": 8, "price_per_gpu_hour": 3.0},
        "search_space": {
            "tensor_parallel": [2, 4], "data_parallel": [1, 2, 4],
            "max_num_batched_tokens": {"min": 256, "max": 8192, "scale": "log2"}, "max_num_seqs": [256],
            "prefill_workers": [1, 2, 3], "prefill_tensor_parallel": [2, 4], "decode_workers": [1, 2],
            "decode_tensor_parallel": [2, 4], "prefill_max_num_batched_tokens": [8192], "decode_max_num_seqs": [256],
        },
        "workload": dict(workload, dataset="random", ignore_eos=True, seed=seed),
        "sla": sla, "budget": {"max_trials": 40}, "probe": {"tolerance": 0.03},
        "deploy": {"shape": "both"}, "search": {"seed": seed},
    }


def write(tmp, spec):
    path = os.path.join(tmp, spec["name"] + ".json")
    with open(path, "w") as f:
        json.dump(spec, f)
    return path


def run(cmd, env):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    if p.returncode != 0:
        sys.exit("%s failed (%d):\n%s" % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
    return json.loads(p.stdout)


def parse_key(key):
    return dict(kv.split("=", 1) for kv in key.split(","))


def shape_best(grid, shape):
    costs = [c["cost"] for c in grid["configs"]
             if c.get("cost") and c["cost"] > 0 and parse_key(c["key"])["shape"] == shape]
    return min(costs) if costs else None


def tpe(grid, budget, seed):
    """Optuna's TPE on the grid's space: the best cost it finds in budget
    deployments, and that configuration's shape."""
    import optuna
    import warnings
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    table, values = {}, {}
    for c in grid["configs"]:
        k = parse_key(c["key"])
        table[json.dumps(k, sort_keys=True)] = c.get("cost")
        for name, v in k.items():
            values.setdefault((k["shape"], name), set()).add(v)
    varying = {s: sorted(n for (sh, n), vs in values.items() if sh == s and len(vs) > 1 and n != "shape")
               for s in ("aggregated", "disaggregated")}
    worst = max((c["cost"] for c in grid["configs"] if c.get("cost") and c["cost"] > 0), default=1.0) * 10
    best = (None, None)

    def objective(trial):
        nonlocal best
        shape = trial.suggest_categorical("shape", ["aggregated", "disaggregated"])
        want = {n: trial.suggest_categorical("%s.%s" % (shape, n), sorted(values[(shape, n)], key=float))
                for n in varying[shape]}
        for key, cost in table.items():
            k = json.loads(key)
            if k["shape"] == shape and all(k[n] == v for n, v in want.items()):
                if cost and cost > 0:
                    if best[0] is None or cost < best[0]:
                        best = (cost, shape)
                    return cost
                return worst  # misses the SLA at any load
        return worst  # not in the space: over the host's GPUs

    sampler = optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True)
    study = optuna.create_study(direction="minimize", sampler=sampler)
    study.optimize(objective, n_trials=budget)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("goodput")
    ap.add_argument("oracle")
    ap.add_argument("engines_dir")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--no-scale", action="store_true")
    a = ap.parse_args()
    env = dict(os.environ, GOODPUT_ENGINES_DIR=os.path.abspath(a.engines_dir))
    try:
        import optuna  # noqa: F401
        have_tpe = True
    except ImportError:
        have_tpe = False
    bad = 0
    with tempfile.TemporaryDirectory(prefix="bench-disagg-") as tmp:
        print("| workload | grid: best shape | grid gain per GPU | goodput: shape chosen | answer vs grid optimum "
              "| answer's gain | deployments | virtual time to answer | TPE, same deployments: shape, vs optimum "
              "| TPE, 20 deployments |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for wname, (workload, sla, want) in WORKLOADS.items():
            other = "aggregated" if want == "disaggregated" else "disaggregated"
            gwins, ggains, shapes, regret, gains, deps, tta, tpe_rows, tpe20 = [], [], [], [], [], [], [], [], []
            for seed in range(1, a.seeds + 1):
                spec = write(tmp, spec_of("pd-%s-%d" % (wname, seed), workload, sla, seed))
                grid = run([a.oracle, spec, a.engines_dir], env)
                gwins.append(parse_key(grid["best_key"])["shape"])
                ggains.append(shape_best(grid, other) / shape_best(grid, want))
                out = run([a.goodput, "tune", "--dry-run", "--json", "-q", "--no-report", "--db",
                           os.path.join(tmp, "%s-%d.db" % (wname, seed)), spec], env)
                b = out["best"]
                shapes.append(b["knobs"]["shape"])
                regret.append(b["cost_per_mtok"] / grid["best_cost"] - 1)
                gains.append(b["shape"]["gain"] if b.get("shape") else float("nan"))
                deps.append(out["trials"])
                tta.append(b["time_to_answer_seconds"])
                if have_tpe:
                    for budget, rows in ((out["trials"], tpe_rows), (20, tpe20)):
                        cost, shape = tpe(grid, budget, seed)
                        rows.append((shape, cost / grid["best_cost"] - 1 if cost else float("inf")))
                if b["knobs"]["shape"] != want or gwins[-1] != want:
                    bad += 1

            def ms(v, fmt):
                m = fmt % statistics.mean(v)
                return m + (" ± " + (fmt.replace("%+", "%") % statistics.pstdev(v)) if len(v) > 1 else "")

            def tpe_text(rows):
                if not have_tpe:
                    return "optuna missing"
                return "%s; %s" % ("/".join(s or "none" for s, _ in rows), ms([100 * r for _, r in rows], "%+.1f %%"))

            print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                wname, "/".join(gwins), ms(ggains, "%.2fx"), "/".join(shapes), ms([100 * r for r in regret], "%+.1f %%"),
                ms(gains, "%.2fx"), ms(deps, "%.1f"), ms([t / 60 for t in tta], "%.1f min") + " (%s)" % "/".join("%.0f" % (t / 60) for t in tta), tpe_text(tpe_rows),
                tpe_text(tpe20)))
            sys.stdout.flush()
        if not a.no_scale:
            print()
            print("SLA scaled (both bounds x s); the grid's best per-GPU goodput cost of each shape, $/Mtok:")
            print()
            print("| workload | SLA scale | TTFT, TPOT | aggregated | disaggregated | winner | gain |")
            print("|---|---|---|---|---|---|---|")
            for wname, (workload, sla, _) in WORKLOADS.items():
                for s in (0.5, 0.75, 1.0, 1.5, 2.0):
                    sc = dict(sla, ttft_ms=sla["ttft_ms"] * s, tpot_ms=sla["tpot_ms"] * s)
                    grid = run([a.oracle, write(tmp, spec_of("sc-%s-%g" % (wname, s), workload, sc, 1)),
                                a.engines_dir], env)
                    ag, di = shape_best(grid, "aggregated"), shape_best(grid, "disaggregated")
                    win = "aggregated" if ag and (not di or ag <= di) else "disaggregated" if di else "neither"
                    gain = (max(ag, di) / min(ag, di)) if ag and di else float("nan")
                    print("| %s | %gx | %g ms, %g ms | %s | %s | %s | %s |" % (
                        wname, s, sc["ttft_ms"], sc["tpot_ms"], "%.3f" % ag if ag else "misses",
                        "%.3f" % di if di else "misses", win, "%.2fx" % gain if ag and di else "-"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
