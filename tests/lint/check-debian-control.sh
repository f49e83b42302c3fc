#!/bin/sh
# debian/control against scripts/debian-packages: its Build-Depends are the
# "build" section (besides debhelper-compat) and the "tests" section, each
# of those marked <!nocheck>, nothing more; debian/changelog's version is
# the project's (meson.build).
# Usage: check-debian-control.sh SOURCE-ROOT
set -u
src=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
dir=$(mktemp -d /tmp/goodput-control-XXXXXX)
trap 'rm -rf "$dir"' EXIT

# A section of scripts/debian-packages: the package lines after "# NAME"
# up to the next "#" line that is a lone "#".
section() {
	sed -n "/^# $1\$/,/^#\$/p" "$src/scripts/debian-packages" | sed -e 's/#.*//' -e 's/[[:space:]]//g' | grep -v '^$' | sort
}
section build >"$dir/build"
section tests >"$dir/tests"
[ -s "$dir/build" ] && [ -s "$dir/tests" ] || fail "scripts/debian-packages has no build or tests section"

# Build-Depends, one relation per line.
sed -n '/^Build-Depends:/,/^[A-Z]/p' "$src/debian/control" | sed -e 's/^Build-Depends://' -e '/^[A-Z]/d' |
	tr ',' '\n' | sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' | grep -v '^$' >"$dir/deps"
grep -q '^debhelper-compat (= 13)$' "$dir/deps" || fail "Build-Depends lack debhelper-compat (= 13)"
grep -v '<!nocheck>' "$dir/deps" | grep -v '^debhelper-compat' | sort >"$dir/deps-build"
grep '<!nocheck>' "$dir/deps" | sed 's/[[:space:]]*<!nocheck>$//' | sort >"$dir/deps-tests"
diff -u "$dir/build" "$dir/deps-build" >"$dir/diff" ||
	fail "Build-Depends differ from the build section of scripts/debian-packages (- packages, + control):
$(cat "$dir/diff")"
diff -u "$dir/tests" "$dir/deps-tests" >"$dir/diff" ||
	fail "the <!nocheck> Build-Depends differ from the tests section (- packages, + control):
$(cat "$dir/diff")"

version=$(sed -n "s/^[[:space:]]*version: '\([^']*\)',.*/\1/p" "$src/meson.build" | head -n 1)
changelog=$(sed -n '1s/^goodput (\([^)]*\)).*/\1/p' "$src/debian/changelog")
[ -n "$version" ] && [ "$version" = "$changelog" ] ||
	fail "debian/changelog is at ${changelog:-?}, meson.build at ${version:-?}"
echo "Build-Depends: $(wc -l <"$dir/build") build and $(wc -l <"$dir/tests") test packages, as scripts/debian-packages lists them; version $version"
