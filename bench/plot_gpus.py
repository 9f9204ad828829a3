#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# tilewave bench: the speed-up over one GPU against the GPU count, from bench/gpus.sh output,
# as an SVG (no plotting library needed).
"""Draw speed-up over one GPU against the GPU count, GPUs alone, one line per operation,
with the ideal line and [Teodoro13]'s reconstruction curve (docs/references.md; figure 15:
16x, 30x, 43x a CPU core on 1, 2, 3 GPUs).

    python3 bench/plot_gpus.py RESULTS... -o docs/img/gpus-scaling.svg

RESULTS: gpus.jsonl files (one tw_bench JSON line per run, with "gpus") or bench/gpus.sh's
printed summary lines ("edt gpus=0,1 gpu  5.679 s ..."); '#' lines are skipped.
"""
import argparse
import json
import re
import sys

SEED = {1: 1.0, 2: 30 / 16, 3: 43 / 16}
LINE = re.compile(r"^(\S+) gpus=([0-9,]+) (gpu|both)\s+([0-9.]+) s")
COLOURS = {"mrecon": "#1f77b4", "edt": "#d62728", "area-open": "#2ca02c"}
NAMES = {"mrecon": "reconstruction 64K\u00b2", "edt": "exact EDT 64K\u00b2",
         "area-open": "area opening 10 GPix"}


def read(paths):
    """{op: {gpu count: seconds}} for the GPUs-alone runs."""
    out = {}
    for p in paths:
        with open(p) as f:
            for line in f:
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                if line.startswith("{"):
                    r = json.loads(line)
                    if r.get("variant") not in ("gpu", "cuda") or "gpus" not in r:
                        continue
                    op, n, s = r["bench"], len(r["gpus"].split(",")), r["median_s"]
                else:
                    m = LINE.match(line)
                    if not m or m.group(3) != "gpu":
                        continue
                    op, n, s = m.group(1), len(m.group(2).split(",")), float(m.group(4))
                out.setdefault(op, {})[n] = s
    return out


def svg(data, title):
    W, H, L, R, T, B = 560, 400, 60, 170, 40, 50
    maxn = max([max(v) for v in data.values()] + [3])
    sx = lambda n: L + (n - 1) / (maxn - 1) * (W - L - R)
    sy = lambda v: H - B - (v - 1) / (maxn - 1) * (H - T - B)
    el = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
          f'font-family="sans-serif" font-size="12">',
          f'<rect width="{W}" height="{H}" fill="white"/>',
          f'<text x="{L}" y="22" font-size="14">{title}</text>']
    for n in range(1, maxn + 1):
        el.append(f'<line x1="{sx(n):.1f}" y1="{T}" x2="{sx(n):.1f}" y2="{H - B}" '
                  f'stroke="#ddd"/><text x="{sx(n):.1f}" y="{H - B + 16}" '
                  f'text-anchor="middle">{n}</text>')
        el.append(f'<line x1="{L}" y1="{sy(n):.1f}" x2="{W - R}" y2="{sy(n):.1f}" '
                  f'stroke="#ddd"/><text x="{L - 8}" y="{sy(n) + 4:.1f}" '
                  f'text-anchor="end">{n}\u00d7</text>')
    el.append(f'<text x="{(L + W - R) / 2}" y="{H - 12}" text-anchor="middle">GPUs</text>')
    el.append(f'<text x="16" y="{(T + H - B) / 2}" text-anchor="middle" '
              f'transform="rotate(-90 16 {(T + H - B) / 2})">speed-up over one GPU</text>')

    def poly(points, colour, dash=""):
        pts = " ".join(f"{sx(n):.1f},{sy(v):.1f}" for n, v in points)
        el.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2" '
                  f'{dash}/>')
        for n, v in points:
            el.append(f'<circle cx="{sx(n):.1f}" cy="{sy(v):.1f}" r="3" fill="{colour}"/>')

    legend = [("ideal", "#999", 'stroke-dasharray="2,3"'),
              ("seed, reconstruction", "#ff7f0e", 'stroke-dasharray="6,3"')]
    poly([(1, 1), (maxn, maxn)], "#999", 'stroke-dasharray="2,3"')
    poly(sorted(SEED.items()), "#ff7f0e", 'stroke-dasharray="6,3"')
    for op, runs in sorted(data.items()):
        if 1 not in runs:
            continue
        colour = COLOURS.get(op, "#000")
        poly([(n, runs[1] / s) for n, s in sorted(runs.items())], colour)
        legend.append((NAMES.get(op, op), colour, ""))
    for i, (name, colour, dash) in enumerate(legend):
        y = T + 10 + 20 * i
        el.append(f'<line x1="{W - R + 12}" y1="{y}" x2="{W - R + 36}" y2="{y}" '
                  f'stroke="{colour}" stroke-width="2" {dash}/>'
                  f'<text x="{W - R + 42}" y="{y + 4}">{name}</text>')
    el.append("</svg>")
    return "\n".join(el) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", nargs="+")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--title", default="GPUs alone, from host memory")
    args = ap.parse_args()
    data = read(args.results)
    if not data:
        print("plot_gpus.py: no GPUs-alone runs in the input", file=sys.stderr)
        return 1
    with open(args.output, "w") as f:
        f.write(svg(data, args.title))
    for op, runs in sorted(data.items()):
        print(op, " ".join(f"{n}: {runs[1] / s:.2f}x" for n, s in sorted(runs.items())
                           if 1 in runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
