#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# tilewave tests: reconstruction and its filters through the CLI vs scikit-image and SciPy.
"""Cross-check `tilewave reconstruct`, `hmax`, `regional-max`, `fill-holes`, `open-rec` and
`close-rec` against scikit-image (reconstruction, h_maxima, local_maxima, erosion, dilation)
and SciPy (binary_fill_holes), on random images and on scikit-image's bundled real images
(camera, coins, moon, page; 8- and 16-bit), at several tile sizes.

Usage: crosscheck_mrecon.py TILEWAVE_CLI [WORKDIR]
Exit status: 0 when every output equals the reference, 1 at the first difference (printed),
77 when numpy, scipy, scikit-image or tifffile is missing (a skip for ctest).
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import scipy.ndimage as ndi
    import tifffile
    from skimage import data
    from skimage.morphology import (dilation, erosion, h_maxima, local_maxima,
                                    reconstruction)
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"SKIP: {e} (install python3-numpy python3-scipy python3-skimage python3-tifffile)")
    sys.exit(77)

FOOT = {8: np.ones((3, 3), dtype=bool),
        4: np.array([[0, 1, 0], [1, 1, 1], [0, 1, 0]], dtype=bool)}
TILES = ["4096", "64x64", "77x45", "13x200", "200x9"]

cli = sys.argv[1] if len(sys.argv) > 1 else "tilewave"
work = tempfile.mkdtemp(prefix="tw-crosscheck-",
                        dir=sys.argv[2] if len(sys.argv) > 2 else None)
checked = 0


class Mismatch(Exception):
    pass


def write(name, img):
    path = os.path.join(work, name)
    tifffile.imwrite(path, img)
    return path


def run(*args):
    out = os.path.join(work, "out.tif")
    if os.path.exists(out):
        os.remove(out)
    cmd = [cli, *args, "-o", out, "--quiet"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise Mismatch(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")
    if not os.path.exists(out):
        raise Mismatch(f"{' '.join(cmd)}: exit 0 but no output")
    return tifffile.imread(out)


def same(what, got, want):
    global checked
    checked += 1
    want = np.asarray(want)
    if got.shape != want.shape:
        raise Mismatch(f"{what}: shape {got.shape}, reference {want.shape}")
    if got.dtype != want.dtype:
        raise Mismatch(f"{what}: type {got.dtype}, reference {want.dtype}")
    diff = np.argwhere(got != want)
    if len(diff):
        y, x = diff[0]
        raise Mismatch(f"{what}: {len(diff)} pixels differ, first ({x}, {y}): "
                       f"{got[y, x]} vs reference {want[y, x]}")


def check_reconstruct(name, mask, marker, tile, conn, method):
    fm = write("marker.tif", marker)
    fi = write("mask.tif", mask)
    args = ["reconstruct", "--marker", fm, "--mask", fi, "--tile", tile, "--conn", str(conn)]
    if method == "erosion":
        args.append("--erode")
    got = run(*args)
    want = reconstruction(marker, mask, method=method, footprint=FOOT[conn]).astype(mask.dtype)
    same(f"reconstruct {method} conn {conn} tile {tile} on {name} {mask.dtype}", got, want)


def check_filters(name, img, tile, hconn, rng):
    fi = write("img.tif", img)
    top = int(img.max()) - int(img.min())
    for h in sorted({max(1, top // 10), max(1, top // 3), top + 1}):
        got = run("hmax", fi, "--h", str(h), "--tile", tile, "--conn", str(hconn))
        # masks in files are 0/255 (docs/io.md, "Masks"); scikit-image's are 0/1
        same(f"hmax h {h} conn {hconn} tile {tile} on {name} {img.dtype}", got,
             h_maxima(img, h, footprint=FOOT[hconn]) * np.uint8(255))
    for conn in (4, 8):
        got = run("regional-max", fi, "--tile", tile, "--conn", str(conn))
        same(f"regional-max conn {conn} tile {tile} on {name} {img.dtype}", got,
             h_maxima(img, 1, footprint=FOOT[conn]) * np.uint8(255))
        if top > 0:
            same(f"regional-max conn {conn} on {name} vs local_maxima", got,
                 local_maxima(img, connectivity=1 if conn == 4 else 2).astype(np.uint8) * np.uint8(255))
    h = max(1, top // 5)
    got = run("hmax", fi, "--h", str(h), "--dome", "--tile", tile)
    shifted = np.where(img >= h, img - np.array(h, img.dtype), 0).astype(img.dtype)
    same(f"hmax --dome h {h} tile {tile} on {name} {img.dtype}", got,
         img - reconstruction(shifted, img).astype(img.dtype))
    r = int(rng.integers(0, 6))
    sq = np.ones((2 * r + 1, 2 * r + 1), dtype=bool)
    got = run("open-rec", fi, "--radius", str(r), "--tile", tile)
    same(f"open-rec radius {r} tile {tile} on {name} {img.dtype}", got,
         reconstruction(erosion(img, sq), img).astype(img.dtype))
    got = run("close-rec", fi, "--radius", str(r), "--tile", tile)
    same(f"close-rec radius {r} tile {tile} on {name} {img.dtype}", got,
         reconstruction(dilation(img, sq), img, method="erosion").astype(img.dtype))


def check_fill_holes(name, binary, tile, conn, dtype):
    v = np.iinfo(dtype).max
    img = np.where(binary, v, 0).astype(dtype)
    fi = write("bin.tif", img)
    got = run("fill-holes", fi, "--tile", tile, "--conn", str(conn))
    want = ndi.binary_fill_holes(binary, structure=FOOT[conn])
    same(f"fill-holes conn {conn} tile {tile} on {name} {np.dtype(dtype)}", got,
         np.where(want, v, 0).astype(dtype))


def marker_below(img, rng, kind):
    """A marker below the mask: shifted down, sparse seeds, or random under it."""
    big = img.astype(np.int64)
    if kind == 0:
        d = int(big.max() // 6) + 1
        return np.clip(big - d, 0, None).astype(img.dtype)
    if kind == 1:
        m = np.zeros_like(img)
        idx = rng.random(img.shape) < 0.002
        m[idx] = img[idx]
        return m
    return (rng.random(img.shape) * big).astype(img.dtype)


def main():
    rng = np.random.default_rng(2024)
    real = [("camera", data.camera()), ("coins", data.coins()), ("moon", data.moon()),
            ("page", data.page())]
    images = []
    for name, im in real:
        images.append((name, im))
        images.append((name, (im.astype(np.uint16) * 257 + rng.integers(0, 257, im.shape))
                       .astype(np.uint16)))
    for k in range(4):
        h, w = int(rng.integers(1, 200)), int(rng.integers(1, 300))
        noise = rng.random((h, w))
        smooth = ndi.uniform_filter(noise, size=int(rng.integers(1, 9)))
        img = (smooth - smooth.min()) / (np.ptp(smooth) + 1e-9)
        dt = np.uint8 if k % 2 == 0 else np.uint16
        images.append((f"random{k} {w}x{h}", (img * np.iinfo(dt).max).astype(dt)))

    for i, (name, img) in enumerate(images):
        tile = TILES[i % len(TILES)]
        maxv = np.iinfo(img.dtype).max
        for conn in (4, 8):
            marker = marker_below(img, rng, (i + conn) % 3)
            check_reconstruct(name, img, marker, tile, conn, "dilation")
            inv = (maxv - marker_below(maxv - img, rng, (i + conn + 1) % 3)).astype(img.dtype)
            check_reconstruct(name, img, inv, TILES[(i + 2) % len(TILES)], conn, "erosion")
        check_filters(name, img, TILES[(i + 1) % len(TILES)], 4 if i % 2 else 8, rng)

    coins = data.coins()
    binaries = [("coins > 100", coins > 100), ("camera < 80", data.camera() < 80),
                ("horse", ~data.horse()), ("page < 150", data.page() < 150)]
    for k in range(3):
        binaries.append((f"random binary {k}", rng.random((int(rng.integers(1, 150)),
                                                          int(rng.integers(1, 150)))) < 0.55))
    for i, (name, b) in enumerate(binaries):
        for conn in (4, 8):
            check_fill_holes(name, b, TILES[(i + conn) % len(TILES)], conn,
                             np.uint8 if (i + conn) % 3 else np.uint16)
    print(f"crosscheck_mrecon: {checked} outputs equal scikit-image / SciPy")
    return 0


if __name__ == "__main__":
    try:
        rc = main()
    except Mismatch as e:
        print(f"crosscheck_mrecon: MISMATCH: {e}")
        rc = 1
    finally:
        for f in os.listdir(work):
            os.remove(os.path.join(work, f))
        os.rmdir(work)
    sys.exit(rc)
