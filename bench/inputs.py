# SPDX-License-Identifier: MIT
# tilewave bench: deterministic input generators (tissue-like RGB, natural images, gray, masks).
"""Input generators for bench/run.py.

Every generator is deterministic (same name, size and seed give the same pixels) and writes a
TIFF into a cache folder, so a run generates each input once. Names, as the workload registry
uses them:

    tissue              8-bit RGB from `tilewave sample --seed 1` (tiled, pyramidal BigTIFF)
    natural:NAME        scikit-image's bundled ihc, hubble_deep_field or retina, tiled up to
                        the size (needs scikit-image plus tifffile or Pillow)
    natural16:NAME      16-bit gray from the same bundled image: tilewave's luminance,
                        Gaussian-blurred (sigma 1.5) in floating point and scaled by 257, so
                        that levels are nearly all distinct as in 16-bit microscopy (needs
                        scikit-image and SciPy)
    gray8, gray16       smooth tissue-like gray fields with texture (8 or 16 bits)
    mask:F              binary mask (0/255) with a foreground fraction F, e.g. mask:0.3

Generators raise Unavailable when a package they need is missing; the driver reports it and
skips the input.
"""
import importlib.util
import os
import subprocess
import sys

# scikit-image's bundled images: registry name -> skimage.data function
NATURAL = {
    "ihc": "immunohistochemistry",
    "hubble_deep_field": "hubble_deep_field",
    "retina": "retina",
}


class Unavailable(Exception):
    """A package or tool the generator needs is missing."""


def have(module):
    return importlib.util.find_spec(module) is not None


def write_tiff(path, arr):
    """Write arr (HxW or HxWx3, uint8/uint16) with tifffile (tiled, deflate) or Pillow."""
    tmp = path + ".part"
    if have("tifffile"):
        import tifffile

        rgb = arr.ndim == 3
        tifffile.imwrite(tmp, arr, tile=(256, 256), compression="zlib",
                         photometric="rgb" if rgb else "minisblack",
                         bigtiff=arr.nbytes > 2**31, maxworkers=os.cpu_count())
    elif have("PIL"):
        from PIL import Image

        if arr.dtype.itemsize == 2 and arr.ndim == 2:
            img = Image.fromarray(arr.astype("uint16"), mode="I;16")
        else:
            img = Image.fromarray(arr)
        img.save(tmp, format="TIFF")
    else:
        raise Unavailable("neither tifffile nor Pillow is installed")
    os.replace(tmp, path)


def _smooth_field(rng, w, h, cell):
    """A smooth random field in [0, 1): coarse noise upsampled bilinearly, deterministic."""
    import numpy as np

    gw, gh = w // cell + 2, h // cell + 2
    coarse = rng.random((gh, gw), dtype=np.float32)
    ys = np.arange(h, dtype=np.float32) / cell
    xs = np.arange(w, dtype=np.float32) / cell
    y0, x0 = ys.astype(np.int64), xs.astype(np.int64)
    fy, fx = (ys - y0)[:, None], (xs - x0)[None, :]
    top = coarse[y0][:, x0] * (1 - fx) + coarse[y0][:, x0 + 1] * fx
    bot = coarse[y0 + 1][:, x0] * (1 - fx) + coarse[y0 + 1][:, x0 + 1] * fx
    return top * (1 - fy) + bot * fy


def gen_tissue(path, w, h, tilewave, seed=1):
    subprocess.run([tilewave, "sample", path, "--size", f"{w}x{h}", "--seed", str(seed),
                    "--quiet"], check=True)


