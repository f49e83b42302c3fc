#!/bin/sh
# Every C file of the tree is formatted as .clang-format says: prints the
# files that are not (with the first differences) and fails. One
# clang-format process checks every file (one per file took a minute on a
# busy 2-core machine); only the files it names are diffed.
set -eu
top=$1
command -v clang-format >/dev/null || { echo "clang-format is not installed (scripts/setup installs it)"; exit 77; }
cd "$top"
list=$(mktemp)
out=$(mktemp)
trap 'rm -f "$list" "$out"' EXIT
git ls-files '*.c' '*.h' >"$list" 2>/dev/null || find . -name '*.[ch]' -not -path './build*' >"$list"
# --dry-run --Werror: "FILE:LINE:COL: error: code should be clang-formatted"
tr '\n' '\0' <"$list" | xargs -0 clang-format --dry-run --Werror >"$out" 2>&1 || true
bad=0
for f in $(sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' "$out" | sort -u); do
	echo "not formatted: $f (clang-format -i $f)"
	clang-format "$f" | diff -u "$f" - | sed -n '3,12p' || true
	bad=$((bad + 1))
done
if [ "$bad" = 0 ] && grep -q ': error:' "$out"; then
	# an error of another kind (a file that cannot be read): say it
	grep ': error:' "$out" | head -5
	bad=1
fi
echo "check-format: $bad unformatted file(s)"
[ "$bad" = 0 ]
