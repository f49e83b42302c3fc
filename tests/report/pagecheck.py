"""What an engineer checks on a report page at a glance, as code (used by the
report tests on the HTML goodput writes and on the DOM Chromium built):

- no raw null, NaN or undefined in the text a reader sees;
- every plot's axes fitted to what it draws: gnuplot states each panel's
  axis ranges and the range of the data it drew (<metadata class=
  "goodput-axes"> in the SVG, from its GPVAL_ figures), and the data with the
  reference lines the panel must show (SLA bounds, the attainment target)
  span at least 30 % of every axis (on a log axis, of its decades); those
  reference lines are in view;
- the search progress's "best so far" line never rises, left to right.
Standard library only."""

import html as html_mod
import json
import math
import re

SENTINEL = 1e300  # gnuplot's "no data on this axis" is ±8.98e307
BEST_SO_FAR_RGB = "rgb(214,  39,  40)"  # #d62728, the progress plot's best-so-far line, as gnuplot writes it
_BEST_PATH = re.compile(r"""<path\s+stroke=['"]rgb\(\s*214,\s*39,\s*40\)['"]\s+d=['"]([^'"]*)['"]""")


def visible_text(page):
    """The text a reader sees: no style, script, SVG metadata or tags."""
    t = re.sub(r"<(style|script|metadata)\b.*?</\1>", " ", page, flags=re.S | re.I)
    t = re.sub(r"<[^>]+>", " ", t)
    return html_mod.unescape(t)


def raw_values(page):
    """Raw null/NaN/undefined words in the visible text, with context."""
    text = visible_text(page)
    return [text[max(0, m.start() - 40):m.end() + 40].strip()
            for m in re.finditer(r"(?<![\w.])(null|NaN|nan|-nan|undefined)(?![\w])", text)]


def svgs(page):
    return re.findall(r"<svg.*?</svg>", page, re.S)


def plot_title(svg):
    m = re.search(r"<title>(.*?)</title>", svg, re.S)
    return html_mod.unescape(m.group(1)) if m else "?"


def axes_of(svg):
    m = re.search(r'<metadata class="goodput-axes">(.*?)</metadata>', svg, re.S)
    return json.loads(m.group(1)) if m else None


def _scale(v, log):
    return math.log10(v) if log else v


def axis_problems(svg):
    """Why the plot's axes do not fit its data (empty: they do)."""
    title = plot_title(svg)
    panels = axes_of(svg)
    if panels is None:
        return [f"{title}: the plot states no axes (no goodput-axes metadata)"]
    bad = []
    for p in panels:
        if p["categorical"]:
            continue
        for ax in ("x", "y", "y2"):
            a0, a1 = sorted(p[ax])
            d0, d1 = p["data_" + ax]
            marks = p.get("marks_" + ax, [])
            if d0 > d1 or abs(d0) > SENTINEL or abs(d1) > SENTINEL:
                continue  # nothing drawn on this axis
            log = ax == "y" and p["log_y"]
            for m in marks:
                if not (a0 - 1e-9 * abs(a0) <= m <= a1 + 1e-9 * abs(a1)):
                    bad.append(f"{title} / {p['panel']}: reference line {ax} = {m:g} is outside the axis "
                               f"[{a0:g}, {a1:g}]")
            lo, hi = min([d0] + marks), max([d1] + marks)
            if log and (lo <= 0 or a0 <= 0):
                bad.append(f"{title} / {p['panel']}: log axis {ax} with values <= 0")
                continue
            span = _scale(a1, log) - _scale(a0, log)
            if hi <= lo or span <= 0:
                continue  # one value spans nothing: nothing to fit
            share = (_scale(hi, log) - _scale(lo, log)) / span
            if share < 0.3:
                bad.append(f"{title} / {p['panel']}: the data span {share:.0%} of the {ax} axis "
                           f"(data {lo:g}..{hi:g}, axis {a0:g}..{a1:g})")
    return bad


def _subpaths(d):
    """The polylines of an SVG path's d (gnuplot writes M x,y L x,y ...)."""
    out = []
    for part in re.split(r"(?=M)", d.strip()):
        pts = [(float(x), float(y)) for x, y in re.findall(r"(-?[\d.]+),(-?[\d.]+)", part)]
        if pts:
            out.append(pts)
    return out


def best_so_far_problems(svg):
    """The progress plot's best-so-far lines, each read left to right: one
    that goes back in x, or rises (in SVG y grows downwards), is wrong."""
    bad, n = [], 0
    for d in _BEST_PATH.findall(svg):
        for pts in _subpaths(d):
            n += 1
            for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
                if x1 < x0 - 0.01:
                    bad.append(f"best so far goes back in time: x {x0} -> {x1}")
                if y1 < y0 - 0.01:
                    bad.append(f"best so far rises at x {x1}: y {y0} -> {y1}")
    if n == 0:
        bad.append("the progress plot has no best-so-far line")
    return bad


def page_problems(page, expect_plots=None):
    """Everything this module checks, on one page; expect_plots: the number
    of inline plots there must be (None: any)."""
    bad = [f"raw value in the page: ...{c}..." for c in raw_values(page)]
    plots = svgs(page)
    if expect_plots is not None and len(plots) != expect_plots:
        bad.append(f"{len(plots)} plots in the page, expected {expect_plots}")
    for s in plots:
        bad += axis_problems(s)
        if plot_title(s).startswith("Search progress"):
            bad += best_so_far_problems(s)
    return bad
