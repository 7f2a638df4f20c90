#!/usr/bin/env python3
# trace_to_svg.py: renders a Chrome/Perfetto trace JSON as a self-contained SVG timeline.
"""Draws the timeline tailor writes (`tailor inspect PLAN --trace`, `tailor
train PLAN ... --trace`) as one SVG picture, with the standard library only.

Usage:
    scripts/trace_to_svg.py TRACE.json [-o OUT.svg] [--title TEXT]
        [--width PX] [--steps N | --from-ms MS --to-ms MS] [--max-lanes N]
        [--color-by kind|cat]

The trace is `{"traceEvents": [...]}` or a bare list of events. The picture:
  - one lane per (pid, tid) that has complete (`ph: "X"`) slices, named by the
    `M` thread_name (and process_name when there are several processes);
  - each slice a rectangle from ts to ts+dur, coloured by the kernel kind its
    name implies (the cost model's kinds, compiler/CostModel.cpp costKindOf:
    gemm, attention, norm, elementwise, loss, optimizer, copy, host_copy,
    comm; and wait) or, with --color-by cat, by its `cat`; its name inside
    when it fits, and a <title> tooltip with name, origin and times;
  - a legend of the categories with their share of the slice time drawn;
  - a time axis in ms from the first event, with ticks and grid lines;
  - below the lanes one step chart per counter series (`ph: "C"`, e.g. an
    arena's bytes in use), its peak marked and labelled (bytes in KiB or
    MiB, as `tailor inspect` prints them);
  - instant events (`ph: "i"`, e.g. "step 2") as dashed lines; instants named
    "peak ..." are left to the counter charts, which mark their own peaks.

Slices narrower than a pixel are drawn one pixel wide; a run of them that
falls on pixels already painted in the same lane is merged into one
rectangle (coloured by the category with most time in it), so a long trace
gives about one rectangle per pixel per lane, not one per slice.

--steps N keeps the first N steps of a measured trace (between its "step K"
instants); --from-ms/--to-ms keep a window in ms from the first event;
--max-lanes N draws the first N lanes and says how many were left out.

Errors (a missing file, text that is not JSON, a trace with nothing to draw)
are reported on stderr with the file's name; the exit status is then 1.
"""

import argparse
import json
import math
import os
import sys
from xml.sax.saxutils import escape

PROG = "trace_to_svg.py"

# Colours of the kernel kinds (fixed, so pictures compare); other
# categories take the fallback colours in order of name.
KIND_COLORS = {
    "gemm": "#3b6fb6",
    "attention": "#8e5cc2",
    "norm": "#2a9d8f",
    "elementwise": "#e9a03b",
    "loss": "#d1495b",
    "optimizer": "#5a9e3a",
    "copy": "#8d8d8d",
    "host_copy": "#9c6b3f",
    "comm": "#c2357b",
    "wait": "#c9c9c9",
}
FALLBACK_COLORS = ["#3b6fb6", "#e9a03b", "#2a9d8f", "#d1495b", "#8e5cc2",
                   "#5a9e3a", "#c2357b", "#9c6b3f", "#4f8fc0", "#b5b53a"]

FONT = 11             # px, labels
CHAR_W = 0.6 * FONT   # estimated width of a character (sans-serif)
LANE_H = 22
LANE_GAP = 6
COUNTER_H = 64
COUNTER_GAP = 26
MIN_PX = 1.0          # the narrowest rectangle drawn


class TraceError(Exception):
    """A trace that cannot be drawn; the message names the file."""


def kind_of(name):
    """The cost model's kernel kind of a slice name (costKindOf's rules)."""
    if name in ("all_reduce", "reduce_scatter", "all_gather", "broadcast",
                "all_to_all"):
        return "comm"
    if name.startswith("linear") or name.startswith("matmul"):
        return "gemm"
    if name.startswith("attention"):
        return "attention"
    if "norm" in name or name.startswith("softmax"):
        return "norm"
    if name.startswith("cross_entropy"):
        return "loss"
    if (name.startswith("adamw") or name.startswith("sgd")
            or name in ("accumulate", "global_norm")):
        return "optimizer"
    if name in ("copy_h2d", "copy_d2h"):
        return "host_copy"
    if name in ("copy", "dequantize") or name.startswith("copy_"):
        return "copy"
    if name == "wait":
        return "wait"
    return "elementwise"


