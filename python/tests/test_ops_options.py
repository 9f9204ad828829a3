# SPDX-License-Identifier: MIT
# tilewave Python binding tests: maxtree, height filters, convert, input and output options.
"""The operations and options added for issue 9, each against the CLI on the same input (the
same bytes when the binding is given the CLI's command line as description; else equal
arrays) and against naive numpy references. Run as test_binding.py (ctest py/binding)."""
import ctypes
import os
import subprocess

import numpy as np
import pytest

import tilewave as tw

CLI = os.environ.get("TILEWAVE_CLI")
SAFE = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-")


@pytest.fixture(scope="module")
def rt():
    with tw.Runtime(cpu_workers=2, gpus="none", models="none") as r:
        yield r


@pytest.fixture(scope="module")
def slide(tmp_path_factory):
    """A 1024x768 sample slide (8-bit RGB, levels 1024, 512, 256 wide)."""
    p = str(tmp_path_factory.mktemp("slide") / "s.tif")
    tw.sample(p, size=(1024, 768), seed=2)
    return p


def rng(seed):
    return np.random.default_rng(seed)


def cli(*args):
    """Run the CLI; return its command line as it stores it in the outputs' metadata (None
    when a word would need shell quoting: then only arrays are compared)."""
    if not CLI:
        pytest.skip("TILEWAVE_CLI not set")
    argv = [CLI, *map(str, args), "--quiet"]
    env = dict(os.environ, TILEWAVE_RUNTIME_CPU_WORKERS="2", TILEWAVE_RUNTIME_MODELS="none",
               TILEWAVE_RUNTIME_GPUS="none")
    p = subprocess.run(argv, capture_output=True, text=True, env=env)
    assert p.returncode == 0, f"{' '.join(argv)}: {p.stderr}"
    return " ".join(argv) if all(a and set(a) <= SAFE for a in argv) else None


def tiff_write(path, a):
    tifffile = pytest.importorskip("tifffile")
    tifffile.imwrite(path, a)
    return str(path)


def same_file(py_path, cli_path, line):
    """The same TIFF but for where the tiles lie (workers finish them in any order, so the
    CLI's own runs differ there): every page and pyramid level (SubIFDs too) with the same
    size, type, tiling and compression, and every tile the same compressed bytes; the same
    description when the binding was given the CLI's command line (``line``); the same
    pixels through tw.read."""
    tifffile = pytest.importorskip("tifffile")

    def tiles(fh, page):
        out = []
        for off, n in zip(page.dataoffsets, page.databytecounts):
            fh.seek(off)
            out.append(fh.read(n))
        return out

    with tifffile.TiffFile(str(py_path)) as a, tifffile.TiffFile(str(cli_path)) as b, \
            open(py_path, "rb") as fa, open(cli_path, "rb") as fb:
        assert len(a.pages) == len(b.pages) and len(a.series) == len(b.series)
        pages = list(zip(a.pages, b.pages))
        for sa, sb in zip(a.series, b.series):
            assert len(sa.levels) == len(sb.levels)
            pages += [(la.keyframe, lb.keyframe) for la, lb in zip(sa.levels, sb.levels)]
        for pa, pb in pages:
            for attr in ("shape", "dtype", "compression", "tilewidth", "tilelength",
                         "software"):
                assert getattr(pa, attr) == getattr(pb, attr), attr
            if line is not None:
                assert pa.description == pb.description
            assert tiles(fa, pa) == tiles(fb, pb)
    np.testing.assert_array_equal(tw.read(str(py_path)), tw.read(str(cli_path)))


# ---------------------------------------------------------------- naive max-tree

