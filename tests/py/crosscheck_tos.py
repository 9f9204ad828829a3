#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# tilewave tests: `tilewave tos` and `tilewave grain` through the CLI vs Higra's tree of shapes.
"""Cross-check the tree of shapes and the grain filter against Higra
(higra.component_tree_tree_of_shapes_image2d, its default padding "mean", immersion in the
Khalimsky grid), on random images (8- and 16-bit, 2x2 to 256x256: noise, few levels,
smooth, textured) and on scikit-image's bundled images when scikit-image is installed, with
one, two and four CPU workers (the sort splits into parts when workers are idle).

What must hold, byte for byte:
  tos -o PARENT --area AREA: Higra's tree in tilewave's representation (docs/tos.md): a
        pixel's node is its leaf's parent in Higra's tree, the canonical pixel of a node is
        the largest raster index among its leaves, a canonical pixel points to the nearest
        ancestor node with leaves of its own (Higra keeps a root without any when the border
        has no pixel at the exterior level: the top nodes then point to themselves), AREA the
        node's attribute_area; so the trees are the same sets of pixels, up to how a node is
        named. The node areas' multiset is compared too.
  grain --area N == higra.reconstruct_leaf_data(tree, altitudes, attribute_area(tree) < N).
Higra is given the image as int64: with uint8 and uint16 arrays its padding value is a mean
summed in the image's own type, which overflows (a 2x2 image of 200 gets the border 8). Its
mean counts the pixels of a one-row or one-column image twice; those shapes are tested
against naive references in tests/omp/test_tos_omp.c instead.

Usage: crosscheck_tos.py TILEWAVE_CLI [WORKDIR]
Exit status: 0 when every output matches, 1 at the first mismatch (printed), 77 when numpy,
tifffile or Higra is missing (a skip for ctest; `pip install higra`).
"""
import os
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
    import tifffile
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"SKIP: {e} (install python3-numpy python3-tifffile)")
    sys.exit(77)
try:
    import higra as hg
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"SKIP: {e}: Higra is the reference here (pip install higra)")
    sys.exit(77)
try:
    from skimage import data
except ImportError:  # the random images alone then
    data = None

cli = sys.argv[1] if len(sys.argv) > 1 else "tilewave"
work = tempfile.mkdtemp(prefix="tw-crosscheck-tos-",
                        dir=sys.argv[2] if len(sys.argv) > 2 else None)
checked = 0
runs = 0
WORKERS = [["--cpu-workers", "1"], [], ["--cpu-workers", "4"]]


class Mismatch(Exception):
    pass