def load_events(path):
    """The trace's event list; raises TraceError naming the file."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise TraceError(f"{path}: cannot read: {e.strerror}")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise TraceError(f"{path}: not JSON (line {e.lineno}, column {e.colno}: {e.msg})")
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise TraceError(f"{path}: no event list (expected {{\"traceEvents\": [...]}} or a list)")
    events = [e for e in events if isinstance(e, dict)]
    if not any(e.get("ph") in ("X", "C") for e in events):
        raise TraceError(f"{path}: no events to draw (no 'X' slices or 'C' counters)")
    return events


class Trace:
    """The events sorted into lanes, counters and instants (times in us)."""

    def __init__(self, events, color_by):
        self.process_names = {}
        self.thread_names = {}
        self.lanes = {}       # (pid, tid) -> [slice event]
        self.counters = {}    # (pid, name, key) -> [(ts, value)]
        self.instants = []    # (ts, name)
        for e in events:
            self._add(e)
        for slices in self.lanes.values():
            slices.sort(key=lambda s: s["ts"])
        for points in self.counters.values():
            points.sort(key=lambda p: p[0])
        self.instants.sort()
        times = [s["ts"] for v in self.lanes.values() for s in v]
        times += [s["ts"] + s["dur"] for v in self.lanes.values() for s in v]
        times += [p[0] for v in self.counters.values() for p in v]
        self.t0 = min(times)
        self.t1 = max(times)
        self.category = (lambda s: kind_of(s["name"])) if color_by == "kind" \
            else (lambda s: s["cat"])

    def _add(self, e):
        ph = e.get("ph")
        pid, tid = e.get("pid", 0), e.get("tid", 0)
        if ph == "M":
            name = (e.get("args") or {}).get("name")
            if e.get("name") == "process_name" and name is not None:
                self.process_names[pid] = str(name)
            elif e.get("name") == "thread_name" and name is not None:
                self.thread_names[(pid, tid)] = str(name)
        elif ph == "X" and _is_number(e.get("ts")):
            dur = e.get("dur") if _is_number(e.get("dur")) else 0.0
            self.lanes.setdefault((pid, tid), []).append({
                "name": str(e.get("name", "")), "cat": str(e.get("cat", "")),
                "ts": float(e["ts"]), "dur": max(0.0, float(dur)),
                "args": e.get("args") or {}})
        elif ph == "C" and _is_number(e.get("ts")):
            for key, value in (e.get("args") or {}).items():
                if _is_number(value):
                    series = (pid, str(e.get("name", "")), str(key))
                    self.counters.setdefault(series, []).append(
                        (float(e["ts"]), float(value)))
        elif ph in ("i", "I") and _is_number(e.get("ts")):
            self.instants.append((float(e["ts"]), str(e.get("name", ""))))

    def lane_name(self, key):
        pid, tid = key
        name = self.thread_names.get(key, f"tid {tid}")
        if len({k[0] for k in self.lanes}) > 1:
            name = f"{self.process_names.get(pid, f'pid {pid}')}: {name}"
        return name

    def counter_name(self, series):
        pid, name, key = series
        keys = [s for s in self.counters if s[:2] == series[:2]]
        label = name if len(keys) == 1 else f"{name} ({key})"
        if len({s[0] for s in self.counters}) > 1:
            label = f"{self.process_names.get(pid, f'pid {pid}')}: {label}"
        return label


def _order(key):
    """A sort key for ids that may be numbers or strings (both are valid)."""
    return tuple((0, v, "") if _is_number(v) else (1, 0, str(v)) for v in key)


def _is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def step_window(trace, steps, path):
    """The (start, end) in us of the first `steps` steps' "step K" instants."""
    marks = [ts for ts, name in trace.instants
             if name.startswith("step ") and name[5:].strip().isdigit()]
    if not marks:
        raise TraceError(f"{path}: --steps needs 'step N' instant events; the trace has none")
    start = marks[0]
    end = marks[steps] if steps < len(marks) else trace.t1
    return start, end


def nice_step(span, target):
    """A tick step of 1, 2 or 5 times a power of ten giving about `target` ticks."""
    raw = span / max(1, target)
    base = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for m in (1, 2, 5, 10):
        if m * base >= raw:
            return m * base
    return 10 * base


