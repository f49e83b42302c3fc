#!/bin/sh
# The llama.cpp profile against a real llama-server, as its users run it.
#
# 1. The profile's flags exist in this llama-server (check-engine).
# 2. A short offline study over --parallel (max_num_seqs) and --batch-size
#    (max_num_batched_tokens) completes with `goodput tune`, every trial's
#    server command carrying the derived --ctx-size and the study's
#    engine_binary and engine_args.
# 3. A newcomer's online study on a CPU host: the shipped profile, a plain
#    two-knob space, the baseline on by default, an SLA tight enough that
#    load points fail, points capped in time. The baseline deploys llama.cpp's
#    defaults (1 slot, -b 2048) without --n-gpu-layers; the rate search runs
#    (some point misses the SLA, some trial measures several rates); a point
#    still undecided at its cap carries its cap and its 90 % interval; no point
#    runs past its cap, and the progress output says which were judged there;
#    the answer lists the defaults it leaves unset as flags; and no trial
#    waits for the one before it to let go of its port.
#
# Runs when GOODPUT_LLAMA_SERVER (a llama-server binary) and
# GOODPUT_LLAMA_MODEL (a GGUF file) are set; skipped (77) otherwise.
# Usage: test-llamacpp.sh GOODPUT SOURCE-ROOT
set -eu
goodput=$1
src=$2
fail() { echo "FAIL: $*" >&2; exit 1; }

if [ -z "${GOODPUT_LLAMA_SERVER:-}" ] || [ -z "${GOODPUT_LLAMA_MODEL:-}" ]; then
	echo "SKIP: set GOODPUT_LLAMA_SERVER=/path/to/llama-server and GOODPUT_LLAMA_MODEL=/path/to/model.gguf" \
		"to run the llama.cpp integration test" >&2
	exit 77
fi
[ -x "$GOODPUT_LLAMA_SERVER" ] || fail "GOODPUT_LLAMA_SERVER=$GOODPUT_LLAMA_SERVER is not executable"
[ -r "$GOODPUT_LLAMA_MODEL" ] || fail "GOODPUT_LLAMA_MODEL=$GOODPUT_LLAMA_MODEL is not readable"
case "$GOODPUT_LLAMA_MODEL" in *'"'* | *'\'*) fail "the model path must not contain quotes or backslashes" ;; esac

dir=$(mktemp -d /tmp/goodput-test-llamacpp-XXXXXX)
trap 'rm -rf "$dir"' EXIT
# The profile runs "llama-server": put the given binary first on $PATH.
mkdir "$dir/bin"
ln -s "$(readlink -f "$GOODPUT_LLAMA_SERVER")" "$dir/bin/llama-server"
PATH="$dir/bin:$PATH"
export PATH

# The profile's flags must exist in this llama-server.
"$goodput" check-engine --engines-dir "$src/configs/engines" llamacpp || fail "check-engine llamacpp"

# One thread: two spin against each other on a busy 2-core host (8 s a
# token at a load of 20, where one thread keeps 80 ms).
cat >"$dir/study.json" <<EOS
{
	"name": "llamacpp-integration",
	"engine": "llamacpp",
	"model": { "name": "$GOODPUT_LLAMA_MODEL" },
	"gpu": { "type": "cpu", "cores": 2, "price_per_core_hour": 0.02 },
	"engine_binary": "$dir/bin/llama-server",
	"engine_args": ["--threads", "1"],
	"search_space": {
		"max_num_seqs": [1, 2, 4],
		"max_num_batched_tokens": [256, 512],
		"max_model_len": [256]
	},
	"constraints": ["max_num_batched_tokens >= max_num_seqs"],
	"workload": { "input_len": 64, "output_len": 16, "num_prompts": 8, "seed": 1 },
	"scenario": "offline",
	"budget": { "max_trials": 3, "max_wall_time": "20m" },
	"probe": { "max_steps": 2, "request_timeout": 300 },
	"deploy": { "method": "exec", "startup_timeout": 600 }
}
EOS
"$goodput" tune --db "$dir/goodput.db" --log-dir "$dir/logs" --engines-dir "$src/configs/engines" \
	--confirm 0 --json "$dir/study.json" >"$dir/out.json" || { cat "$dir/out.json" >&2; fail "goodput tune failed"; }
