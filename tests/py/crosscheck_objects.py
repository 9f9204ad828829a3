#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# tilewave tests: `tilewave objects` through the CLI vs skimage.measure.regionprops and shapely.
"""Cross-check `tilewave objects` (GeoJSON and CSV) on label images made by
skimage.measure.label from random masks (noise, blobs with holes, rings with islands in their
holes, objects crossing every band, one object covering the image, no object), with band
heights from 1 row to more than the image, and 4- and 8-connected labels.

What must hold:
  per object (every label, each once): area, centroid (mean column, row), bounding box and,
      with --intensity, intensity mean/min/max equal skimage.measure.regionprops(labels,
      intensity) (centroid and mean to 1e-9); perimeter equals the naive count of pixel sides
      between the object and anything else (image edge included); area_um2 = area * mpp^2
  GeoJSON: a FeatureCollection of Features with "objectType": "detection" (and the
      classification given); every geometry valid for shapely (closed rings, holes inside
      their shell, no self-touching ring), its area equal to the pixel count, its boundary
      length equal to the perimeter, and its union equal to the object's pixels as squares
  level-0 coordinates: --level 1 of a pyramid multiplies coordinates by its downsample;
      --region shifts them by the region's origin
  CSV: the same numbers as the GeoJSON's measurements
  the same objects and numbers for every band height; objects in order of last row, label;
      the same bytes for 1, 2, 3 and 7 workers
Bad options exit 2 (or 1 for unreadable inputs) with one line and write nothing.

Usage: crosscheck_objects.py TILEWAVE_CLI [WORKDIR]
Exit status: 0 when everything matches, 1 at the first mismatch (printed), 77 when numpy,
scikit-image, tifffile or shapely is missing (a skip for ctest).
"""
import csv
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import tifffile
    from shapely.geometry import box, shape
    from shapely.ops import unary_union
    from skimage.measure import label, regionprops
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"SKIP: {e} (install python3-numpy python3-skimage python3-tifffile python3-shapely)")
    sys.exit(77)

cli = sys.argv[1] if len(sys.argv) > 1 else "tilewave"
work = tempfile.mkdtemp(prefix="tw-crosscheck-objects-",
                        dir=sys.argv[2] if len(sys.argv) > 2 else None)
checked = 0


class Mismatch(Exception):
    pass


