#!/usr/bin/env python3
"""sim-ledger.py — goodput-sim behind a GPU ledger, for the tests of trials
side by side: the GPUs of CUDA_VISIBLE_DEVICES are locked (one flock per
index in the directory $SIM_LEDGER) for the server's life; a GPU another
process holds is refused as CUDA refuses a device in exclusive mode, with
"GPU n busy" in the words, and the server exits 1. Otherwise it execs
goodput-sim with the same arguments, the locks inherited.

Usage: sim-ledger.py GOODPUT_SIM ARGS..."""
import fcntl
import os
import sys

ledger = os.environ["SIM_LEDGER"]
gpus = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",") if g]
held = []
for g in gpus:
    fd = os.open(os.path.join(ledger, "gpu%s" % g), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        sys.stderr.write("RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable "
                         "(GPU %s busy)\n" % g)
        sys.exit(1)
    os.set_inheritable(fd, True)
    held.append(fd)
os.execv(sys.argv[1], sys.argv[1:])
