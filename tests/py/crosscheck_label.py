#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# tilewave tests: `tilewave label` through the CLI vs skimage.measure.label.
"""Cross-check `tilewave label` against `skimage.measure.label` on random masks (noise of
several densities, blobs with holes, thin winding lines, empty, full), on scikit-image's bundled
images thresholded (camera, coins, text, page: 8-bit; one as 16-bit; astronaut as RGB with
--threshold), with 4- and 8-connectivity, tile sizes from 1x1 and one-pixel strips to larger
than the image, and 1 or 2 CPU workers.

What must hold, byte for byte: the label image equals
    skimage.measure.label(mask, connectivity=1 for 4, 2 for 8, background=0)
as uint32 (or as uint64 with --label-bits 64), where mask is the nonzero pixels (or
gray > N with --threshold N, gray <= N with --invert, gray the BT.601 luminance of RGB).
Also: bad options exit 2 with one line and write nothing.

Usage: crosscheck_label.py TILEWAVE_CLI [WORKDIR]
Exit status: 0 when every output matches, 1 at the first mismatch (printed), 77 when numpy,
scikit-image or tifffile is missing (a skip for ctest).
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import tifffile
    from skimage import data
    from skimage.measure import label
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"SKIP: {e} (install python3-numpy python3-skimage python3-tifffile)")
    sys.exit(77)

TILES = ["1x1", "1x64", "64x1", "7x5", "16x16", "13x200", "33x17", "64x64", "1000x1000",
         "128x96", "5x1", "200x9"]
MAX_TILES = 5000

cli = sys.argv[1] if len(sys.argv) > 1 else "tilewave"
work = tempfile.mkdtemp(prefix="tw-crosscheck-label-",
                        dir=sys.argv[2] if len(sys.argv) > 2 else None)
checked = 0
cursor = 0


class Mismatch(Exception):
    pass


def run(args, out="out.tif"):
    path = os.path.join(work, out)
    if os.path.exists(path):
        os.remove(path)
    cmd = [cli, "label", *args, "-o", path, "--quiet", "--set", "io.compression=none"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise Mismatch(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")
    return tifffile.imread(path)


def compare(what, got, want):
    global checked
    checked += 1
    if got.shape != want.shape or got.dtype != want.dtype:
        raise Mismatch(f"{what}: {got.dtype} {got.shape}, expected {want.dtype} {want.shape}")
    pos = np.argwhere(got != want)
    if len(pos):
        y, x = pos[0]
        raise Mismatch(f"{what}: {len(pos)} pixels differ, first (x {x}, y {y}): "
                       f"{got[y, x]} vs expected {want[y, x]}")


def tiles_for(shape, n):
    global cursor
    h, w = shape
    out = []
    for _ in range(len(TILES)):
        t = TILES[cursor % len(TILES)]
        cursor += 1
        tw, th = (int(v) for v in t.split("x"))
        if -(-w // tw) * -(-h // th) <= MAX_TILES:
            out.append(t)
            if len(out) == n:
                break
    return out


def check(name, img, mask, extra=(), n_tiles=3):
    path = os.path.join(work, name + ".tif")
    tifffile.imwrite(path, img)
    for conn in (4, 8):
        want = label(mask, connectivity=1 if conn == 4 else 2, background=0)
        for k, tile in enumerate(tiles_for(mask.shape, n_tiles)):
            workers = "1" if k % 2 == 0 else "2"
            args = [path, "--conn", str(conn), "--tile", tile, "--cpu-workers", workers,
                    *extra]
            what = f"{name} conn {conn} tile {tile} workers {workers} {' '.join(extra)}"
            compare(what, run(args), want.astype(np.uint32))
        if name.startswith("noise") and conn == 8:
            got = run([path, "--conn", "8", "--tile", "7x5", "--label-bits", "64", *extra])
            compare(f"{name} --label-bits 64", got, want.astype(np.uint64))


def main():
    rng = np.random.default_rng(29)
    for d in (0.2, 0.45, 0.6, 0.8):
        for shape in ((1, 1), (1, 77), (77, 1), (40, 61), (150, 113)):
            m = (rng.random(shape) < d).astype(np.uint8) * 255
            check(f"noise{d}-{shape[0]}x{shape[1]}", m, m > 0)
    yy, xx = np.mgrid[0:180, 0:230]
    blobs = np.zeros((180, 230), bool)
    for _ in range(25):
        cy, cx, r = rng.integers(0, 180), rng.integers(0, 230), rng.integers(2, 30)
        blobs |= (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
    blobs &= rng.random(blobs.shape) > 0.03
    check("blobs", blobs.astype(np.uint8), blobs, n_tiles=4)
    lines = ((xx + 2 * yy) // 3 + (xx * yy) // 7) % 4 == 0
    check("lines", lines.astype(np.uint8) * 9, lines, n_tiles=4)
    check("empty", np.zeros((50, 70), np.uint8), np.zeros((50, 70), bool), n_tiles=2)
    check("full", np.full((50, 70), 3, np.uint8), np.ones((50, 70), bool), n_tiles=2)
    for name in ("camera", "coins", "text", "page"):
        img = getattr(data, name)()
        t = 128
        check(f"{name}-t{t}", img, img > t, extra=("--threshold", str(t)), n_tiles=2)
        check(f"{name}-inv", img, img <= t, extra=("--threshold", str(t), "--invert"),
              n_tiles=1)
    img16 = data.camera().astype(np.uint16) * 257
    check("camera16", img16, img16 > 30000, extra=("--threshold", "30000"), n_tiles=2)
    rgb = data.astronaut()
    c = rgb.astype(np.int64)
    lum = (299 * c[..., 0] + 587 * c[..., 1] + 114 * c[..., 2] + 500) // 1000
    check("astronaut", rgb, lum > 100, extra=("--threshold", "100"), n_tiles=2)
    # Bad options: one line, exit 2, no output.
    path = os.path.join(work, "camera-t128.tif")
    out = os.path.join(work, "bad.tif")
    for bad in (["--conn", "6"], ["--label-bits", "16"], ["--tile", "0x5"]):
        p = subprocess.run([cli, "label", path, "-o", out, *bad], capture_output=True,
                           text=True)
        if p.returncode != 2 or os.path.exists(out) or len(p.stderr.strip().splitlines()) < 1:
            raise Mismatch(f"label {' '.join(bad)}: exit {p.returncode}, {p.stderr!r}")
    print(f"crosscheck_label: {checked} label images equal to skimage.measure.label")


try:
    main()
except Mismatch as e:
    print(f"MISMATCH: {e}")
    sys.exit(1)