def run(args, out):
    path = os.path.join(work, out)
    if os.path.exists(path):
        os.remove(path)
    cmd = [cli, "objects", *args, "-o", path, "--quiet"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise Mismatch(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")
    return path


def perimeters(lab):
    """Pixel sides between each label and anything else (padding = outside)."""
    p = np.pad(lab, 1)
    per = {}
    for a, b in ((p[1:, :], p[:-1, :]), (p[:, 1:], p[:, :-1])):
        d = a != b
        for v in (a[d], b[d]):
            for k, n in zip(*np.unique(v[v != 0], return_counts=True)):
                per[int(k)] = per.get(int(k), 0) + int(n)
    return per


def close(a, b, tol=1e-9):
    return abs(a - b) <= tol * max(1.0, abs(b))


def check_props(what, meas, r, per, inten, mpp=None):
    y0, x0, y1, x1 = r.bbox
    want = {"area": r.area, "centroid_x": r.centroid[1], "centroid_y": r.centroid[0],
            "bbox_x": x0, "bbox_y": y0, "bbox_w": x1 - x0, "bbox_h": y1 - y0,
            "perimeter": per[r.label]}
    if inten is not None:
        want.update(intensity_mean=r.intensity_mean, intensity_min=r.intensity_min,
                    intensity_max=r.intensity_max)
    if mpp:
        want["area_um2"] = r.area * mpp * mpp
    for k, v in want.items():
        if k not in meas or not close(float(meas[k]), float(v)):
            raise Mismatch(f"{what} label {r.label}: {k} = {meas.get(k)!r}, expected {v!r}")


def check_geojson(what, path, lab, inten, scale=1.0, dx=0.0, dy=0.0, cls=None, mpp=None):
    global checked
    with open(path) as f:
        d = json.load(f)
    if d.get("type") != "FeatureCollection":
        raise Mismatch(f"{what}: not a FeatureCollection")
    props = {r.label: r for r in regionprops(lab, intensity_image=inten)}
    per = perimeters(lab)
    seen, order = set(), []
    for f in d["features"]:
        p = f["properties"]
        lb = p["label"]
        if p.get("objectType") != "detection" or f.get("type") != "Feature":
            raise Mismatch(f"{what}: label {lb} is not a detection Feature")
        if cls and p.get("classification", {}).get("name") != cls:
            raise Mismatch(f"{what}: label {lb} has no classification {cls}")
        if lb in seen or lb not in props:
            raise Mismatch(f"{what}: label {lb} twice or unknown")
        seen.add(lb)
        r = props[lb]
        order.append((int(r.coords[:, 0].max()), lb))
        check_props(what, p["measurements"], r, per, inten, mpp)
        g = shape(f["geometry"])
        for poly in getattr(g, "geoms", [g]):
            for ring in [poly.exterior, *poly.interiors]:
                c = ring.coords
                if c[0] != c[-1]:
                    raise Mismatch(f"{what}: label {lb} has an open ring")
        if not g.is_valid:
            raise Mismatch(f"{what}: label {lb}: invalid geometry")
        if not close(g.area, r.area * scale * scale) or not close(g.length, per[lb] * scale):
            raise Mismatch(f"{what}: label {lb}: polygon area {g.area} / length {g.length}, "
                           f"pixels {r.area} / perimeter {per[lb]} (scale {scale})")
        if lab.size <= 4000:
            px = unary_union([box(x * scale + dx, y * scale + dy, (x + 1) * scale + dx,
                                  (y + 1) * scale + dy) for y, x in r.coords])
            if g.symmetric_difference(px).area > 1e-9:
                raise Mismatch(f"{what}: label {lb}: the outline is not the pixels' union")
        checked += 1
    if seen != set(props):
        raise Mismatch(f"{what}: {len(seen)} objects, expected {len(props)}")
    if order != sorted(order):
        raise Mismatch(f"{what}: objects not in order of last row, label")
    return d


def masks(rng):
    yield "noise", rng.random((45, 67)) < 0.5
    yy, xx = np.mgrid[0:90, 0:120]
    blobs = np.zeros((90, 120), bool)
    for _ in range(12):
        cy, cx, r = rng.integers(0, 90), rng.integers(0, 120), rng.integers(2, 20)
        blobs |= (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
    yield "blobs", blobs & (rng.random(blobs.shape) > 0.05)
    d = np.hypot(yy - 45, xx - 60)
    yield "rings", ((d // 6) % 2 == 0) | ((xx + yy) % 17 == 0)  # islands in holes
    yield "bands", ((xx // 3) % 2 == 0) & (yy > 2)  # tall stripes crossing every band
    yield "full", np.ones((20, 30), bool)
    yield "empty", np.zeros((20, 30), bool)
    yield "tiny", np.ones((1, 1), bool)


def main():
    rng = np.random.default_rng(29)
    for name, m in masks(rng):
        for conn in (1, 2):
            lab = label(m, connectivity=conn).astype(np.uint32)
            inten = rng.integers(0, 65536, lab.shape, dtype=np.uint16)
            lp = os.path.join(work, f"{name}{conn}.tif")
            ip = os.path.join(work, f"{name}{conn}-i.tif")
            tifffile.imwrite(lp, lab, resolution=(1e4 / 0.5, 1e4 / 0.5),
                             resolutionunit="CENTIMETER")
            tifffile.imwrite(ip, inten)
            ref = None
            for bh in ("1", "7", "32", "1000"):
                what = f"{name} conn {conn} band {bh}"
                g = run([lp, "--intensity", ip, "--class", "Nucleus", "--set",
                         f"tile.size=64x{bh}", "--cpu-workers", "1"], "o.geojson")
                with open(g, "rb") as f:
                    one = f.read()
                d = check_geojson(what, g, lab, inten, cls="Nucleus", mpp=0.5)
                if ref is None:
                    ref = d
                elif d != ref:
                    raise Mismatch(f"{what}: another band height gives another table")
                # the bands scan at once: the same bytes for any workers
                for w in ("2", "3", "7"):
                    g = run([lp, "--intensity", ip, "--class", "Nucleus", "--set",
                             f"tile.size=64x{bh}", "--cpu-workers", w], "o.geojson")
                    with open(g, "rb") as f:
                        if f.read() != one:
                            raise Mismatch(f"{what}: {w} workers write other bytes than 1")
            c = run([lp, "--intensity", ip], "o.csv")
            with open(c) as f:
                rows = list(csv.DictReader(f))
            meas = {f["properties"]["label"]: f["properties"]["measurements"]
                    for f in ref["features"]}
            if len(rows) != len(meas):
                raise Mismatch(f"{name} conn {conn}: CSV has {len(rows)} rows")
            for row in rows:
                m_ = meas[int(row["label"])]
                for k, v in m_.items():
                    if not close(float(row[k]), float(v)):
                        raise Mismatch(f"{name} CSV label {row['label']}: {k} {row[k]} vs {v}")
    # 64-bit labels (what `tilewave label` writes past 2^32 - 1 objects): the labels of a
    # 32-bit image (checked against regionprops) plus 2^32 + 12345, as uint64: the same
    # features, outlines and measurements under the shifted labels (regionprops itself cannot
    # take labels that large: it allocates one slot per label value).
    shift = 2 ** 32 + 12345
    lab = label(rng.random((200, 300)) < 0.45, connectivity=2).astype(np.uint32)
    wide = lab.astype(np.uint64)
    wide[wide > 0] += np.uint64(shift)
    lp, wp = os.path.join(work, "narrow.tif"), os.path.join(work, "wide.tif")
    tifffile.imwrite(lp, lab)
    tifffile.imwrite(wp, wide)
    d32 = check_geojson("32-bit labels", run([lp, "--set", "tile.size=64x16"], "narrow.geojson"),
                        lab, None)
    with open(run([wp, "--set", "tile.size=64x16"], "wide.geojson")) as f:
        d64 = json.load(f)
    for f in d32["features"]:
        f["properties"]["label"] += shift
        f["id"] = str(f["properties"]["label"])
    if d32 != d64:
        raise Mismatch("64-bit labels: another table than the 32-bit image's, shifted")
    # Level 1 of a pyramid (labels reduced by their top-left pixel): coordinates times 2;
    # a region: shifted by its origin (times the downsample).
    lab = label(rng.random((256, 256)) < 0.4, connectivity=2).astype(np.uint32)
    lp = os.path.join(work, "pyr-src.tif")
    tifffile.imwrite(lp, lab)
    pyr = os.path.join(work, "pyr.tif")
    p = subprocess.run([cli, "convert", lp, "-o", pyr, "--pyramid", "--tile", "64x64",
                        "--quiet", "--set", "io.tiff_tile=64"], capture_output=True, text=True)
    if p.returncode != 0:
        raise Mismatch(f"convert --pyramid: {p.stderr.strip()}")
    lv1 = tifffile.TiffFile(pyr).series[0].levels[1].asarray()
    g = run([pyr, "--level", "1"], "l1.geojson")
    check_geojson("level 1", g, lv1, None, scale=2.0)
    g = run([pyr, "--level", "1", "--region", "10,20,50,40"], "reg.geojson")
    check_geojson("level 1 region", g, lv1[20:60, 10:60], None, scale=2.0, dx=20, dy=40)
    g = run([pyr, "--level", "1", "--region", "10,20,50,40", "--downsample", "1", "--offset",
             "5,7"], "off.geojson")
    check_geojson("downsample 1 offset", g, lv1[20:60, 10:60], None, scale=1.0, dx=15, dy=27)
    # Bad options: one line, a usage or input error, nothing written.
    bad_out = os.path.join(work, "bad.geojson")
    small = os.path.join(work, "tiny2-i.tif")
    for bad, code in ((["--format", "xml"], 2), (["--intensity", small], 1),
                      (["--downsample", "0"], 2), (["--offset", "1"], 2),
                      (["-o", os.path.join(work, "bad.txt")], 1)):
        args = [cli, "objects", os.path.join(work, "noise1.tif"), "-o", bad_out, *bad]
        p = subprocess.run(args, capture_output=True, text=True)
        lines = p.stderr.strip().splitlines()
        if p.returncode != code or os.path.exists(bad_out) or \
                os.path.exists(os.path.join(work, "bad.txt")) or not lines:
            raise Mismatch(f"objects {' '.join(bad)}: exit {p.returncode}, {p.stderr!r}")
    print(f"crosscheck_objects: {checked} objects equal to regionprops and valid outlines")


try:
    main()
except Mismatch as e:
    print(f"MISMATCH: {e}")
    sys.exit(1)
