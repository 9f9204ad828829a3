# SPDX-License-Identifier: MIT
# tilewave Python binding tests: multi-channel images (OME-TIFF planes, qptiff pages).
"""The channel= keyword of read() and the operations, info()'s channel_names, and the error
without a choice, on an OME-TIFF written by tifffile and on the real qptiff of
../shared/data/slides (when there)."""
import os

import numpy as np
import pytest

import tilewave as tw

HERE = os.path.dirname(os.path.abspath(__file__))
QPTIFF = os.path.join(HERE, "..", "..", "..", "shared", "data", "slides", "small_vectra.qptiff")


@pytest.fixture(scope="module")
def rt():
    with tw.Runtime(cpu_workers=2, gpus="none", models="none") as r:
        yield r


@pytest.fixture
def ome(tmp_path):
    tifffile = pytest.importorskip("tifffile")
    rng = np.random.default_rng(27)
    data = rng.integers(0, 65536, (3, 90, 130), dtype=np.uint16)
    path = str(tmp_path / "planes.ome.tif")
    tifffile.imwrite(path, data, photometric="minisblack", ome=True,
                     metadata={"axes": "CYX", "Channel": {"Name": ["DAPI", "CD8", "7"]}})
    return path, data


def test_info_names_the_ome_channels(ome):
    # The three planes are channels named by the OME-XML; each read is one channel.
    path, _ = ome
    d = tw.info(path)
    assert d["channel_names"] == ["DAPI", "CD8", "7"]
    assert d["channels"] == 1 and d["dtype"] == np.uint16


def test_read_picks_a_channel_by_name_or_index(ome):
    # channel="CD8" and channel=1 read the second plane; "7" is a name before an index; no
    # channel, or one that is not there, is an error naming the channels.
    path, data = ome
    assert np.array_equal(tw.read(path, channel="CD8"), data[1])
    assert np.array_equal(tw.read(path, channel=0), data[0])
    assert np.array_equal(tw.read(path, channel="7", region=(5, 6, 40, 30)),
                          data[2, 6:36, 5:45])
    with pytest.raises(tw.Error, match=r"3 channels \(0 DAPI, 1 CD8, 2 7\)"):
        tw.read(path)
    with pytest.raises(tw.Error, match="has no channel 'CD4'"):
        tw.read(path, channel="CD4")
    with pytest.raises(ValueError, match="channel must be an index >= 0 or a name"):
        tw.read(path, channel=-1)


def test_operations_take_channel(ome, rt, tmp_path):
    # gray of a channel is that plane; convert to a file keeps it; without channel= the
    # operation is refused.
    path, data = ome
    assert np.array_equal(tw.gray(path, channel=2, runtime=rt), data[2])
    out = str(tmp_path / "c.tif")
    tw.convert(path, out, channel="DAPI", runtime=rt)
    assert np.array_equal(tw.read(out), data[0])
    with pytest.raises(tw.Error, match="choose one with --channel"):
        tw.gray(path, runtime=rt)


def test_real_qptiff_channels():
    # PerkinElmer Vectra: DAPI, FITC, Cy3 as pages; the FITC read equals the CLI's convert of
    # page 1 through libtiff (tested in tests/cli); here: names, shape and distinct planes.
    if not os.path.exists(QPTIFF):
        pytest.skip("../shared/data/slides/small_vectra.qptiff is not there")
    d = tw.info(QPTIFF)
    assert d["channel_names"] == ["DAPI", "FITC", "Cy3"]
    a, b = tw.read(QPTIFF, channel="DAPI"), tw.read(QPTIFF, channel="FITC")
    assert a.shape == (1440, 1920) and a.dtype == np.uint8
    assert not np.array_equal(a, b)
