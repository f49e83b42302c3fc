# nspawn.sh — sourced by the tests that boot a throw-away systemd-nspawn
# container of this host's own /usr (PLATFORM.md recipe) and run their checks
# as the container's default unit, which powers it off either way. The
# caller writes its files into $nspawn_dir, and its checks leave their
# output in $nspawn_dir/results/test.log and their exit status in .../rc.
#
#   nspawn_init PREFIX            skip (77) unless nspawn can run here; make
#                                 $nspawn_dir and $nspawn_dir/results, clean
#                                 up on exit
#   nspawn_runner_units NAME DESCRIPTION COMMAND [UNIT-LINES]
#                                 NAME.service runs COMMAND (output to
#                                 /results/test.log, status to /results/rc);
#                                 NAME.target is booted
#   nspawn_boot NAME [NSPAWN-ARGS...]
#                                 boots the container into NAME.target (90 s at
#                                 most, or $nspawn_timeout s when set); sets
#                                 $nspawn_rc and $nspawn_seconds
#   nspawn_require_finished WHAT  skip when the container could not boot at
#                                 all, fail when WHAT did not finish inside
#   nspawn_require_passed WHAT    as nspawn_require_finished, then shows the
#                                 checks' output and fails unless they exited
#                                 0 and said "all checks passed"
skip() { echo "SKIP: $*" >&2; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

# nspawn with --keep-unit leaves empty cgroup folders behind (PLATFORM.md)
nspawn_cgroups_rm() {
	for d in /sys/fs/cgroup/systemd/payload /sys/fs/cgroup/systemd/supervisor \
		/sys/fs/cgroup/unified/payload /sys/fs/cgroup/unified/supervisor; do
		rmdir "$d" 2>/dev/null || true
	done
}
nspawn_cleanup() {
	rm -rf "$nspawn_dir"
}

nspawn_init() {
	command -v systemd-nspawn >/dev/null 2>&1 || skip "systemd-nspawn is not installed (apt-get install systemd-container)"
	[ "$(id -u)" = 0 ] || skip "systemd-nspawn needs root"
	[ -x /lib/systemd/systemd ] || skip "no /lib/systemd/systemd to boot"
	nspawn_dir=$(mktemp -d "/tmp/$1-nspawn-XXXXXX")
	nspawn_machine="$1-$$"
	trap nspawn_cleanup EXIT
	mkdir -p "$nspawn_dir/results"
}

nspawn_runner_units() {
	cat >"$nspawn_dir/$1.service" <<EOU
[Unit]
Description=$2
${4:+$4
}SuccessAction=poweroff-force
FailureAction=poweroff-force

[Service]
Type=oneshot
ExecStart=/bin/sh -c '$3 >/results/test.log 2>&1; echo \$? >/results/rc'
EOU
	cat >"$nspawn_dir/$1.target" <<EOU
[Unit]
Description=$2 (target)
Requires=$1.service
After=$1.service
AllowIsolate=yes
EOU
}

# One container at a time on this machine, whichever test or copy of the
# suite boots it: with --keep-unit every container's payload and supervisor
# cgroups are the same folders. The tests themselves run beside the others;
# only the boot waits for this lock ($nspawn_lock_wait s at most), held on
# descriptor 9 (the container itself does not inherit it).
nspawn_lock=${GOODPUT_NSPAWN_LOCK:-/tmp/goodput-tests-nspawn.lock}
nspawn_boot() {
	_unit=$1
	shift
	exec 9>>"$nspawn_lock" || fail "cannot open the container lock $nspawn_lock"
	_waited=$(date +%s)
	flock -w "${nspawn_lock_wait:-600}" 9 ||
		fail "another container held $nspawn_lock for ${nspawn_lock_wait:-600} s"
	_start=$(date +%s)
	[ $((_start - _waited)) -lt 2 ] || echo "waited $((_start - _waited)) s for another test's container"
	timeout "${nspawn_timeout:-90}" systemd-nspawn -D / --volatile=yes --register=no --keep-unit --private-network \
		--console=pipe --machine="$nspawn_machine" \
		"$@" \
		--bind-ro="$nspawn_dir/$_unit.service:/etc/systemd/system/$_unit.service" \
		--bind-ro="$nspawn_dir/$_unit.target:/etc/systemd/system/$_unit.target" \
		--bind="$nspawn_dir/results:/results" \
		--boot -- systemd.unit="$_unit.target" >"$nspawn_dir/boot.log" 2>&1 9>&-
	nspawn_rc=$?
	nspawn_seconds=$(($(date +%s) - _start))
	nspawn_cgroups_rm
	exec 9>&-
}

nspawn_require_finished() {
	[ -e "$nspawn_dir/results/rc" ] && return 0
	if [ ! -s "$nspawn_dir/results/test.log" ] && ! grep -q 'Reached target\|Started\|Starting' "$nspawn_dir/boot.log"; then
		tail -20 "$nspawn_dir/boot.log" >&2
		skip "systemd-nspawn could not boot a container here (exit $nspawn_rc)"
	fi
	tail -40 "$nspawn_dir/boot.log" >&2
	cat "$nspawn_dir/results/test.log" >&2 2>/dev/null
	fail "$1 inside the container did not finish (nspawn exit $nspawn_rc)"
}

nspawn_require_passed() {
	nspawn_require_finished "$1"
	cat "$nspawn_dir/results/test.log"
	_rc=$(cat "$nspawn_dir/results/rc")
	echo "container ran for $nspawn_seconds s"
	[ "$_rc" = 0 ] || { tail -30 "$nspawn_dir/boot.log" >&2; fail "$1 exited $_rc inside the container"; }
	grep -q 'all checks passed' "$nspawn_dir/results/test.log" || fail "no success line"
}
