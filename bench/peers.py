# SPDX-License-Identifier: MIT
# tilewave bench: peer implementations, each timed in its own child process of bench/run.py.
"""Peers: other libraries doing the same operation on the same input.

bench/run.py starts `python3 bench/peers.py NAME --input IN ...` once per peer and
measurement, so each peer's peak RSS is its own and a missing package only skips that peer.
The child loads the input (untimed for in-memory peers), runs one warm-up and R timed calls,
optionally compares its result with tilewave's output, and prints one JSON line.

A peer is a dict in PEERS:
    op        the tilewave operation it matches ("gray")
    kind      "memory" (host array in and out; load not timed), "device-memory" (data
              already on the GPU) or "file" (file in, file out)
    device    "cpu" or "gpu"
    requires  Python modules (imported lazily) or, for CLI peers, executables
    run       function(state) -> result array (memory) or output path (file); for "cli"
              peers a function(input, output) -> argv
    prepare   optional function(image) -> what run takes (e.g. upload to the GPU), not timed
    max_pixels  optional: skipped above this size in run.py's timed modes (slow, one thread)
    against   optional: tilewave measurement kinds it is also compared with (e.g. an
              in-memory peer against tilewave's whole file-to-file run: conservative)
    note      what differs from tilewave (formula, output type, what is timed)
Later operations add their peers here (scikit-image reconstruction, SciPy EDT, ...).

Max-tree, area-opening and tree-of-shapes peers (ops "maxtree", "area-open", "tos" and
"grain") take `--input IN --conn 4|8 [--area N]` (the tree of shapes ignores --conn), load
the image as tw_bench maxtree does (mt_load), and report `nodes` (the tree's node count, for
tilewave's to be compared with) or, given `--reference` (the raw output of `tw_bench
area-open --dump` or `tw_bench tos --grain N --dump`), `differing_pixels`. Their extra
fields:
    nodes       function(result, image) -> node count of the peer's tree
    warmup      False: no warm-up call (peers taking seconds)
    max_repeat  at most this many timed calls
    exact       any differing pixel is a failure

EDT peers (op "edt") take no input file: `--size WxH --background F --pattern P --seed S`
make the same binary image as `tw_bench edt` (edt_binary() below, bit for bit; the number of
background pixels is reported so that run.py can check it), and `--reference` is the raw
float32 output that `tw_bench edt --dump` wrote. Their extra fields:
    exact     the peer is an exact EDT: any pixel differing from tilewave's is a failure
    gpu_events  timed with CUDA events (device-memory peers)
"""
import argparse
import importlib
import importlib.util
import json
import os
import resource
import shutil
import subprocess
import sys
import time


# ---- loading and saving

