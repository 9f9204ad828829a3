# SPDX-License-Identifier: MIT
# tilewave Python binding tests: numpy results vs naive references, SciPy and the CLI.
"""Run with TILEWAVE_LIBRARY=.../libtilewave.so TILEWAVE_CLI=.../tilewave PYTHONPATH=python
python3 -m pytest -q python/tests. Tests that need the CLI skip without TILEWAVE_CLI."""
import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

import tilewave as tw

CLI = os.environ.get("TILEWAVE_CLI")
HERE = os.path.dirname(os.path.abspath(__file__))
PKG_DIR = os.path.dirname(HERE)


@pytest.fixture(scope="module")
def rt():
    with tw.Runtime(cpu_workers=2, gpus="none", models="none") as r:
        yield r


def rng(seed):
    return np.random.default_rng(seed)


def cli(*args):
    if not CLI:
        pytest.skip("TILEWAVE_CLI not set")
    env = dict(os.environ, TILEWAVE_RUNTIME_CPU_WORKERS="2", TILEWAVE_RUNTIME_MODELS="none")
    p = subprocess.run([CLI, *args, "--quiet"], capture_output=True, text=True, env=env)
    assert p.returncode == 0, f"{' '.join(args)}: {p.stderr}"


def tiff_write(path, a):
    tifffile = pytest.importorskip("tifffile")
    tifffile.imwrite(path, a)
    return str(path)


def tiff_read(path):
    tifffile = pytest.importorskip("tifffile")
    return tifffile.imread(path)


# ---------------------------------------------------------------- naive references

def naive_reconstruct(marker, mask, conn, erosion=False):
    """Reconstruction by repeated geodesic dilation (erosion) until stable."""
    m = marker.astype(np.int64)
    i = mask.astype(np.int64)
    if conn == 8:
        offs = [(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1)]
    else:
        offs = [(0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)]
    h, w = m.shape
    big = np.iinfo(np.int64).max if erosion else np.iinfo(np.int64).min
    while True:
        p = np.full((h + 2, w + 2), big, dtype=np.int64)
        p[1:-1, 1:-1] = m
        stack = [p[1 + dy:1 + dy + h, 1 + dx:1 + dx + w] for dy, dx in offs]
        if erosion:
            nxt = np.maximum(np.min(stack, axis=0), i)
        else:
            nxt = np.minimum(np.max(stack, axis=0), i)
        if np.array_equal(nxt, m):
            return m.astype(marker.dtype)
        m = nxt


# ---------------------------------------------------------------- numpy in, numpy out

@pytest.mark.parametrize("conn", [4, 8])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_reconstruct_matches_naive_loop(rt, conn, dtype):
    # Reconstruction by dilation of a random marker under a random mask, small tiles so
    # borders are exchanged, equals the naive geodesic-dilation loop.
    r = rng(1)
    top = 250 if dtype == np.uint8 else 60000
    mask = r.integers(0, top, (37, 53)).astype(dtype)
    marker = (mask * (r.random(mask.shape) < 0.05)).astype(dtype)
    got = tw.reconstruct(marker, mask, conn=conn, tile=(16, 16), runtime=rt)
    assert got.dtype == mask.dtype and got.shape == mask.shape
    np.testing.assert_array_equal(got, naive_reconstruct(marker, mask, conn))


def test_reconstruct_erosion_matches_naive_loop(rt):
    # Reconstruction by erosion (marker above the mask) equals the naive loop, 4-connected.
    r = rng(2)
    mask = r.integers(0, 200, (29, 31)).astype(np.uint8)
    marker = np.where(r.random(mask.shape) < 0.05, mask, 255).astype(np.uint8)
    got = tw.reconstruct(marker, mask, method="erosion", conn=4, tile=16, runtime=rt)
    np.testing.assert_array_equal(got, naive_reconstruct(marker, mask, 4, erosion=True))


