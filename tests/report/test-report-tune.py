#!/usr/bin/env python3
"""A real (dry-run) study reported: `goodput tune --dry-run` on the demo spec,
then `goodput report`; the numbers in the report equal the store's. Then a
dry-run study of both serving shapes (deploy.shape "both"): its report has
the serving-shape section and DistServe's figure (attainment against rate
per GPU and against the SLA scaled, from the attainments each load point
counted under the scaled SLA), which the one-shape study's report has not."""
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile

goodput, spec = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp(prefix="test-report-tune-")

# Both shapes on 4 emulated H100s, a long-prompt workload: one aggregated
# configuration (TP 1) and one disaggregated (a prefill and a decode worker).
BOTH = {"name": "both-shapes", "engine": "sim", "model": {"name": "llama-3.1-8b"}, "quantizations": ["none"],
        "gpu": {"type": "H100", "count": 4, "price_per_gpu_hour": 3.0},
        "search_space": {"tensor_parallel": [1], "max_num_seqs": [64], "max_num_batched_tokens": [512],
                         "prefill_workers": [1], "prefill_tensor_parallel": [1], "decode_workers": [1],
                         "decode_tensor_parallel": [1], "decode_max_num_seqs": [64]},
        "workload": {"dataset": "random", "input_len": 2000, "output_len": 100, "num_prompts": 200,
                     "ignore_eos": True, "seed": 1},
        "sla": {"ttft_ms": 400, "tpot_ms": 15, "attainment": 0.9},
        "budget": {"max_trials": 4}, "probe": {"tolerance": 0.1}, "deploy": {"shape": "both"}}


def both_shapes(tmp):
    spec = os.path.join(tmp, "both.json")
    with open(spec, "w") as f:
        json.dump(BOTH, f)
    db = os.path.join(tmp, "both.db")
    subprocess.run([goodput, "tune", "--db", db, "--dry-run", "-q", "--no-report", spec], check=True,
                   capture_output=True, timeout=600)
    con = sqlite3.connect(db)
    name, = con.execute("select name from studies").fetchone()
    shapes = {json.loads(k).get("shape") for k, in con.execute("select knobs from trials where state = 'done'")}
    if shapes != {"aggregated", "disaggregated"}:
        sys.exit(f"FAIL: the study of both shapes measured {shapes}")
    # every load point counted its attainment under the SLA scaled 0.5..2:
    # rising with the scale, at 1 the load point's own attainment
    for res, att in con.execute("select result, attainment from load_points"):
        pairs = json.loads(res)["attainment_by_sla_scale"]
        if [s for s, _ in pairs] != [round(0.5 + 0.1 * i, 1) for i in range(16)]:
            sys.exit(f"FAIL: scales {pairs}")
        a = [x for _, x in pairs]
        if a != sorted(a) or abs(a[5] - att) > 1e-12:
            sys.exit(f"FAIL: attainment by SLA scale {a} against {att} at scale 1")
    con.close()
    out = os.path.join(tmp, "both-out")
    p = subprocess.run([goodput, "report", "--db", db, name, "--out", out, "--json"],
                       check=True, capture_output=True, text=True, timeout=300)
    j = json.loads(p.stdout)
    html = open(j["html"], encoding="utf-8").read()
    md = open(j["markdown"], encoding="utf-8").read()
    for doc in (html, md):
        if "Serving shape: aggregated or disaggregated" not in doc or "the goodput per GPU of the best" not in doc:
            sys.exit("FAIL: the report of both shapes lacks the serving-shape section")
    if not shutil.which("gnuplot"):
        return
    if j["plots"] != 8 or 'id="plot-shapes"' not in html or "plot-shapes.svg" not in md:
        sys.exit(f"FAIL: {j['plots']} plots; the shapes figure is not in the report")
    svg = open(os.path.join(out, "plot-shapes.svg"), encoding="utf-8").read()
    for t in ["Attainment against request rate per GPU", "Attainment against the SLA scaled",
              "best aggregated (1 GPU)", "best disaggregated (2 GPUs)", "SLA scale"]:
        if t not in svg:
            sys.exit("FAIL: the shapes figure lacks " + t)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import pagecheck
    for problem in pagecheck.axis_problems(svg):
        sys.exit("FAIL: " + problem)
    panels = pagecheck.axes_of(svg)
    if [q["panel"] for q in panels] != ["Attainment against rate", "Attainment against SLA scale"]:
        sys.exit(f"FAIL: panels {panels}")
try:
    db = os.path.join(tmp, "t.db")
    subprocess.run([goodput, "tune", "--db", db, "--dry-run", "--max-trials", "6", spec], check=True,
                   capture_output=True, timeout=600)
    con = sqlite3.connect(db)
    name, = con.execute("select name from studies").fetchone()
    n_trials, = con.execute("select count(*) from trials").fetchone()
    # the study's cost: the mean of every measurement of the chosen configuration
    cost, = con.execute("select avg(t.cost_per_mtok) from trials t join studies s on s.id = t.study_id"
                        " where t.state = 'done' and t.cost_per_mtok is not null and t.canonical_key ="
                        " (select canonical_key from trials where id = s.best_trial_id)").fetchone()
    con.close()
    p = subprocess.run([goodput, "report", "--db", db, name, "--out", os.path.join(tmp, "out"), "--json"],
                       check=True, capture_output=True, text=True, timeout=300)
    j = json.loads(p.stdout)
    if j["trials"] != n_trials:
        sys.exit(f"FAIL: {j['trials']} trials reported, {n_trials} stored")
    if cost is not None and abs(j["best"]["cost_per_mtok"] - cost) > 1e-9 * cost:
        sys.exit(f"FAIL: best cost {j['best']['cost_per_mtok']} != {cost}")
    html = open(j["html"], encoding="utf-8").read()
    trials = html[html.index('<h2 id="trials">'):html.index('<h2 id="landscape">')]
    if len(re.findall(r"<tr[^>]*>\s*<td>", trials)) != n_trials:
        sys.exit("FAIL: not every trial is in the table")
    # how it ended, in words a user reads, not a warning box; nothing on stderr
    # the search that ran: the demo is the model search's, not the NLopt
    # algorithm its row was submitted with
    if not re.search(r"<td>search</td>\s*<td>model, seed", html):
        sys.exit("FAIL: the report does not name the model search as the study's search")
    if "Study message" in html or not re.search(r"<p>The study ended (when|once)", html):
        sys.exit("FAIL: the report does not say in words why the study ended")
    if p.stderr.strip():
        sys.exit("FAIL: report wrote to stderr: " + p.stderr)
    if shutil.which("gnuplot") and j["plots"] != 7:
        sys.exit(f"FAIL: {j['plots']} plots drawn, expected 7: {p.stderr}")
    if 'id="shape"' in html or os.path.exists(os.path.join(tmp, "out", "plot-shapes.svg")):
        sys.exit("FAIL: a study of one serving shape has the serving-shape section or figure")
    both_shapes(tmp)
finally:
    shutil.rmtree(tmp, ignore_errors=True)
print("ok")
