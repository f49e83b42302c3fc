"""simlib.py — goodput-sim for the Python tests: started on a free loopback
port, its output in a file (so that a full pipe never stalls it), ready once
it printed vLLM's "Application startup complete" (listening, the model
"loaded").

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
    from simlib import start_sim
    server, url = start_sim(sim, os.path.join(tmp, "sim.log"), "--gpu", "L40S")
"""
import subprocess
import time


def start_sim(sim, log_path, *args, timeout=20.0):
    """Starts `sim --port 0 ARGS...`, its output to log_path; returns the
    process and its base URL ("http://127.0.0.1:PORT"). Raises RuntimeError,
    with the log, when it does not come up within timeout seconds."""
    # The child writes through its own append-only handle and the log is read
    # through another: a seek on a handle the child shares would move the
    # child's write offset too, and its next line would overwrite the first.
    open(log_path, "w").close()
    with open(log_path, "a") as log:
        server = subprocess.Popen([sim, "--port", "0", *args], stdout=log, stderr=subprocess.STDOUT)

    def text():
        with open(log_path) as f:
            return f.read()

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        t = text()
        if "Application startup complete" in t and "listening on " in t:
            return server, t.split("listening on ")[1].split()[0]
        if server.poll() is not None:
            break
        time.sleep(0.05)
    server.kill()
    server.wait()
    raise RuntimeError("goodput-sim did not start:\n" + text())
