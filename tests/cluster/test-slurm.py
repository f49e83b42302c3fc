#!/usr/bin/env python3
"""test-slurm.py — a study whose trials are jobs on a real Slurm cluster.

The cluster is this machine: munged, slurmctld and slurmd from Debian's
slurm-wlm and munge, started on a private socket, ports and scratch folder
with a generated slurm.conf — one node, 8 emulated GPUs (GRES over device
files made with mknod, a /dev/null twin), no cgroups, CPUs=8 with
SlurmdParameters=config_overrides and jobs at --cpus-per-task=1, so that
GPUs, not cores, decide who waits. goodput-sim serves every trial; its GPU
ledger (lock files per GPU index, CUDA_VISIBLE_DEVICES) refuses a GPU two
servers would share.

Shown, in order:
  missing   without sbatch in PATH the study fails at once, saying so;
  pending   goodputd's status shows a TP 4 trial's job queued (Slurm's reason
            Resources) while a foreign job holds 6 of the 8 GPUs; its wait is
            recorded apart from its deploy time, and it runs on 4 GPUs;
  cluster   goodput tune on the cluster, side by side: a job scancel'ed
            mid-probe is classified (lost) and its trial redone, never
            measured; goodput is killed with SIGKILL mid-study, the jobs it
            left and one submitted but never recorded (found by its comment)
            are cancelled by --resume; concurrent jobs had disjoint GPUs, each
            server as many as its TP, no server found its GPU busy; the
            answer's confirmation alone had its node to itself (sbatch
            --exclusive, which gives a job all the node's GPUs: the server
            still sees only its TP's); no job is left in the queue;
  disagg    a disaggregated trial as a prefill, a decode and a router job,
            measured, with no job left in the queue;
  answer    the cluster's answer is the local study's configuration (exec on
            an 8-GPU emulated host), or within 5 % of its cost.

Skips (77) with the reason where the daemons cannot start here (not root,
the packages missing, no mknod). Usage: test-slurm.py GOODPUT GOODPUTD
GOODPUT_SIM TUNE_ORACLE ENGINES_DIR"""
import concurrent.futures
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "daemon"))
import daemonlib  # noqa: E402

GOODPUT, GOODPUTD, SIM, ORACLE, ENGINES = [os.path.abspath(a) for a in sys.argv[1:6]]
T0 = time.monotonic()


