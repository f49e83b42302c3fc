"""A report page in a headless Chromium, for the report tests: the DOM as
Chromium built it (no console errors, no network fetch, the page checks of
pagecheck.py on it) and a PNG screenshot 1280 px wide, kept in
$GOODPUT_REPORT_SCREENSHOTS with the page when set. Standard library only."""
import os
import re
import shutil
import subprocess
import tempfile

import pagecheck

TMP = tempfile.mkdtemp(prefix="test-report-browser-")

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0",
         # every name but localhost fails to resolve, so any fetch shows in the log
         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost"]


class PageError(Exception):
    pass


def chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser")


def have_chromium():
    return chromium() is not None


def chrome(path, *extra):
    """Runs Chromium on file PATH with a fresh profile; its completed process."""
    ud = tempfile.mkdtemp(prefix="ud-", dir=TMP)
    p = subprocess.run([chromium()] + FLAGS + ["--user-data-dir=" + ud, *extra, "file://" + os.path.abspath(path)],
                       capture_output=True, text=True, timeout=240)
    shutil.rmtree(ud, ignore_errors=True)
    if p.returncode != 0:
        raise PageError(f"chromium exit {p.returncode}: {p.stderr[-2000:]}")
    return p


def screenshot(path, name, height=7000):
    """The page as a 1280 × height PNG."""
    shot = os.path.join(TMP, name)
    chrome(path, "--hide-scrollbars", f"--window-size=1280,{height}", "--screenshot=" + shot)
    with open(shot, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or os.path.getsize(shot) < 20000:
        raise PageError("no screenshot of " + path)
    w, h = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    if (w, h) != (1280, height):
        raise PageError(f"screenshot is {w}x{h}")
    keep = os.environ.get("GOODPUT_REPORT_SCREENSHOTS")
    if keep:
        # the screenshot, and the page it shows beside it
        os.makedirs(keep, exist_ok=True)
        shutil.copy(shot, os.path.join(keep, name))
        shutil.copy(path, os.path.join(keep, os.path.splitext(name)[0] + ".html"))
    return shot


def dom_checks(path, plots):
    """The page as Chromium built it: no console errors or fetches, the
    trials and plots in the DOM (plots: how many; None: any), and
    pagecheck's checks. Returns the DOM."""
    p = chrome(path, "--dump-dom")
    dom = p.stdout
    n = len(re.findall(r"<svg", dom))
    if (plots is not None and n != plots) or "All trials" not in dom:
        why = re.findall(r"Plot not drawn: [^<]*", dom)
        raise PageError(f"the DOM lacks the plots or the trials: {n} plots, expected {plots} {why}")
    for bad in ["CONSOLE", "Uncaught", "ERR_NAME_NOT_RESOLVED", "net::ERR_", "Refused to"]:
        for line in p.stderr.splitlines():
            if bad in line and "dbus" not in line:
                raise PageError("chromium log: " + line)
    problems = pagecheck.page_problems(dom, plots)
    if problems:
        raise PageError("\n".join(problems))
    return dom