def fmt_ms(x, step):
    decimals = max(0, -math.floor(math.log10(step))) if step > 0 else 0
    return f"{x:.{decimals}f}"


def fmt_value(value, key, name):
    """A counter value; bytes as `tailor inspect` prints them (B, KiB, MiB, GiB)."""
    if key != "bytes" and "bytes" not in name:
        return f"{value:g}"
    if abs(value) < 1024:
        return f"{value:.0f} B"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {unit}"
    return f"{value:.0f} B"


def text_color(hex_color):
    r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return "#000" if 0.299 * r + 0.587 * g + 0.114 * b > 150 else "#fff"


def fit(text, px):
    """`text` cut to fit `px` pixels (with an ellipsis), or '' if nothing fits."""
    n = int(px / CHAR_W)
    if len(text) <= n:
        return text
    return text[:n - 1] + "\u2026" if n >= 4 else ""


def merge_slices(slices, x_of, category):
    """Rectangles for one lane: a sub-pixel slice that falls on pixels
    already painted joins the rectangle before it (of its colour, or any on
    the same pixel), so a lane has at most about one rectangle per pixel and
    colour change."""
    rects = []
    for s in slices:
        x0, x1 = x_of(s["ts"]), x_of(s["ts"] + s["dur"])
        cat = category(s)
        last = rects[-1] if rects else None
        narrow = x1 - x0 < MIN_PX
        # Same colour: extend the run; another: only within the pixel the
        # run of sub-pixel slices started on (it takes the larger share).
        if last is not None and narrow and x0 < last["x1_drawn"] + 0.5 and \
                (cat == last["main"] or (last["narrow"] and x0 < last["x0"] + MIN_PX)):
            last["x1"] = max(last["x1"], x1)
            last["x1_drawn"] = max(last["x1_drawn"], last["x0"] + MIN_PX, x1)
            last["time"][cat] = last["time"].get(cat, 0.0) + s["dur"]
            last["main"] = max(last["time"], key=last["time"].get)
            last["slices"].append(s)
            continue
        rects.append({"x0": x0, "x1": x1, "x1_drawn": max(x1, x0 + MIN_PX),
                      "narrow": narrow, "main": cat, "time": {cat: s["dur"]},
                      "slices": [s]})
    return rects


def slice_tooltip(rect, t0):
    slices = rect["slices"]
    if len(slices) == 1:
        s = slices[0]
        origin = s["args"].get("origin", "")
        lines = [s["name"] + (f" ({origin})" if origin else ""),
                 f"{(s['ts'] - t0) / 1000:.4f} ms, {s['dur']:.2f} us, {s['cat']}"]
        return "\n".join(lines)
    names = {}
    for s in slices:
        names[s["name"]] = names.get(s["name"], 0) + 1
    top = sorted(names.items(), key=lambda kv: -kv[1])[:6]
    total = sum(s["dur"] for s in slices)
    return (f"{len(slices)} slices, {total:.2f} us: "
            + ", ".join(f"{n} x{c}" for n, c in top))