def naive_maxtree(f, conn):
    """Max-tree straight from its definition: the node of pixel p is the connected component
    of {f >= f(p)} holding p; its canonical pixel the one of largest raster index at level
    f(p); a canonical pixel's parent is the canonical pixel of the nearest lower level whose
    component holding p has a pixel at that level. Returns (parent, area, height) per pixel,
    height being the node's highest level minus its parent's level (root: its own range)."""
    ndi = pytest.importorskip("scipy.ndimage")
    st = ndi.generate_binary_structure(2, 1 if conn == 4 else 2)
    h, w = f.shape
    fl = f.ravel().astype(np.int64)
    levels = sorted(np.unique(fl).tolist())
    lab, canon, size, top = {}, {}, {}, {}
    for v in levels:
        lab[v] = ndi.label(f >= v, st)[0].ravel()
        counts = np.bincount(lab[v])
        tops = np.zeros(len(counts), np.int64)
        np.maximum.at(tops, lab[v], fl)
        for i in np.flatnonzero(fl == v):
            key = (v, lab[v][i])
            canon[key] = max(canon.get(key, -1), i)
        for key in canon:
            if key[0] == v:
                size[key], top[key] = counts[key[1]], tops[key[1]]
    parent = np.empty(h * w, np.int64)
    area = np.empty(h * w, np.int64)
    height = np.empty(h * w, np.int64)
    for i in range(h * w):
        v = fl[i]
        key = (v, lab[v][i])
        c = canon[key]
        area[i] = size[key]
        if i != c:
            parent[i] = c
            continue
        parent[i] = i
        height[i] = top[key] - levels[0]
        for u in reversed([u for u in levels if u < v]):
            if (u, lab[u][i]) in canon:
                parent[i] = canon[(u, lab[u][i])]
                height[i] = top[key] - u
                break
    for i in range(h * w):
        height[i] = height[parent[i] if parent[i] != i and fl[parent[i]] == fl[i] else i]
    return parent.reshape(h, w), area.reshape(h, w), height.reshape(h, w)


def naive_attr_open(f, parent, attr, threshold, keep_root):
    """Every pixel takes the level of its nearest ancestor node (itself included) whose
    attribute is >= threshold (the root survives when keep_root), else 0."""
    fl, pl, al = f.ravel(), parent.ravel(), attr.ravel()
    out = np.empty_like(fl)
    for i in range(fl.size):
        c = i if pl[i] == i or fl[pl[i]] != fl[i] else pl[i]  # the node's canonical pixel
        while True:
            if al[c] >= threshold or (keep_root and pl[c] == c):
                out[i] = fl[c]
                break
            if pl[c] == c:
                out[i] = 0
                break
            c = pl[c]
    return out.reshape(f.shape)


