#!/bin/sh
# goodput as a Debian package, the way an operator meets it:
#   1. dpkg-buildpackage builds the .deb from a temporary copy of the tree
#      (DEB_BUILD_OPTIONS=nocheck: the build's own tests are this suite);
#   2. lintian finds no error in it;
#   3. a throw-away systemd-nspawn container (a volatile root holding this
#      host's /usr, /etc and package database under writable overlays, no
#      network, no source tree) installs it with dpkg -i, then: starts
#      goodputd.socket, submits the installed demo study, polls goodput
#      status until it is done, asks goodput best, and finds the best files
#      under /var/lib/goodputd/best/, the study's records with
#      journalctl GOODPUT_STUDY=..., its metrics in /run/goodputd/goodput.prom,
#      reads the store offline, and has goodputd write the study's report
#      (goodput report NAME); the man pages and the completion are in place;
#   4. dpkg --purge leaves no unit loaded or socket behind and removes
#      /etc/goodput and /var/lib/goodputd; the goodput system user stays.
# The only changes to the system are a drop-in capping the daemon at two
# trials (goodputd --max-trials 2), so that the real goodput-sim study ends
# in seconds, and no policy-rc.d (a build host's veto on starting services).
# Skips (77) only where nspawn cannot run (not installed, not root, no
# container support) or a packaging tool is missing.
# Usage: test-package.sh SOURCE-ROOT
set -u
src=$(readlink -f "$1")
. "$(dirname "$0")/../lib/nspawn.sh"

for tool in dpkg-buildpackage dh lintian; do
	command -v "$tool" >/dev/null 2>&1 || skip "$tool is not installed (scripts/debian-packages: packaging)"
done
nspawn_init goodput-package
dir=$nspawn_dir
t0=$(date +%s)
elapsed() { echo "$(($(date +%s) - t0)) s"; }

# 1. The package, built in a copy of the tree (what git tracks, plus new
# files it does not ignore; or, outside git, everything but build folders).
version=$(sed -n '1s/^goodput (\([^)]*\)).*/\1/p' "$src/debian/changelog")
copy=$dir/build/goodput-$version
mkdir -p "$copy"
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
	git -C "$src" ls-files -z --cached --others --exclude-standard |
		(cd "$src" && xargs -0 cp --parents -t "$copy" 2>/dev/null) || fail "copying the tree"
else
	(cd "$src" && tar --exclude='./build*' --exclude='./obj-*' -cf - .) | (cd "$copy" && tar -xf -) ||
		fail "copying the tree"
