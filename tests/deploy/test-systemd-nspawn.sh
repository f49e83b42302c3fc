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
. "$(dirname "$0")/../lib/nspawn.sh"

nspawn_init goodput-test
# The test runs as the container's default unit and powers it off either way.
nspawn_runner_units gptest-runner "goodput systemd deployer test" \
	"/opt/goodput/test-deploy-systemd /opt/goodput/goodput-sim /results" \
	"After=dbus.service
Requires=dbus.service"
nspawn_boot gptest-runner \
	--bind-ro="$test_bin:/opt/goodput/test-deploy-systemd" \
	--bind-ro="$sim:/opt/goodput/goodput-sim"
nspawn_require_passed "test-deploy-systemd"
echo ok