def cli_run(args, outputs):
    """Run the CLI (outputs uncompressed); return the outputs read back."""
    global runs
    paths = [os.path.join(work, o) for o in outputs]
    for f in paths:
        if os.path.exists(f):
            os.remove(f)
    cmd = [cli, *args, "--quiet", "--set", "io.compression=none",
           *WORKERS[runs % len(WORKERS)]]
    p = subprocess.run(cmd, capture_output=True, text=True)
    runs += 1
    if p.returncode != 0:
        raise Mismatch(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")
    return [tifffile.imread(f) for f in paths]


def same(what, got, want):
    global checked
    checked += 1
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        raise Mismatch(f"{what}: shape {got.shape}, expected {want.shape}")
    bad = np.flatnonzero(got.ravel() != want.ravel())
    if bad.size:
        i = bad[0]
        raise Mismatch(f"{what}: {bad.size} values differ, first at index {i}: "
                       f"{got.ravel()[i]!r} vs expected {want.ravel()[i]!r}")


# ---- Higra's tree in tilewave's representation

def higra_expected(img):
    """(parent, area per pixel, node areas sorted, tree, altitudes, node area array)."""
    tree, alt = hg.component_tree_tree_of_shapes_image2d(img.astype(np.int64))
    par = tree.parents()
    n = img.size
    area = hg.attribute_area(tree)
    node = par[:n]                               # a pixel's node: its leaf's parent
    canon = np.full(tree.num_vertices(), -1, np.int64)
    np.maximum.at(canon, node, np.arange(n))     # largest raster index of the own pixels
    parent = np.empty(n, np.int64)
    for p in range(n):
        c = node[p]
        if canon[c] != p:
            parent[p] = canon[c]
            continue
        parent[p] = p
        while par[c] != c:                       # the nearest ancestor with pixels
            c = par[c]
            if canon[c] >= 0:
                parent[p] = canon[c]
                break
    return parent, area[node], np.sort(area[n:]), tree, alt, area


def our_node_areas(img, parent, area):
    """Node areas from tilewave's outputs; an implicit root (several top nodes) adds one of
    the whole image, as Higra's pixel-less root."""
    f = img.ravel()
    idx = np.arange(f.size)
    canonical = (parent == idx) | (f[parent] != f)
    areas = list(area[canonical])
    if int((parent == idx).sum()) > 1:
        areas.append(f.size)
    return np.sort(np.array(areas, np.int64))


def case(name, img, grains):
    path = os.path.join(work, "in.tif")
    tifffile.imwrite(path, img)
    parent, area, node_areas, tree, alt, harea = higra_expected(img)
    got_p, got_a = cli_run(["tos", path, "-o", os.path.join(work, "p.tif"), "--area",
                            os.path.join(work, "a.tif")], ["p.tif", "a.tif"])
    what = f"{name} {img.shape[1]}x{img.shape[0]} {img.dtype}"
    same(f"{what}: tos parent image", got_p.ravel().astype(np.int64), parent)
    same(f"{what}: tos --area", got_a.ravel().astype(np.int64), area)
    same(f"{what}: node areas", our_node_areas(img, got_p.ravel().astype(np.int64),
                                               got_a.ravel().astype(np.int64)), node_areas)
    for n in grains:
        want = hg.reconstruct_leaf_data(tree, alt, harea < n).astype(img.dtype)
        got, = cli_run(["grain", path, "--area", str(n), "-o", os.path.join(work, "g.tif")],
                       ["g.tif"])
        same(f"{what}: grain --area {n}", got, want)


def smooth(rng, h, w, top, cell):
    """A smooth field 0..top: coarse noise, bilinearly upsampled."""
    c = rng.random((h // cell + 2, w // cell + 2))
    y, x = np.arange(h) / cell, np.arange(w) / cell
    y0, x0 = y.astype(int), x.astype(int)
    fy, fx = (y - y0)[:, None], (x - x0)[None, :]
    top_row = c[y0][:, x0] * (1 - fx) + c[y0][:, x0 + 1] * fx
    bottom_row = c[y0 + 1][:, x0] * (1 - fx) + c[y0 + 1][:, x0 + 1] * fx
    return np.clip((top_row * (1 - fy) + bottom_row * fy) * (top + 1), 0, top)


def random_image(rng, h, w, dtype, style):
    top = np.iinfo(dtype).max
    if style == "noise":
        v = rng.integers(0, top, (h, w), endpoint=True)
    elif style == "levels":
        k = int(rng.integers(2, 6))
        v = rng.integers(0, k, (h, w)) * (top // k)
    elif style == "smooth":
        v = smooth(rng, h, w, top, int(rng.integers(3, 30)))
    else:
        v = np.minimum(smooth(rng, h, w, top, 12) + rng.integers(0, top // 12 + 2, (h, w)), top)
    return np.ascontiguousarray(v.astype(dtype))


def main():
    rng = np.random.default_rng(2024)
    shapes = [(2, 2), (2, 9), (7, 2), (3, 3), (5, 8), (17, 23), (32, 32), (41, 67), (64, 64),
              (100, 37), (128, 129), (256, 256)]
    styles = ["noise", "levels", "smooth", "textured"]
    k = 0
    for h, w in shapes:
        for dtype in (np.uint8, np.uint16):
            for style in styles:
                if style == "noise" and dtype == np.uint16 and h * w > 64 * 64:
                    continue  # Higra's sort of 16-bit noise is slow; smaller ones cover it
                img = random_image(rng, h, w, dtype, style)
                n = h * w
                case(f"random {style}", img, [[2, 5, 30][k % 3], max(1, n // 9), n + 1][:2 + k % 2])
                k += 1
    # a constant image, and one whose border misses its mean (implicit root)
    case("constant", np.full((6, 9), 77, np.uint8), [1, 10])
    case("two halves", np.hstack([np.zeros((5, 4), np.uint8), np.full((5, 4), 200, np.uint8)]),
         [3, 21])
    if data is not None:
        for name, img in [("camera", data.camera()[100:356, 150:406]),
                          ("coins", data.coins()[:160, :200]), ("moon", data.moon()[:128, :192]),
                          ("text", data.text()[:100])]:
            img = np.ascontiguousarray(img.astype(np.uint8))
            case(name, img, [4, 64, 1000])
        coins16 = np.ascontiguousarray((data.coins()[:120, :150].astype(np.uint16) * 257 +
                                        rng.integers(0, 257, (120, 150))).astype(np.uint16))
        case("coins 16-bit", coins16, [10, 300])
    print(f"crosscheck_tos: {checked} outputs of {runs} runs match Higra "
          f"{getattr(hg, '__version__', '')}".rstrip())
    return 0


if __name__ == "__main__":
    t0 = time.monotonic()
    try:
        rc = main()
    except Mismatch as e:
        print(f"crosscheck_tos: MISMATCH: {e}")
        rc = 1
    finally:
        for f in os.listdir(work):
            os.remove(os.path.join(work, f))
        os.rmdir(work)
    print(f"crosscheck_tos: {time.monotonic() - t0:.1f} s")
    sys.exit(rc)
