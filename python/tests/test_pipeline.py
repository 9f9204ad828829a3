# SPDX-License-Identifier: MIT
# tilewave Python binding: the nuclei pipeline against the CLI commands and its own outputs.
import csv
import os
import subprocess

import numpy as np
import pytest

import tilewave as tw


@pytest.fixture(scope="module")
def rt():
    with tw.Runtime(cpu_workers=2, gpus="none", models="none") as r:
        yield r


@pytest.fixture(scope="module")
def slide(tmp_path_factory):
    p = tmp_path_factory.mktemp("nuclei") / "s.tif"
    tw.sample(str(p), size=(1024, 768), seed=3)
    return str(p)


def cli():
    return os.environ.get("TILEWAVE_CLI", "tilewave")


@pytest.mark.parametrize("memory", ["files", "arrays"])
def test_nuclei_equals_the_cli_steps_and_its_table_its_labels(rt, slide, tmp_path, memory):
    # nuclei() gives the labels the documented CLI sequence gives (docs/objects.md), and the
    # table `tilewave objects` gives of them, whether its intermediate images are files or
    # arrays; and its table describes those labels: one row per label, areas and boxes from
    # the pixels, every object inside the mask and 8-connected.
    work = tmp_path / "w"
    out = str(tmp_path / "n.csv")
    r = tw.nuclei(slide, out, workdir=str(work), memory=memory, runtime=rt)
    assert r["objects"] > 20 and set(r["seconds"]) >= {"fill_holes", "watershed", "objects"}
    assert r["memory"] == memory
    made = sorted(p for p in os.listdir(work))
    assert made == (["labels.tif"] if memory == "arrays" else
                    ["dist.tif", "labels.tif", "markers.tif", "mask.tif", "opened.tif",
                     "peaks.tif"])
    d = tmp_path / "cli"
    d.mkdir()
    f = {k: str(d / (k + ".tif")) for k in ("m", "o", "d", "p", "k", "n")}
    steps = [["fill-holes", slide, "--gray", "hematoxylin", "--threshold", "otsu", "-o", f["m"]],
             ["area-open", f["m"], "--area", "30", "--conn", "8", "-o", f["o"]],
             ["edt", f["o"], "--format", "u16", "--step", "0.5", "-o", f["d"]],
             ["hmax", f["d"], "--h", "2", "--conn", "8", "-o", f["p"]],
             ["label", f["p"], "--conn", "8", "-o", f["k"]],
             ["watershed", f["d"], "--markers", f["k"], "--mask", f["o"], "--negate",
              "--conn", "8", "-o", f["n"]],
             ["objects", f["n"], "--intensity", slide, "--class", "Nucleus", "-o",
              str(d / "n.csv")]]
    for s in steps:
        p = subprocess.run([cli(), *s, "--quiet", "--gpus", "none"], capture_output=True,
                           text=True)
        assert p.returncode == 0, f"{s[0]}: {p.stderr}"
    labels = tw.read(str(work / "labels.tif"))
    np.testing.assert_array_equal(labels, tw.read(f["n"]))
    with open(out, "rb") as a, open(d / "n.csv", "rb") as b:
        assert a.read() == b.read()      # areas in um^2 included (the sample's 0.25 um)
    mask = tw.read(f["o"])
    assert not labels[mask == 0].any()
    n = int(labels.max())
    assert n == r["objects"]
    rows = list(csv.DictReader(open(out)))
    # one row per label (in the order objects end, band by band)
    assert sorted(int(x["label"]) for x in rows) == list(range(1, n + 1))
    area = np.bincount(labels.ravel().astype(np.int64), minlength=n + 1)
    ys, xs = np.nonzero(labels)
    lv = labels[ys, xs].astype(np.int64)
    for row in rows:
        k = int(row["label"])
        assert int(row["area"]) == area[k]
        sel = lv == k
        assert int(row["bbox_x"]) == xs[sel].min() and int(row["bbox_y"]) == ys[sel].min()
        assert int(row["bbox_w"]) == xs[sel].max() - xs[sel].min() + 1
    # every object is one 8-connected piece (a sample of them)
    for k in np.random.default_rng(0).choice(np.arange(1, n + 1), size=min(n, 25),
                                             replace=False):
        one = (labels == k).astype(np.uint8)
        assert tw.label(one, conn=8, return_num=True, runtime=rt)[1] == 1, f"object {k}"


def test_nuclei_cleans_up_and_refuses_bad_arguments(rt, slide, tmp_path):
    out = str(tmp_path / "n.geojson")
    r = tw.nuclei(slide, out, region=(100, 50, 400, 300), runtime=rt)
    assert r["workdir"] is None and os.path.getsize(out) > 0
    assert rt.gpus == [] and r["memory"] == "arrays"   # auto: small, and no GPU
    assert [p for p in os.listdir(tmp_path) if p.startswith(".tw-nuclei-")] == []
    with pytest.raises(ValueError, match="min_area"):
        tw.nuclei(slide, out, min_area=-1, runtime=rt)
    with pytest.raises(ValueError, match="conn"):
        tw.nuclei(slide, out, conn=6, runtime=rt)
    with pytest.raises(ValueError, match="memory"):
        tw.nuclei(slide, out, memory="disk", runtime=rt)
    with pytest.raises(ValueError, match="level"):
        tw.nuclei(slide, out, level=7, runtime=rt)
    with pytest.raises(ValueError, match="region"):
        tw.nuclei(slide, out, region=(1, 2), runtime=rt)
    with pytest.raises(ValueError, match="region"):
        tw.nuclei(slide, out, region="abc", runtime=rt)
    # a whole-number float level is a level (it was a list index: TypeError)
    assert tw.nuclei(slide, out, level=1.0, region=(0, 0, 64, 48), runtime=rt)["objects"] >= 0
    with pytest.raises(TypeError, match="paths"):
        tw.nuclei(np.zeros((4, 4), np.uint8), out, runtime=rt)
