# SPDX-License-Identifier: MIT
# tilewave Python binding tests: SubIFD pyramids and exact levels against tifffile.
"""Pyramids whose reduced levels are SubIFDs of the first page (tilewave's own `convert
--pyramid --layout ome`, vips `tiffsave --pyramid --subifd`, tifffile `subifds=`, as
bioformats2raw/raw2ometiff write them) are read as levels by `info`, `--level` and
`tilewave.read()`, each level equal to tifffile's read of it (issue 27). And the JPEG 2000
SVS's level 1 gives the same bytes for any `--tile`."""
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

import tilewave as tw

CLI = os.environ.get("TILEWAVE_CLI")
SLIDES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared",
                      "data", "slides")
tifffile = pytest.importorskip("tifffile")


def run(*args):
    if not CLI:
        pytest.skip("TILEWAVE_CLI not set")
    env = dict(os.environ, TILEWAVE_RUNTIME_CPU_WORKERS="2", TILEWAVE_RUNTIME_MODELS="none")
    p = subprocess.run([CLI, *args], capture_output=True, text=True, env=env)
    assert p.returncode == 0, f"tilewave {' '.join(args)}: {p.stderr}"
    return p.stdout + p.stderr


def tifffile_levels(path):
    """Every level of the first series as tifffile reads it (SubIFDs included)."""
    with tifffile.TiffFile(path) as t:
        return [lv.asarray() for lv in t.series[0].levels]


def check_subifd_pyramid(path, n_min):
    """info, read() and the CLI's --level see every level of `path`, equal to tifffile's."""
    want = tifffile_levels(path)
    assert len(want) >= n_min, f"{path}: tifffile sees {len(want)} levels"
    d = tw.info(path)
    assert len(d["levels"]) == len(want), (d["levels"], [a.shape for a in want])
    for k, a in enumerate(want):
        assert d["levels"][k][:2] == (a.shape[1], a.shape[0])
        got = tw.read(path, level=k)
        np.testing.assert_array_equal(got, a, err_msg=f"{path} level {k}")
        # a region of the level, read on its own
        h, w = a.shape[:2]
        r = (w // 3, h // 4, max(1, w // 2), max(1, h // 2))
        np.testing.assert_array_equal(tw.read(path, level=k, region=r),
                                      a[r[1]:r[1] + r[3], r[0]:r[0] + r[2]])
    out = run("info", path)
    assert re.search(rf"levels:\s*{len(want)}\b", out), out
    # the CLI's --level reads the SubIFD level (convert copies it as it is)
    last = len(want) - 1
    dst = os.path.join(os.path.dirname(path), "level.tif")
    run("convert", path, "--level", str(last), "-o", dst, "--quiet")
    np.testing.assert_array_equal(tifffile.imread(dst), want[last])


def test_own_ome_pyramid_has_its_levels(tmp_path):
    # tilewave's own OME-TIFF (SubIFDs): `info` said "levels: 1" and --level 1 was refused.
    src = str(tmp_path / "s.tif")
    ome = str(tmp_path / "s.ome.tif")
    run("sample", src, "--size", "1500x1100", "--quiet")
    run("convert", src, "-o", ome, "--pyramid", "--layout", "ome", "--quiet",
        "--set", "io.tiff_tile=256")
    check_subifd_pyramid(ome, 3)


def test_vips_subifd_pyramid_has_its_levels(tmp_path):
    if not shutil.which("vips"):
        pytest.skip("vips not installed (libvips-tools)")
    src = str(tmp_path / "in.tif")
    dst = str(tmp_path / "vips.tif")
    a = np.random.default_rng(5).integers(0, 256, (900, 1300, 3), dtype=np.uint8)
    tifffile.imwrite(src, a, photometric="rgb")
    subprocess.run(["vips", "tiffsave", src, dst, "--tile", "--tile-width", "128",
                    "--tile-height", "128", "--pyramid", "--subifd", "--compression",
                    "deflate"], check=True)
    check_subifd_pyramid(dst, 3)


@pytest.mark.parametrize("dtype,channels", [(np.uint8, 3), (np.uint16, 1)])
def test_tifffile_subifd_pyramid_has_its_levels(tmp_path, dtype, channels):
    # as bioformats2raw/raw2ometiff and tifffile write them: the reduced levels in SubIFDs of
    # page 0, reduced-resolution subfile type, each level its own data (not a mean of the one
    # above, so that a reader that resampled would be caught)
    path = str(tmp_path / "tf.ome.tif")
    rng = np.random.default_rng(7)
    shape = (700, 1000) + ((channels,) if channels > 1 else ())
    levels = [rng.integers(0, np.iinfo(dtype).max, (shape[0] >> k, shape[1] >> k) + shape[2:],
                           dtype=dtype) for k in range(4)]
    photometric = "rgb" if channels == 3 else "minisblack"
    with tifffile.TiffWriter(path, bigtiff=True, ome=True) as t:
        t.write(levels[0], subifds=3, tile=(128, 128), photometric=photometric,
                compression="zlib")
        for a in levels[1:]:
            t.write(a, subfiletype=1, tile=(128, 128), photometric=photometric,
                    compression="zlib")
    check_subifd_pyramid(path, 4)
    for k, a in enumerate(levels):
        np.testing.assert_array_equal(tw.read(path, level=k), a)


def test_j2k_svs_level1_same_bytes_for_any_tile(tmp_path):
    # issue 27: `gray --level 1 --tile 512x512` and the default tiles differed in 1.5 M
    # pixels on the JPEG 2000 SVS (OpenSlide resampled each tile at a fractional offset)
    svs = os.path.join(SLIDES, "tcga-cr-7395-01a-01-ts1.svs")
    if not os.path.exists(svs):
        pytest.skip(f"no {svs}")
    outs = []
    for tile in ("512x512", "256x256", "333x201"):
        out = str(tmp_path / f"g{tile}.tif")
        run("gray", svs, "--level", "1", "--tile", tile, "-o", out, "--quiet")
        outs.append(tifffile.imread(out))
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])


