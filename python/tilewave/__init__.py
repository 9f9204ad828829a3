# SPDX-License-Identifier: MIT
# tilewave Python binding: the public names (ctypes over libtilewave.so, numpy in and out).
"""tilewave: morphology on gigapixel whole-slide images, tile by tile, on every core and GPU.

    import numpy as np, tilewave
    with tilewave.Runtime(cpu_workers=2):
        dist = tilewave.edt(mask)                       # numpy in, numpy out
        tilewave.area_open("slide.svs", 500, out="opened.tif", progress=print)

The library is found through TILEWAVE_LIBRARY (a full path), then the system's library path.
"""
from ._core import (Canceled, Error, Job, Runtime, area_close, area_open, attr_filter,
                    build_has_cuda, choose_level, close_rec, convert, default_runtime, edt,
                    fill_holes, grain, gray, height_close, height_open, hmax, info, label,
                    maxtree, objects, open_rec, read, reconstruct, regional_max, sample, tos,
                    version, watershed)
from ._pipeline import nuclei

__version__ = "0.6.0"
__all__ = ["Canceled", "Error", "Job", "Runtime", "area_close", "area_open", "attr_filter",
           "build_has_cuda", "choose_level", "close_rec", "convert", "default_runtime", "edt",
           "fill_holes", "grain", "gray", "height_close", "height_open", "hmax", "info",
           "label", "maxtree", "nuclei", "objects", "open_rec", "read", "reconstruct",
           "regional_max", "sample", "tos", "version", "watershed"]
