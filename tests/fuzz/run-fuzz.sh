#!/bin/sh
# Runs one libFuzzer target as a test: replays the seed corpus, then RUNS
# inputs mutated from seed 1 (repeatable), at most MAX_LEN bytes each.
# New inputs go to a scratch directory (the seed corpus in the tree is never
# written); a crash leaves its input as crash-* beside the target and fails.
# Usage: run-fuzz.sh TARGET CORPUS RUNS MAX_LEN
set -eu
target=$1 corpus=$2 runs=$3 max_len=$4
scratch=$(mktemp -d "${TMPDIR:-/tmp}/goodput-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
artifacts="$(dirname "$target")/artifacts/"
mkdir -p "$artifacts"
"$target" -runs="$runs" -seed=1 -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
	-artifact_prefix="$artifacts$(basename "$target")-" -print_final_stats=1 "$scratch" "$corpus"