class Svg:
    """Collects SVG elements; numbers rounded to keep the file small."""

    def __init__(self):
        self.parts = []

    def add(self, s):
        self.parts.append(s)

    def rect(self, x, y, w, h, fill, extra="", title=None):
        body = f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.2f}" height="{h:.1f}" fill="{fill}"{extra}'
        if title is None:
            self.add(body + "/>")
        else:
            self.add(body + f"><title>{escape(title)}</title></rect>")

    def text(self, x, y, s, anchor="start", extra=""):
        self.add(f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{extra}>{escape(s)}</text>')

    def line(self, x0, y0, x1, y1, stroke, extra=""):
        self.add(f'<line x1="{x0:.1f}" y1="{y0:.1f}" x2="{x1:.1f}" y2="{y1:.1f}" stroke="{stroke}"{extra}/>')


def render(trace, args, window, source):
    """The SVG text of the trace within `window` (us)."""
    w0, w1 = window
    lanes = sorted(trace.lanes, key=_order)
    left_out = max(0, len(lanes) - args.max_lanes) if args.max_lanes else 0
    if left_out:
        lanes = lanes[:args.max_lanes]
    lane_names = [trace.lane_name(k) for k in lanes]
    counters = sorted(trace.counters, key=_order)
    counter_names = [trace.counter_name(c) for c in counters]

    label_w = min(220, max([len(n) for n in lane_names + counter_names] + [6]) * CHAR_W + 16)
    x_left, x_right = label_w, args.width - 16
    plot_w = x_right - x_left
    span = max(w1 - w0, 1e-9)

    def x_of(t):
        return x_left + (min(max(t, w0), w1) - w0) / span * plot_w

    def shown(s):
        if s["dur"] == 0:
            return w0 <= s["ts"] <= w1
        return s["ts"] < w1 and s["ts"] + s["dur"] > w0

    in_window = {k: [s for s in trace.lanes[k] if shown(s)] for k in lanes}
    cat_time = {}
    for k in lanes:
        for s in in_window[k]:
            c = trace.category(s)
            cat_time[c] = cat_time.get(c, 0.0) + min(s["ts"] + s["dur"], w1) - max(s["ts"], w0)
    colors = assign_colors(cat_time)

    svg = Svg()
    y = draw_header(svg, trace, args, source, w0, w1, sum(len(v) for v in in_window.values()),
                    len(lanes), left_out)
    y = draw_legend(svg, cat_time, colors, x_left, x_right, y)
    lanes_top = y + 14  # room for instant labels
    y = lanes_top
    lane_ys = []
    for k, name in zip(lanes, lane_names):
        lane_ys.append(y)
        svg.rect(x_left, y, plot_w, LANE_H, "#f4f4f4")
        svg.text(x_left - 8, y + LANE_H / 2 + FONT * 0.35, fit(name, label_w - 12), "end")
        y += LANE_H + LANE_GAP
    lanes_bottom = y - LANE_GAP
    counter_top = lanes_bottom + (COUNTER_GAP if counters else 0)
    bottom = counter_top + len(counters) * (COUNTER_H + COUNTER_GAP) - (COUNTER_GAP if counters else 0)
    if not lanes:
        bottom = max(bottom, lanes_top)

    # The grid goes over the lanes' backgrounds and under their slices.
    draw_axis(svg, trace.t0, (w0, w1), x_of, (x_left, plot_w), (lanes_top, bottom))

    for k, ly in zip(lanes, lane_ys):
        draw_lane(svg, merge_slices(in_window[k], x_of, trace.category), ly, colors, trace.t0)
    draw_instants(svg, trace, (w0, w1), x_of, x_right, (lanes_top, lanes_bottom), bool(counters))
    cy = counter_top
    for series, name in zip(counters, counter_names):
        draw_counter(svg, trace, series, name, (w0, w1), x_of, x_left, x_right, cy, label_w)
        cy += COUNTER_H + COUNTER_GAP
    height = bottom + 44
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{args.width}" height="{height:.0f}" '
            f'viewBox="0 0 {args.width} {height:.0f}" font-family="Helvetica, Arial, sans-serif" '
            f'font-size="{FONT}">\n<rect width="100%" height="100%" fill="#fff"/>')
    return head + "\n" + "\n".join(svg.parts) + "\n</svg>\n"


def assign_colors(cat_time):
    colors, spare = {}, 0
    for c in sorted(cat_time):
        if c in KIND_COLORS:
            colors[c] = KIND_COLORS[c]
        else:
            colors[c] = FALLBACK_COLORS[spare % len(FALLBACK_COLORS)]
            spare += 1
    return colors


def draw_header(svg, trace, args, source, w0, w1, n_slices, n_lanes, left_out):
    title = args.title or os.path.basename(source)
    svg.text(12, 20, title, extra=' font-size="15" font-weight="bold"')
    procs = ", ".join(trace.process_names[p] for p in sorted(trace.process_names)
                      if any(k[0] == p for k in trace.lanes) or
                      any(c[0] == p for c in trace.counters))
    note = (f"{procs + ': ' if procs else ''}{n_slices} slices on {n_lanes} "
            f"lane{'s' if n_lanes != 1 else ''}, {(w0 - trace.t0) / 1000:.3f} to "
            f"{(w1 - trace.t0) / 1000:.3f} ms")
    if left_out:
        note += f" ({left_out} more lane{'s' if left_out != 1 else ''} not shown)"
    svg.text(12, 37, note, extra=' fill="#555"')
    return 48


