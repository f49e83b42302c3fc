#!/usr/bin/env python3
"""test-tune-tty.py — goodput tune on a terminal, as an operator watches it:
one status line rewritten in place that names the trial of its budget
("trial 2/4") and an ETA, and every log line (the search's own words, the
report's path) on a line of its own, never glued to the end of the status
line. Runs a 4-trial dry run (virtual time) under a pseudo-terminal; and
again into a pipe, as a log file keeps it, where each measured trial's line
ends with the ETA.

usage: test-tune-tty.py GOODPUT STUDY.json
"""
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

goodput, study = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
CLEAR = "\r\x1b[K"
tmp = tempfile.mkdtemp(prefix="goodput-tune-tty-")
db = os.path.join(tmp, "t.db")

pid, fd = pty.fork()
if pid == 0:
    os.chdir(tmp)
    os.execv(goodput, [goodput, "tune", "--dry-run", "--db", db, "--no-report", "--max-trials", "4", study])
out = b""
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    r, _, _ = select.select([fd], [], [], 1)
    if not r:
        continue
    try:
        chunk = os.read(fd, 65536)
    except OSError:  # EIO: the child closed the terminal
        break
    if not chunk:
        break
    out += chunk
if time.monotonic() >= deadline:
    os.kill(pid, signal.SIGKILL)
_, status = os.waitpid(pid, 0)
os.close(fd)
text = out.decode("utf-8", "replace").replace("\r\n", "\n")
failures = []
if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
    failures.append(f"goodput tune exited {status}: {text[-800:]}")
# what the terminal shows of each line: what follows its last clear
shown = [line.rsplit(CLEAR, 1)[-1] for line in text.split("\n")]
glued = [line for line in shown if re.search(r"\Sgoodput: ", line)]
if glued:
    failures.append("a log line glued to the status line: %r" % glued[0])
logs = [line for line in shown if line.startswith("goodput: ")]
if not logs:
    failures.append("no log line to check (the model search says what it plans): %r" % text[-800:])
status_lines = [seg for line in text.split("\n") for seg in line.split(CLEAR) if seg.startswith("trial ")]
if not any(re.match(r"trial \d+/4 .*; ETA ", s) for s in status_lines):
    failures.append("no status line with the trial of its budget and an ETA: %r" % status_lines[:5])
# into a pipe: no status line, the ETA on each measured trial's line
p = subprocess.run([goodput, "tune", "--dry-run", "--db", os.path.join(tmp, "p.db"), "--no-report", "--max-trials",
                    "4", study], capture_output=True, text=True, timeout=120, cwd=tmp)
if p.returncode != 0 or CLEAR in p.stderr:
    failures.append(f"piped: exit {p.returncode}, a status line cleared {CLEAR in p.stderr}: {p.stderr[-600:]}")
measured = [line for line in p.stderr.splitlines() if re.match(r"trial \d+ .*: \$[\d.]+/Mtok", line)]
if not measured or not all(re.search(r"; ETA \S+$", line) for line in measured[:-1]):
    failures.append("piped: a measured trial's line without its ETA: %r" % measured)
shutil.rmtree(tmp, ignore_errors=True)
for f in failures:
    print("FAIL:", f, file=sys.stderr)
print("tune-tty:", "ok" if not failures else f"{len(failures)} failures",
      f"({len(logs)} log lines, {len(status_lines)} status lines)")
sys.exit(1 if failures else 0)
