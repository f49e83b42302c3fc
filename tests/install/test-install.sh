#!/bin/sh
# The installed layout, as `meson install` lays it out, checked from a
# throw-away DESTDIR (the build's own artefacts; nothing is rebuilt):
#   - the engine profiles (every configs/engines/*.json), the example studies
#     and the deploy hooks (executable) under $datadir/goodput/, the man
#     pages and the bash completion;
#   - no installed program carries the source or build tree's path in its
#     data (only debug info may name sources);
#   - an installed `goodput tune` of a goodput-sim study runs the goodput-sim
#     installed beside it, with $PATH holding no goodput-sim and no
#     GOODPUT_ENGINES_DIR; without --engines-dir it names the installed
#     places it searched, never the source tree.
# Usage: test-install.sh BUILD-DIR SOURCE-ROOT
set -u
build=$(readlink -f "$1")
src=$(readlink -f "$2")
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v meson >/dev/null || { echo "SKIP: meson is not on PATH" >&2; exit 77; }

dir=$(mktemp -d /tmp/goodput-install-XXXXXX)
trap 'rm -rf "$dir"' EXIT
dest=$dir/root
meson install -C "$build" --destdir "$dest" --no-rebuild --quiet >"$dir/install.log" 2>&1 ||
	{ cat "$dir/install.log" >&2; fail "meson install"; }

bin=$(dirname "$(find "$dest" -path '*/bin/goodput' -type f | head -1)")
[ -x "$bin/goodput" ] || fail "no bin/goodput installed"
[ -x "$bin/goodput-sim" ] || fail "goodput-sim is not installed beside goodput ($bin)"
goodputd=$(find "$dest" -path '*/sbin/goodputd' -type f | head -1)
[ -x "$goodputd" ] || fail "no sbin/goodputd installed"
data=$(find "$dest" -type d -path '*/share/goodput' | head -1)
[ -d "$data" ] || fail "no share/goodput installed"

# The data: every engine profile of the tree, the studies, the hooks.
for f in "$src"/configs/engines/*.json; do
	cmp -s "$f" "$data/engines/$(basename "$f")" || fail "engines/$(basename "$f") is not installed"
done
[ "$(ls "$data/engines" | wc -l)" = "$(ls "$src"/configs/engines/*.json | wc -l)" ] ||
	fail "installed engines differ from configs/engines: $(ls "$data/engines")"
for f in "$src"/configs/studies/*.json; do
	cmp -s "$f" "$data/studies/$(basename "$f")" || fail "studies/$(basename "$f") is not installed"
done
for f in "$src"/configs/deploy/*; do
	[ -x "$data/deploy/$(basename "$f")" ] || fail "deploy/$(basename "$f") is not installed executable"
done
echo "layout: $(ls "$data/engines" | wc -l) engine profiles, $(ls "$data/studies" | wc -l) studies," \
	"$(ls "$data/deploy" | wc -l) deploy hooks under ${data#"$dest"}"

# The manual and the shell completion.
for page in man1/goodput.1 man1/goodput-sim.1 man5/goodput-study.5 man5/goodput-engine.5 man8/goodputd.8; do
	[ -s "$(dirname "$data")/man/$page" ] || fail "man page $page is not installed"
done
comp=$(dirname "$data")/bash-completion/completions
[ -s "$comp/goodput" ] || fail "no bash completion in ${comp#"$dest"}"
[ "$(readlink "$comp/goodputd")" = goodput ] || fail "goodputd's completion is not a link to goodput's"
grep -q "$(dirname "$data")" "$comp/goodput" && fail "the completion names the DESTDIR"
echo "man pages in ${data%/goodput}/man, bash completion in ${comp#"$dest"}" | sed "s|$dest||"

# No program refers to the trees it was built in (its read-only data;
# debug info names sources and does not count).
for p in "$bin/goodput" "$bin/goodput-sim" "$goodputd"; do
	objcopy -O binary --only-section=.rodata "$p" "$dir/rodata" || fail "objcopy $p"
	if grep -a -q -e "$src" -e "$build" "$dir/rodata"; then
		fail "$(basename "$p") names the source or build tree: $(grep -a -o -e "$src[^[:cntrl:]]*" -e "$build[^[:cntrl:]]*" "$dir/rodata" | head -3)"
	fi
done
echo "no installed program names $src or $build"

# An installed goodput tune runs the goodput-sim installed beside it.
cat >"$dir/study.json" <<'EOS'
{
  "name": "installed", "engine": "sim",
  "model": {"name": "llama-3.1-8b"}, "quantizations": ["none"],
  "gpu": {"type": "L40S", "count": 1, "price_per_gpu_hour": 0.99},
  "search_space": {"max_num_seqs": [16], "max_num_batched_tokens": [1024], "tensor_parallel": [1]},
  "workload": {"dataset": "random", "input_len": 64, "output_len": 8, "num_prompts": 16, "ignore_eos": true, "seed": 3},
  "sla": {"ttft_ms": 2000, "tpot_ms": 200, "attainment": 0.9},
  "budget": {"max_trials": 1, "max_wall_time": "2m"},
  "probe": {"tolerance": 0.5, "max_steps": 2, "request_timeout": 30},
  "baseline": false,
  "deploy": {"method": "exec", "startup_timeout": 30},
  "search": {"seed": 1}
}
EOS
clean_path=/usr/bin:/bin
PATH=$clean_path command -v goodput-sim >/dev/null 2>&1 && fail "goodput-sim is on $clean_path: the check would prove nothing"
env -u GOODPUT_ENGINES_DIR PATH=$clean_path "$bin/goodput" tune --engines-dir "$data/engines" --db "$dir/t.db" \
	--log-dir "$dir/logs" --confirm 0 -q --json "$dir/study.json" >"$dir/tune.json" 2>"$dir/tune.err" ||
	{ cat "$dir/tune.err" "$dir"/logs/* >&2 2>/dev/null; fail "installed goodput tune failed"; }
grep -q '"cost_per_mtok"' "$dir/tune.json" || fail "no best from the installed goodput tune: $(cat "$dir/tune.json")"
version=$("$bin/goodput-sim" --version | sed -n 's/^goodput-sim //p')
[ -n "$version" ] || fail "goodput-sim --version: $("$bin/goodput-sim" --version)"
grep -q "\"engine_version\":[[:space:]]*\"$version\"" "$dir/tune.json" ||
	fail "the best does not name the engine version $version: $(cat "$dir/tune.json")"
grep -rq "listening on" "$dir/logs" || fail "no goodput-sim log"
echo "installed goodput tune ran ${bin#"$dest"}/goodput-sim with PATH=$clean_path"

# Without --engines-dir: the installed places are named, not the source tree.
env -u GOODPUT_ENGINES_DIR PATH=$clean_path "$bin/goodput" tune --db "$dir/u.db" -q "$dir/study.json" \
	>/dev/null 2>"$dir/none.err" && fail "tune found a profile with none installed in $(dirname "$data")"
grep -q "/etc/goodput/engines" "$dir/none.err" || fail "the error does not name /etc/goodput/engines: $(cat "$dir/none.err")"
grep -q "share/goodput/engines" "$dir/none.err" || fail "the error does not name the data dir: $(cat "$dir/none.err")"
grep -q -e "$src" "$dir/none.err" && fail "the error names the source tree: $(cat "$dir/none.err")"
echo "without profiles: $(cat "$dir/none.err")"
echo ok
