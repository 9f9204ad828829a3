#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# tilewave bench: how far the wavefront (IWPP, Danielsson-like) EDT is from the exact one.
"""Run `tilewave edt --format sq32` with --method exact and --method wavefront on the same
inputs and report, per input, the share of pixels whose squared distance differs, the largest
and mean absolute error of the distance, and the largest relative error. Inputs: random
background at several densities, random discs (nuclei-like), and the sample slide's tissue
mask (gray + Otsu, inverted). Writes a JSON file (--out) and prints a Markdown table.

Usage: python3 bench/edt_wavefront_error.py --build build [--out docs/results/x.json]
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np
import tifffile


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr}")
    return r


def edt(tw, src, out, method, extra, gpus):
    t = time.perf_counter()
    run([tw, "edt", src, "-o", out, "--format", "sq32", "--method", method, "--quiet",
         "--gpus", gpus, "--compression", "none"] + extra)
    return time.perf_counter() - t, tifffile.imread(out).astype(np.int64)


def stats(exact, wave):
    fg = exact > 0
    de, dw = np.sqrt(exact[fg]), np.sqrt(wave[fg])
    err = dw - de
    return {
        "foreground_pixels": int(fg.sum()),
        "differ_fraction": float((exact != wave).sum() / max(fg.sum(), 1)),
        "below_exact": int((wave < exact).sum()),  # must be 0
        "max_abs_error": float(err.max()) if err.size else 0.0,
        "mean_abs_error": float(err.mean()) if err.size else 0.0,
        "max_rel_error": float((err / de).max()) if err.size else 0.0,
    }


def inputs(tw, tmp, rng):
    n = 1024
    for frac in (0.001, 0.01, 0.1):
        img = (rng.random((n, n)) >= frac).astype(np.uint8)
        yield f"random {frac:.1%} background {n}x{n}", img, []
    img = np.ones((n, n), np.uint8)
    yy, xx = np.mgrid[0:n, 0:n]
    for _ in range(60):
        cy, cx, r = rng.integers(0, n), rng.integers(0, n), rng.integers(10, 60)
        img[(yy - cy) ** 2 + (xx - cx) ** 2 < r * r] = 0
    yield f"discs (nuclei-like) {n}x{n}", img, []
    slide, gray = os.path.join(tmp, "s.tif"), os.path.join(tmp, "g.tif")
    run([tw, "sample", slide, "--size", "4096x3072", "--quiet"])
    run([tw, "gray", slide, "-o", gray, "--quiet"])
    yield "sample slide tissue (gray, otsu, inverted) 4096x3072", gray, ["--threshold", "otsu",
                                                                        "--invert"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--out")
    ap.add_argument("--gpus", default="none", help="runtime.gpus for both runs (default none)")
    a = ap.parse_args()
    tw = os.path.join(a.build, "tilewave")
    rng = np.random.default_rng(7)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, img, extra in inputs(tw, tmp, rng):
            src = img
            if not isinstance(img, str):
                src = os.path.join(tmp, "in.tif")
                tifffile.imwrite(src, img, tile=(256, 256))
            te, exact = edt(tw, src, os.path.join(tmp, "e.tif"), "exact", extra, a.gpus)
            tw_, wave = edt(tw, src, os.path.join(tmp, "w.tif"), "wavefront", extra, a.gpus)
            s = stats(exact, wave)
            s.update(input=name, exact_s=te, wavefront_s=tw_)
            rows.append(s)
    doc = {"date": time.strftime("%Y-%m-%d"), "host": platform.node(),
           "cpu": platform.processor() or platform.machine(), "gpus": a.gpus, "rows": rows}
    if a.out:
        with open(a.out, "w") as f:
            json.dump(doc, f, indent=1)
    print("| input | pixels differing | max abs error (px) | mean abs error (px) | "
          "max rel error | below exact |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['input']} | {r['differ_fraction']:.4%} | {r['max_abs_error']:.4f} | "
              f"{r['mean_abs_error']:.2e} | {r['max_rel_error']:.2e} | {r['below_exact']} |")


if __name__ == "__main__":
    main()