def load_rgb(path):
    """Level 0 of a TIFF as an HxWx3 uint8 RGB array (tifffile, else OpenCV, else Pillow)."""
    if importlib.util.find_spec("tifffile"):
        import tifffile

        return tifffile.imread(path, key=0)
    if importlib.util.find_spec("cv2"):
        import cv2

        return cv2.cvtColor(cv2.imread(path, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    from PIL import Image

    import numpy as np

    return np.asarray(Image.open(path).convert("RGB"))


def load_any(path):
    """Level 0 of a TIFF as an array, whatever its layout (for the agreement check)."""
    if importlib.util.find_spec("tifffile"):
        import tifffile

        return tifffile.imread(path, key=0)
    import cv2

    return cv2.imread(path, cv2.IMREAD_UNCHANGED)


# ---- gray peers

def gray_numpy(img):
    """tilewave's exact rule: (299 R + 587 G + 114 B + 500) / 1000 in unsigned integers."""
    import numpy as np

    r = img[..., 0].astype(np.uint32)
    g = img[..., 1].astype(np.uint32)
    b = img[..., 2].astype(np.uint32)
    return ((299 * r + 587 * g + 114 * b + 500) // 1000).astype(img.dtype)


def gray_opencv(img):
    import cv2

    return cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)


def gray_skimage(img):
    from skimage.color import rgb2gray

    return rgb2gray(img)


def gray_opencv_file(inp, out):
    import cv2

    img = cv2.imread(inp, cv2.IMREAD_COLOR)  # BGR
    if img is None:
        raise RuntimeError(f"cv2.imread cannot read '{inp}'")
    gray = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
    if not cv2.imwrite(out, gray, [cv2.IMWRITE_TIFF_COMPRESSION, 1]):
        raise RuntimeError(f"cv2.imwrite cannot write '{out}'")
    return out


def gray_tifffile_numpy_file(inp, out):
    import tifffile

    tifffile.imwrite(out, gray_numpy(tifffile.imread(inp, key=0)), tile=(512, 512))
    return out


def cupy_state(img):
    """The image on the GPU, uploaded once (not timed): the device-memory peers' input."""
    import cupy as cp

    return cp.asarray(img)


def gray_cupy(d_img):
    """tilewave's integer formula with CuPy on a device array; synchronised before return."""
    import cupy as cp

    d = d_img.astype(cp.uint32)
    out = ((299 * d[..., 0] + 587 * d[..., 1] + 114 * d[..., 2] + 500) // 1000).astype(cp.uint8)
    cp.cuda.Device().synchronize()
    return out


def gray_cupy_xfer(img):
    """Host array in, host array out: upload, the formula, download."""
    import cupy as cp

    return cp.asnumpy(gray_cupy(cp.asarray(img)))


# ---- reconstruction peers (h-dome: image - reconstruction(max(image - h, 0), image))

HDOME_H = 40


def luminance_state(img):
    """The tilewave gray rule applied to the RGB input: what `tilewave hmax` reconstructs."""
    return gray_numpy(img)


def hdome_skimage(gray):
    import numpy as np
    from skimage.morphology import reconstruction

    seed = np.maximum(gray.astype(np.int32) - HDOME_H, 0)
    rec = reconstruction(seed, gray.astype(np.int32), method="dilation")
    return (gray.astype(np.int32) - rec.astype(np.int32)).astype(np.uint8)


# ---- distance transform peers (the same generated binary image as tw_bench edt)

# splitmix64 constants of bench/bench_edt.c: pixel i (row-major) is background when
# mix((i + 1) * EDT_GOLDEN + seed * EDT_SEED) >> 11 < floor(F * 2^53).
EDT_GOLDEN = 0x9E3779B97F4A7C15
EDT_SEEDMUL = 0xD1B54A32D192ED03
EDT_MIX1 = 0xBF58476D1CE4E5B9
EDT_MIX2 = 0x94D049BB133111EB
U64 = (1 << 64) - 1


def edt_binary(xp, w, h, background, pattern="random", seed=1, chunk=1 << 23):
    """The uint8 image of tw_bench edt (0 = background, 1 = foreground) with numpy or cupy
    (xp), generated in row blocks so that the uint64 temporaries stay small."""
    img = xp.ones((h, w), dtype=xp.uint8)
    if pattern == "corner":
        img[0, 0] = 0
    if pattern != "random":
        return img
    u = xp.uint64
    thr = u(int(background * 9007199254740992.0))  # (uint64_t)(F * 2^53) in C
    add = u((seed * EDT_SEEDMUL) & U64)
    rows = max(1, chunk // w)
    for y0 in range(0, h, rows):
        y1 = min(h, y0 + rows)
        z = xp.arange(y0 * w + 1, y1 * w + 1, dtype=xp.uint64) * u(EDT_GOLDEN) + add
        z = (z ^ (z >> u(30))) * u(EDT_MIX1)
        z = (z ^ (z >> u(27))) * u(EDT_MIX2)
        z ^= z >> u(31)
        img[y0:y1] = ((z >> u(11)) >= thr).reshape(y1 - y0, w)
    return img


def edt_scipy(img):
    import scipy.ndimage as ndi

    return ndi.distance_transform_edt(img)


def opencv_all_threads(img):
    import cv2

    cv2.setNumThreads(os.cpu_count() or 1)
    return img


def edt_opencv(img):
    import cv2

    return cv2.distanceTransform(img, cv2.DIST_L2, cv2.DIST_MASK_PRECISE)


def edt_cupy(d_img):
    from cupyx.scipy.ndimage import distance_transform_edt

    return distance_transform_edt(d_img, float64_distances=False)


def edt_compare(result, reference, w, h):
    """Pixels of the peer's distances (as float32) that differ from tilewave's raw float32
    output, and the largest difference ("inf" when one side is infinite and the other not)."""
    import numpy as np

    ours = np.memmap(reference, dtype=np.float32, mode="r", shape=(h, w))
    if tuple(result.shape) != (h, w):
        return {"differing_pixels": None, "max_abs_diff": None,
                "diff_error": f"shape {tuple(result.shape)}"}
    differing, worst = 0, 0.0
    step = max(1, (1 << 24) // w)
    for y in range(0, h, step):
        a = result[y:y + step]
        a = (a.get() if type(a).__module__.startswith("cupy") else np.asarray(a))
        a = a.astype(np.float32)
        b = np.asarray(ours[y:y + step])
        bad = a != b
        n = int(bad.sum())
        if n:
            differing += n
            d = np.abs(a[bad].astype(np.float64) - b[bad].astype(np.float64))
            worst = max(worst, float(d.max()))
    return {"differing_pixels": differing,
            "max_abs_diff": worst if np.isfinite(worst) else "inf"}


def edt_worker(args, peer):
    """Generate the image (untimed), one warm-up and R timed calls, then the comparison."""
    import numpy as np

    w, h = (int(v) for v in (args.size.split("x") + [args.size])[:2])
    gpu = peer["device"] == "gpu"
    if gpu:
        import cupy as cp

        xp = cp
    else:
        xp = np
    img = edt_binary(xp, w, h, args.background, args.pattern, args.seed)
    rec = {"bg_pixels": int((img == 0).sum()), "pattern": args.pattern,
           "background": args.background, "seed": args.seed}
    state = peer["prepare"](img) if peer.get("prepare") else img
    times, result = [], None
    r = -1  # warm-up; fast calls get up to FAST_RUNS runs, as long as they take < 1 s
    while r < args.repeat or (r < FAST_RUNS and sum(times) < 1.0):
        result = None  # free the previous result first (large images)
        if gpu:
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            e0.record()
            result = peer["run"](state)
            e1.record()
            e1.synchronize()
            t = cp.cuda.get_elapsed_time(e0, e1) * 1e-3
        else:
            t0 = time.perf_counter()
            result = peer["run"](state)
            t = time.perf_counter() - t0
        if r >= 0:
            times.append(t)
        r += 1
    rec.update(times=times, peak_rss_mib=round(peak_rss_mib(), 1))
    if gpu:
        pool = cp.get_default_memory_pool()
        rec["pool_mib"] = round(pool.total_bytes() / 2**20, 1)
        rec["result_shape"] = list(result.shape)
    if args.reference:
        rec.update(edt_compare(result, args.reference, w, h))
    return rec


# ---- max-tree and attribute-filter peers (ops "maxtree" and "area-open"): the image file
# bench/run.py also gives tw_bench, loaded as tw_bench loads it (level 0; RGB to luminance by
# tilewave's gray rule). The graph of Higra and the loading are not timed.

def mt_load(path):
    """The image tw_bench maxtree --input PATH works on: level 0, one channel."""
    import numpy as np

    img = load_any(path)
    if img.ndim == 3:
        img = gray_numpy(img[..., :3])
    return np.ascontiguousarray(img)


def higra_state(img, conn):
    import higra as hg

    graph = hg.get_4_adjacency_graph(img.shape) if conn == 4 else \
        hg.get_8_adjacency_graph(img.shape)
    return graph, img


def maxtree_higra(state, conn, threshold):
    import higra as hg

    graph, img = state
    return hg.component_tree_max_tree(graph, img)


def maxtree_higra_nodes(result, img):
    tree, _ = result
    return int(tree.num_vertices() - tree.num_leaves())


def area_open_higra(state, conn, threshold):
    """Max-tree, node areas, and every pixel (leaf) at the level of its nearest ancestor of
    area >= threshold: Higra's documented area filter."""
    import higra as hg

    graph, img = state
    tree, altitudes = hg.component_tree_max_tree(graph, img)
    area = hg.attribute_area(tree)
    return hg.reconstruct_leaf_data(tree, altitudes, area < threshold)


def tos_higra_state(img, conn):
    """The image as int64: with uint8 / uint16 arrays Higra's padding mean is summed in the
    image's own type and overflows (another exterior level, another tree)."""
    import numpy as np

    return img.astype(np.int64)


def tos_higra(state, conn, threshold):
    import higra as hg

    return hg.component_tree_tree_of_shapes_image2d(state)


def tos_higra_nodes(result, img):
    tree, _ = result
    return int(tree.num_vertices() - tree.num_leaves())


def grain_higra(state, conn, threshold):
    """Tree of shapes, node areas, every pixel at the level of its nearest ancestor of area
    >= threshold (the grain filter)."""
    import higra as hg

    tree, altitudes = hg.component_tree_tree_of_shapes_image2d(state)
    area = hg.attribute_area(tree)
    return hg.reconstruct_leaf_data(tree, altitudes, area < threshold)


def maxtree_skimage(img, conn, threshold):
    from skimage.morphology import max_tree

    return max_tree(img, connectivity=1 if conn == 4 else 2)


def maxtree_skimage_nodes(result, img):
    """Canonical pixels of scikit-image's parent image: the root and the pixels whose parent
    lies at another level."""
    import numpy as np

    parent = result[0].ravel()
    flat = img.ravel()
    own = parent == np.arange(parent.size)
    return int(own.sum() + (flat[parent] != flat)[~own].sum())


def area_open_skimage(img, conn, threshold):
    from skimage.morphology import area_opening

    return area_opening(img, threshold, connectivity=1 if conn == 4 else 2)


def maxtree_worker(args, peer):
    """Load (untimed), prepare (untimed), R timed calls (slow peers: no warm-up and at most
    max_repeat), then the agreement with tilewave: node counts for the tree, every pixel of
    the filtered image against tilewave's raw dump."""
    import numpy as np

    img = mt_load(args.input)
    state = peer["prepare"](img, args.conn) if peer.get("prepare") else img
    times, result = [], None
    repeat = min(args.repeat, peer.get("max_repeat", args.repeat))
    r = 0 if peer.get("warmup") is False else -1
    while r < repeat or (r < FAST_RUNS and sum(times) < 1.0 and
                         peer.get("max_repeat") is None):
        result = None
        t0 = time.perf_counter()
        result = peer["run"](state, args.conn, args.area)
        if r >= 0:
            times.append(time.perf_counter() - t0)
        r += 1
    rec = {"times": times, "peak_rss_mib": round(peak_rss_mib(), 1), "type": str(img.dtype),
           "w": int(img.shape[1]), "h": int(img.shape[0])}
    if peer.get("nodes"):
        rec["nodes"] = peer["nodes"](result, img)
    if args.reference and peer["op"] in ("area-open", "grain"):
        ours = np.fromfile(args.reference, dtype=img.dtype)
        res = np.asarray(result)
        if ours.size != img.size or res.shape != img.shape:
            rec["diff_error"] = f"shape {res.shape}, tilewave {ours.size} pixels"
        else:
            ours = ours.reshape(img.shape)
            bad = res != ours
            rec["differing_pixels"] = int(bad.sum())
            rec["max_abs_diff"] = int(np.abs(res.astype(np.int64) - ours.astype(np.int64))
                                      .max()) if bad.any() else 0
    return rec


PEERS = {
    "numpy": dict(
        op="gray", kind="memory", device="cpu", requires=["numpy"], run=gray_numpy,
        note="same integer formula as tilewave; one thread"),
    "opencv": dict(
        op="gray", kind="memory", device="cpu", requires=["cv2"], run=gray_opencv,
        note="cv2.cvtColor RGB2GRAY: fixed-point BT.601 weights, may differ by 1"),
    "skimage": dict(
        op="gray", kind="memory", device="cpu", requires=["skimage"], run=gray_skimage,
        max_pixels=8192 * 8192,
        note="rgb2gray: float64 output, BT.709 weights (0.2125, 0.7154, 0.0721), one thread; "
             "compared after x255 rounding"),
    "cupy": dict(
        op="gray", kind="device-memory", device="gpu", requires=["cupy"], run=gray_cupy,
        prepare=cupy_state,
        note="CuPy, the same integer formula on an array already on the GPU (elementwise "
             "kernels with temporaries)"),
    "cupy-xfer": dict(
        op="gray", kind="memory", device="gpu", requires=["cupy"], run=gray_cupy_xfer,
        note="CuPy: upload (pageable), the formula, download"),
    "opencv-file": dict(
        op="gray", kind="file", device="cpu", requires=["cv2"], run=gray_opencv_file,
        note="cv2.imread + cvtColor BGR2GRAY + imwrite (uncompressed TIFF)"),
    "tifffile-numpy-file": dict(
        op="gray", kind="file", device="cpu", requires=["tifffile", "numpy"],
        run=gray_tifffile_numpy_file, max_pixels=8192 * 8192,
        note="tifffile read + the numpy formula + tifffile write (tiled, uncompressed)"),
    "vips-colourspace": dict(
        op="gray", kind="file", device="cpu", requires=["vips"], cli=True,
        run=lambda inp, out: ["vips", "colourspace", inp, out, "b-w"],
        note="vips CLI: sRGB -> B_W through linear light (a different formula); time "
             "includes process start"),
    "skimage-hdome": dict(
        op="hdome", kind="memory", device="cpu", requires=["skimage", "numpy"],
        run=hdome_skimage, prepare=luminance_state, max_pixels=2048 * 2048, against=["file"],
        note="skimage.morphology.reconstruction (dilation, 8-conn) of max(image - 40, 0) "
             "under the luminance image, then image - R; one thread; in memory, compared "
             "with tilewave's whole file-to-file process (which also reads, converts and "
             "writes), so the ratio understates tilewave"),
    "scipy-edt": dict(
        op="edt", kind="memory", device="cpu", requires=["scipy", "numpy"], run=edt_scipy,
        exact=True, max_pixels=4096 * 4096,
        note="scipy.ndimage.distance_transform_edt (exact; float64 out, compared after a "
             "float32 cast, which must equal tilewave's f32 bit for bit); one thread"),
    "opencv-edt": dict(
        op="edt", kind="memory", device="cpu", requires=["cv2", "numpy"], run=edt_opencv,
        prepare=opencv_all_threads,
        note="cv2.distanceTransform(DIST_L2, DIST_MASK_PRECISE), float32 arithmetic and "
             "output (not exact at large distances), cv2.setNumThreads(all cores)"),
    "cupy-edt": dict(
        op="edt", kind="device-memory", device="gpu", requires=["cupy", "numpy"],
        run=edt_cupy, gpu_events=True,
        note="cupyx.scipy.ndimage.distance_transform_edt(float64_distances=False) on a "
             "uint8 array already on the GPU, CUDA events around the call after a warm-up "
             "(PBA+; pads the image to a square, multiple of 32; crashes above 46340 a side)"),
    "higra-maxtree": dict(
        op="maxtree", kind="memory", device="cpu", requires=["higra", "numpy"],
        run=maxtree_higra, prepare=higra_state, nodes=maxtree_higra_nodes,
        note="higra.component_tree_max_tree (C++ union-find, one thread) on a 4- or "
             "8-adjacency graph built beforehand (untimed); its nodes, leaves excluded, are "
             "compared with tilewave's canonical nodes"),
    "skimage-maxtree": dict(
        op="maxtree", kind="memory", device="cpu", requires=["skimage", "numpy"],
        run=maxtree_skimage, nodes=maxtree_skimage_nodes, max_pixels=1024 * 1024,
        warmup=False, max_repeat=1,
        note="skimage.morphology.max_tree (parent image and traverser; one thread; close to "
             "quadratic on large images, so limited to 1024^2; one timed call, no warm-up)"),
    "higra-area-open": dict(
        op="area-open", kind="memory", device="cpu", requires=["higra", "numpy"],
        run=area_open_higra, prepare=higra_state, exact=True,
        note="higra: component_tree_max_tree + attribute_area + reconstruct_leaf_data(area < "
             "N), one thread, graph built beforehand (untimed); must equal tilewave's output"),
    "skimage-area-open": dict(
        op="area-open", kind="memory", device="cpu", requires=["skimage", "numpy"],
        run=area_open_skimage, exact=True, max_pixels=1024 * 1024, warmup=False,
        max_repeat=1,
        note="skimage.morphology.area_opening (max_tree + area + direct filter, one thread; "
             "limited to 1024^2 like its max_tree; one timed call, no warm-up); must equal "
             "tilewave's output"),
    "higra-tos": dict(
        op="tos", kind="memory", device="cpu", requires=["higra", "numpy"], run=tos_higra,
        prepare=tos_higra_state, nodes=tos_higra_nodes, warmup=False,
        note="higra.component_tree_tree_of_shapes_image2d (padding mean, immersion: the same "
             "tree as tilewave's; C++, one thread) of the image as int64 (converted untimed; "
             "uint8 input is about 20% faster but its overflowing mean pads with another "
             "level); no warm-up call (seconds a call); its node count is compared with "
             "tilewave's"),
    "higra-grain": dict(
        op="grain", kind="memory", device="cpu", requires=["higra", "numpy"], run=grain_higra,
        prepare=tos_higra_state, exact=True, warmup=False,
        note="higra: component_tree_tree_of_shapes_image2d + attribute_area + "
             "reconstruct_leaf_data(area < N), one thread; must equal tilewave's output"),
    "vips-extract_band": dict(
        op="gray", kind="file", device="cpu", requires=["vips"], cli=True,
        run=lambda inp, out: ["vips", "extract_band", inp, out, "1"],
        note="vips CLI: copies the G band only (an I/O floor, not the same operation); "
             "time includes process start"),
}


def missing(peer):
    """Name of the first missing requirement of a peer, or None."""
    # Python peers read their inputs and write their outputs as TIFF (load_rgb, load_any)
    if not peer.get("cli") and not any(importlib.util.find_spec(m) for m in ("tifffile", "cv2")):
        return "tifffile (or OpenCV) not installed"
    for req in peer["requires"]:
        if peer.get("cli"):
            if shutil.which(req) is None:
                return f"{req} not installed"
        elif importlib.util.find_spec(req) is None:
            return f"{req} not installed"
    return None


def versions(names):
    """Versions of the Python modules and CLIs named, "not installed" when missing."""
    out = {}
    for name in names:
        if shutil.which(name) and not importlib.util.find_spec(name):
            try:
                r = subprocess.run([name, "--version"], capture_output=True, text=True,
                                   timeout=30)
                out[name] = r.stdout.strip().splitlines()[0] if r.stdout else "?"
            except (OSError, subprocess.SubprocessError):
                out[name] = "?"
        elif importlib.util.find_spec(name):
            try:
                out[name] = getattr(importlib.import_module(name), "__version__", None)
                if out[name] is None:  # higra has no __version__: its distribution's
                    out[name] = importlib.import_module("importlib.metadata").version(name)
            except Exception as e:  # noqa: BLE001 - report, do not fail the run
                out[name] = f"import failed: {e}"
        else:
            out[name] = "not installed"
    return out


def peak_rss_mib():
    """Peak RSS of this process's own address space (VmHWM). ru_maxrss is avoided: on Linux
    exec folds the launcher's high-water mark into it (run.py's, for this process)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def max_abs_diff(result, reference):
    """Largest |result - reference| (arrays or paths), float results scaled to 0..255;
    None when the shapes differ. Row blocks keep the temporaries small."""
    import numpy as np

    ref = load_any(reference) if isinstance(reference, str) else reference
    res = load_any(result) if isinstance(result, str) else np.asarray(result)
    if res.shape != ref.shape:
        return None
    worst = 0
    for y in range(0, res.shape[0], 512):
        a = res[y:y + 512]
        a = np.rint(a * 255.0) if a.dtype.kind == "f" else a
        d = np.abs(a.astype(np.int64) - ref[y:y + 512].astype(np.int64))
        worst = max(worst, int(d.max()) if d.size else 0)
    return worst


# In-memory calls of a few milliseconds are noisy: they get at least this many timed runs
# while the total stays under a second.
FAST_RUNS = 10


def time_cli(argv, repeat):
    """Warm-up plus `repeat` timed runs of a command; (times, peak RSS of the children)."""
    times = []
    for r in range(-1, repeat):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        if r >= 0:
            times.append(time.perf_counter() - t0)
    # The children's ru_maxrss includes this launcher's own peak (exec inherits it): a floor
    # of about 15 MiB, since this process has imported only the standard library.
    return times, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0


def worker(args):
    if args.peer == "diff":  # pixel agreement of two files (kept out of run.py's memory)
        return {"max_abs_diff": max_abs_diff(args.input, args.reference)}
    if args.peer == "cmd":  # any command, e.g. the tilewave CLI, timed as CLI peers are
        times, rss = time_cli(json.loads(args.argv), args.repeat)
        return {"times": times, "peak_rss_mib": round(rss, 1),
                "rss_floor_mib": round(peak_rss_mib(), 1)}
    peer = PEERS[args.peer]
    why = missing(peer)
    if why:
        return {"skipped": why}
    if peer["op"] == "edt":
        return edt_worker(args, peer)
    if peer["op"] in ("maxtree", "area-open", "tos", "grain"):
        return maxtree_worker(args, peer)
    times = []
    result = None
    if peer["kind"] in ("memory", "device-memory"):
        img = load_rgb(args.input)
        if peer.get("prepare"):
            img = peer["prepare"](img)
        r = -1  # warm-up; fast calls get up to FAST_RUNS runs, as long as they take < 1 s
        while r < args.repeat or (r < FAST_RUNS and sum(times) < 1.0):
            t0 = time.perf_counter()
            result = peer["run"](img)
            if r >= 0:
                times.append(time.perf_counter() - t0)
            r += 1
        rss = peak_rss_mib()
    elif peer.get("cli"):
        times, rss = time_cli(peer["run"](args.input, args.output), args.repeat)
    else:
        for r in range(-1, args.repeat):
            t0 = time.perf_counter()
            result = peer["run"](args.input, args.output)
            if r >= 0:
                times.append(time.perf_counter() - t0)
        rss = peak_rss_mib()
    rec = {"times": times, "peak_rss_mib": round(rss, 1)}
    if peer.get("cli"):
        rec["rss_floor_mib"] = round(peak_rss_mib(), 1)  # the launcher's share, see time_cli
    if peer["kind"] == "file":
        try:
            result = load_any(args.output) if args.reference else None
        except ImportError as e:
            rec["diff_error"] = str(e)
        try:
            os.remove(args.output)
        except OSError:
            pass
    if args.reference and result is not None:
        if type(result).__module__.startswith("cupy"):
            result = result.get()
        try:
            rec["max_abs_diff"] = max_abs_diff(result, args.reference)
        except ImportError as e:  # no numpy or TIFF reader here: time without the check
            rec["diff_error"] = str(e)
    if peer.get("cli"):
        # Process start of the CLI alone, so a reader can tell it from the work.
        starts = []
        for _ in range(3):
            t0 = time.perf_counter()
            subprocess.run([peer["requires"][0], "--version"], check=True,
                           stdout=subprocess.DEVNULL)
            starts.append(time.perf_counter() - t0)
        rec["startup_s"] = sorted(starts)[1]
    return rec


def main():
    ap = argparse.ArgumentParser(description="Time one peer (run by bench/run.py).")
    ap.add_argument("peer", choices=sorted(PEERS) + ["cmd", "diff"])
    ap.add_argument("--input")
    ap.add_argument("--argv", help="cmd: the command as a JSON list")
    ap.add_argument("--output", help="output file of file peers")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--reference", help="tilewave's output, to report max_abs_diff")
    ap.add_argument("--size", help="edt peers: image size WxH")
    ap.add_argument("--background", type=float, default=0.5,
                    help="edt peers: background fraction of the random pattern")
    ap.add_argument("--pattern", default="random", choices=["random", "corner", "none"],
                    help="edt peers: the pattern (as tw_bench edt --pattern)")
    ap.add_argument("--seed", type=int, default=1, help="edt peers: the pattern's seed")
    ap.add_argument("--conn", type=int, default=4, choices=[4, 8],
                    help="maxtree / area-open peers: connectivity")
    ap.add_argument("--area", type=int, default=100, help="area-open peers: the threshold")
    args = ap.parse_args()
    try:
        rec = worker(args)
    except Exception as e:  # noqa: BLE001 - one line, as the C tools do
        print(f"peers.py {args.peer}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(json.dumps(rec))
    return 0


if __name__ == "__main__":
    sys.exit(main())
