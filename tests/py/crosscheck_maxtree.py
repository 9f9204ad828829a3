#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# tilewave tests: `tilewave maxtree` and the attribute filters through the CLI vs scikit-image.
"""Cross-check `tilewave area-open`, `area-close`, `height-open`, `height-close` and `maxtree`
through the CLI, on random images (8- and 16-bit, 1x1 to 256x256, odd shapes, few and many
levels, plateaus, smooth fields) and on scikit-image's bundled images (camera, coins, moon,
page, text, astronaut; 8-bit gray, one 16-bit and one RGB input), with 4- and
8-connectivity and tile sizes from 1x1 and 1-pixel-wide strips to larger than the image.

What must hold, byte for byte:
  area-open / area-close N  == skimage.morphology.area_opening / area_closing(image, N,
        connectivity=1 for 4, 2 for 8); where scikit-image cannot run (a side below 3 pixels
        in recent versions) or the image is tiny, the naive reference below
  height-open / height-close H == Higra: component_tree_max_tree, attribute_height, nodes
        of height < H removed (root kept), reconstruct_leaf_data (the dual for closing); the
        naive reference when Higra is not installed
  maxtree -o PARENT --area AREA: the canonical parent image (every pixel's node is the same
        set of pixels as in skimage.morphology.max_tree, the canonical pixel of a node is its
        largest raster index, a canonical pixel points to the parent node's canonical pixel,
        one root pointing to itself), equal to the naive reference's bytes on small images;
        AREA = the area of each pixel's node; --index-bits 64 gives the same values as uint64
The naive reference (this script): pixels sorted by (level, descending index), union-find
from the top (Berger et al. 2007), canonicalisation, areas / heights accumulated up the
tree, the direct filter.

Usage: crosscheck_maxtree.py TILEWAVE_CLI [WORKDIR]
Exit status: 0 when every output matches, 1 at the first mismatch (printed), 77 when numpy,
scikit-image or tifffile is missing (a skip for ctest).
"""
import os
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
    import tifffile
    from skimage import data
    from skimage.morphology import area_closing, area_opening, max_tree
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"SKIP: {e} (install python3-numpy python3-skimage python3-tifffile)")
    sys.exit(77)
try:
    import higra as hg
except ImportError:  # the naive reference checks the height filters instead
    hg = None

# Tile sizes, from 1x1 and one-pixel strips to larger than any image here. A case takes
# the next ones of the list whose tile count stays reasonable for its image.
TILES = ["1x64", "64x1", "7x5", "16x16", "1x1", "13x200", "33x17", "200x9", "64x64",
         "1x512", "1000x1000", "128x96", "5x1"]
MAX_TILES = 6000

cli = sys.argv[1] if len(sys.argv) > 1 else "tilewave"
work = tempfile.mkdtemp(prefix="tw-crosscheck-mt-",
                        dir=sys.argv[2] if len(sys.argv) > 2 else None)
checked = 0
runs = 0
tile_cursor = 0
variants = [[]]  # extra CLI flags cycled through (worker mixes), set in main()


class Mismatch(Exception):
    pass


def write(name, img):
    path = os.path.join(work, name)
    tifffile.imwrite(path, img)
    return path


