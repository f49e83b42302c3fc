#!/usr/bin/env python3
"""Red team, round two (issue 27 items 1, 2, 3, 6 and 7): each attack on
what goodput keeps — its servers, its database, its budget — replayed
against real goodputd and goodput tune processes and real goodput-sim
servers on loopback, and the defended outcome checked. Usage:
test-redteam-store.py GOODPUTD GOODPUT CASE."""

import atexit
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemonlib import SkipTest, TestFailure, check, run, tiny_spec, trials_ok  # noqa: E402

# A goodputd or tune killed: its keeper ends the server's group (SIGTERM,
# then SIGKILL after the profile's stop timeout, 10 s for goodput-sim).
# Loaded 2-core machine under ASan: generous.
GONE_SECONDS = 40


def holders_of(prefix, exclude=()):
    """Processes with a descriptor into prefix (a trial's log): the servers
    a goodput started there, and their keepers."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) in exclude or int(pid) == os.getpid():
            continue
        try:
            for fd in os.listdir("/proc/%s/fd" % pid):
                try:
                    if os.readlink("/proc/%s/fd/%s" % (pid, fd)).startswith(prefix):
                        found.append(int(pid))
                        break
                except OSError:
                    pass
        except OSError:
            pass
    return [p for p in found if not zombie(p)]


def zombie(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def wait_until(what, cond, seconds, step=0.05):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(step)
    raise TestFailure("%s: not within %d s" % (what, seconds))


def sims_in(prefix, exclude=()):
    return [p for p in holders_of(prefix, exclude) if comm(p) == "goodput-sim"]


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return ""


def kill_all(pids):
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass


def db_rows(db, sql, args=()):
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=10)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def write_spec(tmp, spec):
    path = os.path.join(tmp, spec["name"] + ".json")
    with open(path, "w") as f:
        json.dump(spec, f)
    return path


# ---- item 1: a server never outlives the goodput that started it ----


def case_orphan_daemon(make, tmp):
    """goodputd killed -9 in the first second after a trial's server was
    spawned: the old server was never ended and answered /health minutes
    later. Now its keeper ends it with goodputd, restarted or not, and the
    restarted goodputd redoes the trial: nothing lost or twice."""
    d = make(name="od").start()
    logs = os.path.join(d.state, "logs")
    check(d.request({"command": "submit", "study": tiny_spec("od", trials=4)})["ok"], "submit")
    for round_ in range(3):
        sims = wait_until("a server spawned", lambda: sims_in(logs, [d.proc.pid]), 120, 0.01)
        time.sleep(random.uniform(0, 1.0))
        d.stop(sig=signal.SIGKILL)
        left = wait_until("round %d: the server of the killed goodputd gone (it runs: %s)" % (round_, sims),
                          lambda: not holders_of(logs) and [1], GONE_SECONDS)
        check(left, "servers left")
        d.start()
    d.wait_state("od", ["done"], 300)
    trials = d.request({"command": "trials", "study": "od"})["trials"]
    trials_ok(trials)
    check(not holders_of(logs, [d.proc.pid]), "a server still runs after the study")


def case_orphan_tune(make, tmp):
    """A `goodput tune` killed -9 and never resumed left its server running
    for good. Now its keeper ends it; `--resume` finishes the study."""
    d = make(name="ot")  # for its environment only
    spec = tiny_spec("ot", trials=3)
    path = write_spec(tmp, spec)
    db = os.path.join(tmp, "ot.db")
    logs = os.path.join(tmp, "goodput-logs")
    argv = [d.goodput, "tune", "-q", "--db", db, path]
    p = subprocess.Popen(argv, env=d.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_until("a server spawned", lambda: sims_in(logs, [p.pid]), 120, 0.01)
        time.sleep(random.uniform(0, 1.0))
        p.kill()
        p.wait()
        wait_until("the killed tune's server gone", lambda: not holders_of(logs) and [1], GONE_SECONDS)
    finally:
        if p.poll() is None:
            p.kill()
    r = subprocess.run([d.goodput, "tune", "-q", "--db", db, "--resume", "ot"], env=d.env, capture_output=True,
                       text=True, timeout=300)
    check(r.returncode == 0, "resume: %s" % r.stderr)
    rows = db_rows(db, "select seq, kind, knobs, state from trials order by seq")
    trials_ok([{"seq": s, "kind": k, "knobs": json.loads(kn), "state": st} for s, k, kn, st in rows])
    check(not holders_of(logs), "a server still runs after the study")


def disagg_spec(name, trials=3):
    """A study of both shapes goodput-sim answers in seconds, on 4 emulated
    GPUs: one server of TP 2, or a prefill worker, a decode worker and the
    router in front (the decode side's batch size searched)."""
    spec = tiny_spec(name, trials=trials)
    spec["quantizations"] = ["none"]
    spec["gpu"]["count"] = 4
    spec["search_space"] = {"tensor_parallel": [2], "max_num_seqs": [32], "max_num_batched_tokens": [2048],
                            "prefill_workers": [1], "prefill_tensor_parallel": [1], "decode_workers": [1],
                            "decode_tensor_parallel": [1], "decode_max_num_seqs": [16, 32, 64]}
    spec["deploy"]["shape"] = "both"
    return spec


def role_servers(db):
    return db_rows(db, "select trial_id, role, pgid, identity from trial_servers order by trial_id, role")


def stop_with_every_role_running(proc, logs, db):
    """Waits for a trial's three servers (prefill, decode, router), lets
    the trial go on a random moment, then stops its goodput (SIGSTOP: it
    changes nothing more) and checks that every role server that runs is
    in a process group recorded in the store. Returns the sims."""
    wait_until("a prefill, a decode and a router server running", lambda: len(sims_in(logs, [proc.pid])) >= 3,
               120, 0.01)
    time.sleep(random.uniform(0, 1.0))
    os.kill(proc.pid, signal.SIGSTOP)
    sims = sims_in(logs, [proc.pid])
    recorded = {pgid for _, _, pgid, _ in role_servers(db) if pgid}
    for p in sims:
        try:
            check(os.getpgid(p) in recorded, "a role server runs unrecorded: pid %d, recorded %s" % (p, recorded))
        except ProcessLookupError:
            pass
    return sims


def identity_of(pid):
    """As goodput records a group's leader: boot id and start time."""
    with open("/proc/sys/kernel/random/boot_id") as f:
        boot = f.read().strip()
    with open("/proc/%d/stat" % pid) as f:
        start = f.read().rsplit(")", 1)[1].split()[19]
    return "%s:%s" % (boot, start)


def case_orphan_tune_disagg(make, tmp):
    """A disaggregated trial is three servers: a `goodput tune` of both
    shapes killed -9 mid-trial leaves none of them behind (each was
    recorded by role before it ran, and its keeper ends it). A role server whose keeper died too is
    ended by `--resume` from its record, a stranger recorded under a stale
    identity is not, and the study finishes."""
    d = make(name="otd")
    path = write_spec(tmp, disagg_spec("otd", trials=4))
    db = os.path.join(tmp, "otd.db")
    logs = os.path.join(tmp, "goodput-logs")
    p = subprocess.Popen([d.goodput, "tune", "-q", "--no-report", "--db", db, path], env=d.env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        stop_with_every_role_running(p, logs, db)
        p.kill()
        p.wait()
        wait_until("the killed tune's prefill, decode and router servers gone",
                   lambda: not holders_of(logs) and [1], GONE_SECONDS)
    finally:
        if p.poll() is None:
            p.kill()
    trial = db_rows(db, "select id from trials order by seq desc limit 1")[0][0]
    left = subprocess.Popen(["sleep", "300"], start_new_session=True)
    stranger = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        con = sqlite3.connect(db, timeout=10)
        con.execute("insert or replace into trial_servers (trial_id, role, pgid, identity) values (?, ?, ?, ?)",
                    (trial, "decode-0", left.pid, identity_of(left.pid)))
        con.execute("insert or replace into trial_servers (trial_id, role, pgid, identity) values (?, ?, ?, ?)",
                    (trial, "prefill-0", stranger.pid, identity_of(stranger.pid) + "0"))
        con.commit()
        con.close()
        r = subprocess.run([d.goodput, "tune", "--no-report", "--db", db, "--resume", "otd"], env=d.env,
                           capture_output=True, text=True, timeout=300)
        check(r.returncode == 0, "resume: %s" % r.stderr)
        check(left.wait(timeout=10) == -signal.SIGKILL, "the recorded decode-0 was not ended")
        check("orphaned decode-0" in r.stderr, "resume did not say what it ended: %s" % r.stderr[-2000:])
        check(stranger.poll() is None, "resume killed a stranger recorded under another identity")
    finally:
        for x in (left, stranger):
            x.kill()
            x.wait()
    rows = db_rows(db, "select seq, kind, knobs, state from trials order by seq")
    trials_ok([{"seq": s, "kind": k, "knobs": json.loads(kn), "state": st} for s, k, kn, st in rows])
    check(not role_servers(db), "role servers still recorded after the study: %s" % role_servers(db))
    check(not holders_of(logs), "a server still runs after the study")


def case_orphan_daemon_disagg(make, tmp):
    """goodputd killed -9 mid-trial of a disaggregated configuration in a
    study of both shapes, twice: no prefill, decode or router server
    outlives it, and the restarted goodputd redoes the trial and finishes
    the study."""
    d = make(name="odd").start()
    logs = os.path.join(d.state, "logs")
    db = os.path.join(d.state, "goodput.db")
    check(d.request({"command": "submit", "study": disagg_spec("odd", trials=4)})["ok"], "submit")
    for round_ in range(2):
        sims = stop_with_every_role_running(d.proc, logs, db)
        d.stop(sig=signal.SIGKILL)
        wait_until("round %d: the killed goodputd's role servers gone (they ran: %s)" % (round_, sims),
                   lambda: not holders_of(logs) and [1], GONE_SECONDS)
        d.start()
    d.wait_state("odd", ["done"], 300)
    trials = d.request({"command": "trials", "study": "odd"})["trials"]
    trials_ok(trials)
    check([t for t in trials if t["knobs"].get("shape") == "disaggregated"], "no disaggregated trial: %s" % trials)
    check(not [t for t in trials if t["state"] == "failed"], "a trial failed: %s" % trials)
    check("writing the best configuration" not in d.log(), d.log()[-2000:])
    check(not role_servers(db), "role servers still recorded after the study: %s" % role_servers(db))
    check(not holders_of(logs, [d.proc.pid]), "a server still runs after the study")


def sglang_env(tmp):
    """goodput-sim in SGLang's place: `python3 -m sglang.launch_server` and
    `python3 -m sglang_router.launch_router` (the shipped profile's argv)
    find it first on $PATH under the name python3."""
    sim = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(sys.argv[1]))), "sim", "goodput-sim")
    bin_ = os.path.join(tmp, "sglang-bin")
    os.makedirs(bin_, exist_ok=True)
    if not os.path.exists(os.path.join(bin_, "python3")):
        os.symlink(sim, os.path.join(bin_, "python3"))
    return os.path.realpath(sim), {"PATH": bin_ + os.pathsep + os.environ.get("PATH", "")}


