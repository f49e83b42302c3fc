#!/bin/sh
# `goodput tune` with deploy.method "systemd" against a real systemd: boots
# a throw-away systemd-nspawn container of this host's own /usr
# (PLATFORM.md), whose default unit runs tune-systemd-inner.py (a study whose
# servers are transient units; the tuner killed -9 mid-trial; --resume stops
# the orphaned unit and finishes), then powers off. Skips (77) only when
# nspawn cannot boot here (not installed, not root, no container support).
# Usage: test-tune-systemd.sh GOODPUT GOODPUT-SIM SRCDIR
set -u
goodput=$(readlink -f "$1")
sim=$(readlink -f "$2")
src=$(readlink -f "$3")
skip() { echo "SKIP: $*" >&2; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

command -v systemd-nspawn >/dev/null 2>&1 || skip "systemd-nspawn is not installed (apt-get install systemd-container)"
[ "$(id -u)" = 0 ] || skip "systemd-nspawn needs root"
[ -x /lib/systemd/systemd ] || skip "no /lib/systemd/systemd to boot"
[ -x /usr/bin/python3 ] || skip "no /usr/bin/python3 for the test inside the container"

dir=$(mktemp -d /tmp/goodput-test-tune-systemd-XXXXXX)
cleanup() {
	rm -rf "$dir"
	# nspawn with --keep-unit leaves empty cgroup folders behind (PLATFORM.md)
	for d in /sys/fs/cgroup/systemd/payload /sys/fs/cgroup/systemd/supervisor \
		/sys/fs/cgroup/unified/payload /sys/fs/cgroup/unified/supervisor; do
		rmdir "$d" 2>/dev/null || true
	done
}
trap cleanup EXIT
mkdir -p "$dir/results"

cat >"$dir/gptune.service" <<'EOU'
[Unit]
Description=goodput tune with the systemd deployer
After=dbus.service
Requires=dbus.service
SuccessAction=poweroff-force
FailureAction=poweroff-force

[Service]
Type=oneshot
ExecStart=/bin/sh -c '/usr/bin/python3 /opt/goodput/tune-systemd-inner.py /opt/goodput /results >/results/test.log 2>&1; echo $? >/results/rc'
EOU
cat >"$dir/gptune.target" <<'EOU'
[Unit]
Description=goodput tune test target
Requires=gptune.service
After=gptune.service
AllowIsolate=yes
EOU

start=$(date +%s)
timeout 150 systemd-nspawn -D / --volatile=yes --register=no --keep-unit --private-network \
	--console=pipe --machine="goodput-tune-$$" \
	--bind-ro="$goodput:/opt/goodput/goodput" \
	--bind-ro="$sim:/opt/goodput/goodput-sim" \
	--bind-ro="$src/configs/engines:/opt/goodput/engines" \
	--bind-ro="$src/tests/tune/tune-systemd-inner.py:/opt/goodput/tune-systemd-inner.py" \
	--bind-ro="$dir/gptune.service:/etc/systemd/system/gptune.service" \
	--bind-ro="$dir/gptune.target:/etc/systemd/system/gptune.target" \
	--bind="$dir/results:/results" \
	--boot -- systemd.unit=gptune.target >"$dir/boot.log" 2>&1
nspawn_rc=$?
end=$(date +%s)

if [ ! -e "$dir/results/rc" ]; then
	if [ ! -s "$dir/results/test.log" ] && ! grep -q 'Reached target\|Started\|Starting' "$dir/boot.log"; then
		tail -20 "$dir/boot.log" >&2
		skip "systemd-nspawn could not boot a container here (exit $nspawn_rc)"
	fi
	tail -40 "$dir/boot.log" >&2
	cat "$dir/results/test.log" >&2 2>/dev/null
	fail "the test inside the container did not finish (nspawn exit $nspawn_rc)"
fi
cat "$dir/results/test.log" >&2
rc=$(cat "$dir/results/rc")
echo "container ran for $((end - start)) s" >&2
[ "$rc" = 0 ] || fail "tune-systemd-inner.py exited $rc inside the container"
grep -q 'all checks passed' "$dir/results/test.log" || fail "no success line"
echo ok
