#!/usr/bin/env python3
"""fake-slurm.py — Slurm's client commands for the slurm deployer's test,
without a cluster: installed as sbatch, squeue, scancel, sinfo and sacct
(symbolic links; the name it is called by says which), keeping its jobs as
JSON files in $FAKE_SLURM_DIR and printing what Slurm 22.05 prints.

sbatch --parsable OPTIONS SCRIPT ARGS  records the job (PENDING) and starts a
    detached runner that waits $FAKE_SLURM_PENDING seconds (0.2; "hold": until
    released), then runs SCRIPT ARGS as the job (RUNNING, output appended to
    --output, SLURM_JOB_ID, SLURMD_NODENAME=fakenode, SLURM_SUBMIT_HOST and
    CUDA_VISIBLE_DEVICES: the N lowest GPUs of --gres=gpu:N no running job
    holds) and records how it ended
    (COMPLETED, FAILED with the wait status). $FAKE_SLURM_REFUSE makes it
    fail with that message (sbatch: error: MESSAGE).
squeue --json   every job, as {"jobs": [...]} (22.05's shapes), after
    $FAKE_SLURM_SQUEUE_DELAY seconds (0).
scancel IDS     CANCELLED: the job's process group gets SIGTERM.
sinfo --json    one node, fakenode, gpu:8 in partition gpu.
sacct --json    "Slurm accounting storage is disabled" (exit 1).
fake-slurm.py end ID STATE    the cluster ends a job (NODE_FAIL, PREEMPTED...).
fake-slurm.py release ID      a held job may run.
fake-slurm.py forget ID       the queue loses the job (its node went down with it).
fake-slurm.py cleanup [DIR]   ends everything the fake started and removes DIR:
    no job starts any more, and every process of a job's runner's session
    (the runner, the job in a process group of its own, its server) is
    killed, found by session id (the runner's PID) and $FAKE_SLURM_DIR in
    its environment — for a test killed by its timeout, whose jobs run
    outside its process group."""
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time

DIR = os.environ.get("FAKE_SLURM_DIR", "/tmp/fake-slurm")


def job_path(i):
    return os.path.join(DIR, "job-%d.json" % i)


def load(i):
    with open(job_path(i)) as f:
        return json.load(f)


def save(j):
    tmp = job_path(j["job_id"]) + ".tmp"
    with open(tmp, "w") as f:
        json.dump(j, f)
    os.rename(tmp, job_path(j["job_id"]))


def locked(fn):
    with open(os.path.join(DIR, "lock"), "a") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
        return fn()


def next_id():
    path = os.path.join(DIR, "next")
    n = int(open(path).read()) if os.path.exists(path) else 100
    with open(path, "w") as f:
        f.write(str(n + 1))
    return n


def sbatch(args):
    if os.environ.get("FAKE_SLURM_REFUSE"):
        sys.stderr.write("sbatch: error: %s\n" % os.environ["FAKE_SLURM_REFUSE"])
        return 1
    opts, i = {}, 0
    while i < len(args) and args[i].startswith("-"):
        k, _, v = args[i].partition("=")
        opts[k] = v
        i += 1
    script, sargs = args[i], args[i + 1:]
    jid = locked(next_id)
    gpus = int(opts.get("--gres", "gpu:0").split(":")[-1])  # none asked: none given
    save({"job_id": jid, "job_state": "PENDING", "state_reason": "Resources", "name": opts.get("--job-name", ""),
          "comment": opts.get("--comment", ""), "nodes": "", "user_id": os.getuid(), "exit_code": 0,
          "submit_time": int(time.time()), "start_time": 0, "gres_detail": [], "gpus": gpus,
          "output": opts.get("--output", "/dev/null"), "chdir": opts.get("--chdir", "/"),
          "script": script, "args": sargs, "pid": 0})
    pid = os.fork()
    if pid == 0:
        os.setsid()
        fd = os.open("/dev/null", os.O_RDWR)
        for k in (0, 1, 2):
            os.dup2(fd, k)
        if locked(lambda: note_runner(jid)):
            run_job(jid)
        os._exit(0)
    print(jid)
    return 0


def stopped():
    return os.path.exists(os.path.join(DIR, "stopped"))


def note_runner(jid):
    """The runner's session (its PID) goes into the job's record before it
    does anything, unless cleanup came first (both hold the lock)."""
    if stopped():
        return False
    j = load(jid)
    j["runner"] = os.getpid()
    save(j)
    return True


def idx_text(ids):
    """As Slurm prints a job's GPU indices: 0-1, or 0,2."""
    if len(ids) > 1 and ids == list(range(ids[0], ids[-1] + 1)):
        return "%d-%d" % (ids[0], ids[-1])
    return ",".join(map(str, ids))