def log(msg):
    print("[%5.1f s] %s" % (time.monotonic() - T0, msg), flush=True)


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def skip(msg):
    print("SKIP: " + msg, flush=True)
    sys.exit(77)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """munged, slurmctld and slurmd of this test only."""

    def __init__(self, tmp):
        self.dir = os.path.join(tmp, "cluster")
        for d in ("munge", "state", "spool", "log", "dev"):
            os.makedirs(os.path.join(self.dir, d), mode=0o755)
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        self.pids = []

    def write_config(self):
        for i in range(8):
            path = os.path.join(self.dir, "dev", "gpu%d" % i)
            try:
                os.mknod(path, 0o600 | 0o020000, os.makedev(1, 3))
            except OSError as e:
                skip("cannot make the emulated GPUs' device files (mknod %s: %s)" % (path, e))
        d = self.dir
        with open(self.conf, "w") as f:
            f.write("\n".join([
                "ClusterName=gp%d" % os.getpid(),
                "SlurmctldHost=localhost",
                "SlurmctldPort=%d" % free_port(),
                "SlurmdPort=%d" % free_port(),
                "AuthType=auth/munge",
                "AuthInfo=socket=%s/munge/socket" % d,
                "CredType=cred/munge",
                "SlurmUser=root",
                "SlurmdUser=root",
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_Core",
                "GresTypes=gpu",
                "SlurmdParameters=config_overrides",
                "MpiDefault=none",
                "ReturnToService=2",
                "KillWait=5",
                "AccountingStorageType=accounting_storage/none",
                "JobCompType=jobcomp/none",
                "StateSaveLocation=%s/state" % d,
                "SlurmdSpoolDir=%s/spool" % d,
                "SlurmctldPidFile=%s/slurmctld.pid" % d,
                "SlurmdPidFile=%s/slurmd.pid" % d,
                "SlurmctldLogFile=%s/log/slurmctld.log" % d,
                "SlurmdLogFile=%s/log/slurmd.log" % d,
                "NodeName=localhost CPUs=8 RealMemory=4000 Gres=gpu:8 State=UNKNOWN",
                "PartitionName=gpu Nodes=localhost Default=YES MaxTime=INFINITE State=UP",
                ""]))
        with open(os.path.join(d, "gres.conf"), "w") as f:
            f.write("NodeName=localhost Name=gpu File=%s/dev/gpu[0-7]\n" % d)

    def start(self):
        self.write_config()
        key = os.path.join(self.dir, "munge", "key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o600)
        m = os.path.join(self.dir, "munge")
        r = subprocess.run(["munged", "--force", "--socket=%s/socket" % m, "--key-file=%s" % key,
                            "--pid-file=%s/pid" % m, "--log-file=%s/log" % m, "--seed-file=%s/seed" % m],
                           capture_output=True, text=True)
        if r.returncode != 0:
            skip("munged does not start here: %s" % r.stderr.strip())
        self.pids.append(os.path.join(m, "pid"))
        for argv, pid in ((["slurmctld"], "slurmctld.pid"), (["slurmd", "-N", "localhost"], "slurmd.pid")):
            r = subprocess.run(argv, env=self.env, capture_output=True, text=True)
            self.pids.append(os.path.join(self.dir, pid))
            if r.returncode != 0:
                skip("%s does not start here: %s %s" % (argv[0], r.stderr.strip(), self.logs()))
        end = time.monotonic() + 30
        while time.monotonic() < end:
            r = subprocess.run(["sinfo", "--json"], env=self.env, capture_output=True, text=True)
            if r.returncode == 0:
                nodes = json.loads(r.stdout).get("nodes", [])
                if nodes and nodes[0].get("state") == "idle" and nodes[0].get("gres") == "gpu:8":
                    return
            time.sleep(0.3)
        skip("the node never became idle with 8 GPUs: %s" % self.logs())

    def logs(self):
        out = []
        for name in ("slurmctld.log", "slurmd.log"):
            try:
                with open(os.path.join(self.dir, "log", name)) as f:
                    out.append(name + ":\n" + "".join(f.readlines()[-15:]))
            except OSError:
                pass
        return "\n".join(out)

    def jobs(self):
        r = subprocess.run(["squeue", "--json"], env=self.env, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            fail("squeue --json: %s" % r.stderr)
        return {j["job_id"]: j for j in json.loads(r.stdout)["jobs"]}

    def live_jobs(self):
        return {i: j for i, j in self.jobs().items() if j["job_state"] in ("PENDING", "RUNNING", "CONFIGURING",
                                                                            "COMPLETING", "SUSPENDED")}

    def submit(self, script_text, *args):
        path = os.path.join(self.dir, "job-%d.sh" % len(os.listdir(self.dir)))
        with open(path, "w") as f:
            f.write(script_text)
        os.chmod(path, 0o755)
        r = subprocess.run(["sbatch", "--parsable", "--output=/dev/null", "--cpus-per-task=1"] + list(args) + [path],
                           env=self.env, capture_output=True, text=True)
        if r.returncode != 0:
            fail("sbatch: %s" % r.stderr)
        return int(r.stdout.strip().split(";")[0])

    def stop(self):
        subprocess.run(["scancel", "--me"], env=self.env, capture_output=True)
        end = time.monotonic() + 20
        while time.monotonic() < end:
            try:
                if not self.live_jobs():
                    break
            except BaseException:
                break
            time.sleep(0.3)
        for pidfile in reversed(self.pids):
            try:
                with open(pidfile) as f:
                    os.kill(int(f.read().strip()), signal.SIGTERM)
            except (OSError, ValueError):
                pass


def db_rows(db, sql, *args):
    """Rows of the store (none while it does not exist yet)."""
    try:
        con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=10)
    except sqlite3.OperationalError:
        return []
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute(sql, args)]
    except sqlite3.OperationalError:
        return []
    finally:
        con.close()


