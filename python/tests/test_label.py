# SPDX-License-Identifier: MIT
# tilewave Python binding: label and objects against a naive flood fill and the CLI.
import csv
import json
import os

import numpy as np
import pytest

import tilewave as tw


@pytest.fixture(scope="module")
def rt():
    with tw.Runtime(cpu_workers=2, gpus="none", models="none") as r:
        yield r


def naive_label(m, conn):
    """Flood fill from each unlabelled foreground pixel in raster order."""
    h, w = m.shape
    out = np.zeros((h, w), np.uint64)
    n = 0
    nb = [(-1, 0), (1, 0), (0, -1), (0, 1)]
    if conn == 8:
        nb += [(-1, -1), (-1, 1), (1, -1), (1, 1)]
    for y in range(h):
        for x in range(w):
            if not m[y, x] or out[y, x]:
                continue
            n += 1
            out[y, x] = n
            stack = [(y, x)]
            while stack:
                cy, cx = stack.pop()
                for dy, dx in nb:
                    ny, nx = cy + dy, cx + dx
                    if 0 <= ny < h and 0 <= nx < w and m[ny, nx] and not out[ny, nx]:
                        out[ny, nx] = n
                        stack.append((ny, nx))
    return out, n


@pytest.mark.parametrize("conn", [4, 8])
@pytest.mark.parametrize("tile", [1, 5, (7, 3), 64])
def test_label_equals_flood_fill(rt, conn, tile):
    m = np.random.default_rng(conn * 100 + (tile if isinstance(tile, int) else 7)).random(
        (37, 41)) < 0.55
    want, n = naive_label(m, conn)
    got, num = tw.label(m, conn=conn, tile=tile, return_num=True, runtime=rt)
    assert got.dtype == np.uint32 and num == n
    np.testing.assert_array_equal(got, want.astype(np.uint32))
    wide = tw.label(m.astype(np.uint16) * 300, conn=conn, tile=tile, label_bits=64, runtime=rt)
    assert wide.dtype == np.uint64
    np.testing.assert_array_equal(wide, want)


def test_label_bad_options(rt):
    m = np.ones((4, 4), np.uint8)
    with pytest.raises(ValueError):
        tw.label(m, label_bits=16, runtime=rt)
    with pytest.raises(tw.Error, match="connectivity 6"):
        tw.label(m, conn=6, runtime=rt)
    with pytest.raises(TypeError):
        tw.label(m.astype(np.float32), runtime=rt)


def test_objects_table_and_geojson(rt, tmp_path):
    tifffile = pytest.importorskip("tifffile")
    m = np.random.default_rng(5).random((30, 50)) < 0.4
    labels, n = tw.label(m, return_num=True, runtime=rt)
    inten = np.arange(30 * 50, dtype=np.uint16).reshape(30, 50)
    lp, ip = str(tmp_path / "l.tif"), str(tmp_path / "i.tif")
    tifffile.imwrite(lp, labels)
    tifffile.imwrite(ip, inten)
    assert tw.objects(lp, str(tmp_path / "o.csv"), intensity=ip, runtime=rt) == n
    with open(tmp_path / "o.csv") as f:
        rows = {int(r["label"]): r for r in csv.DictReader(f)}
    assert sorted(rows) == list(range(1, n + 1))
    for lb, r in rows.items():
        ys, xs = np.nonzero(labels == lb)
        assert int(r["area"]) == len(ys)
        assert float(r["centroid_x"]) == pytest.approx(xs.mean(), abs=1e-9)
        assert float(r["intensity_mean"]) == pytest.approx(inten[ys, xs].mean(), abs=1e-6)
        assert int(r["intensity_max"]) == inten[ys, xs].max()
    # labels written from an array carry no pixel size: none in the table unless given
    assert rows[1]["area_um2"] == ""
    assert tw.objects(lp, str(tmp_path / "p.csv"), pixel_size=(0.5, 0.25), runtime=rt) == n
    with open(tmp_path / "p.csv") as f:
        for r in csv.DictReader(f):
            assert float(r["area_um2"]) == int(r["area"]) * 0.125
    for bad in (0, -1.0, float("nan"), float("inf"), 10**400, (1.0,), "x"):
        with pytest.raises(ValueError, match="pixel_size"):
            tw.objects(lp, str(tmp_path / "q.csv"), pixel_size=bad, runtime=rt)
    assert not os.path.exists(tmp_path / "q.csv")
    gj = str(tmp_path / "o.json")
    assert tw.objects(lp, gj, format="geojson", classification="Nucleus", runtime=rt) == n
    with open(gj) as f:
        d = json.load(f)
    assert len(d["features"]) == n
    p = d["features"][0]["properties"]
    assert p["objectType"] == "detection" and p["classification"]["name"] == "Nucleus"
    with pytest.raises(ValueError):
        tw.objects(lp, str(tmp_path / "x.csv"), format="xml", runtime=rt)
    with pytest.raises(tw.Error):
        tw.objects(lp, str(tmp_path / "x.txt"), runtime=rt)
    assert not os.path.exists(tmp_path / "x.txt")