def test_reconstruct_accepts_non_contiguous_views(rt):
    # A transposed / strided view gives the same result as its contiguous copy.
    r = rng(3)
    mask = r.integers(0, 255, (40, 30)).astype(np.uint8)
    marker = (mask // 3).astype(np.uint8)
    a = tw.reconstruct(marker.T, mask.T, runtime=rt)
    b = tw.reconstruct(np.ascontiguousarray(marker.T), np.ascontiguousarray(mask.T), runtime=rt)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("conn", [4, 8])
def test_watershed_matches_skimage_on_a_smooth_image(rt, conn):
    # A smooth float32 image with three markers and a mask: the labels of scikit-image's
    # watershed (no ties on a float image), the same for two tilings; a marker shape that
    # differs is a ValueError before anything runs.
    ndi = pytest.importorskip("scipy.ndimage")
    seg = pytest.importorskip("skimage.segmentation")
    img = ndi.gaussian_filter(rng(29).random((80, 70)), 3).astype(np.float32)
    markers = np.zeros(img.shape, np.uint16)
    markers[5, 5], markers[70, 60], markers[40, 30] = 7, 3, 12
    mask = img > np.percentile(img, 15)
    markers[~mask] = 0
    want = seg.watershed(img, markers, mask=mask, connectivity=1 if conn == 4 else 2)
    for tile in ((9, 9), 4096):
        got = tw.watershed(img, markers, mask=mask, conn=conn, tile=tile, runtime=rt)
        assert got.dtype == np.uint32 and got.shape == img.shape
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError):
        tw.watershed(img, markers[:10], runtime=rt)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32])
def test_edt_matches_scipy(rt, dtype):
    # The f32 distance equals float32(SciPy distance_transform_edt) bit for bit; sq32 equals
    # the squared distance; indices point at a background pixel at exactly that distance.
    ndi = pytest.importorskip("scipy.ndimage")
    r = rng(4)
    img = (r.random((70, 90)) * 100).astype(dtype)
    fg = img > 20
    ref = ndi.distance_transform_edt(fg)
    d, idx = tw.edt(img, threshold=20, indices=True, tile=(32, 16), runtime=rt)
    assert d.dtype == np.float32 and idx.shape == (70, 90, 2) and idx.dtype == np.uint32
    np.testing.assert_array_equal(d, ref.astype(np.float32))
    sq = tw.edt(img, threshold=20, format="sq32", runtime=rt)
    np.testing.assert_array_equal(sq.astype(np.float64), np.round(ref ** 2))
    yy, xx = np.indices(fg.shape)
    d2 = (idx[..., 0].astype(np.int64) - yy) ** 2 + (idx[..., 1].astype(np.int64) - xx) ** 2
    np.testing.assert_array_equal(d2, sq.astype(np.int64))
    assert not fg[idx[..., 0], idx[..., 1]].any()
    # u8 with a step: a viewable map, floor(d / step + 0.5) saturating at 255
    v = tw.edt(img, threshold=20, format="u8", step=0.5, runtime=rt)
    assert v.dtype == np.uint8
    np.testing.assert_array_equal(v, np.minimum(np.floor(np.sqrt(sq.astype(np.float64)) * 2
                                                         + 0.5), 255).astype(np.uint8))
    with pytest.raises(ValueError, match="step"):
        tw.edt(img, threshold=20, format="u8", step=0, runtime=rt)


def test_edt_spacing_and_invert(rt):
    # spacing=(sx, sy) is SciPy's sampling=(sy, sx); invert makes value <= threshold the
    # foreground.
    ndi = pytest.importorskip("scipy.ndimage")
    m = (rng(5).random((40, 50)) > 0.2).astype(np.uint8)
    d = tw.edt(m, spacing=(0.5, 2.0), runtime=rt)
    np.testing.assert_allclose(d, ndi.distance_transform_edt(m, sampling=(2.0, 0.5)),
                               rtol=1e-6)
    d = tw.edt(m, invert=True, runtime=rt)
    np.testing.assert_array_equal(d, ndi.distance_transform_edt(m == 0).astype(np.float32))


def test_area_open_matches_skimage(rt):
    # Area opening and closing equal scikit-image area_opening / area_closing
    # (connectivity 1 = 4-neighbours, 2 = 8-neighbours).
    morph = pytest.importorskip("skimage.morphology")
    img = rng(6).integers(0, 255, (45, 60)).astype(np.uint8)
    for conn, sk_conn in ((4, 1), (8, 2)):
        got = tw.area_open(img, 12, conn=conn, tile=(16, 16), runtime=rt)
        np.testing.assert_array_equal(got, morph.area_opening(img, 12, connectivity=sk_conn))
        got = tw.area_close(img, 12, conn=conn, runtime=rt)
        np.testing.assert_array_equal(got, morph.area_closing(img, 12, connectivity=sk_conn))


