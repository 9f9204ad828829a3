# SPDX-License-Identifier: MIT
# tilewave tests: one Otsu threshold for every command, against scikit-image's threshold_otsu.
"""Cross-check `--threshold otsu` of every command that takes it against scikit-image
`threshold_otsu` on the histogram docs/io.md ("Otsu") defines: every pixel of the input's
level and region, after RGB to one channel (luminance (299 R + 587 G + 114 B + 500) // 1000,
computed here from OpenSlide's or tifffile's read), unit bins, foreground > t.

Inputs: the real slides of ../shared/data/slides (CMU-1-Small-Region.svs through OpenSlide;
small_vectra.qptiff's FITC page, --channel FITC), and single-level compressed TIFFs written
here (its luminance, deflate, tiled and striped; a 16-bit image). Every command prints the
threshold it used ("input: threshold T (otsu of level L)", edt in its summary); all must equal
the reference, and gray's mask must be 255 exactly where the gray value is above it.

Usage: crosscheck_otsu.py TILEWAVE_CLI [WORKDIR]
Exit status: 0 when everything matches, 1 at the first mismatch (printed), 77 when numpy,
scikit-image, tifffile or openslide-python is missing (a skip for ctest).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import openslide
    import tifffile
    from skimage.filters import threshold_otsu
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"SKIP: {e} (install python3-numpy python3-skimage python3-tifffile "
          "python3-openslide)")
    sys.exit(77)

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from otsu_ref import exact_otsu  # noqa: E402  (beside this script)

cli = sys.argv[1] if len(sys.argv) > 1 else "tilewave"
work = tempfile.mkdtemp(prefix="tw-crosscheck-otsu-",
                        dir=sys.argv[2] if len(sys.argv) > 2 else None)
slides = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared",
                      "data", "slides")
checked = 0

# Every command with --threshold otsu, its own arguments; the output is -o OUT.
COMMANDS = [
    ("gray", []), ("fill-holes", ["--invert"]), ("hmax", ["--h", "1"]),
    ("regional-max", []), ("open-rec", ["--radius", "1"]), ("close-rec", ["--radius", "1"]),
    ("area-open", ["--area", "20"]), ("area-close", ["--area", "20"]),
    ("height-open", ["--height", "1"]), ("height-close", ["--height", "1"]),
    ("maxtree", []), ("edt", ["--invert"]), ("grain", ["--area", "20"]),
]
FEW = [c for c in COMMANDS if c[0] in ("gray", "fill-holes", "edt", "area-open")]


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def run(*args):
    r = subprocess.run([cli, *args], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"tilewave {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
    return r.stderr


def luminance(rgb):
    rgb = rgb.astype(np.int64)
    return ((299 * rgb[..., 0] + 587 * rgb[..., 1] + 114 * rgb[..., 2] + 500) // 1000).astype(
        np.uint8)


def reference(name, gray):
    t = int(threshold_otsu(gray))
    te = exact_otsu(gray)
    if t != te:
        print(f"crosscheck_otsu: note: {name}: threshold_otsu {t}, exact {te}")
    return te


def printed(cmd, err):
    m = re.search(r"threshold (\d+)(?: \(otsu of level (\d+)\))?", err)
    if not m:
        fail(f"{cmd}: no threshold in its output: {err.strip()}")
    if cmd != "edt" and m.group(2) is None:
        fail(f"{cmd}: the threshold line does not say it is Otsu's: {err.strip()}")
    return int(m.group(1))


def check(name, path, gray, commands, extra=()):
    """Every command's Otsu threshold on `path` (with `extra` input options) is the one of
    `gray`, the reference's view of the same pixels."""
    global checked
    want = reference(name, gray)
    out = os.path.join(work, "out.tif")
    for cmd, args in commands:
        err = run(cmd, path, "-o", out, "--threshold", "otsu", *args, *extra)
        got = printed(cmd, err)
        if got != want:
            fail(f"{cmd} on {name}: Otsu threshold {got}, threshold_otsu of the same "
                 f"histogram {want}")
        checked += 1
        if cmd == "gray":
            mask = tifffile.imread(out)
            top = np.iinfo(gray.dtype).max
            if not np.array_equal(mask, np.where(gray > want, top, 0).astype(gray.dtype)):
                fail(f"gray --threshold otsu on {name}: the mask is not gray > {want}")
    print(f"OK: {name}: threshold {want} for {len(commands)} commands")


def main():
    rng = np.random.default_rng(27)
    svs = os.path.join(slides, "CMU-1-Small-Region.svs")
    qp = os.path.join(slides, "small_vectra.qptiff")
    if not os.path.exists(svs) or not os.path.exists(qp):
        print(f"SKIP: the real slides are not in {slides}")
        sys.exit(77)

    # Aperio JPEG through OpenSlide: the whole level and a region.
    with openslide.OpenSlide(svs) as s:
        rgba = np.asarray(s.read_region((0, 0), 0, s.level_dimensions[0]))
    if (rgba[..., 3] != 255).any():
        fail("CMU-1-Small-Region.svs has transparent pixels (not expected)")
    lum = luminance(rgba[..., :3])
    check("CMU-1-Small-Region.svs", svs, lum, COMMANDS)
    x, y, w, h = 300, 1100, 1000, 700
    check("CMU-1-Small-Region.svs region", svs, lum[y:y + h, x:x + w], FEW,
          ("--region", f"{x},{y},{w},{h}"))

    # Single-level compressed TIFFs: tiled and striped deflate (the files that took 8-27 s).
    tiled = os.path.join(work, "lum-tiled.tif")
    striped = os.path.join(work, "lum-striped.tif")
    tifffile.imwrite(tiled, lum, tile=(256, 256), compression="zlib")
    tifffile.imwrite(striped, lum, rowsperstrip=16, compression="zlib")
    check("single-level tiled deflate", tiled, lum, FEW)
    check("single-level striped deflate", striped, lum, FEW)

    # The FITC page of the qptiff: libtiff's tiffcp decodes it for tifffile (LZW).
    fitc = os.path.join(work, "fitc.tif")
    r = subprocess.run(["tiffcp", "-c", "none", f"{qp},1", fitc], capture_output=True,
                       text=True)
    if r.returncode != 0:
        print(f"SKIP: tiffcp (libtiff-tools) cannot extract the qptiff page: {r.stderr}")
        sys.exit(77)
    check("small_vectra.qptiff FITC", qp, tifffile.imread(fitc), FEW, ("--channel", "FITC"))

    # 16 bits: 65536 bins.
    yy, xx = np.mgrid[0:700, 0:900]
    g16 = (20000 + 15000 * np.sin(xx / 40.0) * np.cos(yy / 55.0) +
           rng.normal(0, 2500, xx.shape)).clip(0, 65535).astype(np.uint16)
    p16 = os.path.join(work, "g16.tif")
    tifffile.imwrite(p16, g16, tile=(128, 128), compression="zlib")
    check("16-bit", p16, g16, FEW)

    print(f"OK: {checked} command runs gave scikit-image's Otsu threshold")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
