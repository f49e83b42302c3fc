#!/usr/bin/env python3
"""bench-levers.py — the trade-offs of the levers beyond batch size and TP,
in virtual time (goodput-sim's engine model through `goodput-sim simulate`,
and `goodput tune --dry-run` for what a study chooses).

Each figure is the median over --seeds runs (the arrivals' seed and the
step-time jitter's, 3 % log-normal) with the range [min-max]; the runs take
no wall time to speak of, so a loaded machine changes none of the figures.

  speculation   8B H100, chat 512/256 with repetitive text (prompt
                repetition 0.5), acceptance 0.7: TPOT at low and high load,
                and $/Mtok at the highest rate meeting a tight TPOT SLA
                (10 ms) and a throughput-bound one (60 ms)
  spec-blog     the vLLM blog's n-gram figure (2024-10-17, figures 6-7):
                70B on 4xH100, 1,000-token articles and 128-token summaries,
                n-gram k=4, mean end-to-end latency at 1, 2, 4 and 8 req/s
                with and without, beside the published seconds
  prefix        8B H100, a 2,000-token shared system prompt + 200 tokens of
                question, 128 out; and the same questions without it
  dp-tp         8B H100 on 2 GPUs, short-prompt chat 256/128:
                DP=2 x TP=1 against TP=2
  pp            70B bf16 H100: the layouts of 2, 4 and 8 GPUs, those that
                do not fit refused by the engine model
  study         `goodput tune --dry-run` of a study with speculation in its
                space under each SLA: the answer and its cost

Usage: bench-levers.py --sim GOODPUT-SIM [--goodput GOODPUT --engines-dir DIR]
                       [--seeds N] [--only SECTION,...] [--json FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def simulate(sim, args, seed):
    """One `goodput-sim simulate --json` run; None when the engine refuses to start."""
    p = subprocess.run([sim, "simulate", "--seed", str(seed), "--json", *args], capture_output=True, text=True)
    if p.returncode == 1:
        return None
    if p.returncode != 0:
        sys.exit(f"bench-levers: goodput-sim simulate {' '.join(args)}: exit {p.returncode}: {p.stderr}")
    return json.loads(p.stdout)


def spread(values, fmt="{:.2f}"):
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    m = statistics.median(values)
    if len(values) == 1 or min(values) == max(values):
        return fmt.format(m)
    return f"{fmt.format(m)} [{fmt.format(min(values))}-{fmt.format(max(values))}]"


def runs(sim, args, seeds, key):
    out = []
    for s in range(1, seeds + 1):
        d = simulate(sim, args, s)
        out.append(None if d is None else key(d))
    return out


H100_8B = ["--model", "llama-3.1-8b", "--gpu", "H100"]
SPECS = {
    "off": [],
    "ngram k=3": ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3}', "--spec-acceptance",
                  "0.7"],
    "draft 1B k=3": ["--speculative-config",
                     '{"method": "draft_model", "model": "llama-3.2-1b", "num_speculative_tokens": 3}',
                     "--spec-acceptance", "0.7"],
}


def bench_speculation(sim, seeds, results):
    wl = ["--random-input-len", "512", "--random-output-len", "256", "--prompt-repetition", "0.5",
          "--num-prompts", "300"]
    print("## speculation: 8B H100, chat 512/256, prompt repetition 0.5, acceptance 0.7")
    print(f"{'':14} {'p50 TPOT ms @1/s':>20} {'@8/s':>20} {'@16/s':>20} "
          f"{'$/Mtok tpot<=10ms':>24} {'max rate':>20} {'$/Mtok tpot<=60ms':>24} {'max rate':>20}")
    for name, spec in SPECS.items():
        row = {}
        for rate in ("1", "8", "16"):
            row[f"tpot_p50_ms@{rate}"] = runs(sim, H100_8B + wl + spec + ["--request-rate", rate], seeds,
                                               lambda d: d["p50_tpot_ms"])
        for tag, sla in (("tight", "tpot:10,ttft:1000"), ("loose", "tpot:60,ttft:2000")):
            both = runs(sim, H100_8B + wl + spec + ["--sla", sla, "--find-max-rate"], seeds,
                        lambda d: (d["usd_per_mtok"], d["max_request_rate"]))
            row[f"usd_per_mtok_{tag}"] = [b[0] for b in both]
            row[f"max_rate_{tag}"] = [b[1] for b in both]
        results["speculation"][name] = row
        print(f"{name:14} {spread(row['tpot_p50_ms@1']):>20} {spread(row['tpot_p50_ms@8']):>20} "
              f"{spread(row['tpot_p50_ms@16']):>20} {spread(row['usd_per_mtok_tight'], '{:.4f}'):>24} "
              f"{spread(row['max_rate_tight'], '{:.1f}'):>20} {spread(row['usd_per_mtok_loose'], '{:.4f}'):>24} "
              f"{spread(row['max_rate_loose'], '{:.1f}'):>20}")
    print()


# The vLLM blog of 2024-10-17, figures 6 and 7 (read off the bars): mean e2e latency, s.
BLOG_NGRAM = {1: (0.98, 2.75), 2: (1.24, 2.95), 4: (1.82, 3.78), 8: (10.7, 5.75)}


def bench_spec_blog(sim, seeds, results):
    base = ["--model", "llama-3.1-70b", "--gpu", "H100", "--tensor-parallel-size", "4", "--max-num-seqs", "256",
            "--random-input-len", "1000", "--random-output-len", "128", "--prompt-repetition", "0.9",
            "--num-prompts", "1000"]
    ngram = ["--spec-method", "ngram", "--spec-tokens", "4", "--spec-acceptance", "0.8"]
    print("## the vLLM blog's n-gram figure: 70B 4xH100, 1000/128, n-gram k=4, acceptance 0.8, mean e2e s")
    print(f"{'req/s':>6} {'n-gram':>20} {'without':>20} {'ratio':>20} {'published':>22}")
    for rate, (pub_on, pub_off) in BLOG_NGRAM.items():
        on = runs(sim, base + ngram + ["--request-rate", str(rate)], seeds, lambda d: d["mean_e2el_ms"] / 1e3)
        off = runs(sim, base + ["--request-rate", str(rate)], seeds, lambda d: d["mean_e2el_ms"] / 1e3)
        ratio = [a / b for a, b in zip(on, off)]
        results["spec_blog"][str(rate)] = {"ngram_e2e_s": on, "off_e2e_s": off, "ratio": ratio,
                                           "published": [pub_on, pub_off]}
        print(f"{rate:>6} {spread(on):>20} {spread(off):>20} {spread(ratio):>20} "
              f"{f'{pub_on} / {pub_off} = {pub_on / pub_off:.2f}':>22}")
    sat = {}
    for name, extra in (("n-gram", ngram), ("without", [])):
        sat[name] = runs(sim, base + extra + ["--request-rate", "inf"], seeds, lambda d: d["request_throughput"])
    results["spec_blog"]["saturated_req_s"] = sat
    print(f"saturated: n-gram {spread(sat['n-gram'])} req/s, without {spread(sat['without'])}")
    print()


def bench_prefix(sim, seeds, results):
    print("## prefix caching: 8B H100, 200-token questions, 128 out, SLA ttft<=500 ms tpot<=50 ms")
    print(f"{'':36} {'hit rate':>10} {'p50 TTFT ms @8/s':>22} {'max rate':>20} {'$/Mtok':>24}")
    for shared, pre in (("2,000-token system prompt", ["--random-prefix-len", "2000"]), ("no shared prefix", [])):
        for cache in ("on", "off"):
            args = H100_8B + ["--random-input-len", "200", "--random-output-len", "128", "--num-prompts", "300",
                              "--prefix-caching", cache] + pre
            hit = runs(sim, args + ["--request-rate", "8"], seeds, lambda d: d["server"]["prefix_cache_hit_rate"])
            ttft = runs(sim, args + ["--request-rate", "8"], seeds, lambda d: d["p50_ttft_ms"])
            both = runs(sim, args + ["--sla", "ttft:500,tpot:50", "--find-max-rate"], seeds,
                        lambda d: (d["usd_per_mtok"], d["max_request_rate"]))
            name = f"{shared}, cache {cache}"
            results["prefix"][name] = {"hit_rate": hit, "ttft_p50_ms@8": ttft, "usd_per_mtok": [b[0] for b in both],
                                       "max_rate": [b[1] for b in both]}
            print(f"{name:36} {spread(hit, '{:.2f}'):>10} {spread(ttft, '{:.1f}'):>22} "
                  f"{spread([b[1] for b in both], '{:.1f}'):>20} {spread([b[0] for b in both], '{:.4f}'):>24}")
    print()


def bench_dp_tp(sim, seeds, results):
    print("## DP x TP: 8B H100, 2 GPUs, chat 256/128, SLA ttft<=500 ms tpot<=50 ms")
    print(f"{'':16} {'max rate':>20} {'$/Mtok':>24} {'p50 TPOT ms @20/s':>22}")
    wl = ["--random-input-len", "256", "--random-output-len", "128", "--num-prompts", "400", "--gpus", "2"]
    for name, lay in (("DP=2 x TP=1", ["--data-parallel-size", "2"]), ("TP=2", ["--tensor-parallel-size", "2"])):
        both = runs(sim, H100_8B + wl + lay + ["--sla", "ttft:500,tpot:50", "--find-max-rate"], seeds,
                    lambda d: (d["usd_per_mtok"], d["max_request_rate"]))
        tpot = runs(sim, H100_8B + wl + lay + ["--request-rate", "20"], seeds, lambda d: d["p50_tpot_ms"])
        results["dp_tp"][name] = {"usd_per_mtok": [b[0] for b in both], "max_rate": [b[1] for b in both],
                                  "tpot_p50_ms@20": tpot}
        print(f"{name:16} {spread([b[1] for b in both], '{:.1f}'):>20} {spread([b[0] for b in both], '{:.4f}'):>24} "
              f"{spread(tpot):>22}")
    print()


def bench_pp(sim, seeds, results):
    print("## PP: 70B bf16 H100, chat 1024/256, SLA ttft<=1000 ms tpot<=50 ms (the 70B example's)")
    print(f"{'':22} {'GPUs':>5} {'max rate':>20} {'$/Mtok':>24}")
    wl = ["--model", "llama-3.1-70b", "--gpu", "H100", "--random-input-len", "1024", "--random-output-len", "256",
          "--num-prompts", "300", "--max-num-seqs", "256"]
    for tp, pp, dp in ((1, 1, 1), (2, 1, 1), (1, 2, 1), (4, 1, 1), (2, 2, 1), (1, 4, 1), (8, 1, 1), (4, 2, 1),
                       (2, 4, 1), (4, 1, 2), (2, 2, 2)):
        name = f"TP={tp} x PP={pp}" + (f" x DP={dp}" if dp > 1 else "")
        gpus = tp * pp * dp
        lay = ["--tensor-parallel-size", str(tp), "--pipeline-parallel-size", str(pp), "--data-parallel-size",
               str(dp), "--gpus", str(gpus)]
        both = runs(sim, wl + lay + ["--sla", "ttft:1000,tpot:50", "--find-max-rate"], seeds,
                    lambda d: (d["usd_per_mtok"], d["max_request_rate"]))
        fits = both[0] is not None
        met = fits and all(b[1] > 0 for b in both)
        results["pp"][name] = {"gpus": gpus, "fits": fits, "usd_per_mtok": [b[0] for b in both if b],
                               "max_rate": [b[1] for b in both if b], "sla_met": met}
        if not fits:
            print(f"{name:22} {gpus:>5} {'does not fit (refused at start-up)':>45}")
        elif not met:
            print(f"{name:22} {gpus:>5} {'starts, meets the SLA at no rate':>45}")
        else:
            print(f"{name:22} {gpus:>5} {spread([b[1] for b in both], '{:.2f}'):>20} "
                  f"{spread([b[0] for b in both], '{:.4f}'):>24}")
    print()


STUDY = {
    "engine": "sim",
    "model": {"name": "llama-3.1-8b", "drafts": {"draft_model": "llama-3.2-1b"}},
    "gpu": {"type": "H100", "count": 1, "price_per_gpu_hour": 3.0},
    "search_space": {"max_num_seqs": [16, 64, 256], "spec_method": ["none", "draft_model"], "spec_tokens": [2, 4]},
    "workload": {"input_len": 512, "output_len": 256, "spec_acceptance": 0.7, "num_prompts": 400},
    "budget": {"max_trials": 12},
}


def bench_study(goodput, engines_dir, sim, seeds, results):
    print("## study: `goodput tune --dry-run`, 8B H100 chat 512/256, space max_num_seqs {16,64,256} x "
          "spec_method {none,draft_model (llama-3.2-1b)} x spec_tokens {2,4}, acceptance 0.7")
    print(f"{'':26} {'answers':>44} {'$/Mtok':>24} {'trials':>8} {'wall s':>8}")
    env = dict(os.environ, GOODPUT_ENGINES_DIR=engines_dir,
               PATH=os.path.dirname(os.path.abspath(sim)) + os.pathsep + os.environ.get("PATH", ""))
    for tag, sla in (("tight: tpot<=10 ms", {"ttft_ms": 1000, "tpot_ms": 10}),
                     ("throughput: tpot<=60 ms", {"ttft_ms": 2000, "tpot_ms": 60})):
        answers, costs, trials, walls, offs = [], [], [], [], []
        for s in range(1, seeds + 1):
            with tempfile.TemporaryDirectory(prefix="bench-levers-") as d:
                spec = dict(STUDY, name=f"levers-{s}", sla=sla, search={"seed": s})
                spec["workload"] = dict(STUDY["workload"], seed=s)
                path = os.path.join(d, "study.json")
                with open(path, "w") as f:
                    json.dump(spec, f)
                t0 = time.monotonic()
                p = subprocess.run([goodput, "tune", "--dry-run", "-q", "--json", "--db", os.path.join(d, "g.db"),
                                    path], capture_output=True, text=True, env=env, cwd=d)
                walls.append(time.monotonic() - t0)
                if p.returncode != 0:
                    sys.exit(f"bench-levers: goodput tune --dry-run: exit {p.returncode}: {p.stderr[-2000:]}")
                best = json.loads(p.stdout)["best"]
                k = best["knobs"]
                answers.append(k.get("spec_method", "none") +
                               (f" k={k['spec_tokens']}" if k.get("spec_method", "none") != "none" else "") +
                               f" seqs={k['max_num_seqs']}")
                costs.append(best["cost_per_mtok"])
                trials.append(json.loads(p.stdout)["trials"])
                offs.append(best.get("levers", {}).get("speculation", ""))
        results["study"][tag] = {"answers": answers, "usd_per_mtok": costs, "trials": trials, "wall_s": walls,
                                 "speculation": offs}
        print(f"{tag:26} {', '.join(sorted(set(answers))):>44} {spread(costs, '{:.4f}'):>24} "
              f"{spread(trials, '{:.0f}'):>8} {spread(walls, '{:.0f}'):>8}")
        for o in sorted(set(offs)):
            print(f"    {o}")
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sim", required=True)
    ap.add_argument("--goodput")
    ap.add_argument("--engines-dir")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--study-seeds", type=int, default=3)
    ap.add_argument("--only", default="speculation,spec-blog,prefix,dp-tp,pp,study")
    ap.add_argument("--json")
    a = ap.parse_args()
    only = a.only.split(",")
    results = {"seeds": a.seeds, "speculation": {}, "spec_blog": {}, "prefix": {}, "dp_tp": {}, "pp": {}, "study": {}}
    if "speculation" in only:
        bench_speculation(a.sim, a.seeds, results)
    if "spec-blog" in only:
        bench_spec_blog(a.sim, a.seeds, results)
    if "prefix" in only:
        bench_prefix(a.sim, a.seeds, results)
    if "dp-tp" in only:
        bench_dp_tp(a.sim, a.seeds, results)
    if "pp" in only:
        bench_pp(a.sim, a.seeds, results)
    if "study" in only:
        if not a.goodput or not a.engines_dir:
            sys.exit("bench-levers: the study section needs --goodput and --engines-dir")
        bench_study(os.path.abspath(a.goodput), os.path.abspath(a.engines_dir), a.sim, a.study_seeds, results)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