grep -q 'max_num_seqs' "$dir/out.json" || fail "no best configuration in: $(cat "$dir/out.json")"
grep -rq -- '--ctx-size' "$dir/logs" || fail "no --ctx-size in the server logs"
grep -rq -- '--parallel' "$dir/logs" || fail "no --parallel in the server logs"
grep -rq -- '--threads 1' "$dir/logs" || fail "no engine_args (--threads 1) in the server logs"
cat "$dir/out.json"

# The SLA of the online study is set from this host's own speed: one slot
# answering one request at a time (TTFT and TPOT medians of 4 requests). A
# fixed SLA is loose on a quiet host (every point met at once, none reaches
# its cap) and out of reach on a busy one.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$dir/bin/llama-server" --model "$GOODPUT_LLAMA_MODEL" --host 127.0.0.1 --port "$port" --parallel 1 \
	--ctx-size 512 --threads 1 --metrics >"$dir/calibrate.log" 2>&1 &
calib_pid=$!
trap 'kill $calib_pid 2>/dev/null || true; rm -rf "$dir"' EXIT
i=0
until python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
	"http://127.0.0.1:$port/health" 2>/dev/null; do
	i=$((i + 1))
	[ $i -lt 1200 ] || { cat "$dir/calibrate.log" >&2; fail "llama-server did not become healthy for the calibration"; }
	kill -0 $calib_pid 2>/dev/null || { cat "$dir/calibrate.log" >&2; fail "llama-server exited"; }
	sleep 0.5
done
"$goodput" probe --base-url "http://127.0.0.1:$port" --model "$GOODPUT_LLAMA_MODEL" --random-input-len 256 \
	--random-output-len 16 --ignore-eos --num-prompts 4 --max-concurrency 1 --seed 2 --json >"$dir/calibrate.json" \
	2>>"$dir/calibrate.log" || { cat "$dir/calibrate.log" >&2; fail "the calibration probe failed"; }
