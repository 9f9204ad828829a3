#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# tilewave: the README's picture of the nuclei pipeline: a region of a slide beside the same
# region with the nuclei that tilewave.nuclei() found outlined (numpy and the standard library
# only: the PNG is written with zlib).
"""Usage: python3 bench/nuclei_png.py SLIDE OUT.png [--region X,Y,W,H] [--scale K]

Runs tilewave.nuclei(SLIDE) (the labels kept in a temporary folder), then draws the region
(level 0, default 640x480 from the slide's centre) twice side by side, K times enlarged
(default 1): as read, and with every nucleus's border pixels (a label pixel with a 4-neighbour
of another label) in green and the nuclei tinted. Prints the nuclei count."""
import argparse
import os
import struct
import sys
import tempfile
import zlib

import numpy as np

import tilewave as tw


def write_png(path, rgb):
    """An 8-bit RGB PNG of an (h, w, 3) uint8 array."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(h))

    def chunk(kind, data):
        c = kind + data
        return struct.pack(">I", len(data)) + c + struct.pack(">I", zlib.crc32(c) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw, 9)))
        f.write(chunk(b"IEND", b""))


def outlined(rgb, lab):
    """rgb with the nuclei tinted and their borders green."""
    out = rgb.astype(np.float32)
    inside = lab > 0
    edge = np.zeros_like(inside)
    for dy, dx in ((0, 1), (1, 0)):
        a, b = lab[: lab.shape[0] - dy, : lab.shape[1] - dx], lab[dy:, dx:]
        d = a != b
        edge[: lab.shape[0] - dy, : lab.shape[1] - dx] |= d & (a > 0)
        edge[dy:, dx:] |= d & (b > 0)
    tint = np.array([255, 230, 60], np.float32)
    out[inside] = 0.75 * out[inside] + 0.25 * tint
    out[edge] = (0, 200, 0)
    return out.astype(np.uint8)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("slide")
    ap.add_argument("out")
    ap.add_argument("--region", help="X,Y,W,H of level 0 (default 640x480 at the centre)")
    ap.add_argument("--scale", type=int, default=1)
    a = ap.parse_args(argv)
    w0, h0 = tw.info(a.slide)["levels"][0][:2]
    if a.region:
        x, y, w, h = (int(v) for v in a.region.split(","))
    else:
        w, h = min(640, w0), min(480, h0)
        x, y = (w0 - w) // 2, (h0 - h) // 2
    with tempfile.TemporaryDirectory(prefix="tw-nuclei-png-") as d:
        r = tw.nuclei(a.slide, os.path.join(d, "n.csv"), workdir=os.path.join(d, "w"))
        lab = tw.read(os.path.join(d, "w", "labels.tif"), region=(x, y, w, h))
    rgb = tw.read(a.slide, region=(x, y, w, h))
    if rgb.ndim == 2:
        rgb = np.repeat(rgb[:, :, None], 3, axis=2)
    rgb = rgb[:, :, :3].astype(np.uint8)
    gap = np.full((h, 8, 3), 255, np.uint8)
    pic = np.concatenate([rgb, gap, outlined(rgb, lab)], axis=1)
    if a.scale > 1:
        pic = pic.repeat(a.scale, axis=0).repeat(a.scale, axis=1)
    write_png(a.out, pic)
    n = len(np.unique(lab[lab > 0]))
    print(f"{a.out}: {pic.shape[1]}x{pic.shape[0]}, region {x},{y},{w},{h}: {n} of the "
          f"{r['objects']} nuclei ({r['memory']})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
