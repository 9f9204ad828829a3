# SPDX-License-Identifier: MIT
# tilewave tests: --mpp / --magnification level choices, the area-average reduction against
# numpy, the pixel size rules of inputs, and the metadata of outputs read back by OpenSlide,
# tifffile and vips.
"""Cross-check resolution and metadata (docs/io.md, "Resolution and metadata").

- Level choices: on the real CMU-1-Small-Region.svs (0.499 mpp, 20x, one level) and on
  pyramids written here with tifffile (pages of downsample 1, 2, 4, 8 with an OME-XML
  description: PhysicalSizeX 0.25 um, NominalMagnification 40), `tilewave info --mpp X` and
  the level and reduction every operation reports.
- The reduction: `convert --mpp X` equals a numpy area average of the level (block sums over
  the pixels inside the image, divided by their count, rounded half up) for u8 RGB, u16 gray
  and the SVS (read with OpenSlide), for several processing tile sizes.
- Inputs: 72 dpi (boxes.tiff, in centimetres) and inch resolutions are an unknown mpp;
  --mpp on them and `edt --spacing auto` fail naming the file and write nothing; --reader tiff
  on the SVS keeps 0.499 mpp and 20x from the Aperio description; --level with --mpp is
  refused.
- Outputs: OpenSlide shows openslide.mpp-x/-y and objective-power of 8-bit outputs (scaled
  by the reduction) and the source's aperio.* properties; tifffile reads the resolution in
  centimetres and the OME PhysicalSizeX of OME outputs; vipsheader reads the resolution.

Usage: crosscheck_resolution.py TILEWAVE_CLI [WORKDIR] [SLIDES_DIR]
Exit status: 0 when everything matches, 1 at the first mismatch (printed), 77 when numpy,
tifffile or openslide-python is missing (a skip for ctest).
"""
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import openslide
    import tifffile
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"SKIP: {e} (install python3-numpy python3-tifffile python3-openslide)")
    sys.exit(77)

cli = sys.argv[1] if len(sys.argv) > 1 else "tilewave"
work = tempfile.mkdtemp(prefix="tw-crosscheck-res-",
                        dir=sys.argv[2] if len(sys.argv) > 2 else None)
slides = sys.argv[3] if len(sys.argv) > 3 else os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "data", "slides")
CMU = os.path.join(slides, "CMU-1-Small-Region.svs")
BOXES = os.path.join(slides, "boxes.tiff")


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def run(*args, ok=True):
    r = subprocess.run([cli, *args], capture_output=True, text=True)
    if ok and r.returncode != 0:
        fail(f"tilewave {' '.join(args)}: exit {r.returncode}: {r.stderr}")
    if not ok and r.returncode == 0:
        fail(f"tilewave {' '.join(args)} succeeded; an error was expected")
    return r


