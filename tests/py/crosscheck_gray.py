# SPDX-License-Identifier: MIT
# tilewave tests: `tilewave gray --mode hematoxylin|eosin` against scikit-image's rgb2hed.
"""Cross-check the colour deconvolution of `tilewave gray` against scikit-image `rgb2hed`
(and `separate_stains` with custom vectors) on random RGB images, every 8-bit level of each
channel, scikit-image's bundled H&E-stained `immunohistochemistry`-style sample where present,
and a thresholded and Otsu mask.

The relation (docs/io.md, "Gray from colour"): scikit-image's optical densities are
log(x) / log(1e-6) = -log10(x) / 6 with x = max(v / 255, 1e-6), so for v >= 1
    tilewave = clamp(round(255 * 6 * rgb2hed(img)[..., s]), 0, 255)
within 1 (tilewave computes in fixed point). Pixels with a 0 sample differ by design
(tilewave clamps v to 1, scikit-image to 1e-6) and are left out.

Usage: crosscheck_gray.py TILEWAVE_CLI [WORKDIR]
Exit status: 0 when everything matches, 1 at the first mismatch (printed), 77 when numpy,
scikit-image or tifffile is missing (a skip for ctest).
"""
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import tifffile
    from skimage.color import rgb2hed, separate_stains
    from skimage.filters import threshold_otsu
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"SKIP: {e} (install python3-numpy python3-skimage python3-tifffile)")
    sys.exit(77)

cli = sys.argv[1] if len(sys.argv) > 1 else "tilewave"
work = tempfile.mkdtemp(prefix="tw-crosscheck-gray-",
                        dir=sys.argv[2] if len(sys.argv) > 2 else None)
HED = np.array([[0.65, 0.70, 0.29], [0.07, 0.99, 0.11], [0.27, 0.57, 0.78]])


def run(*args):
    r = subprocess.run([cli, *args], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"FAIL: tilewave {' '.join(args)}: exit {r.returncode}: {r.stderr}")
        sys.exit(1)
    return r.stderr


def gray(img, mode, tile, extra=()):
    src = os.path.join(work, "in.tif")
    out = os.path.join(work, "out.tif")
    tifffile.imwrite(src, img, tile=(16, 16), photometric="rgb")
    err = run("gray", src, "-o", out, "--mode", mode, "--tile", tile, "--quiet", *extra)
    return tifffile.imread(out), err


def expect(img, got, stains01, what):
    want = np.clip(np.floor(255.0 * 6.0 * stains01 + 0.5), 0, 255)
    ok = (img > 0).all(axis=-1)
    diff = np.abs(got.astype(np.int64) - want.astype(np.int64))[ok]
    if diff.size and diff.max() > 1:
        i = np.argmax(np.abs(got.astype(np.int64) - want.astype(np.int64)) * ok)
        y, x = np.unravel_index(i, got.shape)
        print(f"FAIL: {what}: pixel ({x},{y}) rgb {img[y, x]} tilewave {got[y, x]} "
              f"scikit-image {want[y, x]}")
        sys.exit(1)
    if diff.size and (diff > 0).mean() > 1e-3:
        print(f"FAIL: {what}: {(diff > 0).mean():.2%} of the pixels differ by one")
        sys.exit(1)
    return diff.size


def main():
    rng = np.random.default_rng(8)
    checked = 0
    images = [
        rng.integers(0, 256, size=(97, 131, 3), dtype=np.uint8),
        # every level of every channel against every level of the others (256 x 256 x 3 grid)
        np.stack(np.meshgrid(np.arange(256), np.arange(256), indexing="xy")
                 + [np.full((256, 256), 128)], axis=-1).astype(np.uint8),
        # H&E-like: pink and purple around realistic densities
        np.clip(rng.normal([200, 120, 180], 40, size=(200, 150, 3)), 0, 255).astype(np.uint8),
    ]
    for k, img in enumerate(images):
        hed = rgb2hed(img)
        for s, mode in enumerate(["hematoxylin", "eosin"]):
            got, _ = gray(img, mode, ["7x5", "64x64", "1000x1000"][k])
            checked += expect(img, got, hed[..., s], f"image {k} {mode}")
    # custom vectors: scikit-image's separate_stains with the inverse of the given matrix
    m = np.array([[0.644, 0.717, 0.267], [0.093, 0.954, 0.283], [0.636, 0.001, 0.771]])
    img = images[2]
    sep = separate_stains(img, np.linalg.inv(m))
    vec = ",".join(f"{v:.17g}" for v in m.ravel())
    for s, mode in enumerate(["hematoxylin", "eosin"]):
        got, _ = gray(img, mode, "32x32", ("--stain-vectors", vec))
        checked += expect(img, got, sep[..., s], f"custom vectors {mode}")
    # threshold: > N is 255; otsu on a small single-level image is scikit-image's
    # threshold_otsu of the hematoxylin channel (exact for these integer images)
    h, _ = gray(img, "hematoxylin", "50x50")
    got, _ = gray(img, "hematoxylin", "50x50", ("--threshold", "60"))
    if not np.array_equal(got, np.where(h > 60, 255, 0)):
        print("FAIL: --threshold 60 is not hematoxylin > 60")
        sys.exit(1)
    got, err = gray(img, "hematoxylin", "50x50", ("--threshold", "otsu"))
    t = threshold_otsu(h)
    if not np.array_equal(got, np.where(h > t, 255, 0)):
        print(f"FAIL: --threshold otsu differs from threshold_otsu = {t}")
        sys.exit(1)
    print(f"OK: {checked} pixels of colour deconvolution, thresholds (otsu {t})")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