def test_derived_filters_run(rt):
    # fill_holes, hmax, regional_max, open_rec and close_rec return arrays of the documented
    # shape and type; fill_holes of a ring fills its inside.
    ring = np.zeros((21, 21), np.uint8)
    ring[5:16, 5:16] = 200
    ring[8:13, 8:13] = 0
    filled = tw.fill_holes(ring, runtime=rt)
    assert (filled[8:13, 8:13] == 200).all() and filled[0, 0] == 0
    img = rng(7).integers(0, 255, (30, 30)).astype(np.uint16)
    assert tw.hmax(img, 10, runtime=rt).dtype == np.uint8
    assert tw.hmax(img, 10, dome=True, runtime=rt).dtype == np.uint16
    assert tw.regional_max(img, runtime=rt).dtype == np.uint8
    o = tw.open_rec(img, 1, runtime=rt)
    c = tw.close_rec(img, 1, runtime=rt)
    assert (o <= img).all() and (c >= img).all()


# ---------------------------------------------------------------- the same as the CLI

def test_reconstruct_equals_cli(rt, tmp_path):
    # tilewave.reconstruct on arrays, on paths into an array, and path to path, all equal the
    # CLI's `tilewave reconstruct` on the same TIFFs.
    r = rng(8)
    mask = r.integers(0, 60000, (120, 90)).astype(np.uint16)
    marker = (mask * (r.random(mask.shape) < 0.02)).astype(np.uint16)
    mk = tiff_write(tmp_path / "marker.tif", marker)
    ms = tiff_write(tmp_path / "mask.tif", mask)
    cli("reconstruct", "--marker", mk, "--mask", ms, "-o", str(tmp_path / "cli.tif"),
        "--conn", "4", "--tile", "32x32")
    ref = tiff_read(tmp_path / "cli.tif")
    np.testing.assert_array_equal(tw.reconstruct(marker, mask, conn=4, runtime=rt), ref)
    np.testing.assert_array_equal(tw.reconstruct(mk, ms, conn=4, runtime=rt), ref)
    assert tw.reconstruct(mk, ms, str(tmp_path / "py.tif"), conn=4, runtime=rt) is None
    np.testing.assert_array_equal(tiff_read(tmp_path / "py.tif"), ref)


def test_edt_and_area_open_equal_cli(rt, tmp_path):
    # EDT (f32, u16) and area opening of the same TIFF through the binding and the CLI.
    img = (rng(9).random((100, 130)) * 255).astype(np.uint8)
    p = tiff_write(tmp_path / "in.tif", img)
    for fmt in ("f32", "u16"):
        cli("edt", p, "-o", str(tmp_path / f"cli-{fmt}.tif"), "--threshold", "100",
            "--format", fmt)
        ref = tiff_read(tmp_path / f"cli-{fmt}.tif")
        np.testing.assert_array_equal(tw.edt(img, threshold=100, format=fmt, runtime=rt), ref)
        np.testing.assert_array_equal(tw.edt(p, threshold=100, format=fmt, runtime=rt), ref)
    cli("area-open", p, "--area", "25", "-o", str(tmp_path / "cli-ao.tif"))
    ref = tiff_read(tmp_path / "cli-ao.tif")
    np.testing.assert_array_equal(tw.area_open(img, 25, runtime=rt), ref)
    tw.area_open(p, 25, out=str(tmp_path / "py-ao.tif"), runtime=rt)
    np.testing.assert_array_equal(tiff_read(tmp_path / "py-ao.tif"), ref)


def test_sample_gray_and_read_equal_cli(rt, tmp_path):
    # tilewave.sample writes the same slide as `tilewave sample`; tilewave.gray of it equals
    # the CLI's gray; read() and info() describe it.
    s = str(tmp_path / "s.tif")
    tw.sample(s, size=(600, 400), seed=3)
    cli("sample", str(tmp_path / "c.tif"), "--size", "600x400", "--seed", "3")
    a = tw.read(s)
    assert a.shape == (400, 600, 3) and a.dtype == np.uint8
    np.testing.assert_array_equal(a, tw.read(str(tmp_path / "c.tif")))
    d = tw.info(s)
    assert d["levels"][0][:2] == (600, 400) and d["channels"] == 3
    tw.gray(s, str(tmp_path / "g.tif"), runtime=rt)
    cli("gray", s, "-o", str(tmp_path / "cg.tif"))
    np.testing.assert_array_equal(tw.read(str(tmp_path / "g.tif")),
                                  tw.read(str(tmp_path / "cg.tif")))
    c = a.astype(np.int64)
    lum = (299 * c[..., 0] + 587 * c[..., 1] + 114 * c[..., 2] + 500) // 1000
    np.testing.assert_array_equal(tw.read(str(tmp_path / "g.tif")), lum.astype(np.uint8))


# ---------------------------------------------------------------- progress, jobs, cancel

