# SPDX-License-Identifier: MIT
# tilewave Python binding: the nuclei pipeline, the operations chained through arrays in memory
# or through files.
"""nuclei(): from a slide to a table of nuclei (docs/objects.md, "The nuclei pipeline")."""
import os
import shutil
import tempfile
import time

from . import _core

# Bytes a pixel the chain through arrays holds at most: the opened mask (1), the distance (2)
# and the markers (4) while the watershed runs, and the watershed's own state (18,
# docs/watershed.md).
_ARRAY_BYTES_PER_PIXEL = 25


def _available_memory():
    """MemAvailable of /proc/meminfo in bytes, or None where it cannot be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def nuclei(slide, out, *, gray="hematoxylin", threshold="otsu", invert=False, min_area=30,
           h=2, step=0.5, conn=8, level=0, region=None, classification="Nucleus",
           workdir=None, keep=False, memory="auto", runtime=None):
    """Segment the nuclei of ``slide`` and write their table to ``out`` (GeoJSON for QuPath,
    or CSV, from the name): each step a tilewave job, the slide streamed. ``memory``:
    "arrays" passes the intermediate images from step to step as arrays in memory (25 bytes a
    pixel at most) and writes only the labels, to ``workdir``; "files" writes every
    intermediate image as a tiled TIFF (zstd) in ``workdir`` and reads it back, for slides
    whose arrays do not fit; "auto" (default): arrays when they take at most half of the
    memory available and the runtime has no GPU or uses arrays in place
    (``runtime.caller_memory`` wrap or register; with auto it copies them into page-locked
    tiles, and files were faster). ``workdir``: a new folder beside ``out`` when None, removed at the end
    unless ``keep``. The steps:

    1. mask: ``fill_holes`` of the slide thresholded (``gray`` channel, ``threshold``,
       ``invert``): nuclei without holes;
    2. ``area_open(mask, min_area)``: components under ``min_area`` pixels removed;
    3. ``edt(format="u16", step=step)``: the distance to the glass, ``step`` pixels a level;
    4. ``hmax(h)`` of the distance: one marker per nucleus centre (``h`` levels deep);
    5. ``label`` of the markers (``conn``);
    6. ``watershed`` of the negated distance from those markers inside the mask: touching
       nuclei split;
    7. ``objects``: area, centroid, box, perimeter, the slide's luminance (mean, min, max),
       outline in level-0 pixels of the slide, as ``classification`` detections.

    The same as the CLI commands of docs/objects.md run one after the other, either way.
    Returns {"objects": count, "seconds": {step: wall seconds}, "memory": "arrays" or "files",
    "workdir": path or None}."""
    if not _core._is_path(slide) or not _core._is_path(out):
        raise TypeError("tilewave.nuclei: slide and out are paths")
    for name, v, lo in (("min_area", min_area, 0), ("h", h, 1)):
        if not (_core._is_number(v) and int(v) == v and v >= lo):
            raise ValueError(f"tilewave.nuclei: {name} must be an integer >= {lo} (got {v!r})")
    if conn not in (4, 8):
        raise ValueError(f"tilewave.nuclei: conn must be 4 or 8 (got {conn!r})")
    if memory not in ("auto", "arrays", "files"):
        raise ValueError(f"tilewave.nuclei: memory must be auto, arrays or files (got {memory!r})")
    info = _core.info(slide)
    if not (_core._is_number(level) and int(level) == level and
            0 <= level < len(info["levels"])):
        raise ValueError(f"tilewave.nuclei: level {level!r} is not a level of the slide "
                         f"({len(info['levels'])} levels)")
    level = int(level)  # 1.0 too: a list index
    if region is not None:  # checked here: its size is read below
        region = _core._options("nuclei", {"region": region}, ("region",), ())[0]["region"]
    lw, lh, ds = info["levels"][level]
    w, h_ = (region[2], region[3]) if region is not None else (lw, lh)
    if memory == "auto":
        # arrays where they fit, unless the runtime has GPUs and copies pageable arrays into
        # page-locked tiles (runtime.caller_memory = auto or copy: docs/runtime.md, "Caller
        # memory"): on the H200 machine the chain through arrays was then slower than through
        # zstd files, and faster with `wrap` (docs/objects.md)
        avail = _available_memory()
        rt = _core._runtime(runtime)
        direct = not rt.gpus or rt.config.get("runtime.caller_memory") in ("wrap", "register")
        memory = ("arrays" if avail is not None and direct and
                  w * h_ * _ARRAY_BYTES_PER_PIXEL <= avail // 2 else "files")
    out = os.fspath(out)
    made = workdir is None
    if made:
        workdir = tempfile.mkdtemp(prefix=".tw-nuclei-",
                                   dir=os.path.dirname(os.path.abspath(out)))
    else:
        workdir = os.fspath(workdir)
        os.makedirs(workdir, exist_ok=True)
    f = {k: os.path.join(workdir, k + ".tif")
         for k in ("mask", "opened", "dist", "peaks", "markers", "labels")}
    inopts = {"gray": gray, "threshold": threshold, "invert": invert}
    if region is not None:
        inopts["region"] = region
    seconds = {}

    def step_(name, fn, *args, **kw):
        t = time.perf_counter()
        r = fn(*args, runtime=runtime, **kw)
        seconds[name] = time.perf_counter() - t
        return r

    try:
        # intermediates in zstd: faster to write and read back than deflate (docs/objects.md)
        z = {"compression": "zstd"}
        if memory == "arrays":
            mask = step_("fill_holes", _core.fill_holes, slide, level=level, **inopts)
            opened = step_("area_open", _core.area_open, mask, int(min_area), conn=conn)
            del mask
            dist = step_("edt", _core.edt, opened, format="u16", step=step)
            peaks = step_("hmax", _core.hmax, dist, int(h), conn=conn)
            markers = step_("label", _core.label, peaks, conn=conn)
            del peaks
            step_("watershed", _core.watershed, dist, markers, f["labels"], mask=opened,
                  negate=True, conn=conn, **z)
            del dist, markers, opened
        else:
            step_("fill_holes", _core.fill_holes, slide, f["mask"], level=level, **inopts, **z)
            step_("area_open", _core.area_open, f["mask"], int(min_area), f["opened"],
                  conn=conn, **z)
            step_("edt", _core.edt, f["opened"], f["dist"], format="u16", step=step, **z)
            step_("hmax", _core.hmax, f["dist"], int(h), f["peaks"], conn=conn, **z)
            step_("label", _core.label, f["peaks"], f["markers"], conn=conn, **z)
            step_("watershed", _core.watershed, f["dist"], f["markers"], f["labels"],
                  mask=f["opened"], negate=True, conn=conn, **z)
        # the labels are level 0 of their own file: their outlines are placed in the slide's
        # level 0; labels written from arrays carry no pixel size: their areas in um^2 take
        # the slide's at the level read; the intensity is the slide's luminance over the same
        # pixels
        mx, my = info["mpp"]
        px = (mx * ds, my * ds) if memory == "arrays" and mx > 0 and my > 0 else None
        rx, ry = (region[0], region[1]) if region is not None else (0, 0)
        intensity = slide
        if level or region is not None:
            intensity = os.path.join(workdir, "intensity.tif")
            step_("gray", _core.gray, slide, intensity, level=level, **z,
                  **({"region": region} if region is not None else {}))
        n = step_("objects", _core.objects, f["labels"], out, intensity=intensity,
                  classification=classification, downsample=ds, offset=(rx * ds, ry * ds),
                  pixel_size=px)
    finally:
        if made and not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return {"objects": int(n), "seconds": seconds, "memory": memory,
            "workdir": workdir if (keep or not made) else None}