def spec(tmp, name, method, **over):
    s = {
        "name": name,
        "engine": "sim",
        "model": {"name": "llama-3.1-8b"},
        "quantizations": ["none", "fp8", "awq"],
        "gpu": {"type": "L40S", "count": 8, "price_per_gpu_hour": 0.99},
        "search_space": {
            "max_num_seqs": {"min": 16, "max": 128, "scale": "log2"},
            "max_num_batched_tokens": [1024, 2048],
            "quantization": ["fp8", "awq"],
            "max_model_len": [4096],
            "tensor_parallel": [1, 2],
        },
        "workload": {"dataset": "random", "input_len": 256, "output_len": 32, "range_ratio": 0.25,
                     "num_prompts": 60, "ignore_eos": True, "seed": 7},
        "sla": {"ttft_ms": 500, "tpot_ms": 50, "attainment": 0.9},
        "budget": {"max_trials": 10, "parallel": "auto"},
        "probe": {"tolerance": 0.1, "max_steps": 5, "request_timeout": 30},
        "deploy": {"method": method, "startup_timeout": 60, "stop_timeout": 5},
        "search": {"seed": 1},
    }
    if method == "slurm":
        s["deploy"]["poll_interval"] = 0.5
    s.update(over)
    path = os.path.join(tmp, name + ".json")
    with open(path, "w") as f:
        json.dump(s, f)
    return path


def tune(env, tmp, *args, timeout=240):
    cmd = [GOODPUT, "tune", "--engines-dir", ENGINES, "--log-dir", os.path.join(tmp, "logs")] + list(args)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def case_missing(env, tmp):
    # only goodput's own folders in PATH: no sbatch
    bare = dict(env, PATH=os.path.dirname(GOODPUT) + ":" + os.path.dirname(SIM))
    t = time.monotonic()
    p = tune(bare, tmp, "--db", os.path.join(tmp, "missing.db"), spec(tmp, "missing", "slurm"), timeout=60)
    if p.returncode == 0 or "sbatch: not found" not in p.stderr:
        fail("without sbatch the study did not fail saying so: exit %d\n%s" % (p.returncode, p.stderr))
    if db_rows(os.path.join(tmp, "missing.db"), "SELECT * FROM trials"):
        fail("without sbatch a trial was recorded")
    log("missing: without sbatch the study failed at once (%.1f s): %s" %
        (time.monotonic() - t, [l for l in p.stderr.splitlines() if "sbatch" in l][0].strip()))


def case_pending(env, tmp, cluster):
    # the foreign job holds its GPUs until the TP 4 job has been seen waiting
    # (a loaded machine plans and submits late), then ends
    foreign = cluster.submit("#!/bin/sh\nexec sleep 300\n", "--gres=gpu:6", "--job-name=foreign")
    d = daemonlib.Daemon(GOODPUTD, GOODPUT, tmp, name="d", env=env,
                         config={"engines_dir": ENGINES})
    d.start()
    try:
        path = spec(tmp, "tp4", "slurm", search_space={
            "max_num_seqs": [64], "max_num_batched_tokens": [2048], "quantization": ["fp8"],
            "max_model_len": [4096], "tensor_parallel": [4]}, budget={"max_trials": 1, "parallel": 1})
        d.client("submit", path, check_rc=0)
        seen = None
        end = time.monotonic() + 180
        while time.monotonic() < end and not seen:
            cur = d.request({"command": "status"}).get("current") or {}
            for t in cur.get("trials", []):
                if t["phase"] == "queued" and t.get("job_id") and t.get("pending_seconds", 0) >= 2 \
                        and t.get("pending_reason") == "Resources":
                    seen = t
            time.sleep(0.2)
        if not seen:
            fail("goodputd's status never showed the TP 4 job queued for Resources:\n%s" % d.log())
        text = d.client("status", check_rc=0).stdout
        if "queued" not in text or "job %d, pending" % seen["job_id"] not in text:
            fail("goodput status does not show the pending job:\n%s" % text)
        line = [l for l in text.splitlines() if "(job %d" % seen["job_id"] in l][0].strip()
        log("pending: goodput status while a foreign job holds 6 GPUs: %s" % line)
        time.sleep(max(0.0, 4.5 - seen.get("pending_seconds", 0)))
        subprocess.run(["scancel", str(foreign)], env=cluster.env, check=True)
        d.wait_state("tp4", ("done", "failed"), seconds=90)
        rows = d.request({"command": "trials", "study": "tp4"})["trials"]
        t = rows[0]
        if t["state"] != "done":
            fail("the TP 4 trial ended %s: %s" % (t["state"], t.get("failure_message")))
        if t.get("pending_seconds") is None or t["pending_seconds"] < 4:
            fail("the TP 4 trial's wait for 4 GPUs was not recorded: %s" % t)
        if t["deploy_seconds"] > 5:
            fail("the wait for resources counted as deploy time: %s" % t)
        if len(t.get("gpus", "").split(",")) != 4:
            fail("the TP 4 trial did not run on 4 GPUs: %s" % t.get("gpus"))
        job = cluster.jobs().get(t["job_id"])
        if not job or job["job_state"] != "CANCELLED":
            fail("the TP 4 trial's job %s did not end by goodput's scancel: %s" % (t["job_id"], job))
        log("pending: TP 4 job %d waited %.1f s for 4 free GPUs (%s), deployed in %.2f s on GPUs %s" %
            (t["job_id"], t["pending_seconds"], seen["pending_reason"], t["deploy_seconds"], t["gpus"]))
    finally:
        d.stop()
        subprocess.run(["scancel", str(foreign)], env=cluster.env, capture_output=True)


