#!/bin/sh
# A newcomer's path through the README, as written where it can run here:
#   - "Install": the README's meson commands, the prefix a scratch folder,
#     run as root and without DESTDIR: every file meson installed lies
#     inside the prefix (units, sysusers.d and tmpfiles.d included), and the
#     installed goodput runs from there with the source tree out of reach;
#   - "Your first study": the spec the README prints is a valid study, and
#     `goodput tune --dry-run` of it runs to an answer; `goodput check-engine
#     vllm` answers (77 where vLLM is not installed, as here).
# Usage: test-readme.sh SOURCE-ROOT GOODPUT
set -u
src=$(readlink -f "$1")
goodput=$(readlink -f "$2")
fail() { echo "FAIL: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "SKIP: installs as root into a scratch prefix" >&2; exit 77; }
command -v meson >/dev/null || { echo "SKIP: meson is not on PATH" >&2; exit 77; }

dir=$(mktemp -d /tmp/goodput-readme-XXXXXX)
trap 'rm -rf "$dir"' EXIT
prefix=$dir/prefix
readme=$src/README.md

# The README's install commands, with the prefix replaced and the build
# folder in the scratch folder.
setup_line=$(grep -m1 '^meson setup build-rel ' "$readme") || fail "README has no 'meson setup build-rel' line"
install_line=$(grep -m1 '^meson install -C build-rel' "$readme") || fail "README has no 'meson install' line"
echo "$setup_line" | grep -q -- '-Dtests=false -Dbenchmarks=false' || fail "README's setup line lacks -Dtests=false -Dbenchmarks=false"
cd "$src" || fail "cd $src"
# shellcheck disable=SC2086 # the README's words, split as a shell would
set -- $(echo "$setup_line" | sed "s|--prefix=[^ ]*|--prefix=$prefix|; s|build-rel|$dir/build-rel|")
"$@" >"$dir/setup.log" 2>&1 || { tail -20 "$dir/setup.log" >&2; fail "$setup_line"; }
targets=$(ninja -C "$dir/build-rel" -t targets all 2>/dev/null | grep -c '\.o:')
ninja -C "$dir/build-rel" >"$dir/build.log" 2>&1 || { tail -20 "$dir/build.log" >&2; fail "building"; }
# shellcheck disable=SC2086
set -- $(echo "$install_line" | sed "s|build-rel|$dir/build-rel|")
"$@" >"$dir/install.log" 2>&1 || { tail -20 "$dir/install.log" >&2; fail "$install_line"; }
log=$dir/build-rel/meson-logs/install-log.txt
[ -s "$log" ] || fail "meson wrote no install log"
outside=$(grep -v "^#" "$log" | grep -v -e "^$prefix/" -e "^$prefix\$" || true)
[ -z "$outside" ] || fail "installed outside the prefix $prefix: $outside"
n=$(grep -vc '^#' "$log")
for f in lib/systemd/system/goodputd.service lib/systemd/system/goodputd.socket lib/sysusers.d/goodput.conf \
	lib/tmpfiles.d/goodput.conf bin/goodput sbin/goodputd; do
	[ -e "$prefix/$f" ] || fail "$f is not under the prefix"
done
grep -q "ExecStart=$prefix/sbin/goodputd" "$prefix/lib/systemd/system/goodputd.service" ||
	fail "the unit's ExecStart does not name the prefix's goodputd"
echo "install: $n files, all under the prefix ($targets objects compiled with -Dtests=false -Dbenchmarks=false)"

# The spec the README prints: a study that runs, in virtual time.
awk '/^```json$/{on=1;next} /^```$/{on=0} on' "$readme" >"$dir/my-study.json"
[ -s "$dir/my-study.json" ] || fail "README has no JSON spec"
cd "$dir" || fail "cd $dir"
"$prefix/bin/goodput" tune --dry-run --db "$dir/my.db" --no-report my-study.json >"$dir/tune.log" 2>&1 ||
	{ tail -20 "$dir/tune.log" >&2; fail "goodput tune --dry-run of the README's spec"; }
grep -q 'Best configuration' "$dir/tune.log" || fail "the README's spec found no answer: $(tail -5 "$dir/tune.log")"
echo "README's spec: $(grep -m1 'cost:' "$dir/tune.log" | sed 's/^ *//')"
"$prefix/bin/goodput" check-engine vllm >"$dir/check.log" 2>&1
rc=$?
[ "$rc" = 77 ] || [ "$rc" = 0 ] || [ "$rc" = 1 ] || fail "goodput check-engine vllm exits $rc: $(cat "$dir/check.log")"
echo "check-engine vllm: exit $rc"
