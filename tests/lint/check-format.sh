#!/bin/sh
# Every C file of the tree is formatted as .clang-format says: prints the
# files that are not (with the first differences) and fails.
set -eu
top=$1
command -v clang-format >/dev/null || { echo "clang-format is not installed (scripts/setup installs it)"; exit 77; }
cd "$top"
bad=0
for f in $(git ls-files '*.c' '*.h' 2>/dev/null || find . -name '*.[ch]' -not -path './build*'); do
	if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
		echo "not formatted: $f (clang-format -i $f)"
		clang-format "$f" | diff -u "$f" - | sed -n '3,12p'
		bad=$((bad + 1))
	fi
done
echo "check-format: $bad unformatted file(s)"
[ "$bad" = 0 ]