def sims_by_exe(prefix, sim, exclude=()):
    """The servers writing under prefix, by their program (named python3 here)."""
    found = []
    for p in holders_of(prefix, exclude):
        try:
            if os.path.realpath("/proc/%d/exe" % p) == sim:
                found.append(p)
        except OSError:
            pass
    return found


def kill9_with_every_sglang_role_up(proc, logs, db, sim):
    """SIGKILL proc once a disaggregated trial's prefill, decode and router
    (goodput-sim speaking SGLang) all run, each recorded by role; then every
    one of them is gone within GONE_SECONDS."""
    wait_until("an SGLang prefill, decode and router server running",
               lambda: len(sims_by_exe(logs, sim, [proc.pid])) >= 3, 120, 0.01)
    os.kill(proc.pid, signal.SIGSTOP)
    sims = sims_by_exe(logs, sim, [proc.pid])
    roles = {role for _, role, pgid, _ in role_servers(db) if pgid}
    check({"prefill-0", "decode-0", "router"} <= roles, "roles recorded: %s" % roles)
    recorded = {pgid for _, _, pgid, _ in role_servers(db) if pgid}
    for p in sims:
        try:
            check(os.getpgid(p) in recorded, "a role server runs unrecorded: pid %d" % p)
        except ProcessLookupError:
            pass
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    wait_until("the prefill, decode and router servers of the killed %d gone (they ran: %s)" % (proc.pid, sims),
               lambda: not holders_of(logs) and [1], GONE_SECONDS)