fi
(cd "$copy" && DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" dpkg-buildpackage -Pnocheck -b -us -uc) \
	>"$dir/dpkg-buildpackage.log" 2>&1 || { tail -40 "$dir/dpkg-buildpackage.log" >&2; fail "dpkg-buildpackage"; }
deb=$(ls "$dir"/build/goodput_"$version"_*.deb 2>/dev/null | head -n 1)
[ -f "$deb" ] || fail "no ../goodput_${version}_*.deb: $(ls "$dir/build")"
build_s=$(elapsed)
echo "built $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB) in $build_s"

# 2. lintian: errors fail, warnings are shown.
lintian --fail-on error --no-tag-display-limit "$deb" >"$dir/lintian.log" 2>&1 ||
	{ cat "$dir/lintian.log" >&2; fail "lintian reports errors"; }
echo "lintian: no errors ($(grep -c '^W:' "$dir/lintian.log") warnings, $(elapsed))"
grep '^[WI]:' "$dir/lintian.log" | head -20

# 3 and 4, inside the container.
mkdir -p "$dir/pkg"
cp "$deb" "$dir/pkg/goodput.deb"
cat >"$dir/check.sh" <<'EOS'
#!/bin/sh
set -u
study=demo-sim-llama8b-l40s
t0=$(date +%s)
elapsed() { echo "$(($(date +%s) - t0)) s"; }
fail() {
	echo "FAIL: $*"
	systemctl status --no-pager goodputd.service goodputd.socket 2>&1 | tail -20
	journalctl --no-pager -u goodputd.service | tail -30
	exit 1
}
prop() { systemctl show -P "$2" "$1"; }

# Nothing of goodput before the package: not the tree, not another install.
ls @SRC@ >/dev/null 2>&1 && fail "the source tree @SRC@ is visible"
command -v goodput >/dev/null && fail "a goodput is installed before the package: $(command -v goodput)"

# The test's one change: two trials per study.
mkdir -p /etc/systemd/system/goodputd.service.d
printf '[Service]\nExecStart=\nExecStart=/usr/sbin/goodputd --max-trials 2\n' \
	>/etc/systemd/system/goodputd.service.d/test.conf

# A build host may forbid maintainer scripts to start or stop services
# (policy-rc.d, as in Docker images); an operator's system does not.
rm -f /usr/sbin/policy-rc.d

dpkg -i /opt/pkg/goodput.deb || fail "dpkg -i"
[ "$(command -v goodput)" = /usr/bin/goodput ] || fail "goodput is not /usr/bin/goodput: $(command -v goodput)"
getent passwd goodput >/dev/null || fail "no goodput user after installation"
# The daemon's configuration: a conffile, whose edits dpkg keeps across
# upgrades (the service below runs with it: goodputd refuses a bad one).
dpkg-query --control-show goodput conffiles | grep -q '^ */etc/goodput/goodputd.json' ||
	fail "/etc/goodput/goodputd.json is not a conffile: $(dpkg-query --control-show goodput conffiles 2>&1)"
grep -q '"socket_group": "goodput"' /etc/goodput/goodputd.json ||
	fail "/etc/goodput/goodputd.json: $(cat /etc/goodput/goodputd.json)"
echo "installed: $(dpkg-query -W -f='${Package} ${Version}' goodput), user $(getent passwd goodput | cut -d: -f1,3,6) ($(elapsed))"

[ "$(prop goodputd.socket ActiveState)" = active ] || echo "note: the package did not start goodputd.socket"
systemctl start goodputd.socket || fail "systemctl start goodputd.socket"
[ "$(prop goodputd.socket ActiveState)" = active ] || fail "goodputd.socket is not active"
[ -S /run/goodputd.sock ] || fail "no /run/goodputd.sock"
[ "$(prop goodputd.socket UnitFileState)" = enabled ] || fail "goodputd.socket is $(prop goodputd.socket UnitFileState)"

goodput submit /usr/share/goodput/studies/$study.json || fail "goodput submit of the installed demo study"
i=0
until goodput status >/tmp/status 2>&1 && grep -q '^queue:   (empty)' /tmp/status; do
	i=$((i + 1))
	[ $i -lt 1200 ] || { cat /tmp/status; fail "the study did not finish within 120 s"; }
	sleep 0.1
done
cat /tmp/status
goodput list | grep -q "^[0-9]* *$study *done" || { goodput list; fail "study $study is not done"; }
goodput best $study | tee /tmp/best || fail "goodput best"
grep -q "engine:   sim, version [0-9]" /tmp/best || fail "goodput best names no engine version"
echo "study $study done and answered ($(elapsed)), goodputd $(prop goodputd.service ActiveState) as $(prop goodputd.service User)"

for f in json env cmd; do
	[ -s /var/lib/goodputd/best/$study.$f ] || fail "no /var/lib/goodputd/best/$study.$f"
done
grep -q '\(^\| \)/usr/bin/goodput-sim serve ' /var/lib/goodputd/best/$study.cmd ||
	fail "the launch command is not the installed goodput-sim: $(cat /var/lib/goodputd/best/$study.cmd)"
grep -q '^GOODPUT_ENGINE_VERSION=' /var/lib/goodputd/best/$study.env || fail "no GOODPUT_ENGINE_VERSION in the .env"
ls -l /var/lib/goodputd/best/
cat /var/lib/goodputd/best/$study.cmd

journalctl --no-pager -o cat GOODPUT_STUDY=$study >/tmp/journal
cat /tmp/journal
grep -q "trial 1" /tmp/journal || fail "journalctl GOODPUT_STUDY=$study shows no trial"
grep -q "study $study: done" /tmp/journal || fail "journalctl GOODPUT_STUDY=$study shows no end"
journalctl --no-pager -o cat MESSAGE_ID=d86493fbb10b42d2b56594488881765a | grep -q "study $study: done" ||
	fail "the study's end has no MESSAGE_ID"
journalctl --no-pager -o verbose GOODPUT_STUDY=$study GOODPUT_TRIAL=1 | grep -q "GOODPUT_PHASE=" ||
	fail "trial records carry no GOODPUT_PHASE="
journalctl --no-pager -u goodputd.service | grep "reception only permitted for main PID" &&
	fail "a server started by goodputd notified systemd in its name"
echo "journal: $(wc -l </tmp/journal) records of $study"

# (rewritten within a second of the study's end)
i=0
until grep -q "goodput_study_info{study=\"$study\",state=\"done\"" /run/goodputd/goodput.prom; do
	i=$((i + 1))
	[ $i -lt 50 ] || { cat /run/goodputd/goodput.prom; fail "the metrics file does not show $study done"; }
	sleep 0.1
done
grep -q "goodput_study_best_cost_per_million_tokens_dollars{study=\"$study\"}" /run/goodputd/goodput.prom ||
	fail "the metrics file has no cost of $study"
[ "$(stat -c %a /run/goodputd/goodput.prom)" = 644 ] || fail "the metrics file is not readable by node_exporter"
goodput trials --db /var/lib/goodputd/goodput.db --csv $study >/tmp/trials.csv || fail "goodput trials --db --csv"
[ "$(wc -l </tmp/trials.csv)" -ge 3 ] || fail "trials --csv: $(cat /tmp/trials.csv)"
echo "metrics file and offline store agree: $(grep -c '^goodput_' /run/goodputd/goodput.prom) samples, $(($(wc -l </tmp/trials.csv) - 1)) trials"

# The report, as an operator asks for it: goodputd writes it in its state
# directory and names it (gnuplot is this host's, as the operator's would be).
goodput report $study >/tmp/report 2>&1 || { cat /tmp/report; fail "goodput report $study"; }
html=$(sed -n 's/^report: //p' /tmp/report)
case "$html" in /var/lib/goodputd/*/report.html) ;; *) fail "goodput report named $html: $(cat /tmp/report)" ;; esac
[ -s "$html" ] && grep -q "goodput report: $study" "$html" || fail "no report in $html"
grep -q "Progress (study running" "$html" && fail "the report of a finished study still has the live header"
if command -v gnuplot >/dev/null; then
	[ "$(grep -c '<svg' "$html")" -ge 5 ] ||
		fail "the report has $(grep -c '<svg' "$html") plots: $(grep -o 'Plot not drawn[^<]*\|[^>]*tables only[^<]*' "$html" | head -3)"
fi
goodput report --markdown $study | grep -q "^## All trials" || fail "goodput report --markdown $study"
echo "report: $html ($(du -k "$html" | cut -f1) KiB, $(grep -c '<svg' "$html") plots), written by goodputd"

man -w goodput-study >/dev/null 2>&1 || fail "man goodput-study is not installed"
MANWIDTH=100 man goodput-study 2>/dev/null | grep -q "workload.input_len" || fail "man goodput-study lacks workload.input_len"
[ -s /usr/share/bash-completion/completions/goodput ] || fail "no bash completion"
echo "man pages and bash completion in place"

# Purge: nothing of goodput's but its user remains.
rm -rf /etc/systemd/system/goodputd.service.d
systemctl daemon-reload
dpkg --purge goodput || fail "dpkg --purge"
systemctl daemon-reload
for u in goodputd.service goodputd.socket goodput-pause.timer goodput-resume.timer; do
	[ "$(prop $u LoadState)" = not-found ] && [ "$(prop $u ActiveState)" = inactive ] ||
		fail "$u after purge: $(prop $u LoadState) $(prop $u ActiveState)"
done
systemctl list-units --all --no-legend 'goodput*' | grep . && fail "units left after purge"
[ ! -e /run/goodputd.sock ] || fail "/run/goodputd.sock left after purge"
for p in /etc/goodput /var/lib/goodputd /run/goodputd /usr/share/goodput /usr/bin/goodput; do
	[ ! -e $p ] || fail "$p left after purge"
done
pgrep -u goodput >/dev/null && fail "processes of user goodput left after purge: $(pgrep -a -u goodput)"
getent passwd goodput >/dev/null || fail "the goodput user was removed (policy: system users stay)"
echo "purged: no unit, socket, /etc/goodput or /var/lib/goodputd left; the user goodput stays ($(elapsed))"
echo "all checks passed"
EOS
sed -i "s|@SRC@|$src|g" "$dir/check.sh"
chmod 755 "$dir/check.sh"

# The container's root is a tmpfs with only this host's /usr in it (the
# scaffold's volatile root: the tree is not there); dpkg -i needs /usr
# writable, and this host's /etc (users and groups) and package database,
# each given as an overlay whose writes go to a temporary folder that goes
# with the container (/var/lib a tmpfs of its own, for nspawn makes only the
# last folder of a mount point).
nspawn_runner_units gpkg-runner "goodput's Debian package: the checks" /opt/goodput-test/check.sh
nspawn_timeout=200
nspawn_boot gpkg-runner \
	--overlay=/usr::/usr \
	--overlay=/etc::/etc \
	--tmpfs=/var/lib \
	--overlay=/var/lib/dpkg::/var/lib/dpkg \
	--bind-ro="$dir/check.sh:/opt/goodput-test/check.sh" \
	--bind-ro="$dir/pkg:/opt/pkg"
nspawn_require_passed "the checks"
echo "build $build_s; the whole test $(elapsed)"
echo ok
