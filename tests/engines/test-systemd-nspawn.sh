#!/bin/sh
# Proves the systemd deployer against a real systemd: boots a throw-away
# systemd-nspawn container of this host's own /usr (PLATFORM.md recipe),
# whose default unit runs test-deploy-systemd against goodput-sim on the
# container's system bus, then powers off. Skips (77) only when nspawn
# cannot boot here (not installed, not root, no container support).
# Usage: test-systemd-nspawn.sh TEST-DEPLOY-SYSTEMD GOODPUT-SIM
set -u
test_bin=$(readlink -f "$1")
sim=$(readlink -f "$2")
skip() { echo "SKIP: $*" >&2; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

command -v systemd-nspawn >/dev/null 2>&1 || skip "systemd-nspawn is not installed (apt-get install systemd-container)"
[ "$(id -u)" = 0 ] || skip "systemd-nspawn needs root"
[ -x /lib/systemd/systemd ] || skip "no /lib/systemd/systemd to boot"

dir=$(mktemp -d /tmp/goodput-test-nspawn-XXXXXX)
machine="goodput-test-$$"
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

# The test runs as the container's default unit and powers it off either way.
cat >"$dir/gptest-runner.service" <<'EOU'
[Unit]
Description=goodput systemd deployer test
After=dbus.service
Requires=dbus.service
SuccessAction=poweroff-force
FailureAction=poweroff-force

[Service]
Type=oneshot
ExecStart=/bin/sh -c '/opt/goodput/test-deploy-systemd /opt/goodput/goodput-sim /results >/results/test.log 2>&1; echo $? >/results/rc'
EOU
cat >"$dir/gptest-runner.target" <<'EOU'
[Unit]
Description=goodput test target
Requires=gptest-runner.service
After=gptest-runner.service
AllowIsolate=yes
EOU

start=$(date +%s)
timeout 90 systemd-nspawn -D / --volatile=yes --register=no --keep-unit --private-network \
	--console=pipe --machine="$machine" \
	--bind-ro="$test_bin:/opt/goodput/test-deploy-systemd" \
	--bind-ro="$sim:/opt/goodput/goodput-sim" \
	--bind-ro="$dir/gptest-runner.service:/etc/systemd/system/gptest-runner.service" \
	--bind-ro="$dir/gptest-runner.target:/etc/systemd/system/gptest-runner.target" \
	--bind="$dir/results:/results" \
	--boot -- systemd.unit=gptest-runner.target >"$dir/boot.log" 2>&1
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
[ "$rc" = 0 ] || fail "test-deploy-systemd exited $rc inside the container"
grep -q 'all checks passed' "$dir/results/test.log" || fail "no success line"
echo ok