def reduce(a, k):
    """The reference area average: sums of k x k blocks over the pixels inside the image,
    divided by their count, rounded half up."""
    h, w = a.shape[:2]
    H, W = -(-h // k), -(-w // k)
    pad = [(0, H * k - h), (0, W * k - w)] + [(0, 0)] * (a.ndim - 2)
    s = np.pad(a.astype(np.int64), pad).reshape(H, k, W, k, *a.shape[2:]).sum(axis=(1, 3))
    n = np.pad(np.ones((h, w), np.int64), pad[:2]).reshape(H, k, W, k).sum(axis=(1, 3))
    if a.ndim == 3:
        n = n[..., None]
    return ((s + n // 2) // n).astype(a.dtype)


def ome_xml(w, h, ch, dtype, mpp, mag):
    return ('<?xml version="1.0" encoding="UTF-8"?>'
            '<OME xmlns="http://www.openmicroscopy.org/Schemas/OME/2016-06">'
            '<Instrument ID="Instrument:0"><Objective ID="Objective:0:0" '
            f'NominalMagnification="{mag}"/></Instrument>'
            '<Image ID="Image:0"><Pixels ID="Pixels:0" DimensionOrder="XYCZT" '
            f'Type="{dtype}" SizeX="{w}" SizeY="{h}" SizeC="{ch}" SizeZ="1" SizeT="1" '
            f'PhysicalSizeX="{mpp * 1000}" PhysicalSizeXUnit="nm" '
            f'PhysicalSizeY="{mpp * 1000}" PhysicalSizeYUnit="nm">'
            '<TiffData IFD="0" PlaneCount="1"/></Pixels></Image></OME>')


def write_pyramid(path, base, n_levels=4, mpp=0.25, mag=40):
    """Pages of downsample 1, 2, 4, 8 (each the 2x2 mean of the one above, cropped to an
    even size first), the first with an OME-XML description giving mpp and magnification."""
    levels = [base]
    for _ in range(n_levels - 1):
        a = levels[-1]
        a = a[: a.shape[0] // 2 * 2, : a.shape[1] // 2 * 2]
        levels.append(reduce(a, 2))
    ch = 3 if base.ndim == 3 else 1
    with tifffile.TiffWriter(path, bigtiff=True) as tw:
        for i, a in enumerate(levels):
            tw.write(a, tile=(32, 32), photometric="rgb" if ch == 3 else "minisblack",
                     compression="zlib", subfiletype=1 if i else 0,
                     description=ome_xml(base.shape[1], base.shape[0], ch,
                                         str(base.dtype), mpp, mag) if i == 0 else None,
                     metadata=None)
    return levels


def rule(ds, want):
    """The documented choice, as a reference: the coarsest level whose downsample is at most
    1.01 times the one asked, then the whole factor it is finer by."""
    level = max((d, i) for i, d in enumerate(ds) if d <= want * 1.01)[1]
    k = int(np.floor(want * 1.01 / ds[level]))
    return level, k if k >= 2 else 1


def info_choice(path, flag, value):
    out = run("info", path, flag, str(value)).stdout
    line = [ln for ln in out.splitlines() if ln.strip().startswith(flag)]
    if not line:
        fail(f"info {path} {flag} {value}: no choice line in {out!r}")
    return line[0].strip()


def expect_choice(path, flag, value, level, k):
    line = info_choice(path, flag, value)
    want = f"{flag} {value:g}: level {level}" + (f" reduced {k}x{k}" if k > 1 else ",")
    if not line.startswith(want):
        fail(f"info {os.path.basename(path)} {flag} {value}: {line!r}, expected {want!r}...")


def check_choices_and_reduction():
    rng = np.random.default_rng(27)
    rgb = rng.integers(0, 256, size=(203, 301, 3), dtype=np.uint8)
    u16 = rng.integers(0, 65536, size=(190, 257), dtype=np.uint16)
    for name, base in (("rgb", rgb), ("u16", u16)):
        src = os.path.join(work, f"pyr_{name}.tif")
        levels = write_pyramid(src, base)
        # mpp 0.25 at level 0; downsamples 1, 2, 4, 8 (a hair above for odd sizes)
        ds = [base.shape[1] / lv.shape[1] for lv in levels]
        expect_choice(src, "--mpp", 0.25, 0, 1)
        expect_choice(src, "--mpp", 0.5, 1, 1)
        expect_choice(src, "--mpp", 0.7, 1, 1)
        expect_choice(src, "--mpp", 7.5, 3, 3)
        for mpp in (0.25, 0.3, 0.5, 0.7, 0.99, 1.0, 1.5, 2.0, 2.5, 4.0, 5.0, 7.5, 11.0, 100.0):
            expect_choice(src, "--mpp", mpp, *rule(ds, mpp / 0.25))
        # magnification 40 at level 0: 10x is level 2, 2x is level 3 reduced 2x2
        expect_choice(src, "--magnification", 40, 0, 1)
        expect_choice(src, "--magnification", 10, 2, 1)
        expect_choice(src, "--magnification", 2, 3, 2)
        run("info", src, "--mpp", "0.2", ok=False)
        run("info", src, "--magnification", "60", ok=False)
        # the reduction, exact, for several tile sizes: of the last level, and of level 0 of
        # a file without a pyramid
        one = os.path.join(work, f"one_{name}.tif")
        write_pyramid(one, base, n_levels=1)
        for path, lv, mpp in ((src, levels, 5.0), (src, levels, 11.0), (one, [base], 0.5),
                              (one, [base], 0.75)):
            level, k = rule([1.0] if lv is not levels else ds, mpp / 0.25)
            if k < 2:
                fail(f"test setup: --mpp {mpp} does not reduce")
            want = reduce(lv[level], k)
            for tile in ("16x16", "37x23", "512x512"):
                out = os.path.join(work, f"conv_{name}_{mpp}_{tile}.tif")
                r = run("convert", path, "-o", out, "--mpp", str(mpp), "--tile", tile)
                got = tifffile.imread(out)
                if got.shape != want.shape or got.dtype != want.dtype:
                    fail(f"{name} --mpp {mpp}: shape {got.shape} {got.dtype}, expected "
                         f"{want.shape} {want.dtype}")
                if not np.array_equal(got, want):
                    d = tuple(np.argwhere(got != want)[0])
                    fail(f"{name} --mpp {mpp} --tile {tile}: pixel {d} is {got[d]}, the numpy "
                         f"area average {want[d]}")
                said = f"input: level {level} reduced {k}x{k} by area average"
                if said not in r.stderr:
                    fail(f"convert --mpp {mpp}: stderr {r.stderr!r} does not say {said!r}")
                # the output's pixel size is the level's scaled by the reduction
                with tifffile.TiffFile(out) as t:
                    p = t.pages[0]
                    xr = p.tags["XResolution"].value
                    unit = p.tags["ResolutionUnit"].value
                ds_l = base.shape[1] / lv[level].shape[1]
                if unit != 3 or abs(1e4 * xr[1] / xr[0] - 0.25 * ds_l * k) > 1e-6:
                    fail(f"{name} --mpp {mpp}: resolution {xr} unit {unit}, expected "
                         f"{0.25 * ds_l * k} um per pixel in centimetres")
        # a region is in the frame of the reduced image
        out = os.path.join(work, f"region_{name}.tif")
        run("convert", one, "-o", out, "--mpp", "0.75", "--region", "10,7,40,30")
        if not np.array_equal(tifffile.imread(out), reduce(base, 3)[7:37, 10:50]):
            fail(f"{name}: --mpp 0.75 --region 10,7,40,30 differs from the numpy reference")
        # the OME input's own pixel size and magnification are read
        for reader in ("auto", "openslide"):  # OpenSlide: a generic-tiff it has no mpp of
            txt = run("info", "--reader", reader, src).stdout
            if "mpp:      0.2500 x 0.2500" not in txt or "objective: 40x" not in txt:
                fail(f"info --reader {reader} {src}: {txt!r} lacks mpp 0.25 and objective 40x")
    return 2


def check_svs():
    if not os.path.exists(CMU):
        print(f"note: {CMU} not found; the real-slide checks are skipped")
        return 0
    expect_choice(CMU, "--mpp", 1, 0, 2)
    expect_choice(CMU, "--mpp", 0.5, 0, 1)
    expect_choice(CMU, "--magnification", 5, 0, 4)
    expect_choice(CMU, "--magnification", 20, 0, 1)
    slide = openslide.OpenSlide(CMU)
    px = np.asarray(slide.read_region((0, 0), 0, slide.dimensions).convert("RGB"))
    want = reduce(px, 2)
    out = os.path.join(work, "cmu_mpp1.tif")
    r = run("convert", CMU, "-o", out, "--mpp", "1")
    if "input: level 0 reduced 2x2 by area average, 0.998 um per pixel" not in r.stderr:
        fail(f"convert CMU --mpp 1: {r.stderr!r}")
    got = tifffile.imread(out)
    if not np.array_equal(got, want):
        fail("convert CMU --mpp 1 differs from the numpy area average of OpenSlide's pixels")
    # OpenSlide reads the 8-bit output as aperio with the scaled mpp and power, the source's
    # vendor properties kept, and the same pixels
    o = openslide.OpenSlide(out)
    p = o.properties
    for key, want_v in (("openslide.mpp-x", 0.998), ("openslide.mpp-y", 0.998),
                        ("openslide.objective-power", 10.0), ("aperio.aperio.AppMag", 20.0),
                        ("aperio.aperio.MPP", 0.499)):
        if key not in p or abs(float(p[key]) - want_v) > 1e-9:
            fail(f"OpenSlide on {out}: {key} = {p.get(key)!r}, expected {want_v}")
    if p.get("aperio.aperio.ScanScope ID") != "CPAPERIOCS":
        fail(f"OpenSlide on {out}: the source's aperio.ScanScope ID was not kept")
    back = np.asarray(o.read_region((0, 0), 0, o.dimensions).convert("RGB"))
    if not np.array_equal(back, want):
        fail(f"OpenSlide reads other pixels from {out}")
    # a gray 8-bit output and a thresholded mask too; a 16-bit output is not aperio
    for args in (("gray", "--mpp", "1"), ("fill-holes", "--magnification", "10",
                                          "--threshold", "otsu", "--invert")):
        out2 = os.path.join(work, f"cmu_{args[0]}.tif")
        run(args[0], CMU, "-o", out2, *args[1:])
        p = openslide.OpenSlide(out2).properties
        if abs(float(p.get("openslide.mpp-x", 0)) - 0.998) > 1e-9 or \
                abs(float(p.get("openslide.objective-power", 0)) - 10) > 1e-9:
            fail(f"OpenSlide on {args[0]} output: mpp {p.get('openslide.mpp-x')}, power "
                 f"{p.get('openslide.objective-power')}")
        txt = run("info", out2).stdout
        if "read with libtiff" not in txt or "gray, u8" not in txt:
            fail(f"tilewave reads its own aperio-described output through libtiff: {txt!r}")
    # a viewable distance map (edt --format u8 --step): OpenSlide opens it with the mpp and
    # the step; its pixels are SciPy's distance in um / step, rounded, saturating at 255
    out3 = os.path.join(work, "cmu_dist.tif")
    run("edt", CMU, "-o", out3, "--mpp", "2", "--threshold", "otsu", "--invert",
        "--spacing", "auto", "--format", "u8", "--step", "4")
    o = openslide.OpenSlide(out3)
    p = o.properties
    if abs(float(p.get("openslide.mpp-x", 0)) - 1.996) > 1e-9 or \
            p.get("aperio.DistanceStep") != "4" or p.get("aperio.DistanceUnit") != "um":
        fail(f"OpenSlide on the u8 distance map: mpp {p.get('openslide.mpp-x')}, step "
             f"{p.get('aperio.DistanceStep')}, unit {p.get('aperio.DistanceUnit')}")
    f32 = os.path.join(work, "cmu_dist32.tif")
    run("edt", CMU, "-o", f32, "--mpp", "2", "--threshold", "otsu", "--invert",
        "--spacing", "auto")
    q = tifffile.imread(f32).astype(np.float64) / 4
    want = np.minimum(np.floor(q + 0.5), 255).astype(np.uint8)
    # float32 distances: within their rounding of a half, either way
    near = np.abs(q - np.floor(q) - 0.5) < 1e-6 * np.maximum(q, 1)
    got = np.asarray(o.read_region((0, 0), 0, o.dimensions).convert("L"))
    if ((tifffile.imread(out3) != want) & ~near).any() or ((got != want) & ~near).any():
        fail("the u8 distance map is not the f32 map / 4 rounded (tifffile or OpenSlide)")
    # the OME layout carries PhysicalSizeX in um (tifffile)
    ome = os.path.join(work, "cmu.ome.tif")
    run("convert", CMU, "-o", ome, "--mpp", "2", "--layout", "ome")
    with tifffile.TiffFile(ome) as t:
        xml = t.ome_metadata
    if 'PhysicalSizeX="1.996"' not in xml or "AppMag = 5" not in xml:
        fail(f"OME output: {xml!r} lacks PhysicalSizeX 1.996 or AppMag 5")
    # vips reads the resolution (pixels per mm)
    if shutil.which("vipsheader"):
        xres = subprocess.run(["vipsheader", "-f", "xres", out], capture_output=True,
                              text=True).stdout.strip()
        if not xres or abs(float(xres) - 1000 / 0.998) > 1e-3:
            fail(f"vipsheader -f xres {out}: {xres!r}, expected {1000 / 0.998}")
    # --reader tiff keeps the Aperio pixel size and power
    txt = run("info", "--reader", "tiff", CMU).stdout
    if "mpp:      0.4990 x 0.4990" not in txt or "objective: 20x" not in txt:
        fail(f"info --reader tiff on the SVS: {txt!r}")
    return 1


def check_unknown():
    checked = 0
    if os.path.exists(BOXES):
        txt = run("info", BOXES).stdout
        if "mpp:      unknown" not in txt:
            fail(f"info boxes.tiff (72 dpi in centimetres): {txt!r}")
        checked += 1
    # 300 dpi in inches, no unit, 72 dpi in cm: unknown; 20000 pixels per cm: 0.5 um
    a = np.zeros((64, 64), np.uint8)
    a[20:40, 20:40] = 255
    for res, unit, known in (((300, 1), "INCH", False), ((72, 1), "NONE", False),
                             ((283465, 10000), "CENTIMETER", False),
                             ((20000, 1), "CENTIMETER", True)):
        src = os.path.join(work, f"res_{unit}_{res[0]}.tif")
        tifffile.imwrite(src, a, tile=(16, 16), resolution=(res, res), resolutionunit=unit)
        txt = run("info", src).stdout
        if ("mpp:      unknown" in txt) == known:
            fail(f"{unit} {res}: {txt!r}")
        if not known:
            out = os.path.join(work, "never.tif")
            for args in (("edt", src, "-o", out, "--spacing", "auto"),
                         ("gray", src, "-o", out, "--mpp", "1")):
                r = run(*args, ok=False)
                if os.path.exists(out) or src not in r.stderr or len(r.stderr.splitlines()) != 1:
                    fail(f"tilewave {' '.join(args)}: {r.stderr!r} (one line naming the file, "
                         "no output expected)")
        checked += 1
    r = run("gray", BOXES if os.path.exists(BOXES) else src, "-o",
            os.path.join(work, "x.tif"), "--level", "1", "--mpp", "2", ok=False)
    if "--level and --mpp cannot both be given" not in r.stderr:
        fail(f"--level with --mpp: {r.stderr!r}")
    return checked


def main():
    n = check_choices_and_reduction() + check_svs() + check_unknown()
    shutil.rmtree(work, ignore_errors=True)
    print(f"ok: resolution and metadata ({n} groups checked)")


if __name__ == "__main__":
    main()