def running(t):
    """When a trial's job held its GPUs, as the store tells: from the job's
    start (the trial's start plus its wait in the queue) to its outcome
    (the job ends after it, torn down)."""
    return t["started_usec"] + int(t["pending_seconds"] * 1e6), t["finished_usec"]


def overlapping(ts):
    """The trial pairs whose jobs ran at once on one node and shared a GPU."""
    shared = []
    for i, a in enumerate(ts):
        for b in ts[i + 1:]:
            (a0, a1), (b0, b1) = running(a), running(b)
            if not (a0 < b1 and b0 < a1):
                continue
            if a["job_node"] == b["job_node"] and set(a["gpus"].split(",")) & set(b["gpus"].split(",")):
                shared.append((a["seq"], a["gpus"], b["seq"], b["gpus"]))
    return shared


def case_cluster(env, tmp, cluster):
    db = os.path.join(tmp, "cluster.db")
    path = spec(tmp, "cluster", "slurm")
    out = open(os.path.join(tmp, "tune-1.log"), "w")
    cmd = [GOODPUT, "tune", "--engines-dir", ENGINES, "--log-dir", os.path.join(tmp, "logs"), "--db", db, path]
    p = subprocess.Popen(cmd, env=env, stdout=out, stderr=out)

    def wait_rows(sql, what, seconds=90):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            rows = db_rows(db, sql)
            if rows:
                return rows
            if p.poll() is not None:
                fail("goodput tune ended (%d) before %s:\n%s" % (p.returncode, what, open(out.name).read()[-3000:]))
            time.sleep(0.1)
        fail("no %s within %d s" % (what, seconds))

    # a job scancel'ed while its trial probes
    victim = wait_rows("SELECT seq, job_id FROM trials WHERE state = 'probing' AND job_id IS NOT NULL", "probing job")[0]
    subprocess.run(["scancel", str(victim["job_id"])], env=cluster.env, check=True)
    wait_rows("SELECT seq FROM trials WHERE seq = %d AND job_lost >= 1" % victim["seq"], "lost job counted", 120)
    log("cluster: job %d of trial %d scancel'ed mid-probe" % (victim["job_id"], victim["seq"]))
    # kill -9 while jobs run
    live = wait_rows("SELECT seq, job_id FROM trials WHERE state IN ('deploying', 'probing') AND job_id IS NOT NULL"
                     " AND (SELECT COUNT(*) FROM trials WHERE state IN ('deploying', 'probing')"
                     " AND job_id IS NOT NULL) >= 2", "two jobs running")
    p.send_signal(signal.SIGKILL)
    p.wait()
    out.close()
    queue = cluster.jobs()
    left = [r["job_id"] for r in live if queue.get(r["job_id"], {}).get("job_state") in ("RUNNING", "PENDING")]
    if not left:
        fail("after kill -9 no job of the study was left running to clean up: %s" % live)
    created = db_rows(db, "SELECT created_usec FROM studies WHERE name = 'cluster'")[0]["created_usec"]
    orphan = cluster.submit("#!/bin/sh\nexec sleep 300\n", "--comment=goodput:cluster:%d:99" % created,
                            "--job-name=goodput-cluster-99")
    log("cluster: goodput killed with SIGKILL; its jobs %s still run, and job %d was submitted but never recorded"
        % (left, orphan))
    r = tune(env, tmp, "--db", db, "--resume", "cluster", timeout=600)
    with open(os.path.join(tmp, "tune-2.log"), "w") as f:
        f.write(r.stdout + r.stderr)
    if r.returncode != 0:
        fail("goodput tune --resume failed (%d):\n%s" % (r.returncode, r.stderr[-3000:]))
    line = [l for l in r.stderr.splitlines() if "cancelling" in l]
    if not line:
        fail("--resume did not cancel the jobs left behind:\n%s" % r.stderr[-2000:])
    queue = cluster.jobs()
    for j in left + [orphan]:
        if queue.get(j, {}).get("job_state") != "CANCELLED":
            fail("job %d was left behind: %s" % (j, queue.get(j, {}).get("job_state")))
    log("cluster: --resume: %s" % line[0].split(": ", 1)[1])

    ts = db_rows(db, "SELECT * FROM trials ORDER BY seq")
    bad = [(t["seq"], t["state"], t["failure_message"]) for t in ts if t["state"] not in ("done", "infeasible")]
    if bad:
        fail("trials not measured: %s" % bad)
    redone = [t for t in ts if t["seq"] == victim["seq"]][0]
    if redone["job_lost"] < 1 or redone["job_id"] == victim["job_id"] or redone["state"] != "done":
        fail("the trial whose job was cancelled was not redone as a new job: %s" % redone)
    if "was ended by the cluster (Slurm CANCELLED" not in open(os.path.join(tmp, "tune-1.log")).read():
        fail("the cancelled job was not classified as ended by the cluster")
    shared = overlapping(ts)
    if shared:
        fail("concurrent jobs shared a GPU: %s" % shared)
    most = 0
    for t in ts:
        with open(t["log_path"]) as f:
            text = f.read()
        if "job-exec: job %d on %s (GPUs %s)" % (t["job_id"], t["job_node"], t["gpus"]) not in text:
            fail("trial %d: its server did not run on the GPUs recorded (%s):\n%s" % (t["seq"], t["gpus"], text[:800]))
        if " busy" in text:
            fail("trial %d: a server found its GPU busy:\n%s" % (t["seq"], text[-800:]))
        tp = json.loads(t["knobs"])["tensor_parallel"]
        if len(t["gpus"].split(",")) != tp:
            fail("trial %d (TP %d) ran on GPUs %s" % (t["seq"], tp, t["gpus"]))
        at_once = sum(1 for u in ts if running(u)[0] <= running(t)[0] < running(u)[1])
        most = max(most, at_once)
    if most < 3:
        fail("at most %d trials ran at once on 8 GPUs" % most)
    # the answer's confirmation alone: its job had the node to itself
    alone = [t for t in ts if "confirm" in t["kind"] and "search-confirm" not in t["kind"]]
    if not alone:
        fail("the answer was never confirmed alone: %s" % [(t["seq"], t["kind"]) for t in ts])
    for a in alone:
        beside = [u["seq"] for u in ts if u is not a and u["job_node"] == a["job_node"]
                  and running(u)[0] < running(a)[1] and running(a)[0] < running(u)[1]]
        if beside:
            fail("trial %d, a confirmation alone, shared its node with trials %s" % (a["seq"], beside))
    live = cluster.live_jobs()
    if live:
        fail("jobs left in the queue after the study: %s" % {i: j["name"] for i, j in live.items()})
    best = db_rows(db, "SELECT t.* FROM studies s JOIN trials t ON t.id = s.best_trial_id")[0]
    log("cluster: %d trials (%d at once at most, GPUs disjoint per node), trial %d redone as job %d, answer %s; "
        "no job left in the queue" % (len(ts), most, victim["seq"], redone["job_id"], best["canonical_key"]))
    return best["canonical_key"]


