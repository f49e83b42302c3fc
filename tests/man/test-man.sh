#!/bin/sh
# The man pages, as man(1) shows them (man-db rendering the pages scdoc
# built):
#   - goodput-study(5) lists every key `goodput tune --help-spec` prints and
#     no other (both come from the study's schema table);
#   - goodputd(8) lists every key of goodputd.json, and every option of
#     goodputd --help; goodput-sim(1) every option of goodput-sim --help;
#   - goodput(1) has a section for every command `goodput --help` lists and
#     names every option of every command's --help;
#   - the --help texts name their man page, and none names a source path;
#     goodputd --version refuses anything beside it.
# Usage: test-man.sh GOODPUT GOODPUTD GOODPUT-SIM MANDIR
set -u
goodput=$1
goodputd=$2
sim=$3
mandir=$4
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v man >/dev/null || { echo "SKIP: man is not installed (apt-get install man-db)" >&2; exit 77; }
[ -f "$mandir/goodput.1" ] || { echo "SKIP: the man pages were not built (scdoc missing)" >&2; exit 77; }

dir=$(mktemp -d /tmp/goodput-man-XXXXXX)
trap 'rm -rf "$dir"' EXIT
show() { MANWIDTH=250 man --nh --nj -E ascii -l "$mandir/$1" 2>"$dir/man.err" || fail "man $1: $(cat "$dir/man.err")"; }
for p in goodput.1 goodputd.8 goodput-sim.1 goodput-study.5 goodput-engine.5; do
	show "$p" >"$dir/$p.txt"
	[ -s "$dir/$p.txt" ] || fail "man $p shows nothing"
	grep -q "^NAME" "$dir/$p.txt" || fail "man $p has no NAME section"
done

# goodput-study(5): the keys of --help-spec, no more, no fewer.
"$goodput" tune --help-spec | sed -n 's/^  \([^ ]\{1,\}\)\( \*\)\{0,1\}  (.*/\1/p' | sort >"$dir/spec.keys"
sed -n '/^KEYS/,/^[A-Z]/s/^       \([^ ]\{1,\}\) (.*/\1/p' "$dir/goodput-study.5.txt" | sort >"$dir/man.keys"
[ "$(wc -l <"$dir/spec.keys")" -ge 50 ] || fail "--help-spec printed $(wc -l <"$dir/spec.keys") keys"
diff -u "$dir/spec.keys" "$dir/man.keys" >"$dir/keys.diff" ||
	fail "man goodput-study and goodput tune --help-spec differ (- --help-spec, + man):
$(cat "$dir/keys.diff")"
grep -q "required" "$dir/goodput-study.5.txt" || fail "goodput-study(5) marks no key required"
echo "goodput-study(5): the $(wc -l <"$dir/spec.keys") keys of --help-spec"

# goodput-engine(5): every key an installed profile uses (top level).
n=$(sed -n '/^KEYS/,/^[A-Z]/s/^       \([^ ]\{1,\}\) (.*/\1/p' "$dir/goodput-engine.5.txt" | wc -l)
[ "$n" -ge 15 ] || fail "goodput-engine(5) lists $n keys"
for k in argv knobs health oom_patterns version_command; do
	grep -q "^       $k (" "$dir/goodput-engine.5.txt" || fail "goodput-engine(5) lacks $k"
done
echo "goodput-engine(5): $n keys"

# goodputd(8): its options and its configuration's keys.
for o in $("$goodputd" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
	grep -q -- "$o" "$dir/goodputd.8.txt" || fail "goodputd(8) does not name $o"
done
for k in socket_group engines_dir prices metrics_file limits.max_connections limits.idle_timeout; do
	grep -q "^       $k (" "$dir/goodputd.8.txt" || fail "goodputd(8) lacks the configuration key $k"
done
grep -q "GOODPUT_STUDY=" "$dir/goodputd.8.txt" || fail "goodputd(8) names no journal field"
grep -q "MESSAGE_ID=[0-9a-f]\{32\}" "$dir/goodputd.8.txt" || fail "goodputd(8) names no MESSAGE_ID"
echo "goodputd(8): every option and configuration key"

# goodput-sim(1): every option of its --help.
for o in $("$sim" --help | grep -o -- '--[a-z][a-z0-9-]*' | sort -u); do
	grep -q -- "$o" "$dir/goodput-sim.1.txt" || fail "goodput-sim(1) does not name $o"
done
echo "goodput-sim(1): every option of --help"

# goodput(1): every command, and every option of each.
cmds=$("$goodput" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p')
[ "$(echo "$cmds" | wc -w)" -ge 15 ] || fail "goodput --help lists: $cmds"
for c in $cmds; do
	grep -q "^   goodput $c\( \|$\)" "$dir/goodput.1.txt" || fail "goodput(1) has no section for $c"
	for o in $("$goodput" "$c" --help | grep -o -- '--[a-z][a-z0-9-]*' | sort -u); do
		[ "$o" = --help ] && continue
		grep -q -- "$o" "$dir/goodput.1.txt" || fail "goodput(1) does not name $c's option $o"
	done
done
echo "goodput(1): $(echo "$cmds" | wc -w) commands, every option"

# --help names the manual, never a source path (a file in a folder of the
# tree, configs/, or the tree's Markdown).
source_path='(^|[^/[:alnum:]])((daemon|sim|cli|study|store|common|probes|runner|report|deploy|units|tests|twin|optimizer)/[A-Za-z0-9_.-]+\.(c|h|json|md|sh|py|in)|configs/)|(README|PROTOCOL|PERFMODEL|DESIGN)\.md'
"$goodput" --help | grep -q "goodput(1)" || fail "goodput --help does not name goodput(1)"
"$goodputd" --help | grep -q "goodputd(8)" || fail "goodputd --help does not name goodputd(8)"
"$sim" --help | grep -q "goodput-sim(1)" || fail "goodput-sim --help does not name goodput-sim(1)"
"$goodput" tune --help | grep -q "goodput-study(5)" || fail "goodput tune --help does not name goodput-study(5)"
for c in $cmds; do
	"$goodput" "$c" --help >"$dir/help.txt" 2>&1
	[ "$c" = probe ] || grep -q "goodput(1)" "$dir/help.txt" || fail "goodput $c --help does not name goodput(1)"
	grep -n -E "$source_path" "$dir/help.txt" && fail "goodput $c --help names a source path"
done
for p in "$goodputd" "$sim"; do
	"$p" --help | grep -E "$source_path" && fail "$p --help names a source path"
done
"$goodput" tune --help-spec | grep -E "$source_path" && fail "--help-spec names a source path"
echo "--help names the manual and no source path"

# What the pages say of --version holds: it takes nothing else.
"$goodputd" --version --bogus >/dev/null 2>&1; rc=$?
[ "$rc" = 2 ] || fail "goodputd --version --bogus: exit $rc, expected 2"
"$goodputd" --version extra >/dev/null 2>&1; rc=$?
[ "$rc" = 2 ] || fail "goodputd --version extra: exit $rc, expected 2"
echo ok