def test_real_slide_levels_equal_openslide_and_tifffile(tmp_path):
    # every level of the real slides, copied by `convert --level k`, is OpenSlide's read of
    # the whole level from (0, 0) (openslide-python), tilewave.read()'s, and tifffile's
    # where tifffile decodes the file's compression itself
    openslide = pytest.importorskip("openslide")
    for name in ("tcga-cr-7395-01a-01-ts1.svs", "CMU-1-Small-Region.svs", "boxes.tiff",
                 "small_HE_levels.tiff"):
        path = os.path.join(SLIDES, name)
        if not os.path.exists(path):
            pytest.skip(f"no {path}")
        osr = openslide.OpenSlide(path)
        n = len(tw.info(path)["levels"])
        assert n == osr.level_count, name
        t = tifffile.TiffFile(path)
        series = t.series[0].levels
        for k in range(n):
            out = str(tmp_path / f"{k}.tif")
            run("convert", path, "--level", str(k), "-o", out, "--quiet")
            got = tifffile.imread(out)
            w, h = osr.level_dimensions[k]
            rgba = np.asarray(osr.read_region((0, 0), k, (w, h)))
            # OpenSlide 3.4.1 misplaces the rows of a generic TIFF level smaller than one
            # tile (boxes.tiff level 2: 75x62 in 64x64 tiles): its pixels are not opaque there
            if (rgba[..., 3] == 255).all():
                np.testing.assert_array_equal(got, rgba[..., :3], err_msg=f"{name} level {k}")
            np.testing.assert_array_equal(got, tw.read(path, level=k))
            # tifffile decodes none, LZW and deflate itself (JPEG and JPEG 2000 need
            # imagecodecs, which Debian does not package)
            if series[k].keyframe.compression in (1, 5, 8, 32946):
                np.testing.assert_array_equal(got, series[k].asarray(),
                                              err_msg=f"{name} level {k}")
        t.close()
        osr.close()
