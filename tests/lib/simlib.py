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
    log = open(log_path, "w+")
    server = subprocess.Popen([sim, "--port", "0", *args], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log.seek(0)
        text = log.read()
        if "Application startup complete" in text:
            return server, text.split("listening on ")[1].split()[0]
        if server.poll() is not None:
            break
        time.sleep(0.05)
    server.kill()
    server.wait()
    log.seek(0)
    raise RuntimeError("goodput-sim did not start:\n" + log.read())
