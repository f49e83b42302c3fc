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