def test_progress_is_monotonic_and_ends_at_total(rt):
    # The callback (every step: progress_interval=0) sees increasing `done`, never above
    # `total`, ending with done == total; a bool mask is taken as 0/1. The callback is set
    # right after the submission: steps made before it are reported with the next one, and a
    # job that ended before it gets the last call only (tw_job_set_progress_callback), which
    # a loaded machine can make of a small job; so the image is large (thousands of steps of
    # 32 x 32) and the count of calls is asked only to exceed a few.
    calls = []
    img = rng(10).random((3000, 3000)) > 0.3
    tw.edt(img, tile=32, runtime=rt, progress=lambda d, t, e: calls.append((d, t, e)),
           progress_interval=0)
    assert len(calls) >= 5, calls
    dones = [c[0] for c in calls]
    # strictly increasing but for the final call, which may repeat the last step's count
    assert dones == sorted(dones) and len(set(dones[:-1])) == len(dones) - 1
    assert all(0 <= d <= t for d, t, _ in calls)
    assert calls[-1][0] == calls[-1][1] > 0
    assert all(e is None or e >= 0 for _, _, e in calls)


def test_progress_returning_false_cancels(rt):
    # A progress callback returning False cancels the job: Canceled, a tilewave.Error.
    mask = rng(11).integers(0, 255, (1500, 1500)).astype(np.uint8)
    marker = np.zeros_like(mask)
    marker[0, 0] = mask[0, 0]
    with pytest.raises(tw.Canceled) as e:
        tw.reconstruct(marker, mask, tile=32, runtime=rt, progress=lambda d, t, eta: False)
    assert isinstance(e.value, tw.Error) and e.value.status == "TW_E_CANCELED"


def test_job_cancel_and_wait(rt):
    # wait=False gives a Job; cancel() then wait() raises Canceled; a second job on the same
    # runtime still runs afterwards.
    mask = rng(12).integers(0, 255, (2000, 2000)).astype(np.uint8)
    job = tw.reconstruct(np.zeros_like(mask), mask, tile=32, runtime=rt, wait=False)
    assert isinstance(job, tw.Job)
    job.cancel()
    with pytest.raises(tw.Canceled):
        job.wait()
    assert job.done
    job.close()
    small = np.full((8, 8), 5, np.uint8)
    with tw.reconstruct(small, small, runtime=rt, wait=False) as j:
        np.testing.assert_array_equal(j.wait(), small)
        assert j.done and j.progress()[0] == j.progress()[1]


def test_exception_in_progress_cancels_and_is_raised(rt):
    # An exception raised by the callback cancels the job and comes out of wait().
    def cb(d, t, e):
        raise RuntimeError("boom")
    img = (rng(13).random((400, 400)) > 0.5).astype(np.uint8)
    with pytest.raises(RuntimeError, match="boom"):
        tw.edt(img, tile=16, runtime=rt, progress=cb)


def test_concurrent_jobs_from_threads(rt):
    # Four Python threads submit jobs on one runtime at once; each gets its own right result.
    ndi = pytest.importorskip("scipy.ndimage")
    imgs = [(rng(20 + k).random((200, 150)) > 0.2).astype(np.uint8) for k in range(4)]
    out = [None] * 4

    def work(k):
        out[k] = tw.edt(imgs[k], tile=32, runtime=rt)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for k in range(4):
        np.testing.assert_array_equal(out[k], ndi.distance_transform_edt(imgs[k])
                                      .astype(np.float32))


def test_with_block_sets_default_runtime():
    # Inside `with Runtime()` operations use it without runtime=; after the block it is
    # closed and using it explicitly is an Error.
    with tw.Runtime(cpu_workers=1, gpus="none", models="none") as r:
        assert r.workers == 1 and r.config["runtime.cpu_workers"] == "1"
        got = tw.edt(np.array([[0, 1, 1]], np.uint8))
        np.testing.assert_array_equal(got, np.array([[0, 1, 2]], np.float32))
    assert r.closed
    with pytest.raises(tw.Error, match="closed"):
        tw.edt(np.zeros((2, 2), np.uint8), runtime=r)


# ---------------------------------------------------------------- errors