@pytest.mark.parametrize("conn", [4, 8])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_maxtree_matches_naive_definition(rt, conn, dtype):
    # The parent and area images equal the max-tree built from its definition (components
    # of upper level sets, canonical = largest raster index) on a small image with plateaus;
    # area opening and height opening of that naive tree equal tilewave's filters (and
    # scikit-image's area_opening when it is there).
    r = rng(30)
    img = (r.integers(0, 7, (23, 31)) * (1 if dtype == np.uint8 else 9000)).astype(dtype)
    parent, area = tw.maxtree(img, area=True, conn=conn, runtime=rt)
    assert parent.dtype == np.uint32 and area.dtype == np.uint32
    ref_parent, ref_area, ref_height = naive_maxtree(img, conn)
    np.testing.assert_array_equal(parent, ref_parent)
    np.testing.assert_array_equal(area, ref_area)
    flat = img.ravel()
    assert (flat[parent.ravel()] <= flat).all()
    assert (parent.ravel() == np.arange(img.size)).sum() == 1  # one root
    for a in (1, 5, 40):
        np.testing.assert_array_equal(tw.area_open(img, a, conn=conn, tile=16, runtime=rt),
                                      naive_attr_open(img, ref_parent, ref_area, a, False))
    step = 1 if dtype == np.uint8 else 9000
    for hgt in (1, 2 * step, 4 * step):
        np.testing.assert_array_equal(
            tw.height_open(img, hgt, conn=conn, tile=16, runtime=rt),
            naive_attr_open(img, ref_parent, ref_height, hgt, True))
    top = np.iinfo(dtype).max
    inv = (top - img).astype(dtype)
    inv_parent, _, inv_height = naive_maxtree(inv, conn)
    np.testing.assert_array_equal(
        tw.height_close(img, 2 * step, conn=conn, tile=16, runtime=rt),
        (top - naive_attr_open(inv, inv_parent, inv_height, 2 * step, True)).astype(dtype))
    morph = pytest.importorskip("skimage.morphology")
    np.testing.assert_array_equal(tw.area_open(img, 5, conn=conn, runtime=rt),
                                  morph.area_opening(img, 5, connectivity=conn // 4))


def test_maxtree_equals_cli(rt, tmp_path):
    # maxtree of a TIFF through the binding (arrays, path to files) and the CLI, with the
    # area image, 8-connected and 64-bit indices: the same files, the same arrays.
    img = (rng(31).random((90, 120)) * 255).astype(np.uint8)
    p = tiff_write(tmp_path / "in.tif", img)
    for bits, dt in ((32, np.uint32), (64, np.uint64)):
        c_par, c_area = tmp_path / f"c-par{bits}.tif", tmp_path / f"c-area{bits}.tif"
        line = cli("maxtree", p, "-o", c_par, "--area", c_area, "--conn", "8",
                   "--index-bits", bits)
        ref_par, ref_area = tw.read(str(c_par)), tw.read(str(c_area))
        assert ref_par.dtype == dt and ref_area.dtype == dt
        par, area = tw.maxtree(img, area=True, conn=8, index_bits=bits, runtime=rt)
        np.testing.assert_array_equal(par, ref_par)
        np.testing.assert_array_equal(area, ref_area)
        par2 = tw.maxtree(p, conn=8, index_bits=bits, runtime=rt)
        np.testing.assert_array_equal(par2, ref_par)
        py_par, py_area = tmp_path / f"p-par{bits}.tif", tmp_path / f"p-area{bits}.tif"
        assert tw.maxtree(p, str(py_par), area=str(py_area), conn=8, index_bits=bits,
                          description=line, runtime=rt) is None
        same_file(py_par, c_par, line)
        same_file(py_area, c_area, line)
    # a file parent with the area in memory, default 32-bit indices
    only_area = tw.maxtree(p, str(tmp_path / "p2.tif"), area=True, conn=8, runtime=rt)
    np.testing.assert_array_equal(only_area, tw.read(str(tmp_path / "c-area32.tif")))


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_tos_and_grain_equal_cli(rt, tmp_path, dtype):
    # The tree of shapes (parent and area images) and the grain filter through the binding,
    # from arrays and from the file, equal the CLI's outputs; the parent image is a tree over
    # the pixels (every chain ends at a self-pointing canonical pixel); the grain filter with
    # area 1 is the identity and with the whole image's area a constant image.
    img = (rng(41).random((70, 95)) * (250 if dtype == np.uint8 else 60000)).astype(dtype)
    p = tiff_write(tmp_path / "in.tif", img)
    c_par, c_area, c_grain = tmp_path / "c-par.tif", tmp_path / "c-area.tif", tmp_path / "g.tif"
    cli("tos", p, "-o", c_par, "--area", c_area)
    cli("grain", p, "--area", 30, "-o", c_grain)
    par, area = tw.tos(img, area=True, runtime=rt)
    assert par.dtype == np.uint32 and area.dtype == np.uint32
    np.testing.assert_array_equal(par, tw.read(str(c_par)))
    np.testing.assert_array_equal(area, tw.read(str(c_area)))
    np.testing.assert_array_equal(tw.tos(p, runtime=rt), par)
    flat = par.ravel().astype(np.int64)
    roots = np.flatnonzero(flat == np.arange(flat.size))
    assert roots.size >= 1
    hop = flat.copy()
    for _ in range(64):
        hop = flat[hop]
    assert np.all(np.isin(hop, roots))
    g = tw.grain(img, 30, runtime=rt)
    assert g.dtype == img.dtype
    np.testing.assert_array_equal(g, tw.read(str(c_grain)))
    np.testing.assert_array_equal(tw.grain(p, 30, runtime=rt), g)
    np.testing.assert_array_equal(tw.grain(img, 1, runtime=rt), img)
    assert np.unique(tw.grain(img, img.size, runtime=rt)).size == 1
    with pytest.raises(ValueError):
        tw.grain(img, 0, runtime=rt)


def test_tos_batch_of_jobs_at_once(rt):
    # A batch of images (docs/tos.md, "Batches"): every job submitted with wait=False, then
    # waited for, runs together on the runtime; each parent image (and grain result) equals
    # the one computed alone.
    imgs = [(rng(70 + k).random((60 + 7 * k, 90 - 5 * k)) * (250 if k % 2 else 60000))
            .astype(np.uint8 if k % 2 else np.uint16) for k in range(5)]
    alone = [tw.tos(a, runtime=rt) for a in imgs]
    grains = [tw.grain(a, 25, runtime=rt) for a in imgs]
    jobs = [tw.tos(a, runtime=rt, wait=False) for a in imgs]
    gjobs = [tw.grain(a, 25, runtime=rt, wait=False) for a in imgs]
    for j, want in zip(jobs, alone):
        np.testing.assert_array_equal(j.wait(), want)
    for j, want in zip(gjobs, grains):
        np.testing.assert_array_equal(j.wait(), want)


@pytest.mark.parametrize("op", ["height-open", "height-close"])
def test_height_filters_equal_cli(rt, tmp_path, op):
    # height_open / height_close of a 16-bit TIFF equal `tilewave height-open/close` (files
    # byte for byte, arrays), with output options and small tiles.
    img = (rng(32).random((100, 140)) * 3000).astype(np.uint16)
    p = tiff_write(tmp_path / "in.tif", img)
    c_out = tmp_path / "cli.tif"
    line = cli(op, p, "--height", "400", "-o", c_out, "--conn", "8", "--tile", "32x32",
               "--compression", "zstd")
    fn = tw.height_open if op == "height-open" else tw.height_close
    np.testing.assert_array_equal(fn(img, 400, conn=8, tile=32, runtime=rt),
                                  tw.read(str(c_out)))
    fn(p, 400, str(tmp_path / "py.tif"), conn=8, tile=32, compression="zstd",
       description=line, runtime=rt)
    same_file(tmp_path / "py.tif", c_out, line)


# ---------------------------------------------------------------- convert

def test_convert_equals_cli_and_read(rt, slide, tmp_path):
    # convert of a region as a pyramid (both layouts, zstd, 128 tiles in and out) writes the
    # CLI's file; its level 0 is tw.read of that region and level 1 the 2x2 mean.
    region = (128, 64, 640, 512)
    small = tw.Runtime(cpu_workers=2, gpus="none", models="none", io_tiff_tile=(128, 128))
    for layout in ("tiff", "ome"):
        c_out = tmp_path / f"cli-{layout}.tif"
        line = cli("convert", slide, "-o", c_out, "--region", "128,64,640,512", "--pyramid",
                   "--layout", layout, "--tile", "128x128", "--compression", "zstd",
                   "--set", "io.tiff_tile=128x128")
        py_out = tmp_path / f"py-{layout}.tif"
        assert tw.convert(slide, str(py_out), region=region, pyramid=True, layout=layout,
                          tile=128, compression="zstd", description=line,
                          runtime=small) is None
        same_file(py_out, c_out, line)
        np.testing.assert_array_equal(tw.read(str(py_out)), tw.read(slide, region=region))
    levels = tw.info(str(tmp_path / "py-tiff.tif"))["levels"]
    assert [lv[:2] for lv in levels[:2]] == [(640, 512), (320, 256)]
    tifffile = pytest.importorskip("tifffile")
    with tifffile.TiffFile(str(tmp_path / "py-ome.tif")) as t:
        assert t.is_ome and len(t.pages) == 1  # the levels are SubIFDs of the first page
        assert [lv.shape[:2] for lv in t.series[0].levels[:2]] == [(512, 640), (256, 320)]
    a = tw.read(slide, region=region).astype(np.int64)
    mean = (a[0::2, 0::2] + a[1::2, 0::2] + a[0::2, 1::2] + a[1::2, 1::2] + 2) // 4
    got = tw.read(str(tmp_path / "py-tiff.tif"), level=1).astype(np.int64)
    assert np.abs(got - mean).max() <= 1
    small.close()
    # a level of the slide, JPEG with a quality
    c_out = tmp_path / "cli-l1.tif"
    line = cli("convert", slide, "-o", c_out, "--level", "1", "--compression", "jpeg",
               "--quality", "70")
    tw.convert(slide, str(tmp_path / "py-l1.tif"), level=1, compression="jpeg", quality=70,
               description=line, runtime=rt)
    same_file(tmp_path / "py-l1.tif", c_out, line)


# ---------------------------------------------------------------- input options

def test_gray_options_equal_cli_and_numpy(rt, slide, tmp_path):
    # gray with a region is the crop of the whole result; threshold N / invert is the
    # pointwise mask of the luminance; hematoxylin with given stain vectors, Otsu, tissue and
    # the tissue mask equal the CLI's files.
    full = tw.gray(slide, runtime=rt)
    rgb = tw.read(slide).astype(np.int64)
    lum = ((299 * rgb[..., 0] + 587 * rgb[..., 1] + 114 * rgb[..., 2] + 500) // 1000)
    np.testing.assert_array_equal(full, lum.astype(np.uint8))
    np.testing.assert_array_equal(tw.gray(slide, region=(100, 50, 300, 200), runtime=rt),
                                  full[50:250, 100:400])
    np.testing.assert_array_equal(tw.gray(slide, level=1, region=(10, 20, 64, 32),
                                          runtime=rt),
                                  tw.gray(slide, level=1, runtime=rt)[20:52, 10:74])
    np.testing.assert_array_equal(tw.gray(slide, threshold=180, runtime=rt),
                                  np.where(lum > 180, 255, 0).astype(np.uint8))
    np.testing.assert_array_equal(tw.gray(slide, threshold=180, invert=True, runtime=rt),
                                  np.where(lum <= 180, 255, 0).astype(np.uint8))
    stains = [0.6, 0.75, 0.3, 0.1, 0.95, 0.15, 0.3, 0.55, 0.8]
    c_out = tmp_path / "c-hema.tif"
    line = cli("gray", slide, "-o", c_out, "--mode", "hematoxylin", "--stain-vectors",
               ",".join(map(str, stains)), "--region", "0,0,512,384")
    tw.gray(slide, str(tmp_path / "p-hema.tif"), mode="hematoxylin",
            stains=np.reshape(stains, (3, 3)), region=(0, 0, 512, 384), description=line,
            runtime=rt)
    same_file(tmp_path / "p-hema.tif", c_out, line)
    default_h = tw.gray(slide, mode="hematoxylin", region=(0, 0, 512, 384), runtime=rt)
    assert not np.array_equal(default_h, tw.read(str(c_out)))  # the stains did change it
    c_out, c_mask = tmp_path / "c-otsu.tif", tmp_path / "c-mask.tif"
    line = cli("gray", slide, "-o", c_out, "--threshold", "otsu", "--invert", "--tissue-mask",
               c_mask)
    rep = {}
    tw.gray(slide, str(tmp_path / "p-otsu.tif"), threshold="otsu", invert=True,
            tissue_mask=str(tmp_path / "p-mask.tif"), input_report=rep, description=line,
            runtime=rt)
    same_file(tmp_path / "p-otsu.tif", c_out, line)
    np.testing.assert_array_equal(tw.read(str(tmp_path / "p-mask.tif")), tw.read(str(c_mask)))
    assert rep["otsu_level"] >= 0 and 0 < rep["threshold"] < 255
    assert 0 < rep["tissue_fraction"] < 1 and rep["reads"] >= rep["skipped"] >= 0
    t = rep["threshold"]
    np.testing.assert_array_equal(tw.gray(slide, threshold=t, invert=True, runtime=rt),
                                  tw.read(str(c_out)))


def test_filter_input_options_equal_cli(rt, slide, tmp_path):
    # area_open, edt and reconstruct-based filters on a slide with level, region, gray,
    # threshold and tissue: the CLI's files; a region equals the operation on the cropped
    # gray array.
    c_out = tmp_path / "c-ao.tif"
    line = cli("area-open", slide, "--area", "30", "-o", c_out, "--level", "1", "--region",
               "32,16,400,300", "--gray", "g", "--tile", "64x64")
    tw.area_open(slide, 30, str(tmp_path / "p-ao.tif"), level=1, region=(32, 16, 400, 300),
                 gray="g", tile=64, description=line, runtime=rt)
    same_file(tmp_path / "p-ao.tif", c_out, line)
    g = tw.read(slide, level=1, region=(32, 16, 400, 300))[..., 1].copy()
    np.testing.assert_array_equal(tw.read(str(c_out)), tw.area_open(g, 30, runtime=rt))
    # a thresholded eosin mask with tissue skipping: the same result as without skipping
    c_out = tmp_path / "c-fh.tif"
    line = cli("fill-holes", slide, "-o", c_out, "--gray", "eosin", "--threshold", "60",
               "--tissue", "--tile", "128x128")
    rep = {}
    tw.fill_holes(slide, str(tmp_path / "p-fh.tif"), gray="eosin", threshold=60, tissue=True,
                  tile=128, input_report=rep, description=line, runtime=rt)
    same_file(tmp_path / "p-fh.tif", c_out, line)
    assert rep["reads"] > 0 and rep["threshold"] == 60
    np.testing.assert_array_equal(
        tw.read(str(c_out)), tw.fill_holes(slide, gray="eosin", threshold=60, tile=128,
                                           runtime=rt))
    # edt keeps its own threshold; gray and region apply
    c_out = tmp_path / "c-edt.tif"
    line = cli("edt", slide, "-o", c_out, "--threshold", "otsu", "--invert", "--region",
               "0,0,512,512", "--gray", "r")
    tw.edt(slide, str(tmp_path / "p-edt.tif"), threshold="otsu", invert=True,
           region=(0, 0, 512, 512), gray="r", description=line, runtime=rt)
    same_file(tmp_path / "p-edt.tif", c_out, line)
    # reconstruct: the options apply to marker and mask (as the CLI's)
    c_out = tmp_path / "c-rec.tif"
    line = cli("reconstruct", "--marker", slide, "--mask", slide, "-o", c_out, "--region",
               "0,0,256,256", "--threshold", "200")
    rep = {}
    got = tw.reconstruct(slide, slide, region=(0, 0, 256, 256), threshold=200,
                         input_report=rep, runtime=rt)
    np.testing.assert_array_equal(got, tw.read(str(c_out)))
    assert rep["threshold"] == 200


def test_maxtree_input_options_equal_cli(rt, slide, tmp_path):
    # maxtree of a slide region at level 1 in hematoxylin: the CLI's parent image; equal to
    # maxtree of that gray array.
    c_out = tmp_path / "c.tif"
    cli("maxtree", slide, "-o", c_out, "--level", "1", "--region", "0,0,200,150", "--gray",
        "hematoxylin")
    ref = tw.read(str(c_out))
    got = tw.maxtree(slide, level=1, region=(0, 0, 200, 150), gray="hematoxylin", runtime=rt)
    np.testing.assert_array_equal(got, ref)
    g = tw.gray(slide, mode="hematoxylin", level=1, region=(0, 0, 200, 150), runtime=rt)
    np.testing.assert_array_equal(tw.maxtree(g, runtime=rt), ref)


# ---------------------------------------------------------------- output options

def test_output_options_equal_cli(rt, slide, tmp_path):
    # compression, JPEG quality, pyramid, OME layout and the overlay (JPEG and deflate) on an
    # operation's output: the CLI's files.
    c_out, c_ov = tmp_path / "c.ome.tif", tmp_path / "c-ov.tif"
    line = cli("open-rec", slide, "--radius", "2", "-o", c_out, "--compression", "jpeg",
               "--quality", "80", "--pyramid", "--layout", "ome", "--overlay", c_ov,
               "--tile", "128x128")
    p_out, p_ov = tmp_path / "p.ome.tif", tmp_path / "p-ov.tif"
    tw.open_rec(slide, 2, str(p_out), compression="jpeg", quality=80, pyramid=True,
                layout="ome", overlay=str(p_ov), tile=128, description=line, runtime=rt)
    same_file(p_out, c_out, line)
    same_file(p_ov, c_ov, line)
    ov = tw.read(str(p_ov))
    assert ov.shape == (768, 1024, 3) and ov.dtype == np.uint8
    tw.area_open(slide, 20, str(tmp_path / "d.tif"), overlay=str(tmp_path / "d-ov.tif"),
                 overlay_deflate=True, runtime=rt)
    assert tw.info(str(tmp_path / "d-ov.tif"))["channels"] == 3


# ---------------------------------------------------------------- progress and cancel

def test_progress_and_cancel_new_ops(rt, slide, tmp_path):
    # maxtree, height_open, convert and gray call progress up to done == total (also when
    # the job ended before the callback was set); returning False from it cancels convert
    # and height_open (Canceled, no output file left), and so does Job.cancel().
    img = (rng(33).random((300, 300)) * 255).astype(np.uint8)
    for run in (lambda cb: tw.maxtree(img, progress=cb, progress_interval=0, runtime=rt),
                lambda cb: tw.height_open(img, 10, tile=32, progress=cb, progress_interval=0,
                                          runtime=rt),
                lambda cb: tw.convert(slide, str(tmp_path / "c.tif"), tile=128, progress=cb,
                                      progress_interval=0, runtime=rt),
                lambda cb: tw.gray(slide, tile=128, progress=cb, progress_interval=0,
                                   runtime=rt)):
        calls = []
        run(lambda d, t, e: calls.append((d, t)))
        assert calls and calls[-1][0] == calls[-1][1] > 0
        assert [c[0] for c in calls] == sorted(c[0] for c in calls)
    # a job that ends before its callback is set still gets the last call, done == total
    for _ in range(20):
        calls = []
        tw.maxtree(np.eye(2, dtype=np.uint8), progress=lambda d, t, e: calls.append((d, t)),
                   runtime=rt)
        assert calls and calls[-1][0] == calls[-1][1]
    out = tmp_path / "cancel.tif"
    with pytest.raises(tw.Canceled):
        tw.convert(slide, str(out), tile=64, progress=lambda d, t, e: False,
                   progress_interval=0, runtime=rt)
    assert not out.exists()
    with pytest.raises(tw.Canceled):
        tw.height_open(slide, 5, str(out), tile=64, progress=lambda d, t, e: False,
                       progress_interval=0, runtime=rt)
    assert not out.exists()
    big = (rng(34).random((1200, 1200)) * 255).astype(np.uint8)
    job = tw.height_open(big, 5, tile=32, wait=False, runtime=rt)
    job.cancel()
    with pytest.raises(tw.Canceled):
        job.wait()
    job.close()
    # gray to an array with wait=False: the result is read back when the job ends
    with tw.gray(slide, region=(0, 0, 64, 64), wait=False, runtime=rt) as j:
        assert j.wait().shape == (64, 64)


# ---------------------------------------------------------------- errors

def test_bad_options_raise_clear_errors(rt, slide, tmp_path):
    # Bad values are ValueError / TypeError naming the function and option before anything
    # runs; what only the library can judge is tilewave.Error with its message.
    img = np.zeros((8, 8), np.uint8)
    out = str(tmp_path / "o.tif")
    with pytest.raises(ValueError, match=r"tilewave.gray: region must be \(x, y, w, h\)"):
        tw.gray(slide, region=(0, 0, 0, 5), runtime=rt)
    with pytest.raises(ValueError, match="region must be"):
        tw.area_open(slide, 5, region=(1, 2, 3), runtime=rt)
    with pytest.raises(ValueError, match="threshold apply to path inputs only"):
        tw.area_open(img, 5, threshold=3, runtime=rt)
    with pytest.raises(ValueError, match="level, region apply to path inputs only"):
        tw.maxtree(img, level=1, region=(0, 0, 2, 2), runtime=rt)
    with pytest.raises(ValueError, match="compression, pyramid apply to out=PATH only"):
        tw.maxtree(img, pyramid=True, compression="zstd", runtime=rt)
    with pytest.raises(TypeError, match="tilewave.convert: unexpected keyword argument "
                                        "'threshold'"):
        tw.convert(slide, out, threshold=4, runtime=rt)
    with pytest.raises(TypeError, match="unexpected keyword argument 'invert_mask'"):
        tw.gray(slide, invert_mask=True, runtime=rt)
    with pytest.raises(ValueError, match=r"unknown layout 'bigtiff' \(tiff, ome\)"):
        tw.gray(slide, out, layout="bigtiff", runtime=rt)
    with pytest.raises(ValueError, match="quality must be an integer 1..100"):
        tw.gray(slide, out, compression="jpeg", quality=0, runtime=rt)
    with pytest.raises(ValueError, match="unknown gray mode 'hema'"):
        tw.edt(slide, gray="hema", runtime=rt)
    with pytest.raises(ValueError, match="stains must be 9 finite numbers"):
        tw.gray(slide, mode="eosin", stains=[1, 2, 3], runtime=rt)
    with pytest.raises(ValueError, match="threshold must be a finite number or 'otsu'"):
        tw.gray(slide, threshold="otsus", runtime=rt)
    with pytest.raises(ValueError, match="invert applies with a threshold"):
        tw.gray(slide, invert=True, runtime=rt)
    with pytest.raises(ValueError, match="unknown reader 'vips'"):
        tw.gray(slide, reader="vips", runtime=rt)
    with pytest.raises(ValueError, match="index_bits must be 0, 32 or 64"):
        tw.maxtree(img, index_bits=16, runtime=rt)
    for op in (tw.maxtree, tw.tos):
        name = op.__name__
        with pytest.raises(TypeError, match=f"tilewave.{name}: area must be True, False or a "
                                            "path, not 3"):
            op(img, area=3, runtime=rt)
        with pytest.raises(ValueError, match=f"tilewave.{name}: area and out are the same file"):
            op(img, out, area=out, runtime=rt)
    with pytest.raises(ValueError, match="overlay needs a slide path"):
        tw.area_open(img, 3, out, overlay=str(tmp_path / "ov.tif"), runtime=rt)
    with pytest.raises(TypeError, match="input_report must be a dict"):
        tw.gray(slide, input_report=[], runtime=rt)
    with pytest.raises(ValueError, match="height_open: the area or height must be an integer"):
        tw.height_open(img, -1, runtime=rt)
    with pytest.raises(TypeError, match="unexpected keyword argument 'value'"):
        tw.area_open(img, 3, value=4, runtime=rt)
    # the library's own checks
    with pytest.raises(tw.Error) as e:
        tw.maxtree(img, conn=6, runtime=rt)
    assert e.value.status == "TW_E_INVALID" and "connectivity 6" in e.value.message
    with pytest.raises(tw.Error) as e:
        tw.gray(slide, out, quality=50, runtime=rt)  # quality without JPEG
    assert e.value.status == "TW_E_INVALID" and not os.path.exists(out)
    with pytest.raises(tw.Error) as e:
        tw.gray(slide, region=(1000, 0, 100, 100), runtime=rt)  # outside the level
    assert e.value.status == "TW_E_INVALID"
    gray_tif = str(tmp_path / "g.tif")
    tw.gray(slide, gray_tif, region=(0, 0, 64, 64), runtime=rt)
    with pytest.raises(tw.Error) as e:
        tw.area_open(gray_tif, 3, tissue=True, runtime=rt)  # tissue needs RGB
    assert e.value.status == "TW_E_FORMAT" and "RGB" in e.value.message
    with pytest.raises(tw.Error, match="level 9"):
        tw.convert(slide, out, level=9, runtime=rt)


def test_every_options_struct_matches_the_library():
    # Each ctypes mirror of an options struct (tw_input and tw_output nested in them) has the
    # size the library's _init writes into struct_size: the binding and the headers agree.
    from tilewave import _core, _lib
    from tilewave._lib import lib
    for name in ("gray", "mrecon", "mrecon_filter", "edt", "attr_filter", "maxtree", "tos",
                 "grain", "convert", "sample"):
        cls = {"gray": _lib.GrayOpts, "mrecon": _lib.MreconOpts,
               "mrecon_filter": _lib.MreconFilterOpts, "edt": _lib.EdtOpts,
               "attr_filter": _lib.AttrFilterOpts,
               "maxtree": _lib.MaxtreeOpts, "tos": _lib.TosOpts, "grain": _lib.GrainOpts,
               "convert": _lib.ConvertOpts, "sample": _lib.SampleOpts}[name]
        o = _core._init(getattr(lib, f"tw_{name}_opts_init"), cls)
        assert o.struct_size == ctypes.sizeof(cls)


# ---------------------------------------------------------------- resolution

def area_mean(a, k):
    """k x k block means over the pixels inside the image, rounded half up (docs/io.md)."""
    h, w = a.shape[:2]
    H, W = -(-h // k), -(-w // k)
    pad = [(0, H * k - h), (0, W * k - w)] + [(0, 0)] * (a.ndim - 2)
    s = np.pad(a.astype(np.int64), pad).reshape(H, k, W, k, *a.shape[2:]).sum(axis=(1, 3))
    n = np.pad(np.ones((h, w), np.int64), pad[:2]).reshape(H, k, W, k).sum(axis=(1, 3))
    n = n[..., None] if a.ndim == 3 else n
    return ((s + n // 2) // n).astype(a.dtype)


def test_mpp_equals_cli_and_numpy(rt, slide, tmp_path):
    # mpp= picks the coarsest level at least as fine (the sample: 0.25 um, levels 1024 and 512
    # wide) and reduces it k x k by area average when k >= 2 times finer: the same file as the
    # CLI's --mpp, equal to a numpy area average of tw.read of the level; the report says it.
    assert [lv[0] for lv in tw.info(slide)["levels"]] == [1024, 512]
    assert tw.choose_level(slide, mpp=0.5) == {"level": 1, "reduce": 1, "size": (512, 384),
                                               "mpp": (0.5, 0.5), "magnification": 0.0}
    c = tw.choose_level(slide, mpp=3.0)
    assert (c["level"], c["reduce"], c["size"], c["mpp"]) == (1, 6, (86, 64), (3.0, 3.0))
    c_out = tmp_path / "cli-mpp.tif"
    line = cli("convert", slide, "-o", c_out, "--mpp", "3")
    rep = {}
    tw.convert(slide, str(tmp_path / "py-mpp.tif"), mpp=3, description=line,
               input_report=rep, runtime=rt)
    same_file(tmp_path / "py-mpp.tif", c_out, line)
    assert (rep["level"], rep["reduce"], rep["mpp"]) == (1, 6, (3.0, 3.0))
    want = area_mean(tw.read(slide, level=1), 6)
    np.testing.assert_array_equal(tw.read(str(tmp_path / "py-mpp.tif")), want)
    assert tw.info(str(tmp_path / "py-mpp.tif"))["mpp"] == pytest.approx((3.0, 3.0))
    # an array result at 1 um: level 1 reduced 2x2, the shape choose_level() gives
    g = tw.gray(slide, mpp=1.0, runtime=rt)
    assert g.shape == (192, 256)
    # (the RGB reduced first, then its luminance)
    r = area_mean(tw.read(slide, level=1), 2).astype(np.int64)
    np.testing.assert_array_equal(g, (299 * r[..., 0] + 587 * r[..., 1] + 114 * r[..., 2] +
                                      500) // 1000)
    with pytest.raises(ValueError, match="cannot both be given"):
        tw.gray(slide, level=1, mpp=0.5, runtime=rt)
    with pytest.raises(ValueError, match="positive number"):
        tw.gray(slide, mpp=-1, runtime=rt)
    with pytest.raises(tw.Error, match="objective power of .* is unknown"):
        tw.choose_level(slide, magnification=5)
    with pytest.raises(tw.Error, match="finer than level 0"):
        tw.convert(slide, str(tmp_path / "never.tif"), mpp=0.1, runtime=rt)
    assert not (tmp_path / "never.tif").exists()
