#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# tilewave bench: charts from bench/run.py JSON: throughput against image size, per operation.
"""Draw one PNG per operation from bench/run.py results.

    python3 bench/plot.py RESULT.json [MORE.json ...] [--out docs/img] [--tag cpu]

Each PNG (OUT/bench-OP-TAG.png; TAG defaults to "gpu" when the run saw a GPU, else "cpu")
has a row per kind of measurement (file -> file; in memory; data already on the GPU) and a
column per input. x: image size in megapixels (log scale); y: MPix/s (log scale); solid lines
are tilewave's variants, dashed lines the peers. Several JSON files of the same machine
are merged (later files win for the same point).
"""
import argparse
import json
import os
import sys

TW_COLOURS = ["#1f4e9c", "#d62728", "#2ca02c", "#6a3d9a", "#ff7f0e", "#17becf", "#000000"]
PEER_COLOURS = ["#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#2a9d8f", "#f4a261", "#6d597a",
                "#98df8a", "#ffbb78", "#aec7e8"]
KIND_TITLES = {"file": "file -> file", "memory": "in memory (host)",
               "device-memory": "in memory (data on the GPU)"}


def plain(v, _pos=None):
    """Tick label without exponents: 20, 150, 1.5k, 12k."""
    if v >= 1000:
        return f"{v / 1000:g}k"
    return f"{v:g}"


def load(paths):
    meta, points = None, {}
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        meta = meta or data["meta"]
        for m in data["measurements"]:
            if m.get("side") not in ("tilewave", "peer") or "mpix_per_s" not in m:
                continue
            key = (m["op"], m["kind"], m["input"], m["side"], m["name"], m["w"] * m["h"])
            points[key] = m
    return meta, list(points.values())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json", nargs="+")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "docs", "img"))
    ap.add_argument("--tag", help="file name suffix (default: gpu or cpu)")
    args = ap.parse_args()
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib import ticker
    except ImportError:
        print("plot.py: matplotlib not installed", file=sys.stderr)
        return 1
    meta, points = load(args.json)
    if not points:
        print("plot.py: no image measurements in the input", file=sys.stderr)
        return 1
    hw = meta["hardware"]
    tag = args.tag or ("gpu" if hw.get("gpus") else "cpu")
    os.makedirs(args.out, exist_ok=True)
    for op in sorted({p["op"] for p in points}):
        pts = [p for p in points if p["op"] == op]
        kinds = [k for k in KIND_TITLES if any(p["kind"] == k for p in pts)]
        inputs = list(dict.fromkeys(p["input"] for p in pts
                                    if p["input"] != "generated")) or ["generated"]
        series = sorted({(p["side"], p["name"]) for p in pts},
                        key=lambda s: (s[0] != "tilewave", s[1]))
        tw_n = peer_n = 0
        colour = {}
        for s in series:  # strong colours for tilewave, softer ones for peers
            if s[0] == "tilewave":
                colour[s] = TW_COLOURS[tw_n % len(TW_COLOURS)]
                tw_n += 1
            else:
                colour[s] = PEER_COLOURS[peer_n % len(PEER_COLOURS)]
                peer_n += 1
        sizes = sorted({(p["w"], p["h"]) for p in pts}, key=lambda wh: wh[0] * wh[1])
        fig, axes = plt.subplots(len(kinds), len(inputs), squeeze=False, sharex=True,
                                 figsize=(4.6 * len(inputs) + 2.4, 3.8 * len(kinds)))
        for r, kind in enumerate(kinds):
            for c, inp in enumerate(inputs):
                ax = axes[r][c]
                # Input-independent points (generated images) only where this input was run.
                ran = {p["w"] * p["h"] for p in pts if p["input"] == inp}
                for s in series:
                    line = sorted((p for p in pts if (p["side"], p["name"]) == s and
                                   p["kind"] == kind and (p["input"] == inp or (
                                       p["input"] == "generated" and p["w"] * p["h"] in ran))),
                                  key=lambda p: p["w"] * p["h"])
                    if not line:
                        continue
                    tw = s[0] == "tilewave"
                    ax.plot([p["w"] * p["h"] / 1e6 for p in line],
                            [p["mpix_per_s"] for p in line],
                            marker="o" if tw else "s", linestyle="-" if tw else "--",
                            linewidth=2.2 if tw else 1.3, markersize=5 if tw else 4,
                            color=colour[s], label=("tilewave " if tw else "") + s[1])
                ax.set_xscale("log")
                ax.set_yscale("log")
                ax.xaxis.set_minor_locator(ticker.NullLocator())
                ax.set_xticks([w * h / 1e6 for w, h in sizes])
                ax.set_xticklabels([f"{w}x{h}\n{w * h / 1e6:.2g} MP" if w * h < 1e7 else
                                    f"{w}x{h}\n{w * h / 1e6:.0f} MP" for w, h in sizes],
                                   fontsize=7)
                ax.yaxis.set_major_formatter(ticker.FuncFormatter(plain))
                ax.yaxis.set_minor_formatter(ticker.FuncFormatter(
                    lambda v, _: plain(v, _) if str(int(v))[0] in "25" else ""))
                ax.tick_params(axis="y", which="both", labelsize=7)
                ax.grid(True, which="both", alpha=0.3)
                ax.set_title(f"{KIND_TITLES[kind]}, input {inp}", fontsize=10)
                if r == len(kinds) - 1:
                    ax.set_xlabel("image size")
                if c == 0:
                    ax.set_ylabel("throughput (MPix/s, log)")
                if c == len(inputs) - 1:
                    handles, labels = [], []
                    for a in axes[r]:
                        for h, lab in zip(*a.get_legend_handles_labels()):
                            if lab not in labels:
                                handles.append(h)
                                labels.append(lab)
                    ax.legend(handles, labels, fontsize=8, loc="upper left",
                              bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
        gpus = ", ".join(g["name"] for g in hw.get("gpus", [])) or "no GPU"
        fig.suptitle(f"tilewave {op} vs peers: {hw['cpu_model']}, {hw['cores']} cores, {gpus}"
                     f" ({meta['date'][:10]}, {meta['commit']})", fontsize=11)
        fig.tight_layout()
        path = os.path.join(args.out, f"bench-{op}-{tag}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
