#!/bin/sh
# The llama.cpp profile against a real llama-server: a short offline study
# over --parallel (max_num_seqs) and --batch-size/--ubatch-size
# (max_num_batched_tokens) completes with `goodput tune`, every trial's
# server command carrying the derived --ctx-size and the study's
# engine_binary and engine_args; then a short online study (the rate search
# with sequential verdicts) ends with an answer or no_feasible_config, and
# no trial waits for the one before it to let go of its port.
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

cat >"$dir/study.json" <<EOS
{
	"name": "llamacpp-integration",
	"engine": "llamacpp",
	"model": { "name": "$GOODPUT_LLAMA_MODEL" },
	"gpu": { "type": "local", "count": 1, "price_per_gpu_hour": 1 },
	"engine_binary": "$dir/bin/llama-server",
	"engine_args": ["--threads", "2"],
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
grep -rq -- '--threads 2' "$dir/logs" || fail "no engine_args (--threads 2) in the server logs"
cat "$dir/out.json"

# Online: the rate search under a loose SLA, two configurations.
python3 - "$dir/study.json" "$dir/online.json" <<'EOP' || fail "cannot write the online study"
import json, sys
s = json.load(open(sys.argv[1]))
s.update(name="llamacpp-online", scenario="online", sla={"ttft_ms": 10000, "tpot_ms": 2000, "attainment": 0.9})
s["search_space"]["max_num_seqs"] = [2, 4]
s["budget"]["max_trials"] = 2
json.dump(s, open(sys.argv[2], "w"))
EOP
status=0
"$goodput" tune --db "$dir/goodput.db" --log-dir "$dir/logs" --engines-dir "$src/configs/engines" \
	--confirm 0 --json "$dir/online.json" >"$dir/online-out.json" || status=$?
[ "$status" = 0 ] || [ "$status" = 3 ] || { cat "$dir/online-out.json" >&2; fail "online study exited $status"; }
python3 - "$dir/goodput.db" <<'EOP' || fail "online study"
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
ts = db.execute("SELECT t.id, t.state, t.started_usec, t.finished_usec FROM trials t JOIN studies s"
                " ON s.id = t.study_id WHERE s.name = 'llamacpp-online' ORDER BY t.seq").fetchall()
assert ts, "no trials"
for t in ts:
    for (r,) in db.execute("SELECT result FROM load_points WHERE trial_id = ? AND phase = 'search'", (t[0],)):
        assert json.loads(r).get("verdict") in ("met", "missed", "undecided"), "a load point without a verdict"
gaps = [(b[2] - a[3]) / 1e6 for a, b in zip(ts, ts[1:])]
assert all(g < 10 for g in gaps), "gaps between trials %r s: the teardown waited" % gaps
print("online: %d trials, gaps %s s" % (len(ts), gaps))
EOP
cat "$dir/online-out.json"
echo ok