kill $calib_pid
wait $calib_pid 2>/dev/null || true
# TTFT: a few service times of queueing; TPOT: twice one slot's decode, which
# a slot holds alone but not beside another slot's 256-token prefill
sla=$(python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))
print("%.0f %.1f" % (max(4 * d["median_ttft_ms"], 50), max(2 * d["median_tpot_ms"], 2)))' "$dir/calibrate.json")
ttft_ms=${sla% *}
tpot_ms=${sla#* }
echo "calibrated on this host: one request alone $(python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))
print("TTFT %.0f ms, TPOT %.1f ms" % (d["median_ttft_ms"], d["median_tpot_ms"]))' "$dir/calibrate.json"); SLA TTFT $ttft_ms ms, TPOT $tpot_ms ms"

# A newcomer's online study: the profile as shipped, two plain knobs, the
# baseline of llama.cpp's defaults, one thread (two spin against each other
# on a busy 2-core host), the SLA above, points capped at 10 s (the
# saturation runs too): a few dozen requests a point, so points near the
# knee stay undecided at their cap.
cap=10
cat >"$dir/online.json" <<EOS
{
	"name": "llamacpp-online",
	"engine": "llamacpp",
	"model": { "name": "$GOODPUT_LLAMA_MODEL" },
	"gpu": { "type": "cpu", "cores": 2, "price_per_core_hour": 0.02 },
	"engine_binary": "$dir/bin/llama-server",
	"engine_args": ["--threads", "1"],
	"search_space": { "max_num_seqs": [1, 2], "max_num_batched_tokens": [512, 2048] },
	"workload": { "input_len": 256, "output_len": 16, "num_prompts": 16, "ignore_eos": true, "seed": 1 },
	"sla": { "ttft_ms": $ttft_ms, "tpot_ms": $tpot_ms, "attainment": 0.9 },
	"budget": { "max_trials": 3, "max_wall_time": "15m", "min_configurations": 3 },
	"probe": { "max_steps": 4, "request_timeout": 120, "max_point_seconds": $cap, "tolerance": 0.1 }
}
EOS
status=0
"$goodput" tune --db "$dir/goodput.db" --log-dir "$dir/logs" --engines-dir "$src/configs/engines" \
	--confirm 0 --json "$dir/online.json" >"$dir/online-out.json" 2>"$dir/online-err.txt" || status=$?
cat "$dir/online-err.txt" >&2
[ "$status" = 0 ] || [ "$status" = 3 ] || { cat "$dir/online-out.json" >&2; fail "online study exited $status"; }
# the progress output says which points were judged at their cap, with the rate sent
grep -Eq 'load point [0-9]+[^:]*: [0-9.]+ req/s.* good; (met|missed) at the cap: [0-9.]+ %, 90 % CI' "$dir/online-err.txt" ||
	fail "the progress output does not say which points were judged at their cap"
python3 - "$dir/goodput.db" "$dir/online-out.json" "$status" "$cap" <<'EOP' || fail "online study"
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
out = json.load(open(sys.argv[2]))
cap = float(sys.argv[4])
ts = db.execute("SELECT t.id, t.state, t.started_usec, t.finished_usec, t.kind, t.knobs, t.launch, t.host_json,"
                " t.failure_message FROM trials t JOIN studies s ON s.id = t.study_id"
                " WHERE s.name = 'llamacpp-online' ORDER BY t.seq").fetchall()
assert ts, "no trials"
# the baseline: llama.cpp's defaults, on a CPU host without --n-gpu-layers
base = [t for t in ts if t[4] == "baseline"]
assert base and json.loads(base[0][5]) == {"max_num_seqs": 1, "max_num_batched_tokens": 2048}, \
    "baseline %r" % [(t[4], t[5]) for t in ts]
for t in ts:
    argv = json.loads(t[6])["argv"]
    assert "--n-gpu-layers" not in argv, "a CPU study's server got --n-gpu-layers: %r" % argv
version = json.loads(base[0][7] or "{}").get("engine_version") or ""
assert version, "no engine version recorded"
points, missed, capped, multi = [], 0, [], 0
for t in ts:
    ps = [json.loads(r) for (r,) in db.execute("SELECT result FROM load_points WHERE trial_id = ? AND phase ="
                                                " 'search' ORDER BY seq", (t[0],))]
    multi += len(ps) >= 2
    for p in ps:
        assert p.get("verdict") in ("met", "missed", "undecided"), "a load point without a verdict: %r" % p
        # the cap bounds a point's wall time (the saturation run's too); 2 s: the loop's timers on a busy host
        assert p["duration"] <= cap + 2, "a load point ran %.0f s, past its cap of %g s" % (p["duration"], cap)
        missed += not p["sla_met"]
        if p["verdict"] == "undecided":
            assert p.get("cap") in ("requests", "seconds") and len(p.get("attainment_ci") or []) == 2, \
                "undecided without its cap and interval: %r" % p
            capped.append(p)
    points += ps
    for (r,) in db.execute("SELECT result FROM load_points WHERE trial_id = ? AND phase = 'saturation'", (t[0],)):
        p = json.loads(r)
        assert p["duration"] <= cap + 2, "a saturation run ran %.0f s, past its cap of %g s" % (p["duration"], cap)
assert missed > 0, "no load point missed the SLA: the rate search was not exercised"
assert multi > 0, "no trial measured more than one rate: the rate search did not run"
assert capped, "no load point reached its cap: the verdict at the cap went untested"
if sys.argv[3] == "0":
    best = out["best"]
    assert "--ubatch-size 512" in best.get("engine_defaults", ""), "the answer lacks the defaults: %r" % best
    assert "--parallel" in best["command"] and "--n-gpu-layers" not in best["command"], best["command"]
gaps = [(b[2] - a[3]) / 1e6 for a, b in zip(ts, ts[1:])]
assert all(g < 10 for g in gaps), "gaps between trials %r s: the teardown waited" % gaps
c = capped[0]
print("online: %d trials (%s), %d search points, %d missed, %d at their cap (e.g. %.3g req/s: %.1f %%, 90 %% CI"
      " %.0f-%.0f %%, %s cap), version %s, gaps %s s" % (len(ts), ", ".join(t[1] for t in ts), len(points), missed,
      len(capped), c["request_rate"], c["attainment"] * 100, c["attainment_ci"][0] * 100,
      c["attainment_ci"][1] * 100, c["cap"], version, gaps))
EOP
cat "$dir/online-out.json"
echo ok