def run_job(jid):
    pending = os.environ.get("FAKE_SLURM_PENDING", "0.2")
    end = time.monotonic() + (120 if pending == "hold" else float(pending))
    while time.monotonic() < end and not os.path.exists(os.path.join(DIR, "release-%d" % jid)):
        if load(jid)["job_state"] != "PENDING":
            return
        time.sleep(0.05)

    def start():
        j = load(jid)
        if j["job_state"] != "PENDING" or stopped():
            return None
        # the node's lowest GPUs no running job holds, as Slurm's gres plugin gives them
        held = set()
        for name in os.listdir(DIR):
            if name.startswith("job-") and name.endswith(".json") and name != "job-%d.json" % jid:
                o = load(int(name[4:-5]))
                if o["job_state"] == "RUNNING":
                    held.update(o.get("gpu_ids", []))
        ids = [g for g in range(8) if g not in held][:j["gpus"]]
        out = os.open(j["output"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        env = dict(os.environ, SLURM_JOB_ID=str(jid), SLURMD_NODENAME="fakenode", SLURM_SUBMIT_HOST="localhost")
        env.pop("CUDA_VISIBLE_DEVICES", None)
        if ids:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in ids)
        # a process group of its own (scancel signals it), in the runner's session (cleanup finds it)
        p = subprocess.Popen([j["script"]] + j["args"], cwd=j["chdir"], stdin=subprocess.DEVNULL, stdout=out,
                             stderr=out, env=env, process_group=0)
        os.close(out)
        j.update(job_state="RUNNING", state_reason="None", nodes="fakenode", start_time=int(time.time()),
                 pid=p.pid, gpu_ids=ids, gres_detail=["gpu:%d(IDX:%s)" % (j["gpus"], idx_text(ids))] if ids else [])
        save(j)
        return p

    p = locked(start)
    if not p:
        return
    status = p.wait()
    wait_status = (-status) if status < 0 else (status << 8)

    def finish():
        j = load(jid)
        if j["job_state"] == "RUNNING":
            j["job_state"] = "COMPLETED" if status == 0 else "FAILED"
        j["exit_code"] = wait_status
        j["gres_detail"] = []
        save(j)

    locked(finish)


def end_job(jid, state):
    def do():
        j = load(jid)
        if j["job_state"] in ("PENDING", "RUNNING"):
            if j["pid"]:
                try:
                    os.killpg(j["pid"], signal.SIGTERM)
                except ProcessLookupError:
                    pass
            j["job_state"] = state
            save(j)

    locked(do)


def session_of(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[3])
    except (OSError, IndexError, ValueError):
        return None


def ours(pid, marker):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            return marker in f.read().split(b"\0")
    except OSError:
        return False


def cleanup(remove):
    sessions = set()

    def stop():
        open(os.path.join(DIR, "stopped"), "w").close()
        for name in os.listdir(DIR):
            if name.startswith("job-") and name.endswith(".json"):
                runner = load(int(name[4:-5])).get("runner", 0)
                if runner > 1:
                    sessions.add(runner)

    if os.path.isdir(DIR):
        locked(stop)
    # a session id is not given to another session while a process of it
    # lives; the environment tells ours from a new one under a reused PID
    marker = ("FAKE_SLURM_DIR=" + DIR).encode()
    deadline = time.monotonic() + 10
    while sessions and time.monotonic() < deadline:
        left = [p for p in (int(d) for d in os.listdir("/proc") if d.isdigit())
                if session_of(p) in sessions and ours(p, marker)]
        if not left:
            break
        for p in left:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
    if remove:
        shutil.rmtree(remove, ignore_errors=True)
    return 0


def squeue():
    # a loaded controller: the answer takes this long
    time.sleep(float(os.environ.get("FAKE_SLURM_SQUEUE_DELAY", "0")))
    jobs = []
    for name in sorted(os.listdir(DIR)):
        if name.startswith("job-") and name.endswith(".json"):
            j = json.load(open(os.path.join(DIR, name)))
            jobs.append({k: v for k, v in j.items()
                         if k not in ("output", "chdir", "script", "args", "pid", "gpus", "gpu_ids")})
    print(json.dumps({"meta": {}, "errors": [], "jobs": jobs}))
    return 0


def main():
    cmd = os.path.basename(sys.argv[0])
    args = sys.argv[1:]
    if args[:1] == ["cleanup"]:
        return cleanup(args[1] if len(args) > 1 else None)
    os.makedirs(DIR, exist_ok=True)
    if cmd == "sbatch":
        return sbatch([a for a in args if a != "--parsable"])
    if cmd == "squeue":
        return squeue()
    if cmd == "scancel":
        for a in args:
            if os.path.exists(job_path(int(a))):
                end_job(int(a), "CANCELLED")
        return 0
    if cmd == "sinfo":
        print(json.dumps({"nodes": [{"name": "fakenode", "gres": "gpu:8", "partitions": ["gpu"]}]}))
        return 0
    if cmd == "sacct":
        sys.stderr.write("Slurm accounting storage is disabled\n")
        return 1
    if args[0] == "end":
        end_job(int(args[1]), args[2])
    elif args[0] == "release":
        open(os.path.join(DIR, "release-%s" % args[1]), "w").close()
    elif args[0] == "forget":
        end_job(int(args[1]), "NODE_FAIL")
        os.unlink(job_path(int(args[1])))
    return 0


sys.exit(main())
