#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# tilewave bench: label, small-object removal and watershed of in-memory arrays against their CPU
# peers, one run.
"""Connected-component labelling, removal of small objects and marker-controlled watershed of
numpy arrays through the Python binding (tilewave.label, tilewave.area_open, tilewave.watershed,
the default runtime: every core), against
scikit-image, SciPy, OpenCV and DIPlib on the same inputs in the same process (issue 29):

    TILEWAVE_LIBRARY=build/libtilewave.so python3 bench/objects.py
    python3 bench/objects.py --build build --sizes 4096,8192 --repeat 3 --json objects.json
    python3 bench/objects.py --gpus all          # GPU workers too (the GPU machine)

Inputs (generated, not timed): a nuclei-like mask, random overlapping discs of radius 6 to 16
(one or two centres in every 32x32 cell, drawn from a hash of the cell: the same mask as
`tw_bench label`), about 40% foreground, its objects crossing every tile border. Label: that
mask, 8-connectivity. Area opening (`--ops area_open`, not by default: the nuclei pipeline's
step 2): the mask with specks (about 2% of the pixels set at random besides the discs: most are
components of 1 to 3 pixels), components under 30 pixels removed, 8-connectivity.
Watershed: the negated Euclidean distance map of the mask (float32, tilewave.edt), markers the
labelled local maxima of the distance (a 7x7 maximum filter, at least 2 pixels from the
background), the mask as mask, 8-connectivity; scikit-image and DIPlib flood the negated map
as given (negation not timed), tilewave floods it with negate=True.

Peers (each skipped when its package is missing):
  label      skimage.measure.label (connectivity=2, int64 out), scipy.ndimage.label (3x3,
             int32), cv2.connectedComponents (8, CV_32S; OpenCV's threads), dip.Label
             (connectivity=2; DIPlib's threads)
  area_open  skimage.morphology.remove_small_objects (min_size=30, connectivity=2),
             scipy.ndimage.label then a table of the sizes, cv2.connectedComponentsWithStats
             then a table of the areas, dip.BinaryAreaOpening (30, connectivity=2)
  watershed  skimage.segmentation.watershed(-dist, markers, mask, connectivity=2),
             dip.SeededWatershed(-dist, markers, mask, connectivity=2, maxDepth=0,
             flags={"labels", "no gaps"}: no merging, no lines).
             Not cv2.watershed: it floods an 8-bit 3-channel image (the distance map would be
             quantised to 256 levels, its plateaus split differently), always draws -1 lines
             between regions and takes no mask: not the same work.
Agreement, printed for every peer so that no row compares different work: label, identical
bytes to tilewave's (raster-order numbering, as scikit-image) or else the same partition (a
bijection between the labels); area opening, the same foreground pixels; watershed, the
share of pixels where the peer's labels equal scikit-image's and tilewave's
(docs/watershed.md: tilewave and scikit-image differ only at ties on borders, 0.1-0.2% of the
pixels of such inputs).

Times: best of --repeat wall times after one untimed warm-up for tilewave; peers taking more
than --slow seconds a call are not repeated, and a peer whose time at the previous size,
scaled by the pixel count, exceeds --skip-above seconds is skipped at the next (printed).
Sizes that would not fit in the available memory (an estimate of the peak, from
/proc/meminfo's MemAvailable) are skipped with a note. Exit 1 when a peer's label partition
differs or a watershed agreement with scikit-image is below 99%.
"""
import argparse
import datetime
import gc
import importlib
import json
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

try:
    import numpy as np
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"SKIP: {e}")
    sys.exit(77)


def optional(name):
    try:
        return importlib.import_module(name)
    except Exception:
        return None


def version(mod, attr="__version__"):
    return getattr(mod, attr, "?") if mod is not None else None


# ---- inputs

CELL = 32
M64 = (1 << 64) - 1


