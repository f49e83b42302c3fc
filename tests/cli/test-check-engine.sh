#!/bin/sh
# `goodput check-engine`: the sim profile against goodput-sim's own --help
# (all flags found); a fake engine the test writes whose help lacks a flag
# (exit 1, the flag named); an engine that is not installed (exit 77 with a
# clear message); a help that hangs (bounded by --timeout); every shipped
# profile against goodput-sim in that engine's dialect.
# Usage: test-check-engine.sh GOODPUT GOODPUT-SIM
set -eu
goodput=$1
sim=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
dir=$(mktemp -d /tmp/goodput-test-check-engine-XXXXXX)
trap 'rm -rf "$dir"' EXIT

"$goodput" check-engine --help | grep -q '^Usage: goodput check-engine' || fail "no --help"

# 1. goodput-sim and the shipped sim profile agree.
"$goodput" check-engine --binary "$sim" sim >"$dir/out" || fail "sim: $(cat "$dir/out")"
grep -q 'all 18 flags found' "$dir/out" || fail "sim: $(cat "$dir/out")"
# the version as the profile's version_pattern reads "goodput-sim X.Y.Z"
grep -q "version $("$sim" --version | cut -d' ' -f2)\$" "$dir/out" || fail "sim: version not shown: $(cat "$dir/out")"
"$goodput" check-engine --json --binary "$sim" sim | grep -q '"ok":[[:space:]]*true' || fail "sim --json"

# 2. A fake engine whose help lacks --ubatch-size (an older release, say).
cat >"$dir/fake-server" <<'EOS'
#!/bin/sh
case "$1" in
--version) echo "fake-server 1.2.3" ;;
--help) printf '%s\n' "usage: fake-server [options]" "  -m, --model FNAME   model path" \
	"  --port PORT" "  -np, --parallel N   slots" "  -b, --batch-size N" "  --ubatch-size-typo N" ;;
*) exit 2 ;;
esac
EOS
chmod +x "$dir/fake-server"
cat >"$dir/fake.json" <<'EOS'
{
	"name": "fake",
	"argv": ["fake-server", "--model", "{model}", "--port", "{port}"],
	"knobs": {
		"max_num_seqs": { "flag": "--parallel" },
		"max_num_batched_tokens": { "flag": ["--batch-size", "--ubatch-size"] }
	},
	"health": { "path": "/health" },
	"version_command": ["fake-server", "--version"]
}
EOS
set +e
"$goodput" check-engine --binary "$dir/fake-server" "$dir/fake.json" >"$dir/out" 2>&1; rc=$?
set -e
[ "$rc" = 1 ] || fail "fake: exit $rc, expected 1: $(cat "$dir/out")"
grep -q -- '--ubatch-size .*MISSING' "$dir/out" || fail "fake: --ubatch-size not reported missing: $(cat "$dir/out")"
grep -q -- '--batch-size .*ok' "$dir/out" || fail "fake: --batch-size not found: $(cat "$dir/out")"
grep -q '1 of 5 flags missing' "$dir/out" || fail "fake: summary: $(cat "$dir/out")"
grep -q 'version fake-server 1.2.3' "$dir/out" || fail "fake: version: $(cat "$dir/out")"
# Found through $PATH too.
PATH="$dir:$PATH" "$goodput" check-engine "$dir/fake.json" >/dev/null 2>&1 && fail "fake via PATH passed"

# 3. Not installed: skipped (77) with a message naming the program.
set +e
PATH=/nonexistent "$goodput" check-engine "$dir/fake.json" >"$dir/out" 2>&1; rc=$?
set -e
[ "$rc" = 77 ] || fail "absent: exit $rc, expected 77"
grep -q 'fake-server is not installed here' "$dir/out" || fail "absent: $(cat "$dir/out")"

# 4. A help that never ends is cut off by --timeout.
printf '#!/bin/sh\nexec sleep 30\n' >"$dir/hang-server"
chmod +x "$dir/hang-server"
set +e
start=$(date +%s)
"$goodput" check-engine --timeout 0.5 --binary "$dir/hang-server" "$dir/fake.json" >"$dir/out" 2>&1; rc=$?
end=$(date +%s)
set -e
[ "$rc" = 1 ] || fail "hang: exit $rc"
[ $((end - start)) -lt 10 ] || fail "hang: took $((end - start)) s"
grep -q 'did not finish within' "$dir/out" || fail "hang: $(cat "$dir/out")"

# 5. Every shipped engine profile against goodput-sim in that engine's
# dialect (its program names on $PATH): all flags found, the version read
# by the profile's pattern (llama.cpp's build, not its compiler line).
src=$(cd "$(dirname "$0")/../.." && pwd)
mkdir "$dir/bin"
for name in vllm llama-server text-generation-launcher trtllm-serve python3; do
	ln -s "$(readlink -f "$sim")" "$dir/bin/$name"
done
for want in "vllm 0.10.1.1" "sglang 0.4.6.post1" "tgi 3.3.4" "llamacpp 4748 (c392e5094)" "trtllm 1.0.0"; do
	engine=${want%% *}
	PATH="$dir/bin:$PATH" "$goodput" check-engine --engines-dir "$src/configs/engines" "$engine" >"$dir/out" 2>&1 ||
		fail "$engine: $(cat "$dir/out")"
	grep -q "^$engine: .*, version ${want#* }\$" "$dir/out" || fail "$engine: version: $(cat "$dir/out")"
	grep -q 'all [0-9]* flags found' "$dir/out" || fail "$engine: $(cat "$dir/out")"
	# the levers' flags are among those checked, where the engine has them
	case $engine in
	vllm) levers="--speculative-config --enable-prefix-caching --no-enable-prefix-caching --data-parallel-size
		--pipeline-parallel-size --kv-cache-dtype" ;;
	sglang) levers="--speculative-algorithm --speculative-draft-model-path --speculative-num-steps
		--disable-radix-cache --dp-size --pp-size --kv-cache-dtype" ;;
	tgi) levers="--speculate" ;;
	llamacpp) levers="--model-draft --draft-max" ;;
	trtllm) levers="--pp_size" ;;
	esac
	for flag in $levers; do
		grep -q -- "^  $flag  *ok\$" "$dir/out" || fail "$engine: lever flag $flag not checked: $(cat "$dir/out")"
	done
done

# 6. An older vLLM without the speculation and data-parallel flags (its
# help the sim's vLLM help with those two renamed): both named missing.
cat >"$dir/bin-old-vllm" <<EOS
#!/bin/sh
[ "\$1" = --version ] && exec "$dir/bin/vllm" --version
"$dir/bin/vllm" "\$@" | sed -e 's/--speculative-config/--speculative-model/g' -e 's/--data-parallel-size/--data-parallel-size-x/g'
EOS
chmod +x "$dir/bin-old-vllm"
set +e
PATH="$dir/bin:$PATH" "$goodput" check-engine --binary "$dir/bin-old-vllm" --engines-dir "$src/configs/engines" vllm \
	>"$dir/out" 2>&1; rc=$?
set -e
[ "$rc" = 1 ] || fail "old vllm: exit $rc, expected 1: $(cat "$dir/out")"
grep -q -- '^  --speculative-config  *MISSING' "$dir/out" || fail "old vllm: $(cat "$dir/out")"
grep -q -- '^  --data-parallel-size  *MISSING' "$dir/out" || fail "old vllm: $(cat "$dir/out")"
grep -q '^2 of [0-9]* flags missing' "$dir/out" || fail "old vllm: summary: $(cat "$dir/out")"
echo "ok"