def draw_legend(svg, cat_time, colors, x_left, x_right, y):
    total = sum(cat_time.values()) or 1.0
    x = x_left
    for c in sorted(cat_time, key=lambda c: (-cat_time[c], c)):
        label = f"{c} {100 * cat_time[c] / total:.0f}%"
        w = 14 + len(label) * CHAR_W + 14
        if x + w > x_right and x > x_left:
            x, y = x_left, y + 16
        svg.rect(x, y, 10, 10, colors[c])
        svg.text(x + 14, y + 9, label)
        x += w
    return y + 16


def draw_axis(svg, t0, window, x_of, plot, rows):
    """Ticks in ms from t0 below the rows, with grid lines through them."""
    (w0, w1), (x_left, plot_w), (top, bottom) = window, plot, rows
    span_ms = (w1 - w0) / 1000
    step = nice_step(span_ms, max(2, int(plot_w / 90)))
    start_ms = (w0 - t0) / 1000
    tick = math.ceil(start_ms / step - 1e-9) * step
    svg.line(x_left, bottom + 6, x_left + plot_w, bottom + 6, "#333")
    while tick <= start_ms + span_ms + 1e-9:
        x = x_of(t0 + tick * 1000)
        svg.line(x, top, x, bottom + 6, "#ddd", ' stroke-width="0.6"')
        svg.line(x, bottom + 6, x, bottom + 11, "#333")
        svg.text(x, bottom + 23, fmt_ms(tick, step), "middle")
        tick += step
    svg.text(x_left + plot_w, bottom + 38, "ms from the first event", "end", ' fill="#555"')


def draw_lane(svg, rects, ly, colors, t0):
    """A lane's rectangles, then the names of the single slices whose
    uncovered part holds them (labels never overlap one another)."""
    for r in rects:
        svg.rect(r["x0"], ly + 2, r["x1_drawn"] - r["x0"], LANE_H - 4, colors[r["main"]],
                 title=slice_tooltip(r, t0))
    label_end = -1e9
    for i, r in enumerate(rects):
        if len(r["slices"]) != 1:
            continue
        start = max(r["x0"], label_end)
        end = min([r["x1_drawn"]] + [q["x0"] for q in rects[i + 1:i + 2]])
        name = r["slices"][0]["name"]
        label = fit(name, end - start - 4)
        if label and len(label) >= min(5, len(name)):  # 4 letters and the ellipsis
            fill = colors[r["main"]]
            svg.text((start + end) / 2, ly + LANE_H / 2 + 3.5, label, "middle",
                     f' font-size="10" fill="{text_color(fill)}"')
            label_end = (start + end) / 2 + len(label) * CHAR_W / 2


def draw_instants(svg, trace, window, x_of, x_right, rows, have_counters):
    """Instant events as dashed lines over the lanes, named above them."""
    (w0, w1), (top, bottom) = window, rows
    last_label_end = -1e9
    for ts, name in trace.instants:
        if ts < w0 or ts > w1 or (have_counters and name.startswith("peak ")):
            continue
        x = x_of(ts)
        svg.line(x, top - 2, x, bottom, "#444", ' stroke-dasharray="3,2" stroke-width="0.8"')
        w = len(name) * CHAR_W * 0.9
        start = x + 2 if x + 2 + w <= x_right else x - 2 - w
        if start > last_label_end + 4:
            svg.text(start, top - 4, name, extra=' font-size="10" fill="#444"')
            last_label_end = start + w


