#!/bin/sh
# goodputd under a real systemd: boots a throw-away systemd-nspawn container
# of this host's own /usr (PLATFORM.md recipe) with the project's units
# installed as an operator would install them — goodputd.service (the
# configured one from the build), goodputd.socket, the sysusers.d entry —
# and the binaries bound under /opt. A small drop-in only points ExecStart at
# /opt, runs dry-run studies, and shortens the watchdog so the test is quick.
# Inside, a oneshot unit checks:
#   - socket activation: goodputd.socket listens, the service is inactive,
#     and the first `goodput status` starts it;
#   - Type=notify readiness: the service is active (which systemd only says
#     after READY=1) and StatusText= carries the daemon's STATUS=;
#   - queries answered: a study submitted with `goodput submit` runs and
#     `goodput best` returns its result through the socket;
#   - a watchdog restart: SIGUSR1 with GOODPUTD_DEBUG_STALL_SECONDS stalls the
#     loop past WatchdogSec, systemd kills the daemon and Restart=on-failure
#     starts a new one (NRestarts 0 -> 1, a new MainPID) that answers `best`.
# Skips (77) only when nspawn cannot boot here (not installed, not root, no
# container support).
# Usage: test-goodputd-nspawn.sh GOODPUTD GOODPUT UNITS-BUILD-DIR SOURCE-ROOT
set -u
goodputd=$(readlink -f "$1")
goodput=$(readlink -f "$2")
units_build=$(readlink -f "$3")
src=$(readlink -f "$4")
. "$(dirname "$0")/../lib/nspawn.sh"

nspawn_init goodputd-test
dir=$nspawn_dir
mkdir -p "$dir/goodputd.service.d"

# What an operator's drop-in would change, plus the test's short watchdog.
cat >"$dir/goodputd.service.d/test.conf" <<'EOU'
[Service]
ExecStart=
ExecStart=/opt/goodput/goodputd --dry-run
WatchdogSec=3s
RestartSec=300ms
LimitCORE=0
Environment=GOODPUTD_DEBUG_STALL_SECONDS=15
EOU

# A study goodputd runs in virtual time (--dry-run) in a second or two.
cat >"$dir/results/study.json" <<'EOS'
{
  "name": "ns1", "engine": "sim", "label": "nspawn 128/16",
  "model": {"name": "llama-3.1-8b"}, "quantizations": ["none", "fp8"],
  "gpu": {"type": "L40S", "count": 1, "price_per_gpu_hour": 0.99},
  "search_space": {"max_num_seqs": {"min": 8, "max": 64, "scale": "log2"},
                   "max_num_batched_tokens": {"min": 512, "max": 2048, "scale": "log2"},
                   "tensor_parallel": [1]},
  "workload": {"dataset": "random", "input_len": 128, "output_len": 16, "num_prompts": 24,
               "ignore_eos": true, "seed": 7},
  "sla": {"ttft_ms": 2000, "tpot_ms": 100, "attainment": 0.9},
  "budget": {"max_trials": 3, "max_wall_time": "5m"},
  "probe": {"tolerance": 0.3, "max_steps": 3, "request_timeout": 30},
  "deploy": {"method": "exec", "startup_timeout": 30},
  "search": {"seed": 1, "algorithm": "LN_SBPLX"}
}
EOS

# The checks, run as root inside the container.
cat >"$dir/check.sh" <<'EOS'
#!/bin/sh
set -u
G=/opt/goodput/goodput
fail() { echo "FAIL: $*"; systemctl status --no-pager goodputd.service goodputd.socket 2>&1 | tail -30; journalctl --no-pager -u goodputd.service | tail -30; exit 1; }
prop() { systemctl show -P "$2" "$1"; }
# (no awk: /usr/bin/awk points into /etc/alternatives, empty in a volatile /etc)
t0=$(date +%s%N)
elapsed() { echo "$((($(date +%s%N) - t0) / 1000000)) ms"; }

