#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Caller-memory jobs (the Python binding, numpy in and out) against CuPy host to host, one GPU:
    TILEWAVE_LIBRARY=build/libtilewave.so python3 bench/memory.py [EDT_SIDE ...]
EDT of 32768^2 and 65536^2 masks (or the sides given), area opening and reconstruction of
16384^2 images (issue 25)."""
import os
import sys
import time
import numpy as np
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import tilewave as tw

def best(f, n=3):
    ts = []
    for _ in range(n):
        t = time.perf_counter(); r = f(); ts.append(time.perf_counter() - t)
    return min(ts), r

rng = np.random.default_rng(1)
def blobs(n, frac=0.5):
    small = rng.random((n // 64, n // 64)) < frac
    return np.kron(small, np.ones((64, 64), dtype=bool)).astype(np.uint8)

try:
    import cupy as cp
    from cupyx.scipy import ndimage as cnd
except Exception as e:
    cp = None
    print("no cupy:", e)
with tw.Runtime() as rt:
    for n in [int(v) for v in sys.argv[1:]] or (32768, 65536):
        m = blobs(n)
        t, d = best(lambda: tw.edt(m, runtime=rt), 1 if n > 40000 else 3)
        line = f"edt {n}^2: tilewave {t:.3f} s"
        if cp is not None and n <= 32768:
            def c():
                r = cnd.distance_transform_edt(cp.asarray(m)); return cp.asnumpy(r)
            tc, dc = best(c, 1)
            line += f"; cupy host-to-host {tc:.3f} s; max |diff| {float(np.abs(dc.astype(np.float32) - d).max()):.3g}"
        print(line, flush=True)
        del m, d
    for n in (16384,):
        img = (rng.random((n, n)) * 255).astype(np.uint8)
        t, r = best(lambda: tw.area_open(img, 500, runtime=rt))
        print(f"area_open {n}^2: tilewave {t:.3f} s", flush=True)
        mask = img
        marker = np.maximum(img.astype(np.int16) - 40, 0).astype(np.uint8)
        t, r = best(lambda: tw.reconstruct(marker, mask, runtime=rt))
        print(f"reconstruct {n}^2: tilewave {t:.3f} s", flush=True)