def run(*args, outputs=("out.tif",)):
    """Run the CLI with -o the first output; return the outputs read back."""
    global runs
    paths = [os.path.join(work, o) for o in outputs]
    for f in paths:
        if os.path.exists(f):
            os.remove(f)
    cmd = [cli, *args, "-o", paths[0], "--quiet", "--set", "io.compression=none"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    runs += 1
    if p.returncode != 0:
        raise Mismatch(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")
    for f in paths:
        if not os.path.exists(f):
            raise Mismatch(f"{' '.join(cmd)}: exit 0 but no {os.path.basename(f)}")
    return [tifffile.imread(f) for f in paths]


def first_diff(what, got, want):
    global checked
    checked += 1
    if got.shape != want.shape or got.dtype != want.dtype:
        raise Mismatch(f"{what}: {got.dtype} {got.shape}, expected {want.dtype} {want.shape}")
    pos = np.argwhere(got != want)
    if len(pos):
        at = tuple(pos[0])
        where = f"(x {at[1]}, y {at[0]})" if got.ndim == 2 else f"index {at[0]}"
        raise Mismatch(f"{what}: {len(pos)} pixels differ, first {where}: "
                       f"{got[at]!r} vs expected {want[at]!r}")


def tiles_for(shape, n):
    """The next n tile sizes of TILES that cut this image into at most MAX_TILES tiles."""
    global tile_cursor
    h, w = shape
    out = []
    for _ in range(len(TILES)):
        t = TILES[tile_cursor % len(TILES)]
        tile_cursor += 1
        tw, th = (int(v) for v in t.split("x"))
        if -(-w // tw) * -(-h // th) <= MAX_TILES:
            out.append(t)
            if len(out) == n:
                break
    return out


def variant():
    """CLI flags of the next worker mix (CPU only, GPU only, both: when a GPU is present)."""
    v = variants[runs % len(variants)]
    return list(v)


# ---- the naive reference

def naive_tree(img, conn):
    """Canonical max-tree (our form) of a small image: (parent, order) with order the pixels
    sorted by (level ascending, raster index descending), order[0] the root."""
    h, w = img.shape
    f = img.ravel().astype(np.int64)
    n = f.size
    idx = np.arange(n)
    order = np.lexsort((-idx, f))
    parent = np.arange(n)
    zpar = np.full(n, -1)
    offs = [(-1, 0), (1, 0), (0, -1), (0, 1)]
    if conn == 8:
        offs += [(-1, -1), (-1, 1), (1, -1), (1, 1)]
    fl = f.tolist()
    par = parent.tolist()
    zp = zpar.tolist()
    for p in reversed(order.tolist()):
        par[p] = zp[p] = p
        y, x = divmod(p, w)
        for dy, dx in offs:
            ny, nx = y + dy, x + dx
            if 0 <= ny < h and 0 <= nx < w:
                q = ny * w + nx
                if zp[q] < 0:
                    continue
                r = q
                while zp[r] != r:
                    r = zp[r]
                while zp[q] != r:
                    zp[q], q = r, zp[q]
                if r != p:
                    par[r] = p
                    zp[r] = p
    for p in order.tolist():
        q = par[p]
        if fl[par[q]] == fl[q]:
            par[p] = par[q]
    return np.array(par, dtype=np.int64), order


def tree_attributes(f, parent, order):
    """Area and highest level of every pixel's subtree (canonical pixels: their node's)."""
    area = np.ones(f.size, dtype=np.int64).tolist()
    top = f.tolist()
    par = parent.tolist()
    for p in reversed(order.tolist()[1:]):
        q = par[p]
        area[q] += area[p]
        if top[p] > top[q]:
            top[q] = top[p]
    return area, top


def naive_open(img, conn, kind, t):
    """Area or height opening of img by the direct rule on the naive tree."""
    f = img.ravel().astype(np.int64)
    parent, order = naive_tree(img, conn)
    area, top = tree_attributes(f, parent, order)
    fl, par = f.tolist(), parent.tolist()
    out = [0] * f.size
    root = int(order[0])
    for p in order.tolist():
        q = par[p]
        if p == root:
            out[p] = fl[p] if kind == "height" or area[p] >= t else 0
        elif fl[q] != fl[p]:
            attr = area[p] if kind == "area" else top[p] - fl[q]
            out[p] = fl[p] if attr >= t else out[q]
        else:
            out[p] = out[q]
    return np.array(out, dtype=img.dtype).reshape(img.shape)


def higra_height_open(img, conn, t):
    graph = hg.get_4_adjacency_graph(img.shape) if conn == 4 else \
        hg.get_8_adjacency_graph(img.shape)
    tree, alt = hg.component_tree_max_tree(graph, img)
    deleted = hg.attribute_height(tree, alt) < t
    deleted[tree.root()] = False
    return hg.reconstruct_leaf_data(tree, alt, deleted).astype(img.dtype).reshape(img.shape)


def inverted(img):
    return (np.iinfo(img.dtype).max - img).astype(img.dtype)


def expected(img, filt, conn, t):
    """The reference result and its name."""
    kind, op = filt.split("-")
    small = img.size <= 48 * 48
    if kind == "area" and min(img.shape) >= 3 and not small:
        fn = area_opening if op == "open" else area_closing
        return fn(img, t, connectivity=1 if conn == 4 else 2), "scikit-image"
    src = img if op == "open" else inverted(img)
    if kind == "height" and hg is not None and not small:
        out, name = higra_height_open(src, conn, t), "Higra"
    else:
        out, name = naive_open(src, conn, kind, t), "naive"
    return (out if op == "open" else inverted(out)), name


# ---- cases

def case_filter(name, img, path, filt, conn, t, ntiles=2):
    want, ref = expected(img, filt, conn, t)
    flag = "--area" if filt.startswith("area") else "--height"
    for tile in tiles_for(img.shape, ntiles):
        extra = variant()
        (got,) = run(filt, path, flag, str(t), "--conn", str(conn), "--tile", tile, *extra)
        first_diff(f"{name} {img.shape[1]}x{img.shape[0]} {img.dtype} {filt} {t} "
                   f"{conn}-conn tile {tile} {' '.join(extra)} (vs {ref})", got, want)


def node_of(parent, f):
    """Each pixel's node, named by its canonical pixel."""
    own = (parent == np.arange(parent.size)) | (f[parent] != f)
    return np.where(own, np.arange(parent.size), parent), own


def check_parent(what, img, conn, got, got_area):
    """The parent image against scikit-image's max_tree (and the naive bytes when small)."""
    global checked
    f = img.ravel().astype(np.int64)
    n = f.size
    P = got.ravel().astype(np.int64)
    if P.min() < 0 or P.max() >= n:
        raise Mismatch(f"{what}: parent index outside the image")
    node, own = node_of(P, f)
    # Canonical pixels point to other canonical pixels, one level down; the others to
    # their node's canonical pixel at their level.
    if not own[node].all() or (f[node] != f).any():
        raise Mismatch(f"{what}: a pixel's parent at its level is not canonical")
    roots = np.flatnonzero(P == np.arange(n))
    if len(roots) != 1:
        raise Mismatch(f"{what}: {len(roots)} roots")
    nonroot = own.copy()
    nonroot[roots] = False
    if not own[P[nonroot]].all() or (f[P[nonroot]] >= f[nonroot]).any():
        raise Mismatch(f"{what}: a canonical pixel's parent is not a lower canonical pixel")
    largest = np.full(n, -1)
    np.maximum.at(largest, node, np.arange(n))
    bad = own & (largest != np.arange(n))
    if bad.any():
        c = int(np.flatnonzero(bad)[0])
        raise Mismatch(f"{what}: node of canonical pixel {c} holds pixel {largest[c]}, larger")
    # The same nodes as scikit-image, and the same parent of each node.
    sp, trav = max_tree(img, connectivity=1 if conn == 4 else 2)
    sp = sp.ravel().astype(np.int64)
    snode, sown = node_of(sp, f)
    pairs = np.unique(node * n + snode)
    if len(pairs) != own.sum() or len(pairs) != sown.sum():
        raise Mismatch(f"{what}: {own.sum()} nodes, scikit-image {sown.sum()}, "
                       f"{len(pairs)} pairs")
    to_ours = np.full(n, -1)
    to_ours[snode] = node
    sroot = np.flatnonzero(sp == np.arange(n))
    snr = sown.copy()
    snr[sroot] = False
    cs = np.flatnonzero(snr)
    if (P[to_ours[cs]] != to_ours[sp[cs]]).any():
        raise Mismatch(f"{what}: a node's parent differs from scikit-image's")
    # Areas: accumulated over scikit-image's tree, read at each pixel's node.
    area = np.ones(n, dtype=np.int64)
    tl = trav.ravel().tolist()
    spl = sp.tolist()
    al = area.tolist()
    for p in reversed(tl[1:]):
        al[spl[p]] += al[p]
    area = np.array(al)
    first_diff(what + " --area (vs scikit-image)", got_area.ravel().astype(np.int64),
               area[snode])
    checked += 1
    if n <= 64 * 64:
        ref, _ = naive_tree(img, conn)
        first_diff(what + " (vs naive bytes)", P, ref)


def case_maxtree(name, img, path, conn, bits=None):
    extra = ["--index-bits", str(bits)] if bits else []
    got, got_area = run("maxtree", path, "--conn", str(conn), "--area",
                        os.path.join(work, "area.tif"), *extra, *variant(),
                        outputs=("parent.tif", "area.tif"))
    what = f"maxtree {name} {img.shape[1]}x{img.shape[0]} {img.dtype} {conn}-conn"
    want_type = np.uint64 if bits == 64 else np.uint32
    if got.dtype != want_type or got_area.dtype != want_type or got.shape != img.shape:
        raise Mismatch(f"{what}: parent {got.dtype} {got.shape}, area {got_area.dtype}, "
                       f"expected {np.dtype(want_type)} {img.shape}")
    if min(img.shape) >= 3:
        check_parent(what, img, conn, got, got_area)
    else:  # scikit-image may not run: the naive tree and areas
        ref, order = naive_tree(img, conn)
        first_diff(what + " (vs naive bytes)", got.ravel().astype(np.int64), ref)
        area, _ = tree_attributes(img.ravel().astype(np.int64), ref, order)
        node, _ = node_of(ref, img.ravel().astype(np.int64))
        first_diff(what + " --area (vs naive)", got_area.ravel().astype(np.int64),
                   np.array(area)[node])


def smooth(rng, h, w, top, cell):
    """A smooth random field 0..top (bilinear upsampling of coarse noise)."""
    gh, gw = h // cell + 2, w // cell + 2
    c = rng.random((gh, gw))
    ys, xs = np.arange(h) / cell, np.arange(w) / cell
    y0, x0 = ys.astype(int), xs.astype(int)
    fy, fx = (ys - y0)[:, None], (xs - x0)[None, :]
    v = (c[y0][:, x0] * (1 - fx) + c[y0][:, x0 + 1] * fx) * (1 - fy) + \
        (c[y0 + 1][:, x0] * (1 - fx) + c[y0 + 1][:, x0 + 1] * fx) * fy
    return np.clip(v * (top + 1), 0, top).astype(np.int64)


def random_image(rng, h, w, dtype, style):
    top = np.iinfo(dtype).max
    if style == "noise":
        return rng.integers(0, top, (h, w), endpoint=True).astype(dtype)
    if style == "levels":  # few levels: large plateaus, many nodes at one level
        k = int(rng.integers(2, 6))
        return (rng.integers(0, k, (h, w)) * (top // k)).astype(dtype)
    if style == "smooth":  # deep chains of nested nodes
        return smooth(rng, h, w, top, int(rng.integers(4, 40))).astype(dtype)
    # textured: smooth plus noise
    v = smooth(rng, h, w, top, 16) + rng.integers(0, max(2, top // 16), (h, w))
    return np.minimum(v, top).astype(dtype)


def luminance(rgb):
    r, g, b = (rgb[..., i].astype(np.uint32) for i in range(3))
    return ((299 * r + 587 * g + 114 * b + 500) // 1000).astype(rgb.dtype)


def self_test(rng):
    """The naive reference agrees with scikit-image (areas) and Higra (heights) where both
    run, so that it can stand in for them."""
    global checked
    for k in range(12):
        dtype = np.uint8 if k % 2 else np.uint16
        img = random_image(rng, int(rng.integers(3, 30)), int(rng.integers(3, 30)), dtype,
                           ["noise", "levels", "smooth", "textured"][k % 4])
        conn = 4 if k % 3 else 8
        t = int(rng.integers(1, img.size + 2))
        want = area_opening(img, t, connectivity=1 if conn == 4 else 2)
        first_diff(f"self-test: naive area opening {t} {conn}-conn", naive_open(img, conn,
                                                                                "area", t), want)
        if hg is not None:
            t = int(rng.integers(0, 4 if k % 4 == 1 else 40))
            first_diff(f"self-test: naive height opening {t} {conn}-conn",
                       naive_open(img, conn, "height", t), higra_height_open(img, conn, t))


def main():
    rng = np.random.default_rng(6)
    self_test(rng)
    shapes = [(1, 1), (1, 37), (29, 1), (2, 3), (3, 3), (17, 23), (37, 53), (64, 64),
              (100, 37), (5, 256), (131, 129), (200, 150), (256, 255), (256, 256)]
    styles = ["noise", "levels", "smooth", "textured"]
    filters = ["area-open", "area-close", "height-open", "height-close"]
    k = 0
    for i, (h, w) in enumerate(shapes):
        for dtype in (np.uint8, np.uint16):
            img = random_image(rng, h, w, dtype, styles[k % len(styles)])
            path = write(f"r{k}.tif", img)
            conn = 4 if k % 2 == 0 else 8
            n = h * w
            for j, filt in enumerate(filters):
                if filt.startswith("area"):
                    t = [2, 5, 30, max(1, n // 7), n, n + 1][(k + j) % 6]
                else:
                    top = np.iinfo(dtype).max
                    t = [1, 3, top // 50 + 1, top // 3, 0, top][(k + j) % 6]
                case_filter(f"random {styles[k % len(styles)]}", img, path, filt,
                            conn if j % 2 == 0 else 12 - conn, t, ntiles=2 if n > 1 else 1)
            if n <= 256 * 256:
                case_maxtree(f"random {styles[k % len(styles)]}", img, path, conn)
            k += 1

    # scikit-image's bundled images: both area filters, both connectivities.
    samples = [("camera", data.camera()), ("coins", data.coins()), ("moon", data.moon()),
               ("page", data.page()), ("text", data.text()),
               ("astronaut", luminance(data.astronaut())[100:400, 150:407])]
    thresholds = [16, 64, 500, 5000, 50, 2000]
    for i, (name, img) in enumerate(samples):
        img = np.ascontiguousarray(img.astype(np.uint8))
        path = write(f"s{i}.tif", img)
        for j, (filt, conn) in enumerate([("area-open", 4), ("area-open", 8),
                                          ("area-close", 4), ("area-close", 8)]):
            case_filter(name, img, path, filt, conn, thresholds[(i + j) % len(thresholds)])
        case_filter(name, img, path, ["height-open", "height-close"][i % 2], 4 + 4 * (i % 2),
                    [10, 40, 100][i % 3], ntiles=1)
        crop = np.ascontiguousarray(img[:128, :160])
        case_maxtree(name + " crop", crop, write(f"c{i}.tif", crop), 4 + 4 * (i % 2))

    # Masks (two levels: the tiles take omp/maxtree_two.c's passes): the samples above their
    # median as 0/255, 0/1 and 7/9, random specks, both area filters and connectivities.
    for i, (name, img) in enumerate(samples[:5]):
        on = img > np.median(img)
        for lo, hi in ((0, 255), (0, 1), (7, 9)):
            m = np.where(on, hi, lo).astype(np.uint8)
            path = write(f"m{i}-{hi}.tif", m)
            for j, (filt, conn) in enumerate([("area-open", 8), ("area-close", 4)]):
                c = 12 - conn if hi % 2 else conn
                case_filter(f"{name} mask {lo}/{hi}", m, path, filt, c,
                            [5, 30, 400][(i + j + hi) % 3], ntiles=3)
    specks = np.where(rng.random((300, 280)) < 0.3, 65535, 0).astype(np.uint16)
    path = write("specks.tif", specks)
    for conn in (4, 8):
        case_filter("random specks 16-bit", specks, path, "area-open", conn, 6, ntiles=4)
        case_filter("random specks 16-bit", specks, path, "area-close", conn, 3, ntiles=4)

    # 16-bit coins, an RGB input (luminance first) and 64-bit parent indices.
    coins16 = (data.coins().astype(np.uint16) * 257 +
               rng.integers(0, 257, data.coins().shape)).astype(np.uint16)
    path = write("coins16.tif", coins16)
    case_filter("coins 16-bit", coins16, path, "area-open", 8, 300)
    case_filter("coins 16-bit", coins16, path, "area-close", 4, 40)
    case_filter("coins 16-bit", coins16, path, "height-open", 4, 2000, ntiles=1)
    rgb = np.ascontiguousarray(data.astronaut()[:180, :220])
    case_filter("astronaut RGB", luminance(rgb), write("rgb.tif", rgb), "area-open", 4, 80)
    small = random_image(rng, 40, 30, np.uint16, "textured")
    case_maxtree("random textured", small, write("b64.tif", small), 8, bits=64)
    print(f"crosscheck_maxtree: {checked} outputs of {runs} runs match "
          f"scikit-image / {'Higra' if hg else 'the naive reference'}")
    return 0


def has_gpu():
    """Whether the CLI sees a CUDA device (then GPU-only and mixed runs are cycled in)."""
    try:
        p = subprocess.run([cli, "devices"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    # A line "  worker  2  cuda  GPU 0 ..." per GPU worker.
    return p.returncode == 0 and any(line.split()[2:3] == ["cuda"]
                                     for line in p.stdout.splitlines()
                                     if line.strip().startswith("worker"))


if __name__ == "__main__":
    t0 = time.monotonic()
    if has_gpu():
        variants = [[], ["--gpus", "none"], ["--cpu-workers", "0"]]
    try:
        rc = main()
    except Mismatch as e:
        print(f"crosscheck_maxtree: MISMATCH: {e}")
        rc = 1
    finally:
        for f in os.listdir(work):
            os.remove(os.path.join(work, f))
        os.rmdir(work)
    print(f"crosscheck_maxtree: {time.monotonic() - t0:.1f} s")
    sys.exit(rc)