def draw_counter(svg, trace, series, name, window, x_of, x_left, x_right, top, label_w):
    """One counter series as a step area with its peak marked."""
    w0, w1 = window
    points = trace.counters[series]
    value = 0.0
    for ts, v in points:  # the value in force when the window opens
        if ts <= w0:
            value = v
    inside = [(ts, v) for ts, v in points if w0 < ts <= w1]
    peak_v = max([value] + [v for _, v in inside])
    peak_t = w0 if value == peak_v else next(ts for ts, v in inside if v == peak_v)
    h = COUNTER_H
    base = top + h
    scale = (h - 18) / peak_v if peak_v > 0 else 0.0  # room above for the label
    # One point per pixel column (its highest value), so the peak survives.
    cols = {}
    for ts, v in [(w0, value)] + inside:
        c = int(x_of(ts))
        cols[c] = max(cols.get(c, v), v) if c in cols else v
    path = [f"M{x_left:.1f},{base:.1f}"]
    prev = None
    for c in sorted(cols):
        x = max(float(c), x_left)
        yv = base - cols[c] * scale
        if prev is not None:
            path.append(f"H{x:.1f}")
        if prev != yv:
            path.append(f"V{yv:.1f}")
        prev = yv
    path.append(f"H{x_right:.1f}V{base:.1f}Z")
    svg.rect(x_left, top, x_right - x_left, h, "#f8f8f8")
    svg.add(f'<path d="{"".join(path)}" fill="#7fa7d9" fill-opacity="0.55" '
            f'stroke="#2f5f9f" stroke-width="1"><title>{escape(name)}</title></path>')
    svg.line(x_left, base, x_right, base, "#333", ' stroke-width="0.8"')
    svg.text(x_left - 8, top + h / 2 - 2, fit(name, label_w - 12), "end")
    svg.text(x_left - 8, top + h / 2 + 12, f"0 to {fmt_value(peak_v, series[2], series[1])}",
             "end", ' font-size="10" fill="#555"')
    px, py = x_of(peak_t), base - peak_v * scale
    label = (f"peak {fmt_value(peak_v, series[2], series[1])} "
             f"at {(peak_t - trace.t0) / 1000:.3f} ms")
    halo = ' fill="#b02a3f" font-weight="bold" stroke="#fff" stroke-width="3" paint-order="stroke"'
    if px + 4 + len(label) * CHAR_W <= x_right:
        svg.text(px + 4, py - 6, label, "start", halo)
    else:
        svg.text(px - 4, py - 6, label, "end", halo)
    svg.add(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3.5" fill="#d1495b">'
            f'<title>{escape(label)} ({peak_v:.0f})</title></circle>')


def parse_args(argv):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace", help="Chrome/Perfetto trace JSON")
    p.add_argument("-o", "--output", default="-", help="SVG file to write (default: stdout)")
    p.add_argument("--title", help="the picture's title (default: the trace's file name)")
    p.add_argument("--width", type=int, default=1200, help="width in pixels (default 1200)")
    p.add_argument("--steps", type=int, help="draw the first N steps (between 'step K' instants)")
    p.add_argument("--from-ms", type=float, help="window start, ms from the first event")
    p.add_argument("--to-ms", type=float, help="window end, ms from the first event")
    p.add_argument("--max-lanes", type=int, default=0, help="draw at most N lanes (0: all)")
    p.add_argument("--color-by", choices=("kind", "cat"), default="kind",
                   help="colour slices by kernel kind from the name (default) or by cat")
    args = p.parse_args(argv)
    if args.width < 300:
        p.error("--width must be at least 300")
    if args.steps is not None and args.steps < 1:
        p.error("--steps must be at least 1")
    if args.steps is not None and (args.from_ms is not None or args.to_ms is not None):
        p.error("give --steps or --from-ms/--to-ms, not both")
    if args.max_lanes < 0:
        p.error("--max-lanes must be 0 or more")
    return args


def main(argv):
    args = parse_args(argv)
    try:
        trace = Trace(load_events(args.trace), args.color_by)
        if args.steps is not None:
            window = step_window(trace, args.steps, args.trace)
        else:
            w0 = trace.t0 + 1000 * args.from_ms if args.from_ms is not None else trace.t0
            w1 = trace.t0 + 1000 * args.to_ms if args.to_ms is not None else trace.t1
            if w1 <= w0 and args.from_ms is None and args.to_ms is None:
                w1 = w0 + 1.0  # everything at one instant: a 1 us picture
            if w1 <= w0:
                raise TraceError(f"{args.trace}: empty window: {(w0 - trace.t0) / 1000:g} to "
                                 f"{(w1 - trace.t0) / 1000:g} ms")
            window = (w0, w1)
        svg = render(trace, args, window, args.trace)
    except TraceError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    if args.output == "-":
        sys.stdout.write(svg)
        return 0
    try:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(svg)
    except OSError as e:
        print(f"{PROG}: error: {args.output}: cannot write: {e.strerror}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