def test_bad_arrays_raise_clear_errors(rt):
    # Wrong dtype: TypeError; not 2-D or mismatched shapes: ValueError; each names the op.
    with pytest.raises(TypeError, match=r"tilewave.reconstruct: marker dtype float64"):
        tw.reconstruct(np.zeros((4, 4)), np.zeros((4, 4)), runtime=rt)
    with pytest.raises(ValueError, match=r"must be 2-D.*\(4, 4, 3\)"):
        tw.edt(np.zeros((4, 4, 3), np.uint8), runtime=rt)
    with pytest.raises(ValueError, match="marker shape"):
        tw.reconstruct(np.zeros((4, 4), np.uint8), np.zeros((4, 5), np.uint8), runtime=rt)
    with pytest.raises(TypeError, match="marker dtype uint8 != mask dtype uint16"):
        tw.reconstruct(np.zeros((4, 4), np.uint8), np.zeros((4, 4), np.uint16), runtime=rt)
    with pytest.raises(TypeError, match="dtype float32 is not supported"):
        tw.area_open(np.zeros((4, 4), np.float32), 3, runtime=rt)
    with pytest.raises(TypeError, match="numpy array or a path"):
        tw.edt([[0, 1]], runtime=rt)
    with pytest.raises(ValueError, match="unknown EDT format 'f64'"):
        tw.edt(np.zeros((2, 2), np.uint8), format="f64", runtime=rt)


def test_library_errors_carry_status_and_message(rt, tmp_path):
    # Failures inside the library become tilewave.Error with the tw_status name and the
    # library's one-line message: a marker above the mask, a missing file, a bad option.
    mask = np.zeros((5, 5), np.uint8)
    marker = mask.copy()
    marker[2, 3] = 9
    with pytest.raises(tw.Error) as e:
        tw.reconstruct(marker, mask, runtime=rt)
    assert e.value.status == "TW_E_INVALID" and "mrecon: marker 9 above mask 0 at (3, 2)" \
        in str(e.value)
    with pytest.raises(tw.Error) as e:
        tw.edt(str(tmp_path / "missing.tif"), runtime=rt)
    assert e.value.status == "TW_E_IO" and "missing.tif" in e.value.message
    with pytest.raises(tw.Error, match="TW_E_INVALID: .*spacing"):
        tw.edt(np.zeros((2, 2), np.uint8), spacing=(-1, 1), runtime=rt)


def test_runtime_config_errors():
    # Unknown keys and bad values are tilewave.Error naming the key; dotted keys go in a dict;
    # a missing INI file is TW_E_IO.
    with pytest.raises(tw.Error, match="unknown key 'no_such_key'"):
        tw.Runtime(no_such_key=1)
    with pytest.raises(tw.Error) as e:
        tw.Runtime(cpu_workers="many")
    assert e.value.status == "TW_E_INVALID" and "runtime.cpu_workers" in e.value.message
    with pytest.raises(tw.Error, match="unknown key 'tile.sise'"):
        tw.Runtime({"tile.sise": "64x64"})
    with pytest.raises(tw.Error) as e:
        tw.Runtime("/nonexistent/x.ini")
    assert e.value.status == "TW_E_IO"
    with pytest.raises(TypeError):
        tw.Runtime(42)
    with tw.Runtime({"tile.size": "64x64"}, tile_size=(128, 128), cpu_workers=1,
                    models="none") as r:
        assert r.config["tile.size"] == "128x128"


# ---------------------------------------------------------------- loading and installing

def test_bad_library_path_is_a_clear_import_error(tmp_path):
    # TILEWAVE_LIBRARY naming a missing file: ImportError naming what was tried.
    env = dict(os.environ, TILEWAVE_LIBRARY=str(tmp_path / "nope.so"), PYTHONPATH=PKG_DIR)
    p = subprocess.run([sys.executable, "-c", "import tilewave"], capture_output=True,
                       text=True, env=env)
    assert p.returncode != 0
    assert "ImportError" in p.stderr and "nope.so" in p.stderr and "TILEWAVE_LIBRARY" in p.stderr


def test_pip_install_from_source_tree(tmp_path):
    # `pip install --no-deps --no-build-isolation --target DIR` of a copy of python/ works
    # offline and the installed package imports and runs from DIR.
    for mod in ("pip", "setuptools"):
        if subprocess.run([sys.executable, "-c", f"import {mod}"],
                          capture_output=True).returncode:
            pytest.skip(f"{mod} is not installed")
    src = tmp_path / "src"
    shutil.copytree(PKG_DIR, src, ignore=shutil.ignore_patterns("tests", "__pycache__",
                                                                "*.egg-info", "build"))
    target = tmp_path / "site"
    p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                        "--no-build-isolation", "--no-index", "--target", str(target),
                        str(src)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    env = dict(os.environ, PYTHONPATH=str(target))
    code = ("import numpy as np, tilewave as tw; print(tw.__file__); "
            "print(tw.edt(np.array([[0, 1, 1]], np.uint8), runtime=tw.Runtime(cpu_workers=1,"
            " models='none')).tolist())")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0].startswith(str(target))
    assert p.stdout.splitlines()[1] == "[[0.0, 1.0, 2.0]]"
