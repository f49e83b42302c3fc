#!/bin/bash
# Bash completion of goodput as bash-completion runs it: the script built
# for installation sourced after /usr/share/bash-completion/bash_completion,
# each case a command line completed at its end (COMP_WORDS, COMP_CWORD).
#   - commands, options (from each command's --help) and option values
#     (--format json|csv, --db FILE, --engines-dir DIR, --engine NAME);
#   - study specs (*.json) for tune and submit, engine profile names for
#     check-engine (from GOODPUT_ENGINES_DIR and --engines-dir);
#   - study names from a running goodputd, and with --db from that store
#     when no daemon answers.
# Usage: test-completion.sh GOODPUT GOODPUTD COMPLETION-SCRIPT
set -u
goodput=$(readlink -f "$1")
goodputd=$(readlink -f "$2")
script=$3
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -r /usr/share/bash-completion/bash_completion ] ||
	{ echo "SKIP: bash-completion is not installed (scripts/debian-packages)" >&2; exit 77; }

dir=$(mktemp -d /tmp/goodput-completion-XXXXXX)
daemon_pid=
cleanup() {
	[ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
mkdir -p "$dir/bin" "$dir/work/specs" "$dir/engines"
ln -s "$goodput" "$dir/bin/goodput"
PATH="$dir/bin:$PATH"
. /usr/share/bash-completion/bash_completion
. "$script"
complete -p goodput | grep -q _goodput || fail "the script does not complete goodput"

# complete WORDS...: COMPREPLY for the command line WORDS (the last one is
# being completed), one per line, sorted.
complete_line() {
	COMP_WORDS=("$@")
	COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
	COMP_LINE="$*"
	COMP_POINT=${#COMP_LINE}
	COMPREPLY=()
	_goodput goodput "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
	printf '%s\n' "${COMPREPLY[@]}" | sort
}
expect_has() { # WHAT WORD LINE...
	local what=$1 word=$2
	shift 2
	complete_line "$@" >"$dir/out"
	grep -qx -- "$word" "$dir/out" || fail "$what: '$*' does not offer '$word': $(tr '\n' ' ' <"$dir/out")"
}
expect_not() {
	local what=$1 word=$2
	shift 2
	complete_line "$@" >"$dir/out"
	grep -qx -- "$word" "$dir/out" && fail "$what: '$*' offers '$word'"
	return 0
}

cd "$dir/work" || exit 1
touch specs/a.json specs/b.txt

expect_has "commands" tune goodput ""
expect_has "commands" export goodput ex
expect_not "commands" tune goodput ex
expect_has "options" --db goodput trials --
expect_has "options" --csv goodput trials --
expect_has "options" --help-spec goodput tune --help-
expect_has "option values" csv goodput export --format ""
expect_has "option values" json goodput export --format j
expect_has "--db FILE" specs goodput list --db ""
expect_has "tune's spec" specs/a.json goodput tune specs/
expect_not "tune's spec" specs/b.txt goodput tune specs/
expect_has "submit's spec" specs/a.json goodput submit specs/
echo "commands, options, option values and spec files"

# the tree's profiles (the test setup's GOODPUT_ENGINES_DIR) and one more
[ -d "${GOODPUT_ENGINES_DIR-}" ] || fail "GOODPUT_ENGINES_DIR is not set by the test setup"
cp "$GOODPUT_ENGINES_DIR"/*.json "$dir/engines/"
cp "$dir/engines/sim.json" "$dir/engines/my-engine.json"
export GOODPUT_ENGINES_DIR=$dir/engines
expect_has "profiles" my-engine goodput check-engine my
mkdir -p "$dir/other"
touch "$dir/other/other-engine.json"
expect_has "profiles from --engines-dir" other-engine goodput check-engine --engines-dir "$dir/other" oth
expect_has "--engine NAME" my-engine goodput best --engine m
echo "engine profile names"

# Study names: from goodputd when it answers ...
cat >"$dir/study.json" <<'EOS'
{"name": "from-daemon", "engine": "sim", "model": {"name": "llama-3.1-8b"}, "quantizations": ["none"],
 "gpu": {"type": "L40S", "count": 1, "price_per_gpu_hour": 0.99},
 "search_space": {"max_num_seqs": [16, 32], "max_num_batched_tokens": [1024], "tensor_parallel": [1]},
 "workload": {"dataset": "random", "input_len": 64, "output_len": 8, "num_prompts": 16},
 "sla": {"ttft_ms": 2000, "tpot_ms": 200}, "budget": {"max_trials": 2}}
EOS
"$goodputd" --dry-run --socket "$dir/d.sock" --state-dir "$dir/state" >"$dir/d.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 100); do [ -S "$dir/d.sock" ] && break; sleep 0.1; done
export GOODPUT_SOCKET=$dir/d.sock
"$goodput" submit "$dir/study.json" >/dev/null || fail "submit: $(cat "$dir/d.log")"
expect_has "studies from goodputd" from-daemon goodput best fr
expect_has "studies from goodputd" from-daemon goodput trials ""
kill "$daemon_pid"
wait "$daemon_pid"
daemon_pid=

# ... else from --db (the daemon's store, read offline), or a command's store.
expect_has "studies from --db" from-daemon goodput trials --db "$dir/state/goodput.db" fr
sed 's/from-daemon/from-tune/' "$dir/study.json" >"$dir/tune.json"
"$goodput" tune --dry-run -q --db goodput.db "$dir/tune.json" >/dev/null || fail "tune --dry-run"
expect_has "studies of ./goodput.db" from-tune.dry-run goodput report from
expect_has "studies of --db for export" from-daemon goodput export --db "$dir/state/goodput.db" ""
echo "study names from goodputd, else from the store"

# goodputd and goodput-sim: their options.
complete -p goodputd | grep -q _longopt || fail "goodputd is not completed"
echo ok