systemctl start goodputd.socket || fail "goodputd.socket did not start"
[ "$(prop goodputd.socket ActiveState)" = active ] || fail "goodputd.socket is not listening"
[ -S /run/goodputd.sock ] || fail "no /run/goodputd.sock"
ls -l /run/goodputd.sock
[ "$(prop goodputd.service ActiveState)" = inactive ] || fail "goodputd.service runs before any connection"
echo "socket listening, service inactive"

# Socket activation: this first connection starts the service.
$G status || fail "goodput status through the socket"
[ "$(prop goodputd.service ActiveState)" = active ] || fail "goodputd.service not active after the first connection"
[ "$(prop goodputd.service Type)" = notify ] || fail "Type is not notify"
[ "$(prop goodputd.service User)" = goodput ] || fail "not running as the goodput user"
echo "socket activation: started by the first connection ($(elapsed)); Type=$(prop goodputd.service Type)," \
	"ActiveState=active (after READY=1), StatusText=\"$(prop goodputd.service StatusText)\""
prop goodputd.service StatusText | grep -q . || fail "no STATUS= reached systemd"
[ "$(prop goodputd.service WatchdogUSec)" = 3s ] || echo "note: WatchdogUSec=$(prop goodputd.service WatchdogUSec)"
pid1=$(prop goodputd.service MainPID)
[ "$(prop goodputd.service NRestarts)" = 0 ] || fail "restarted already"
ps -o user=,pid=,rss=,args= -p "$pid1"

# Queries answered: a dry-run study submitted and its best configuration asked for.
$G submit /results/study.json || fail "goodput submit"
i=0
until $G list | grep -q 'ns1.*done'; do
	i=$((i + 1)); [ $i -lt 300 ] || fail "study ns1 did not finish"; sleep 0.1
done
$G best ns1 || fail "goodput best"
$G best --json ns1 >/results/best1.json || fail "goodput best --json"
[ -s /var/lib/goodputd/best/ns1.env ] || fail "no /var/lib/goodputd/best/ns1.env"
echo "study ns1 done and best answered ($(elapsed))"

# Watchdog: stall the loop past WatchdogSec; systemd kills it and restarts it.
kill -USR1 "$pid1" || fail "kill -USR1"
i=0
while [ "$(prop goodputd.service NRestarts)" = 0 ]; do
	i=$((i + 1)); [ $i -lt 300 ] || fail "no restart within 30 s of the stall"; sleep 0.1
done
i=0
until [ "$(prop goodputd.service ActiveState)" = active ]; do
	i=$((i + 1)); [ $i -lt 300 ] || fail "not active again after the restart"; sleep 0.1
done
pid2=$(prop goodputd.service MainPID)
[ "$pid2" != "$pid1" ] || fail "same MainPID after the restart"
journalctl --no-pager -u goodputd.service | grep -i 'watchdog' | tail -3
journalctl --no-pager -u goodputd.service | grep -qi 'watchdog timeout' || fail "the journal shows no watchdog timeout"
echo "watchdog restart: MainPID $pid1 -> $pid2, NRestarts=$(prop goodputd.service NRestarts) ($(elapsed))"
$G best --json ns1 >/results/best2.json || fail "goodput best after the restart"
cmp -s /results/best1.json /results/best2.json || fail "best differs after the restart"
echo "best answered by the restarted daemon"
echo "all checks passed ($(elapsed))"
EOS
chmod 755 "$dir/check.sh"

nspawn_runner_units gpdtest-runner "goodputd under systemd: the checks" /opt/goodput/check.sh
nspawn_boot gpdtest-runner \
	--bind-ro="$goodputd:/opt/goodput/goodputd" \
	--bind-ro="$goodput:/opt/goodput/goodput" \
	--bind-ro="$dir/check.sh:/opt/goodput/check.sh" \
	--bind-ro="$units_build/goodputd.service:/etc/systemd/system/goodputd.service" \
	--bind-ro="$src/units/goodputd.socket:/etc/systemd/system/goodputd.socket" \
	--bind-ro="$dir/goodputd.service.d:/etc/systemd/system/goodputd.service.d" \
	--bind-ro="$src/units/sysusers-goodput.conf:/etc/sysusers.d/goodput.conf" \
	--bind-ro="$src/configs/engines:/etc/goodput/engines"
nspawn_require_passed "the checks"
echo ok