def gen_natural(path, w, h, name):
    if not have("skimage"):
        raise Unavailable("scikit-image not installed")
    if not (have("tifffile") or have("PIL")):
        raise Unavailable("neither tifffile nor Pillow is installed")
    import numpy as np
    import skimage.data

    img = getattr(skimage.data, NATURAL[name])()
    if img.ndim == 2:
        img = np.stack([img] * 3, axis=-1)
    img = np.ascontiguousarray(img[..., :3]).astype(np.uint8)
    reps = (-(-h // img.shape[0]), -(-w // img.shape[1]), 1)
    write_tiff(path, np.ascontiguousarray(np.tile(img, reps)[:h, :w]))


def gen_natural16(path, w, h, name):
    if not have("skimage") or not have("scipy"):
        raise Unavailable("scikit-image or SciPy not installed")
    if not (have("tifffile") or have("PIL")):
        raise Unavailable("neither tifffile nor Pillow is installed")
    import numpy as np
    import scipy.ndimage as ndi
    import skimage.data

    img = getattr(skimage.data, NATURAL[name])()
    if img.ndim == 3:  # tilewave's luminance rule (bench/peers.py gray_numpy)
        rgb = img[..., :3].astype(np.uint32)
        img = (299 * rgb[..., 0] + 587 * rgb[..., 1] + 114 * rgb[..., 2] + 500) // 1000
    smooth = ndi.gaussian_filter(img.astype(np.float32), 1.5, mode="wrap") * 257.0
    img = np.clip(np.rint(smooth), 0, 65535).astype(np.uint16)
    reps = (-(-h // img.shape[0]), -(-w // img.shape[1]))
    write_tiff(path, np.ascontiguousarray(np.tile(img, reps)[:h, :w]))


def gen_gray(path, w, h, bits, seed=1):
    import numpy as np

    rng = np.random.default_rng(seed)
    f = 0.7 * _smooth_field(rng, w, h, 256) + 0.3 * _smooth_field(rng, w, h, 16)
    top = 255 if bits == 8 else 65535
    arr = np.clip(f * top, 0, top).astype(np.uint8 if bits == 8 else np.uint16)
    write_tiff(path, arr)


def gen_mask(path, w, h, fraction, seed=1):
    """Foreground (255) where a smooth field exceeds its (1 - fraction) quantile."""
    import numpy as np

    rng = np.random.default_rng(seed)
    f = 0.8 * _smooth_field(rng, w, h, 128) + 0.2 * _smooth_field(rng, w, h, 8)
    thr = np.quantile(f[:: max(1, h // 512), :: max(1, w // 512)], 1.0 - fraction)
    write_tiff(path, np.where(f > thr, 255, 0).astype(np.uint8))


def path_for(cache, name, w, h):
    safe = name.replace(":", "-")
    return os.path.join(cache, f"{safe}-{w}x{h}.tif")


def make(cache, name, w, h, tilewave):
    """Return the path of input `name` at w x h, generating it into cache when missing."""
    os.makedirs(cache, exist_ok=True)
    path = path_for(cache, name, w, h)
    if os.path.exists(path):
        return path
    kind, _, arg = name.partition(":")
    if kind == "tissue":
        gen_tissue(path, w, h, tilewave)
    elif kind == "natural":
        if arg not in NATURAL:
            raise ValueError(f"unknown natural image '{arg}' ({', '.join(NATURAL)})")
        gen_natural(path, w, h, arg)
    elif kind == "natural16":
        if arg not in NATURAL:
            raise ValueError(f"unknown natural image '{arg}' ({', '.join(NATURAL)})")
        gen_natural16(path, w, h, arg)
    elif kind in ("gray8", "gray16"):
        gen_gray(path, w, h, 8 if kind == "gray8" else 16)
    elif kind == "mask":
        gen_mask(path, w, h, float(arg))
    else:
        raise ValueError(f"unknown input '{name}'")
    return path


def main(argv):
    """python3 bench/inputs.py NAME W H CACHE TILEWAVE: print the input's path. Exit 3 when
    a package it needs is missing (the message says which), 1 on other failures."""
    if len(argv) != 6:
        print("usage: inputs.py NAME W H CACHE TILEWAVE", file=sys.stderr)
        return 2
    try:
        print(make(argv[4], argv[1], int(argv[2]), int(argv[3]), argv[5]))
    except Unavailable as e:
        print(f"unavailable: {e}", file=sys.stderr)
        return 3
    except (subprocess.CalledProcessError, OSError, ValueError) as e:
        print(f"inputs.py: {argv[1]} {argv[2]}x{argv[3]}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