def case_disagg(env, tmp, cluster):
    """One disaggregated trial as Slurm jobs: a prefill job and a decode job
    (a GPU each), then the router's job (none); the trial is measured
    through the router, each role's log names its job, and no job is left
    in the queue."""
    db = os.path.join(tmp, "disagg.db")
    path = spec(tmp, "disagg", "slurm", quantizations=["none"],
                search_space={"prefill_workers": [1], "prefill_tensor_parallel": [1], "decode_workers": [1],
                              "decode_tensor_parallel": [1]},
                budget={"max_trials": 1, "parallel": 1}, baseline=False, sweep=False,
                deploy={"method": "slurm", "startup_timeout": 60, "stop_timeout": 5, "poll_interval": 0.5,
                        "shape": "disaggregated"})
    t = time.monotonic()
    r = tune(env, tmp, "-q", "--no-report", "--db", db, path)
    if r.returncode != 0:
        fail("the disaggregated study failed (%d):\n%s" % (r.returncode, r.stderr[-3000:]))
    ts = db_rows(db, "SELECT * FROM trials ORDER BY seq")
    pd = [t_ for t_ in ts if json.loads(t_["knobs"]).get("shape") == "disaggregated"]
    if not pd or pd[0]["state"] != "done" or not pd[0]["cost_per_mtok"]:
        fail("no disaggregated trial measured: %s" % [(t_["seq"], t_["knobs"], t_["state"]) for t_ in ts])
    base = pd[0]["log_path"].rsplit(".", 1)[0]
    for role in ("prefill-0", "decode-0", "router"):
        with open("%s.%s.log" % (base, role)) as f:
            text = f.read()
        if "job-exec: job " not in text:
            fail("%s: its log names no job:\n%s" % (role, text[:800]))
    if db_rows(db, "SELECT * FROM trial_servers"):
        fail("role servers still recorded after the study")
    live = cluster.live_jobs()
    if live:
        fail("jobs left in the queue after the disaggregated study: %s" % {i: j["name"] for i, j in live.items()})
    log("disagg: trial %d as a prefill, a decode and a router job, $%.4f/Mtok, in %.0f s; no job left" %
        (pd[0]["seq"], pd[0]["cost_per_mtok"], time.monotonic() - t))


