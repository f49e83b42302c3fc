#!/bin/sh
# `goodput tune` with deploy.method "systemd" against a real systemd: boots
# a throw-away systemd-nspawn container of this host's own /usr
# (PLATFORM.md, tests/lib/nspawn.sh), whose default unit runs
# tune-systemd-inner.py (a study whose servers are transient units; the tuner
# killed -9 mid-trial; --resume stops the orphaned unit and finishes), then
# powers off. Skips (77) only when nspawn cannot boot here (not installed,
# not root, no container support).
# Usage: test-tune-systemd.sh GOODPUT GOODPUT-SIM SRCDIR
set -u
goodput=$(readlink -f "$1")
sim=$(readlink -f "$2")
src=$(readlink -f "$3")
. "$(dirname "$0")/../lib/nspawn.sh"

nspawn_init goodput-tune
[ -x /usr/bin/python3 ] || skip "no /usr/bin/python3 for the test inside the container"
nspawn_runner_units gptune "goodput tune with the systemd deployer" \
	"/usr/bin/python3 /opt/goodput/tune-systemd-inner.py /opt/goodput /results" \
	"After=dbus.service
Requires=dbus.service"
# a whole study plus a resume: more than the library's default 90 s
nspawn_timeout=150
nspawn_boot gptune \
	--bind-ro="$goodput:/opt/goodput/goodput" \
	--bind-ro="$sim:/opt/goodput/goodput-sim" \
	--bind-ro="$src/configs/engines:/opt/goodput/engines" \
	--bind-ro="$src/tests/runner/tune-systemd-inner.py:/opt/goodput/tune-systemd-inner.py"
nspawn_require_passed "tune-systemd-inner.py"
echo ok