def mix64(z):
    """twtest_mix64 (tests/common/twtest_rnd.h) on uint64 arrays."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
    return z ^ (z >> np.uint64(31))


def disc_mask(n):
    """bench_label.c's mask (bit for bit): one or two discs in every 32x32 cell, radius 6..16."""
    w = h = n
    cw, ch = -(-w // CELL), -(-h // CELL)
    cy, cx = np.meshgrid(np.arange(ch, dtype=np.uint64), np.arange(cw, dtype=np.uint64),
                         indexing="ij")
    with np.errstate(over="ignore"):
        s = mix64((cx * np.uint64(0x9E3779B97F4A7C15)) ^ (cy * np.uint64(0xC2B2AE3D27D4EB4F)) ^
                  np.uint64(0x7477))
        discs = 1 + (s % np.uint64(10) < 3)
        centres = []
        for i in range(2):
            s = mix64(s + np.uint64(0x9E3779B97F4A7C15))
            keep = (discs > i).ravel()
            x0 = (cx * CELL + (s & np.uint64(31))).ravel()[keep].astype(np.int64)
            y0 = (cy * CELL + ((s >> np.uint64(5)) & np.uint64(31))).ravel()[keep].astype(np.int64)
            r = (6 + (s >> np.uint64(10)) % np.uint64(11)).ravel()[keep].astype(np.int64)
            centres.append((x0, y0, r))
    x0 = np.concatenate([c[0] for c in centres])
    y0 = np.concatenate([c[1] for c in centres])
    rr = np.concatenate([c[2] for c in centres])
    mask = np.zeros((h, w), np.uint8)
    for r in range(6, 17):
        sel = rr == r
        xs, ys = x0[sel], y0[sel]
        for dy in range(-r, r + 1):
            span = int(np.floor(np.sqrt(r * r - dy * dy)))
            y = ys + dy
            ok_y = (y >= 0) & (y < h)
            for dx in range(-span, span + 1):
                x = xs + dx
                ok = ok_y & (x >= 0) & (x < w)
                mask[y[ok], x[ok]] = 255
    return mask


def watershed_inputs(tw, mask, runtime):
    """The negated-EDT input of a nuclei pipeline: the distance map (float32, exact), markers
    (uint32: the 8-connected local maxima of the distance, >= 2 pixels deep, labelled)."""
    import scipy.ndimage as ndi

    dist = tw.edt(mask, runtime=runtime)
    peaks = (ndi.maximum_filter(dist, size=7) == dist) & (dist >= 2)
    markers, _ = ndi.label(peaks, structure=np.ones((3, 3), bool))
    return dist, markers.astype(np.uint32)


# ---- agreement

def same_partition(a, b):
    """True when a and b label the same sets of pixels (background 0 in both), whatever the
    numbering."""
    if a.shape != b.shape or not np.array_equal(a == 0, b == 0):
        return False
    a = a.ravel()
    b = b.ravel()
    na, nb = int(a.max()), int(b.max())
    if na != nb:
        return False
    m = np.zeros(na + 1, np.int64)
    m[a] = b
    if not np.array_equal(m[a], b):
        return False
    return np.unique(m[1:]).size == na


def label_agreement(ref, got):
    if ref.shape == got.shape and np.array_equal(ref, got):
        return "identical"
    return "same partition" if same_partition(ref, got) else "DIFFERENT"


def share_equal(a, b):
    return float(np.count_nonzero(a == b)) / a.size


# ---- timing

def best_of(f, n, slow, warmup=False):
    """(best wall seconds, last result, calls timed): one untimed warm-up call when asked;
    n timed calls, or one when a call takes more than `slow` seconds."""
    if warmup:
        r = f()
        del r
    times, r = [], None
    for i in range(n):
        r = None
        gc.collect()
        t = time.perf_counter()
        r = f()
        times.append(time.perf_counter() - t)
        if times[-1] > slow:
            break
    return min(times), r, len(times)


def mem_available_gib():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return None


def hardware():
    hw = {"cpu_model": platform.processor() or "?", "logical_cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    hw["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        with open("/proc/meminfo") as f:
            hw["mem_gib"] = round(int(f.readline().split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return hw


# ---- the peers

def label_peers(mods):
    skm, ndi, cv2, dip = mods["skimage"], mods["scipy"], mods["cv2"], mods["dip"]
    peers = []
    if skm is not None:
        from skimage.measure import label as sk_label
        peers.append(("skimage.measure.label", lambda m, b: sk_label(b, connectivity=2)))
    if ndi is not None:
        import scipy.ndimage as nd
        st = np.ones((3, 3), bool)
        peers.append(("scipy.ndimage.label", lambda m, b: nd.label(b, structure=st)[0]))
    if cv2 is not None:
        peers.append(("cv2.connectedComponents",
                      lambda m, b: cv2.connectedComponents(m, connectivity=8,
                                                           ltype=cv2.CV_32S)[1]))
    if dip is not None:
        peers.append(("dip.Label",
                      lambda m, b: np.asarray(dip.Label(dip.Image(b), connectivity=2))))
    return peers


AREA = 30


def speck_mask(mask):
    """The disc mask with about 2% of the pixels set at random (a hash of the pixel index)."""
    idx = np.arange(mask.size, dtype=np.uint64).reshape(mask.shape)
    with np.errstate(over="ignore"):
        specks = mix64(idx ^ np.uint64(0x5EC5)) % np.uint64(100) < 2
    return np.where(specks, np.uint8(255), mask)


def area_peers(mods):
    skm, ndi, cv2, dip = mods["skimage"], mods["scipy"], mods["cv2"], mods["dip"]
    peers = []

    def keep_by_size(lab, sizes):
        keep = sizes >= AREA
        keep[0] = False
        return keep[lab]
    if skm is not None:
        from skimage.morphology import remove_small_objects
        peers.append(("skimage.morphology.remove_small_objects",
                      lambda m, b: remove_small_objects(b, min_size=AREA, connectivity=2)))
    if ndi is not None:
        import scipy.ndimage as nd
        st = np.ones((3, 3), bool)

        def sp(m, b):
            lab = nd.label(b, structure=st)[0]
            return keep_by_size(lab, np.bincount(lab.ravel()))
        peers.append(("scipy.ndimage.label+bincount", sp))
    if cv2 is not None:
        def cv(m, b):
            _, lab, stats, _ = cv2.connectedComponentsWithStats(m, connectivity=8,
                                                                ltype=cv2.CV_32S)
            return keep_by_size(lab, stats[:, cv2.CC_STAT_AREA].copy())
        peers.append(("cv2.connectedComponentsWithStats", cv))
    if dip is not None:
        peers.append(("dip.BinaryAreaOpening",
                      lambda m, b: np.asarray(dip.BinaryAreaOpening(dip.Image(b), AREA,
                                                                    connectivity=2))))
    return peers


def watershed_peers(mods):
    skm, dip = mods["skimage"], mods["dip"]
    peers = []
    if skm is not None:
        from skimage.segmentation import watershed as sk_ws
        peers.append(("skimage.segmentation.watershed",
                      lambda neg, mk, b: sk_ws(neg, mk, mask=b, connectivity=2)))
    if dip is not None:
        peers.append(("dip.SeededWatershed",
                      lambda neg, mk, b: np.asarray(dip.SeededWatershed(
                          dip.Image(neg), dip.Image(mk), dip.Image(b), connectivity=2,
                          maxDepth=0, maxSize=0, flags={"labels", "no gaps"}))))
    return peers


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", help="build folder holding libtilewave.so (default: "
                    "TILEWAVE_LIBRARY or the binding's search)")
    ap.add_argument("--sizes", default="4096,8192,16384", help="square sizes, comma-separated")
    ap.add_argument("--ops", default="label,watershed")
    ap.add_argument("--repeat", type=int, default=3, help="timed calls (best of)")
    ap.add_argument("--gpus", default="none",
                    help="runtime.gpus for tilewave's runtime: none (default), all, or a list")
    ap.add_argument("--peers", default="all",
                    help="comma list of peer names (substrings), 'all' or 'none'")
    ap.add_argument("--slow", type=float, default=60.0,
                    help="a peer call longer than this is not repeated (seconds)")
    ap.add_argument("--skip-above", type=float, default=600.0,
                    help="skip a peer whose scaled time at the previous size exceeds this")
    ap.add_argument("--trace", help="tilewave's runtime.trace file (the last call's trace)")
    ap.add_argument("--json", help="write every measurement here")
    args = ap.parse_args()

    if args.build:
        os.environ["TILEWAVE_LIBRARY"] = os.path.join(os.path.abspath(args.build),
                                                      "libtilewave.so")
    sys.path.insert(0, os.path.join(HERE, "..", "python"))
    import tilewave as tw

    mods = {"skimage": optional("skimage"), "scipy": optional("scipy"), "cv2": optional("cv2"),
            "dip": optional("diplib")}
    if mods["dip"] is not None:
        mods["dip"].SetNumberOfThreads(os.cpu_count() or 1)
    versions = {"tilewave": tw.version(), "numpy": np.__version__,
                "scikit-image": version(mods["skimage"]), "scipy": version(mods["scipy"]),
                "opencv": version(mods["cv2"]), "diplib": version(mods["dip"]),
                "python": platform.python_version()}
    wanted = [p.strip() for p in args.peers.split(",")]

    def use(name):
        return args.peers == "all" or (args.peers != "none" and any(w in name for w in wanted))

    ops = [o.strip() for o in args.ops.split(",")]
    if "watershed" in ops and mods["scipy"] is None:
        print("# watershed skipped: its input (local maxima, their labels) needs SciPy")
        ops.remove("watershed")
    sizes = [int(s) for s in args.sizes.split(",")]
    hw = hardware()
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    keys = {"gpus": args.gpus}
    if args.trace:
        keys["runtime_trace"] = args.trace
    rt = tw.Runtime(**keys)
    print(f"# objects: {hw['cpu_model']}, {hw['logical_cpus']} logical CPUs, "
          f"{hw.get('mem_gib')} GiB, {when}, load {load and round(load, 2)}; tilewave "
          f"{rt.workers} workers (runtime.gpus={args.gpus}); best of {args.repeat}", flush=True)
    print("# versions: " + ", ".join(f"{k} {v}" for k, v in versions.items() if v), flush=True)
    records, failed, prev = [], False, {}
    # Peak estimate, bytes a pixel: label (mask 1, bool 1, tilewave 4, skimage int64 8 plus
    # its scratch ~8), watershed (dist 4, negated 4 and skimage's float64 8, markers 4, labels
    # 4 + 4, skimage's heap and index arrays ~24).
    peak_bpp = {"label": 26, "area_open": 26, "watershed": 56}
    for n in sizes:
        px = n * n
        avail = mem_available_gib()
        need = max(peak_bpp[o] for o in ops) * px / 2**30
        if avail is not None and need > 0.8 * avail:
            print(f"## {n}^2: skipped: about {need:.1f} GiB needed, {avail:.1f} GiB available",
                  flush=True)
            records.append({"size": n, "skipped": f"needs ~{need:.1f} GiB, {avail:.1f} free"})
            continue
        t0 = time.perf_counter()
        mask = disc_mask(n)
        b = mask > 0
        fg = float(np.count_nonzero(b)) / px
        print(f"## {n}^2: mask {fg * 100:.1f}% foreground, generated in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
        if "label" in ops:
            t, ref, k = best_of(lambda: tw.label(mask, conn=8, runtime=rt), args.repeat,
                                args.slow, warmup=True)
            nobj = int(ref.max())
            rec = {"op": "label", "size": n, "tool": "tilewave", "best_s": t, "calls": k,
                   "mpix_per_s": px / t / 1e6, "objects": nobj, "foreground": fg}
            records.append(rec)
            print(f"label {n}^2: tilewave {t:.3f} s ({px / t / 1e6:.0f} MPix/s), {nobj} "
                  "objects", flush=True)
            rows = [rec]
            for name, f in label_peers(mods):
                if not use(name):
                    continue
                est = prev.get(("label", name))
                if est is not None and est * px > args.skip_above:
                    print(f"label {n}^2: {name}: skipped (about {est * px:.0f} s from the "
                          "previous size)", flush=True)
                    continue
                try:
                    tp, out, k = best_of(lambda: f(mask, b), args.repeat, args.slow)
                except Exception as e:  # a peer failing (memory) only skips it
                    print(f"label {n}^2: {name}: failed: {e}", flush=True)
                    continue
                prev[("label", name)] = tp / px
                agree = label_agreement(ref, out)
                del out
                failed |= agree == "DIFFERENT"
                r = {"op": "label", "size": n, "tool": name, "best_s": tp, "calls": k,
                     "mpix_per_s": px / tp / 1e6, "agreement": agree, "tilewave_speedup":
                     tp / t}
                records.append(r)
                rows.append(r)
                print(f"label {n}^2: {name} {tp:.3f} s, {agree}; tilewave {tp / t:.2f}x",
                      flush=True)
            del ref
            gc.collect()
        if "area_open" in ops:
            sm = speck_mask(mask)
            sb = sm > 0
            t, ref, k = best_of(lambda: tw.area_open(sm, AREA, conn=8, runtime=rt),
                                args.repeat, args.slow, warmup=True)
            ref = ref > 0
            rec = {"op": "area_open", "size": n, "tool": "tilewave", "best_s": t, "calls": k,
                   "mpix_per_s": px / t / 1e6, "kept": float(np.count_nonzero(ref)) / px,
                   "foreground": float(np.count_nonzero(sb)) / px}
            records.append(rec)
            print(f"area_open {n}^2: tilewave {t:.3f} s ({px / t / 1e6:.0f} MPix/s), "
                  f"{rec['foreground'] * 100:.1f}% -> {rec['kept'] * 100:.1f}% foreground",
                  flush=True)
            for name, f in area_peers(mods):
                if not use(name):
                    continue
                try:
                    tp, out, k = best_of(lambda: f(sm, sb), args.repeat, args.slow)
                except Exception as e:
                    print(f"area_open {n}^2: {name}: failed: {e}", flush=True)
                    continue
                agree = "identical" if np.array_equal(out != 0, ref) else "DIFFERENT"
                del out
                failed |= agree == "DIFFERENT"
                records.append({"op": "area_open", "size": n, "tool": name, "best_s": tp,
                                "calls": k, "mpix_per_s": px / tp / 1e6, "agreement": agree,
                                "tilewave_speedup": tp / t})
                print(f"area_open {n}^2: {name} {tp:.3f} s, {agree}; tilewave {tp / t:.2f}x",
                      flush=True)
            del sm, sb, ref
            gc.collect()
        if "watershed" in ops:
            dist, markers = watershed_inputs(tw, mask, rt)
            neg = -dist
            nmk = int(markers.max())
            t, ref, k = best_of(lambda: tw.watershed(dist, markers, mask=mask, conn=8,
                                                     negate=True, runtime=rt),
                                args.repeat, args.slow, warmup=True)
            rec = {"op": "watershed", "size": n, "tool": "tilewave", "best_s": t, "calls": k,
                   "mpix_per_s": px / t / 1e6, "markers": nmk, "foreground": fg}
            records.append(rec)
            print(f"watershed {n}^2: tilewave {t:.3f} s ({px / t / 1e6:.0f} MPix/s), {nmk} "
                  "markers", flush=True)
            sk = None
            for name, f in watershed_peers(mods):
                if not use(name):
                    continue
                est = prev.get(("watershed", name))
                if est is not None and est * px > args.skip_above:
                    print(f"watershed {n}^2: {name}: skipped (about {est * px:.0f} s from the "
                          "previous size)", flush=True)
                    continue
                try:
                    tp, out, k = best_of(lambda: f(neg, markers, b), args.repeat, args.slow)
                except Exception as e:
                    print(f"watershed {n}^2: {name}: failed: {e}", flush=True)
                    continue
                prev[("watershed", name)] = tp / px
                r = {"op": "watershed", "size": n, "tool": name, "best_s": tp, "calls": k,
                     "mpix_per_s": px / tp / 1e6, "tilewave_speedup": tp / t,
                     "agree_tilewave": share_equal(out, ref)}
                if name.startswith("skimage"):
                    sk = out
                    rec["agree_skimage"] = r["agree_tilewave"]
                    failed |= r["agree_tilewave"] < 0.99
                elif sk is not None:
                    r["agree_skimage"] = share_equal(out, sk)
                del out
                records.append(r)
                extra = (f", agrees with skimage on {r['agree_skimage'] * 100:.3f}%"
                         if "agree_skimage" in r and not name.startswith("skimage") else "")
                print(f"watershed {n}^2: {name} {tp:.3f} s; agrees with tilewave on "
                      f"{r['agree_tilewave'] * 100:.3f}% of the pixels{extra}; tilewave "
                      f"{tp / t:.2f}x", flush=True)
            del sk, ref, dist, neg, markers
            gc.collect()
        del mask, b
        gc.collect()
    rt.close()

    print("\n| op | size | tool | best time | MPix/s | agreement | tilewave speed-up |")
    print("|---|---|---|---|---|---|---|")
    for r in records:
        if "tool" not in r:
            continue
        if r["op"] == "label":
            agree = r.get("agreement", f"{r.get('objects')} objects")
        elif r["op"] == "area_open":
            agree = r["agreement"] if "agreement" in r else f"{r['kept'] * 100:.1f}% kept"
        else:
            agree = (f"{r['agree_skimage'] * 100:.3f}% with skimage"
                     if r.get("agree_skimage") is not None and r["tool"] != "skimage."
                     "segmentation.watershed" else "")
            if r["tool"] != "tilewave":
                agree = (agree + "; " if agree and r["tool"] != "skimage.segmentation."
                         "watershed" else "") + f"{r['agree_tilewave'] * 100:.3f}% with tilewave"
        sp = f"{r['tilewave_speedup']:.2f}x" if "tilewave_speedup" in r else ""
        print(f"| {r['op']} | {r['size']}² | {r['tool']} | {r['best_s']:.3f} s "
              f"{'(1 call) ' if r['calls'] == 1 and r['tool'] != 'tilewave' else ''}| "
              f"{r['mpix_per_s']:.0f} | {agree} | {sp} |")
    print("\n| op | size | tilewave | fastest peer | its time | tilewave / fastest peer |")
    print("|---|---|---|---|---|---|")
    for op in ops:
        for n in sizes:
            mine = [r for r in records if r.get("op") == op and r.get("size") == n]
            tw_r = [r for r in mine if r["tool"] == "tilewave"]
            peers = [r for r in mine if r["tool"] != "tilewave"]
            if not tw_r or not peers:
                continue
            f = min(peers, key=lambda r: r["best_s"])
            print(f"| {op} | {n}² | {tw_r[0]['best_s']:.3f} s | {f['tool']} | "
                  f"{f['best_s']:.3f} s | {f['best_s'] / tw_r[0]['best_s']:.2f}x |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"hardware": hw, "date": when, "load": load, "versions": versions,
                       "gpus": args.gpus, "repeat": args.repeat, "records": records}, f,
                      indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