def sglang_spec(name):
    """Both shapes on 4 emulated GPUs through the shipped SGLang profile:
    one server of TP 2, or a prefill and a decode worker (P=1 D=1, TP 1
    each) behind SGLang's router, the decode side's batch searched."""
    spec = disagg_spec(name, trials=3)
    spec["engine"] = "sglang"
    spec["search_space"]["decode_max_num_seqs"] = [16, 32]
    spec["deploy"]["stop_timeout"] = 5
    spec["baseline"] = False
    return spec


def case_disagg_sglang(make, tmp):
    """issue 26's real-time study: goodput-sim playing SGLang's roles
    (--disaggregation-mode prefill|decode and sglang_router
    --pd-disaggregation) on loopback, 4 emulated GPUs, P=1 D=1 and
    aggregated TP 2 in the space. Through `goodput tune`: killed -9 with
    every role up, nothing left; --resume runs the study to its answer,
    which names the winning shape and the other's best beside it. Through
    goodputd: killed -9 with every role up, nothing left; restarted, it
    finishes the study with both shapes measured; nothing runs after."""
    sim, env = sglang_env(tmp)
    d = make(name="sg", env=env)
    path = write_spec(tmp, sglang_spec("sgt"))
    db = os.path.join(tmp, "sgt.db")
    logs = os.path.join(tmp, "goodput-logs")
    p = subprocess.Popen([d.goodput, "tune", "-q", "--no-report", "--db", db, path], env=d.env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        kill9_with_every_sglang_role_up(p, logs, db, sim)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    r = subprocess.run([d.goodput, "tune", "--json", "--no-report", "--db", db, "--resume", "sgt"], env=d.env,
                       capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, "resume: %s" % r.stderr[-3000:])
    shape = json.loads(r.stdout)["best"].get("shape") or {}
    check(shape.get("winner") in ("aggregated", "disaggregated") and shape.get("other_best") and
          shape.get("gain", 0) >= 1, "the answer does not compare the shapes: %s" % r.stdout[-2000:])
    rows = db_rows(db, "select seq, kind, knobs, state from trials order by seq")
    trials_ok([{"seq": s, "kind": k, "knobs": json.loads(kn), "state": st} for s, k, kn, st in rows])
    launch = " ".join(x for x, in db_rows(db, "select launch from trials where launch is not null"))
    for flag in ("--disaggregation-mode", "sglang_router.launch_router", "--pd-disaggregation"):
        check(flag in launch, "no trial was launched with %s" % flag)
    check(not role_servers(db) and not holders_of(logs), "a server outlives the study")

    d.start()
    dlogs = os.path.join(d.state, "logs")
    ddb = os.path.join(d.state, "goodput.db")
    check(d.request({"command": "submit", "study": sglang_spec("sgd")})["ok"], "submit")
    kill9_with_every_sglang_role_up(d.proc, dlogs, ddb, sim)
    d.start()
    d.wait_state("sgd", ["done"], 300)
    trials = d.request({"command": "trials", "study": "sgd"})["trials"]
    trials_ok(trials)
    check({t["knobs"].get("shape") for t in trials if t["state"] == "done"} == {"aggregated", "disaggregated"},
          "both shapes not measured: %s" % trials)
    best = d.request({"command": "best", "study": "sgd"})
    check(best.get("ok") and best["best"]["knobs"].get("shape"), "best: %s" % best)
    check(not role_servers(ddb), "role servers still recorded after the study: %s" % role_servers(ddb))
    check(not holders_of(dlogs, [d.proc.pid]), "a server still runs after the study")


DEPLOY_SH = """#!/bin/sh
# starts the server outside its own process group, as docker run -d does
set -eu
setsid "$@" >>"$0.out" 2>&1 </dev/null &
echo $! > "$0-$GOODPUT_STUDY-$GOODPUT_TRIAL_ID.pid"
echo "GOODPUT_BASE_URL=http://127.0.0.1:$GOODPUT_PORT"
"""

TEARDOWN_SH = """#!/bin/sh
# ends it by the trial's name alone, as docker rm -f goodput-STUDY-TRIAL does
pidfile="$(dirname "$0")/deploy.sh-$GOODPUT_STUDY-$GOODPUT_TRIAL_ID.pid"
[ -f "$pidfile" ] || exit 0
pid=$(cat "$pidfile")
kill "$pid" 2>/dev/null || true
while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
rm -f "$pidfile"
"""


def case_orphan_command(make, tmp):
    """The command method: the deploy command starts a server outside its
    own process group (a container). A `goodput tune` killed -9 left it
    running, and `--resume` never ended it. Now `--resume` runs the
    teardown command for the trial left deployed, before anything else."""
    d = make(name="oc")
    hooks = os.path.join(tmp, "hooks")
    os.mkdir(hooks)
    for name, text in (("deploy.sh", DEPLOY_SH), ("teardown.sh", TEARDOWN_SH)):
        with open(os.path.join(hooks, name), "w") as f:
            f.write(text)
        os.chmod(os.path.join(hooks, name), 0o755)
    spec = tiny_spec("oc", trials=3)
    spec["deploy"] = {"method": "command", "deploy_command": [os.path.join(hooks, "deploy.sh")],
                      "teardown_command": [os.path.join(hooks, "teardown.sh")], "startup_timeout": 30}
    path = write_spec(tmp, spec)
    db = os.path.join(tmp, "oc.db")
    out = os.path.join(hooks, "deploy.sh.out")
    # killed at a random moment of the first trial's deployment; a trial
    # that ended (and tore its server down) before the kill left nothing to
    # end: that run is started again from an empty store
    for attempt in range(5):
        for f in (db, db + "-wal", db + "-shm", out):
            if os.path.exists(f):
                os.unlink(f)
        p = subprocess.Popen([d.goodput, "tune", "-q", "--no-report", "--db", db, path], env=d.env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            orphans = wait_until("a server deployed", lambda: sims_in(out, [p.pid]), 120, 0.01)
            time.sleep(random.uniform(0, 1.0))
            p.kill()
            p.wait()
        finally:
            if p.poll() is None:
                p.kill()
        time.sleep(1)
        orphans = [o for o in orphans if not zombie(o)]
        if orphans:
            break
    check(orphans, "the server outside the deploy command's group ended by itself, in 5 runs")
    r = subprocess.run([d.goodput, "tune", "--no-report", "--db", db, "--resume", "oc"], env=d.env,
                       capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, "resume: %s" % r.stderr)
    check("teardown command ended what an earlier run left" in r.stderr, r.stderr)
    left = [o for o in orphans if not zombie(o)]
    check(not left, "the server the killed tune left deployed still runs: %s" % left)
    rows = db_rows(db, "select seq, kind, knobs, state from trials order by seq")
    trials_ok([{"seq": s, "kind": k, "knobs": json.loads(kn), "state": st} for s, k, kn, st in rows])
    check(not sims_in(out), "a server still runs after the study")


def case_pid_reuse(make, tmp):
    """A recorded process group whose pid the kernel has since given to
    another program: the restarted goodputd killed it as an orphan. Now the
    group's leader's identity is recorded with it, and a stranger is
    never killed."""
    d = make(name="pr").start()
    logs = os.path.join(d.state, "logs")
    db = os.path.join(d.state, "goodput.db")
    check(d.request({"command": "submit", "study": tiny_spec("pr", trials=3)})["ok"], "submit")
    wait_until("a server spawned", lambda: sims_in(logs, [d.proc.pid]), 120, 0.01)
    d.stop(sig=signal.SIGKILL)
    # the server ended (its keeper ends it; made sure of here)
    kill_all(holders_of(logs))
    wait_until("the server gone", lambda: not holders_of(logs) and [1], GONE_SECONDS)
    # the same pid for another program: a stranger that leads a group of its own
    stranger = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        con = sqlite3.connect(db, timeout=10)
        n = con.execute("update trials set server_pgid = ? where server_pgid is not null",
                        (stranger.pid,)).rowcount
        con.commit()
        con.close()
        check(n >= 1, "no server recorded")
        d.start()
        d.wait_state("pr", ["done"], 300)
        check(stranger.poll() is None, "goodputd killed a process that was not its server (pid %d)" % stranger.pid)
        check("killed the orphaned server" not in d.log(), d.log())
    finally:
        stranger.kill()
        stranger.wait()


# ---- item 2: one writer per database, whatever path names it ----


def case_lock_links(make, tmp):
    """Through a symlinked or hard-linked database a second `goodput tune`
    wrote into the live one, and a second goodputd killed the first one's
    server as an orphan. Now the file itself is locked: both are refused,
    naming the first goodputd, and its server lives on."""
    a = make(name="la").start()
    logs = os.path.join(a.state, "logs")
    db = os.path.join(a.state, "goodput.db")
    check(a.request({"command": "submit", "study": tiny_spec("la", trials=3)})["ok"], "submit")
    sims = wait_until("a server spawned", lambda: sims_in(logs, [a.proc.pid]), 120, 0.01)
    other = os.path.join(tmp, "other")
    os.mkdir(other)
    links = {"symlink": os.path.join(other, "sym.db"), "hard link": os.path.join(other, "hard.db")}
    os.symlink(db, links["symlink"])
    os.link(db, links["hard link"])
    spec = write_spec(tmp, tiny_spec("intruder", trials=1))
    for how, path in links.items():
        r = subprocess.run([a.goodput, "tune", "-q", "--dry-run", "--db", path, spec], env=a.env,
                           capture_output=True, text=True, timeout=60)
        check(r.returncode != 0 and ("goodputd (pid %d) is writing to it" % a.proc.pid) in r.stderr,
              "a tune through a %s: exit %d: %s" % (how, r.returncode, r.stderr))
    # a second goodputd whose state directory holds a hard link to the live database
    b = make(name="lb")
    os.makedirs(b.state)
    os.link(db, os.path.join(b.state, "goodput.db"))
    b.start(wait=False)
    rc = b.proc.wait(30)
    check(rc != 0 and ("another goodputd (pid %d)" % a.proc.pid) in b.log(), "second daemon: %s\n%s" % (rc, b.log()))
    check("orphan" not in b.log(), b.log())
    alive = [p for p in sims if not zombie(p)]
    if not alive:
        # gone: only its own daemon's teardown, after the trial was measured,
        # may have ended it (a server killed under it fails the trial)
        first = wait_until("the first trial ended", lambda: [
            r[0] for r in db_rows(db, "select state from trials order by id limit 1")
            if r[0] not in ("pending", "deploying", "probing")], 60)
        check(first == ["done"], "the first daemon's server %s was killed: its trial %s" % (sims, first))
    names = [r[0] for r in db_rows(db, "select name from studies")]
    check(names == ["la"], "studies in the live database: %s" % names)
    a.wait_state("la", ["done"], 300)
    trials_ok(a.request({"command": "trials", "study": "la"})["trials"])


# ---- item 3: a deleted WAL or database ----


def case_wal_deleted(make, tmp):
    """goodput.db-wal removed while goodputd ran: it went on reporting its
    trials, and after kill -9 and restart there were 0 studies, nothing
    logged. Now the journal says so at once, what the WAL held is written
    back, and a kill -9 and restart loses nothing."""
    d = make(name="wd").start()
    db = os.path.join(d.state, "goodput.db")
    check(d.request({"command": "submit", "study": tiny_spec("wd", trials=3)})["ok"], "submit")
    d.wait_state("wd", ["done"], 300)
    before = d.request({"command": "trials", "study": "wd"})["trials"]
    check(len(before) >= 3, before)
    os.unlink(db + "-wal")
    wait_until("the journal names the removed WAL",
               lambda: "goodput.db-wal was removed" in d.log() and "nothing was lost" in d.log(), 30)
    check(d.request({"command": "submit", "study": tiny_spec("wd2", trials=2)})["ok"], "submit after")
    d.wait_state("wd2", ["done"], 300)
    d.stop(sig=signal.SIGKILL)
    d.start()
    studies = [s["name"] for s in d.request({"command": "list"})["studies"]]
    check(studies == ["wd", "wd2"], "after kill -9 and restart: studies %s" % studies)
    after = d.request({"command": "trials", "study": "wd"})["trials"]
    check(len(after) == len(before), "trials of wd: %d, were %d" % (len(after), len(before)))


def case_db_deleted(make, tmp):
    """goodput.db itself removed while goodputd ran: it went on answering
    with figures no file held. Now the journal and status say so, every
    query refuses naming the copy of what it still had, no work is taken,
    and the copy holds every trial."""
    d = make(name="dd").start()
    db = os.path.join(d.state, "goodput.db")
    check(d.request({"command": "submit", "study": tiny_spec("dd", trials=2)})["ok"], "submit")
    d.wait_state("dd", ["done"], 300)
    n = len(d.request({"command": "trials", "study": "dd"})["trials"])
    os.unlink(db)
    st = wait_until("status says the database is lost",
                    lambda: (lambda r: r if r.get("state") == "failed" else None)(d.request({"command": "status"})),
                    30)
    check("was removed while it was open" in st["status"], st)
    r = d.request({"command": "trials", "study": "dd"})
    check(not r["ok"] and "saved as" in r["error"], "trials answered from a removed database: %s" % r)
    r = d.request({"command": "submit", "study": tiny_spec("late", trials=1)})
    check(not r["ok"], "work taken on a lost database: %s" % r)
    check("was removed while it was open" in d.log(), d.log())
    copy = st["status"].split("saved as ", 1)[1].split(";", 1)[0]
    rows = db_rows(copy, "select count(*) from trials")
    check(rows[0][0] == n, "the copy holds %d trials, not %d" % (rows[0][0], n))


# ---- item 6: a full disk ----


def case_disk_full(make, tmp):
    """The disk of the state directory full: the daemon looped resume→fail
    1,565 times in 11 s, and the study stayed failed once there was space
    again. Now it waits ('waiting: ... disk full' in status), backing off,
    never fails the study for it, and finishes it once there is space; so
    does a `goodput tune` whose database is on the same disk ('waiting: disk
    full' on stderr, then exit 0). A real file system fills: a 24 MiB tmpfs,
    in a mount namespace of the test's own."""
    if os.environ.get("GOODPUT_TEST_UNSHARED") != "1":
        raise TestFailure("not in a mount namespace of its own")
    state = os.path.join(tmp, "full")
    os.mkdir(state)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m,mode=0755", "tmpfs", state], capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise SkipTest("cannot mount a tmpfs: %s" % r.stderr.strip())
    d = make(name="df")
    d.state = os.path.join(state, "state")
    d.start()
    check(d.request({"command": "submit", "study": tiny_spec("df", trials=6)})["ok"], "submit")
    d.wait_phase(["probing"], min_trial=2, seconds=180)
    tune_db = os.path.join(state, "tune.db")
    tune_err = open(os.path.join(tmp, "tune.err"), "w+")
    tune = subprocess.Popen([d.goodput, "tune", "--no-report", "--db", tune_db,
                             write_spec(tmp, tiny_spec("dft", trials=4))], env=d.env, stdout=subprocess.DEVNULL,
                            stderr=tune_err)
    atexit.register(lambda: tune.poll() is None and tune.kill())  # a failed check leaves it running
    def tune_done():
        try:  # the file is there before its tables
            return db_rows(tune_db, "select count(*) from trials where state = 'done'")[0][0] >= 1
        except sqlite3.Error:
            return False

    wait_until("goodput tune's first trial", tune_done, 120)
    check(tune.poll() is None, "goodput tune ended before the disk filled")
    filler = os.path.join(state, "filler")
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * (1 << 16))
                f.flush()
        except OSError:
            pass
    t_full = time.monotonic()
    st = wait_until("status says waiting: disk full",
                    lambda: (lambda r: r if "disk full" in r.get("status", "") else None)(
                        d.request({"command": "status"})), 120)
    check(st["state"] == "waiting", st)
    t_waiting = time.monotonic() - t_full
    states = set()
    while time.monotonic() - t_full < 25:
        states.update(s["state"] for s in d.request({"command": "list"})["studies"])
        time.sleep(0.5)
    check("failed" not in states, "the study was failed for a full disk: %s" % states)
    attempts = d.log().count("study df: resuming")
    check(attempts <= 8, "%d attempts in 25 s of a full disk: a loop" % attempts)
    tune_err.seek(0)
    tune_waits = tune_err.read().count("waiting: disk full")
    check(tune.poll() is None and 1 <= tune_waits <= 8,
          "goodput tune on a full disk: exit %s, %d waits in 25 s" % (tune.poll(), tune_waits))
    os.unlink(filler)
    t_free = time.monotonic()
    d.wait_state("df", ["done"], 400)
    check(tune.wait(400) == 0, "goodput tune after the disk had room again: exit %s" % tune.returncode)
    rows = db_rows(tune_db, "select seq, kind, knobs, state from trials order by seq")
    trials_ok([{"seq": s, "kind": k, "knobs": json.loads(kn), "state": st} for s, k, kn, st in rows])
    check(len(rows) == 4 and db_rows(tune_db, "select state from studies") == [("done",)],
          "goodput tune's study: %d trials, %s" % (len(rows), db_rows(tune_db, "select state from studies")))
    trials = d.request({"command": "trials", "study": "df"})["trials"]
    trials_ok(trials)
    check(not [t for t in trials if "disk" in (t.get("failure_message") or "")],
          "a trial failed for the disk: %s" % trials)
    print("disk-full: '%s' %.1f s after the disk filled; %d resume attempts in 25 s of a full disk, states seen %s; "
          "done %.1f s after space returned, %d trials; goodput tune waited %d times and finished its %d" %
          (st["status"], t_waiting, attempts, sorted(states), time.monotonic() - t_free, len(trials), tune_waits,
           len(rows)))
    d.stop()
    subprocess.run(["umount", "-l", state])


# ---- item 7: the budget ----


def case_budget(make, tmp):
    """With --parallel 2, max_trials 1, 2, 3 gave 2, 3, 4 deployments (an
    extra measurement of the answer alone). Now exactly 1, 2, 3 with any
    --parallel from 1 to 4 (on 4 GPUs) in virtual time, 4 and 5 where the
    search keeps confirmations of its own, and so in real time side by
    side with 2 and 4."""
    d = make(name="bu")
    spec = tiny_spec("bu", trials=12)
    spec["gpu"]["count"] = 4
    path = write_spec(tmp, spec)
    runs = ([(n, p, True) for n in (1, 2, 3) for p in (1, 2, 3, 4)] + [(n, p, True) for n in (4, 5) for p in (2, 4)] +
            [(n, 2, False) for n in (1, 2, 3)] + [(3, 4, False)])
    seen = []
    for n, par, dry in runs:
        db = os.path.join(tmp, "bu-%d-%d-%s.db" % (n, par, dry))
        argv = [d.goodput, "tune", "-q", "--no-report", "--parallel", str(par), "--max-trials", str(n), "--db",
                db, path] + (["--dry-run"] if dry else [])
        r = subprocess.run(argv, env=d.env, capture_output=True, text=True, timeout=300)
        check(r.returncode == 0, "%s: %s" % (" ".join(argv), r.stderr))
        kinds = [k for (k,) in db_rows(db, "select kind from trials order by seq")]
        check(len(kinds) == n, "max_trials %d, --parallel %d%s: %d deployments %s" %
              (n, par, " (dry run)" if dry else "", len(kinds), kinds))
        seen.append("%d/%d%s" % (n, par, "" if dry else " real"))
    print("budget: deployments == max_trials for (max_trials/--parallel) %s" % ", ".join(seen))


CASES = {
    "orphan-daemon": case_orphan_daemon,
    "orphan-tune": case_orphan_tune,
    "orphan-command": case_orphan_command,
    "orphan-tune-disagg": case_orphan_tune_disagg,
    "orphan-daemon-disagg": case_orphan_daemon_disagg,
    "disagg-sglang": case_disagg_sglang,
    "pid-reuse": case_pid_reuse,
    "lock-links": case_lock_links,
    "wal-deleted": case_wal_deleted,
    "db-deleted": case_db_deleted,
    "disk-full": case_disk_full,
    "budget": case_budget,
}

if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[3] == "disk-full" and os.environ.get("GOODPUT_TEST_UNSHARED") != "1":
        # a mount namespace of its own: the tmpfs goes with the test, however it ends
        if os.geteuid() != 0 or not shutil.which("unshare"):
            print("SKIP: the disk-full case mounts a tmpfs: it needs root and unshare(1)")
            sys.exit(77)
        os.environ["GOODPUT_TEST_UNSHARED"] = "1"
        r = subprocess.run(["unshare", "-m", "--propagation", "private", sys.executable] + sys.argv)
        sys.exit(r.returncode)
    sys.exit(run(CASES, sys.argv))
