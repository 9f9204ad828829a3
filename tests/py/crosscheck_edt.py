#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# tilewave tests: `tilewave edt` through the CLI vs SciPy distance_transform_edt.
"""Cross-check `tilewave edt` against SciPy `distance_transform_edt` (with `sampling` and
`return_indices`) and scikit-image `threshold_otsu`, on random binary images (odd shapes,
1x1 to 256x256, background from one pixel to 99 %), thresholded gray images (8-, 16-bit and
float32 inputs, plain and tiled TIFF) and scikit-image's bundled coins and horse, at tile
sizes from 7x5 to larger than the image.

What must hold (squared distances d2 are integers, taken from SciPy's exact feature
transform):
  sq32  == min(d2, 2^32 - 1), as integers
  f32   == float32(SciPy's float64 distance), bit for bit (= float32(sqrt(d2)))
  u16   == min(65535, floor(sqrt(d2) + 0.5))
  u8    == min(255, floor(sqrt(d2) + 0.5)); with --spacing and --step S (u8, u16):
        min(top, floor(SciPy's distance / S + 0.5)) (a distance within rounding of a half
        may round either way)
  --spacing SX,SY (SciPy sampling=(SY, SX)): f32 within a relative 1e-6 of SciPy
  --indices: (row, column) of a background pixel at exactly the nearest distance (SciPy's
        tie-break is not required)
  no background pixel: exit 0, a warning, +inf / 65535 / 4294967295, indices 4294967295
  --method wavefront: never below the exact distance, 0 on background
  --threshold otsu: foreground = image > threshold_otsu(image) (computed exactly here too:
        where scikit-image's floating-point rounding picks a worse threshold, the exact one)

Usage: crosscheck_edt.py TILEWAVE_CLI [WORKDIR]
Exit status: 0 when every output matches, 1 at the first mismatch (printed), 77 when numpy,
scipy, scikit-image or tifffile is missing (a skip for ctest).
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
    from skimage.filters import threshold_otsu
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"SKIP: {e} (install python3-numpy python3-scipy python3-skimage python3-tifffile)")
    sys.exit(77)

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from otsu_ref import exact_otsu  # noqa: E402  (beside this script)

TILES = ["7x5", "16x16", "64x32", "13x200", "200x9", "1000x1000", "33x17", "256x256"]
FORMATS = ["f32", "u16", "sq32", "u8"]
NONE32 = 4294967295

cli = sys.argv[1] if len(sys.argv) > 1 else "tilewave"
work = tempfile.mkdtemp(prefix="tw-crosscheck-edt-",
                        dir=sys.argv[2] if len(sys.argv) > 2 else None)
checked = 0
runs = 0


class Mismatch(Exception):
    pass


def write(name, img, tiled=False):
    path = os.path.join(work, name)
    if tiled:
        tifffile.imwrite(path, img, tile=(16, 16))
    else:
        tifffile.imwrite(path, img)
    return path


def run(inp, *args, indices=False, quiet=True):
    """Run `tilewave edt`; return (distances, indices or None, stderr)."""
    global runs
    out = os.path.join(work, "out.tif")
    idx = os.path.join(work, "idx.tif")
    for f in (out, idx):
        if os.path.exists(f):
            os.remove(f)
    cmd = [cli, "edt", inp, "-o", out, *args]
    if indices:
        cmd += ["--indices", idx]
    if quiet:
        cmd.append("--quiet")
    p = subprocess.run(cmd, capture_output=True, text=True)
    runs += 1
    if p.returncode != 0:
        raise Mismatch(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")
    if not os.path.exists(out) or (indices and not os.path.exists(idx)):
        raise Mismatch(f"{' '.join(cmd)}: exit 0 but no output")
    return (tifffile.imread(out), tifffile.imread(idx) if indices else None, p.stderr)


def first_diff(what, bad, got, want):
    pos = np.argwhere(bad)
    if len(pos):
        y, x = pos[0][:2]
        raise Mismatch(f"{what}: {len(pos)} pixels differ, first (x {x}, y {y}): "
                       f"{got[y, x]!r} vs expected {want[y, x]!r}")


def expect_shape(what, got, shape, dtype):
    if got.shape != shape:
        raise Mismatch(f"{what}: shape {got.shape}, expected {shape}")
    if got.dtype != np.dtype(dtype):
        raise Mismatch(f"{what}: type {got.dtype}, expected {np.dtype(dtype)}")


def reference(fg, sampling=None):
    """SciPy's distances (float64) and exact squared distances in pixels (int64, from its
    feature transform)."""
    dist, ind = ndi.distance_transform_edt(fg, sampling=sampling, return_indices=True)
    yy, xx = np.indices(fg.shape)
    d2 = (ind[0] - yy).astype(np.int64) ** 2 + (ind[1] - xx).astype(np.int64) ** 2
    return dist, d2


def check_format(what, fmt, got, fg, dist, d2):
    global checked
    checked += 1
    if fmt == "sq32":
        expect_shape(what, got, fg.shape, np.uint32)
        want = np.minimum(d2, NONE32).astype(np.uint32)
        first_diff(what, got != want, got, want)
    elif fmt == "f32":
        expect_shape(what, got, fg.shape, np.float32)
        want = dist.astype(np.float32)
        first_diff(what + " (vs SciPy)", got.view(np.uint32) != want.view(np.uint32), got, want)
        exact = np.sqrt(d2.astype(np.float64)).astype(np.float32)
        first_diff(what + " (vs sqrt d2)", got.view(np.uint32) != exact.view(np.uint32), got,
                   exact)
    else:
        dt, top = (np.uint16, 65535) if fmt == "u16" else (np.uint8, 255)
        expect_shape(what, got, fg.shape, dt)
        want = np.minimum(np.floor(np.sqrt(d2.astype(np.float64)) + 0.5), top)
        want = want.astype(dt)
        first_diff(what, got != want, got, want)


def check_indices(what, idx, fg, want_dist, sampling=None):
    """Each (row, column) is a background pixel whose distance is the nearest one."""
    global checked
    checked += 1
    h, w = fg.shape
    expect_shape(what, idx, (h, w, 2), np.uint32)
    r, c = idx[..., 0].astype(np.int64), idx[..., 1].astype(np.int64)
    out = (r >= h) | (c >= w)
    first_diff(what + ": index outside the image", out, idx, np.zeros_like(idx))
    first_diff(what + ": index is not a background pixel", fg[r, c], idx, np.zeros_like(idx))
    yy, xx = np.indices(fg.shape)
    if sampling is None:
        d2 = (r - yy) ** 2 + (c - xx) ** 2
        want = np.rint(want_dist.astype(np.float64) ** 2).astype(np.int64)
        first_diff(what + ": distance of the index", d2 != want, d2, want)
    else:
        d = np.sqrt(((r - yy) * sampling[0]) ** 2 + ((c - xx) * sampling[1]) ** 2)
        bad = ~np.isclose(d, want_dist, rtol=1e-6, atol=0)
        first_diff(what + ": distance of the index", bad, d, want_dist)


def case_binary(name, fg, k, dtype=np.uint8, indices=True):
    """fg (True = foreground) written as 0 / random nonzero values; the three formats at
    three tile sizes; indices with the f32 run."""
    top = np.iinfo(dtype).max
    rng = np.random.default_rng(k)
    img = np.where(fg, rng.integers(1, top, fg.shape, endpoint=True), 0).astype(dtype)
    path = write(f"in{k}.tif", img, tiled=k % 2 == 1)
    dist, d2 = reference(fg)
    for j, fmt in enumerate(FORMATS):
        tile = TILES[(k + 3 * j) % len(TILES)]
        with_idx = indices and fmt == "f32"
        got, idx, _ = run(path, "--tile", tile, "--format", fmt, indices=with_idx)
        what = f"{name} {fg.shape[1]}x{fg.shape[0]} {np.dtype(dtype)} {fmt} tile {tile}"
        check_format(what, fmt, got, fg, dist, d2)
        if with_idx:
            check_indices(what + " indices", idx, fg, dist)


def case_spacing(name, fg, k, sx, sy):
    global checked
    img = np.where(fg, 255, 0).astype(np.uint8)
    path = write(f"sp{k}.tif", img, tiled=k % 2 == 0)
    dist, _ = ndi.distance_transform_edt(fg, sampling=(sy, sx), return_indices=True)
    tile = TILES[k % len(TILES)]
    got, idx, _ = run(path, "--tile", tile, "--spacing", f"{sx},{sy}", indices=True)
    what = f"{name} {fg.shape[1]}x{fg.shape[0]} spacing {sx},{sy} f32 tile {tile}"
    expect_shape(what, got, fg.shape, np.float32)
    checked += 1
    bad = ~np.isclose(got.astype(np.float64), dist, rtol=1e-6, atol=0)
    first_diff(what, bad, got, dist)
    check_indices(what + " indices", idx, fg, dist, sampling=(sy, sx))
    got, _, _ = run(path, "--tile", TILES[(k + 1) % len(TILES)], "--spacing", f"{sx},{sy}",
                    "--format", "u16")
    checked += 1
    want = np.minimum(np.floor(dist + 0.5), 65535)
    # A distance within rounding of a half may round either way.
    near_half = np.abs(dist - np.floor(dist) - 0.5) < 1e-6 * np.maximum(dist, 1)
    first_diff(what + " u16", (got != want) & ~near_half, got, want)
    for fmt, top, step in (("u8", 255, 0.3), ("u16", 65535, 2.5)):
        got, _, _ = run(path, "--tile", TILES[(k + 2) % len(TILES)], "--spacing", f"{sx},{sy}",
                        "--format", fmt, "--step", str(step))
        checked += 1
        q = dist / step
        want = np.minimum(np.floor(q + 0.5), top)
        near_half = np.abs(q - np.floor(q) - 0.5) < 1e-6 * np.maximum(q, 1)
        first_diff(f"{what} {fmt} step {step}", (got != want) & ~near_half, got, want)


def case_threshold(name, img, k, arg, fg):
    """A gray image with --threshold (a number or otsu): foreground = img > threshold."""
    path = write(f"th{k}.tif", img, tiled=k % 2 == 0)
    dist, d2 = reference(fg)
    tile = TILES[k % len(TILES)]
    got, idx, _ = run(path, "--tile", tile, "--threshold", arg, indices=True)
    what = f"{name} {np.dtype(img.dtype)} --threshold {arg} tile {tile}"
    check_format(what, "f32", got, fg, dist, d2)
    check_indices(what + " indices", idx, fg, dist)
    got, _, _ = run(path, "--tile", TILES[(k + 2) % len(TILES)], "--threshold", arg,
                    "--format", "sq32")
    check_format(what + " sq32", "sq32", got, fg, dist, d2)


def otsu(name, img):
    """scikit-image's threshold, or the exact one where scikit-image's rounding picks a
    threshold of smaller variance (reported)."""
    t, t_exact = threshold_otsu(img), exact_otsu(img)
    if t != t_exact:
        print(f"crosscheck_edt: note: {name}: threshold_otsu {t}, exact Otsu {t_exact} "
              "(tilewave must give the exact one)")
    return t_exact


def case_no_background(k):
    global checked
    h, w = 37, 91
    path = write(f"nobg{k}.tif", np.full((h, w), 7, np.uint8), tiled=k % 2 == 0)
    want = {"f32": np.float32(np.inf), "u16": 65535, "sq32": NONE32, "u8": 255}
    for j, fmt in enumerate(FORMATS):
        tile = TILES[(k + j) % len(TILES)]
        got, idx, err = run(path, "--tile", tile, "--format", fmt, indices=fmt == "f32",
                            quiet=False)
        what = f"no background {w}x{h} {fmt} tile {tile}"
        checked += 1
        if "warn" not in err.lower():
            raise Mismatch(f"{what}: no warning on stderr: {err.strip()!r}")
        expect_shape(what, got, (h, w), {"f32": np.float32, "u16": np.uint16,
                                         "sq32": np.uint32, "u8": np.uint8}[fmt])
        first_diff(what, got != want[fmt], got, np.full(got.shape, want[fmt]))
        if idx is not None:
            expect_shape(what + " indices", idx, (h, w, 2), np.uint32)
            first_diff(what + " indices", idx != NONE32, idx, np.full(idx.shape, NONE32))
    # All background: every distance 0 and every pixel its own nearest.
    zero = np.zeros((h, w), bool)
    got, idx, _ = run(write(f"allbg{k}.tif", np.zeros((h, w), np.uint16)), "--tile", "16x16",
                      indices=True)
    check_format(f"all background {w}x{h}", "f32", got, zero, *reference(zero))
    check_indices(f"all background {w}x{h} indices", idx, zero, np.zeros((h, w)))


def case_wavefront(name, fg, k):
    global checked
    path = write(f"wf{k}.tif", np.where(fg, 255, 0).astype(np.uint8))
    dist, _ = reference(fg)
    got, _, _ = run(path, "--method", "wavefront")
    what = f"{name} {fg.shape[1]}x{fg.shape[0]} --method wavefront"
    expect_shape(what, got, fg.shape, np.float32)
    checked += 1
    exact = dist.astype(np.float32)
    first_diff(what + ": below the exact distance", got < exact, got, exact)
    first_diff(what + ": background not 0", ~fg & (got != 0), got, exact)


def random_fg(rng, h, w, bg):
    """Foreground mask with a background fraction bg (0: exactly one background pixel)."""
    if bg == 0:
        fg = np.ones((h, w), bool)
        fg[int(rng.integers(0, h)), int(rng.integers(0, w))] = False
        return fg
    fg = rng.random((h, w)) >= bg
    if fg.all():
        fg[int(rng.integers(0, h)), int(rng.integers(0, w))] = False
    return fg


def main():
    rng = np.random.default_rng(5)
    shapes = [(1, 1), (1, 97), (89, 1), (2, 3), (37, 53), (64, 64), (100, 17), (5, 256),
              (200, 150), (256, 255), (129, 131), (256, 256)]
    fractions = [0, 0.002, 0.01, 0.1, 0.5, 0.9, 0.99]
    k = 0
    for i, (h, w) in enumerate(shapes):
        for bg in (fractions[i % len(fractions)], fractions[(i + 3) % len(fractions)]):
            fg = random_fg(rng, h, w, bg)
            case_binary(f"random bg {bg}", fg, k, np.uint8 if k % 3 else np.uint16)
            k += 1
    # Lines, a single column or row of background, and a corner: long distances, deep
    # stacks of collinear sites.
    fg = np.ones((150, 230), bool)
    fg[:, 111] = False
    case_binary("background column", fg, k)
    fg = np.ones((230, 150), bool)
    fg[77, :] = False
    case_binary("background row", fg, k + 1, np.uint16)
    fg = np.ones((211, 256), bool)
    fg[-1, -1] = False
    case_binary("corner", fg, k + 2)
    fg = np.ones((97, 203), bool)
    fg[::7, ::11] = False
    case_binary("lattice", fg, k + 3)

    for j, (sx, sy) in enumerate([(0.5, 2.0), (1.3, 0.7), (0.25, 0.25), (3.0, 1.0)]):
        h, w = int(rng.integers(20, 160)), int(rng.integers(20, 160))
        case_spacing("random", random_fg(rng, h, w, [0.01, 0.3, 0, 0.05][j]), j, sx, sy)

    coins = data.coins()
    case_threshold("coins", coins, 0, "otsu", coins > otsu("coins", coins))
    coins16 = (coins.astype(np.uint16) * 257 + rng.integers(0, 257, coins.shape)).astype(
        np.uint16)
    case_threshold("coins 16-bit", coins16, 1, "otsu", coins16 > otsu("coins 16-bit", coins16))
    camera = data.camera()
    case_threshold("camera", camera, 2, "100", camera > 100)
    case_threshold("coins 16-bit", coins16, 3, "30000", coins16 > 30000)
    gray = rng.random((77, 130)).astype(np.float32)
    case_threshold("random float32", gray, 4, "0.25", gray > 0.25)
    horse = ~data.horse()
    case_binary("horse", horse, 100)

    case_no_background(0)
    case_wavefront("random bg 0.05", random_fg(rng, 120, 170, 0.05), 0)
    case_wavefront("horse", horse, 1)
    print(f"crosscheck_edt: {checked} outputs of {runs} runs match SciPy / scikit-image")
    return 0


if __name__ == "__main__":
    try:
        rc = main()
    except Mismatch as e:
        print(f"crosscheck_edt: MISMATCH: {e}")
        rc = 1
    finally:
        for f in os.listdir(work):
            os.remove(os.path.join(work, f))
        os.rmdir(work)
    sys.exit(rc)
