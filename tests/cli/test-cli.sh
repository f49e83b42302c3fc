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

# Every command's --help starts with its usage and lists --help among its
# options (from the command's option table).
for cmd in $("$goodput" --help | sed -n '/^Commands:/,/^$/p' | awk 'NR > 1 && NF { print $1 }'); do
	"$goodput" "$cmd" --help >help.txt 2>&1
	head -1 help.txt | grep -q "^Usage: goodput $cmd" || fail "$cmd --help: $(head -1 help.txt)"
	grep -q -- '--help' help.txt || fail "$cmd --help does not list --help"
done
rm -f help.txt

# Usage errors are the same for every command: exit 2 and a message that
# names what is wrong and points at the command's --help.
usage_error() { # expected-text command args...
	want=$1
	shift
	set +e
	"$goodput" "$@" >out.txt 2>err.txt
	rc=$?
	set -e
	[ "$rc" = 2 ] || fail "goodput $*: exit $rc, expected 2: $(cat err.txt)"
	grep -q -- "$want" err.txt || fail "goodput $*: no \"$want\" in: $(cat err.txt)"
	[ ! -s out.txt ] || fail "goodput $*: printed on stdout: $(cat out.txt)"
}
usage_error "report: missing STUDY" report
usage_error "see 'goodput report --help'" report
usage_error "compare: unexpected argument 'c'" compare a b c
usage_error "see 'goodput plan --help'" plan --bogus x
usage_error "trials: missing STUDY" trials
usage_error "status: unexpected argument 'x'" status x
usage_error "--timeout: " check-engine --timeout 0 sim
usage_error "--confirm: 99 is out of range" tune --confirm 99 x.json
usage_error "--headroom: " plan --headroom -1 s --rate 1
usage_error "give exactly one of --rate, --tokens-per-second and --rate-profile" plan s
usage_error "best: give a study name, or --model and --engine" best
usage_error "unrecognized option '--model'" status --model m
# version, like every command, refuses what it does not take
usage_error "unrecognized option '--bogus'" version --bogus
usage_error "version: unexpected argument 'x'" version x
usage_error "unrecognized option '--bogus'" --version --bogus
usage_error "version: unexpected argument 'x'" --version x
# offline queries: one source and one format at a time
usage_error "--csv and --json exclude each other" trials --csv --json --db x.db s
usage_error "--db and --socket exclude each other" list --db x.db --socket s
usage_error "export: --format: expected json or csv" export --format xml s
rm -f out.txt err.txt
echo ok
