#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Render a tilewave trace (runtime.trace / --trace FILE) as a PNG timeline for docs.

    python3 bench/trace_png.py run.json -o run.png [--title TEXT] [--from S] [--to S]

One row per lane (CPU workers, each GPU's manager thread, copies and device work), one bar
per event coloured by task kind, the busy fraction of every lane at the right. The same file
opens interactively at ui.perfetto.dev.
"""
import argparse
import json
import sys


def load(path):
    with open(path) as f:
        d = json.load(f)
    names, order, events = {}, {}, []
    for e in d["traceEvents"]:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[e["tid"]] = e["args"]["name"]
        elif e.get("ph") == "M" and e.get("name") == "thread_sort_index":
            order[e["tid"]] = e["args"]["sort_index"]
        elif e.get("ph") == "X":
            events.append((e["tid"], e["name"], e["ts"] / 1e6, e["dur"] / 1e6))
    return names, order, events


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--title", default=None)
    ap.add_argument("--from", dest="t_from", type=float, default=None, help="start (s)")
    ap.add_argument("--to", dest="t_to", type=float, default=None, help="end (s)")
    a = ap.parse_args(argv)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("trace_png.py: matplotlib is not installed", file=sys.stderr)
        return 1
    try:
        names, order, events = load(a.trace)
    except (OSError, ValueError, KeyError) as e:
        print(f"trace_png.py: cannot read the trace '{a.trace}' ({e})", file=sys.stderr)
        return 1
    if not events:
        print(f"trace_png.py: the trace '{a.trace}' has no events", file=sys.stderr)
        return 1
    t0 = a.t_from if a.t_from is not None else min(e[2] for e in events)
    t1 = a.t_to if a.t_to is not None else max(e[2] + e[3] for e in events)
    lanes = sorted({e[0] for e in events} | set(names), key=lambda t: order.get(t, t))
    row = {t: i for i, t in enumerate(lanes)}
    kinds = sorted({e[1] for e in events})
    cmap = plt.get_cmap("tab20")
    colour = {k: cmap(i % 20) for i, k in enumerate(kinds)}
    fig, ax = plt.subplots(figsize=(12, 0.6 + 0.32 * len(lanes)))
    busy = {t: 0.0 for t in lanes}
    for tid, name, ts, dur in events:
        s, e = max(ts, t0), min(ts + dur, t1)
        if e <= s:
            continue
        busy[tid] += e - s
        ax.barh(row[tid], e - s, left=s - t0, height=0.8, color=colour[name], linewidth=0)
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels([f"{names.get(t, t)}  ({100 * busy[t] / (t1 - t0):.0f}% busy)"
                        for t in lanes], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, t1 - t0)
    ax.set_xlabel("seconds")
    ax.set_title(a.title or a.trace, fontsize=9)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour[k]) for k in kinds]
    ax.legend(handles, kinds, fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5),
              frameon=False)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