def case_local(env, tmp):
    db = os.path.join(tmp, "local.db")
    path = spec(tmp, "local", "exec")
    t = time.monotonic()
    # beside the cluster cases, on a machine other tests share: its wait is the test's
    r = tune(env, tmp, "--db", db, path, timeout=420)
    if r.returncode != 0:
        fail("the local study failed (%d):\n%s" % (r.returncode, r.stderr[-3000:]))
    best = db_rows(db, "SELECT t.* FROM studies s JOIN trials t ON t.id = s.best_trial_id")[0]
    log("local: %s in %.0f s" % (best["canonical_key"], time.monotonic() - t))
    return best["canonical_key"], path


def main():
    if os.geteuid() != 0:
        skip("slurmd and slurmctld run as root here (this test starts its own cluster)")
    missing = [p for p in ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo")
               if not shutil.which(p, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")]
    if missing:
        skip("not installed: %s (Debian: slurm-wlm, munge; scripts/debian-packages)" % ", ".join(missing))
    tmp = tempfile.mkdtemp(prefix="goodput-slurm-")
    os.chmod(tmp, 0o755)
    env = dict(os.environ)
    env["PATH"] = ":".join([os.path.dirname(GOODPUT), os.path.dirname(SIM), env.get("PATH", ""), "/usr/sbin"])
    env["GOODPUT_SIM_GPU_LEDGER"] = os.path.join(tmp, "ledger")
    os.makedirs(env["GOODPUT_SIM_GPU_LEDGER"])
    os.environ["PATH"] = env["PATH"]
    case_missing(dict(env), tmp)
    # The local study runs meanwhile, on an emulated host of its own (its
    # own GPU ledger): the test runs alone, and most of it waits on Slurm.
    local_env = dict(env, GOODPUT_SIM_GPU_LEDGER=os.path.join(tmp, "ledger-local"))
    os.makedirs(local_env["GOODPUT_SIM_GPU_LEDGER"])
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    local_study = pool.submit(case_local, local_env, tmp)
    cluster = Cluster(tmp)
    env["SLURM_CONF"] = cluster.conf
    try:
        cluster.start()
        log("a cluster of one node with 8 emulated GPUs is up (%s)" % cluster.conf)
        case_pending(env, tmp, cluster)
        answer = case_cluster(env, tmp, cluster)
        case_disagg(env, tmp, cluster)
    except daemonlib.TestFailure as e:
        fail(str(e))
    finally:
        cluster.stop()
    local, path = local_study.result()  # a failure there (SystemExit) is raised here
    pool.shutdown()
    if answer != local:
        o = json.loads(subprocess.check_output([ORACLE, path, ENGINES], env=env, text=True))
        costs = {c["key"]: c.get("cost") for c in o["configs"]}
        if costs[answer] > costs[local] * 1.05:
            fail("the cluster answered %s ($%.4f), the local study %s ($%.4f): more than 5 %% apart" %
                 (answer, costs[answer], local, costs[local]))
        log("answer: the cluster's %s is within %.1f %% of the local %s" %
            (answer, (costs[answer] / costs[local] - 1) * 100, local))
    else:
        log("answer: the cluster and the local study chose the same configuration")
    shutil.rmtree(tmp, ignore_errors=True)
    log("done")


main()
