#!/bin/sh
# The goodput command line: --help, --version, and clear usage errors.
set -eu
goodput=$1
fail() { echo "FAIL: $*" >&2; exit 1; }

"$goodput" --help | grep -q '^Usage: goodput' || fail "--help has no usage line"
"$goodput" --version | grep -q '^goodput [0-9]' || fail "--version prints no version"
"$goodput" version | grep -q 'NLopt 2\.' || fail "version does not name NLopt"
set +e
"$goodput" no-such-command 2>err.txt; rc=$?
set -e
[ "$rc" = 2 ] || fail "unknown command exits $rc, expected 2"
grep -q "unknown command 'no-such-command'" err.txt || fail "unknown command not named"
rm -f err.txt

# One exit-status table, printed the same by goodput --help and every
# command's --help (the list is taken from goodput --help itself).
table=$("$goodput" --help | sed -n '/^Exit status/,$p')
[ -n "$table" ] || fail "goodput --help has no exit-status table"
echo "$table" | grep -q '^  3 ' || fail "the table lacks code 3"
for cmd in $("$goodput" --help | sed -n '/^Commands:/,/^$/p' | awk 'NR > 1 && NF { print $1 }'); do
	"$goodput" "$cmd" --help >help.txt 2>&1 || fail "$cmd --help exits non-zero"
	sed -n '/^Exit status/,$p' help.txt >tail.txt
	[ "$(cat tail.txt)" = "$table" ] || fail "$cmd --help does not end with the exit-status table"
done
rm -f help.txt tail.txt
