#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# tilewave bench: the driver: every registered workload, tilewave against its peers, one run.
"""Benchmark tilewave against its peers, side by side, in one run.

    python3 bench/run.py --quick [--json out.json]    # < 2 min on a 2-core machine
    python3 bench/run.py --full                       # sizes up to 16384^2, all inputs
    python3 bench/run.py --gpu --json bench-gpu.json  # the GPU machine (bench/gpu.sh)
    python3 bench/run.py --quick --workloads edt      # one workload (here the EDT)

For each workload in WORKLOADS the driver generates the inputs (bench/inputs.py, cached),
runs tilewave's variants through build/tw_bench (and the tilewave CLI), runs each peer in
its own child process (bench/peers.py), and prints a table: ratio = peer time / tilewave
time, so a ratio above 1 means tilewave is faster. Every timing is a median over --repeat
runs after one warm-up. Peak RSS is per process: each tilewave variant and each peer runs in
a child of its own. run.py itself needs only Python 3; most peers and the natural, gray and
mask inputs need numpy; whatever is missing is reported "not installed" and skipped. Exit
status 1 when a command fails or tilewave's variants disagree.

To add an operation, append a dict to WORKLOADS (and its peers to bench/peers.py); see the
`gray` entry for the fields. The EDT (`edt`) runs on generated random binary images rather
than input files: its cases per mode are in EDT_MODES and its measurements in EDT_TILEWAVE.
"""
import argparse
import datetime
import filecmp
import json
import os
import platform
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import peers  # noqa: E402

# ---- the distance transform's cases per mode (runner "edt"): groups of sizes x background
# fractions of the random binary image that tw_bench edt and bench/peers.py both generate,
# the tilewave measurements (EDT_TILEWAVE) and the peers of each group. The first tilewave
# measurement of a group dumps its float32 output, which every peer is checked against.
EDT_SEED = 1
EDT_CPU = ["kernel-cpu", "job-cpu", "wavefront-cpu"]
EDT_CPU_PEERS = ["scipy-edt", "opencv-edt"]
# The wavefront makes no error on random images (short distances, no curved boundaries):
# pattern "cells" (tw_bench only, no peer: a disk per 64x64 cell) shows its errors.
EDT_CELLS_CPU = dict(sizes=[2048], pattern="cells", backgrounds=[0.5], dump=False,
                     tilewave=["kernel-cpu", "wavefront-cpu"], peers=[])
EDT_MODES = {
    "quick": [dict(sizes=[2048, 4096], backgrounds=[0.01, 0.5], tilewave=EDT_CPU,
                   peers=EDT_CPU_PEERS), EDT_CELLS_CPU],
    "full": [dict(sizes=[2048, 4096, 8192], backgrounds=[0.01, 0.5], tilewave=EDT_CPU,
                  peers=EDT_CPU_PEERS), EDT_CELLS_CPU],
    "gpu": [
        dict(sizes=[8192], pattern="cells", backgrounds=[0.5], dump=False,
             tilewave=["kernel-cuda", "wavefront-cuda"], peers=[]),
        dict(sizes=[8192, 16384], backgrounds=[0.01, 0.5],
             tilewave=["kernel-cuda", "wavefront-cuda"], peers=["cupy-edt"]),
        # CuPy pads to a square of the longer side: a strip pays for the whole square.
        dict(sizes=["1024x16384", "16384x1024"], backgrounds=[0.01, 0.5],
             tilewave=["kernel-cuda"], peers=["cupy-edt"]),
        # Above CuPy's 46340 a side: tilewave alone, CuPy attempted in its own process so
        # that its crash is recorded (crashed: ...) instead of ending the run.
        dict(sizes=[50000], backgrounds=[0.01], tilewave=["kernel-cuda"], peers=["cupy-edt"],
             dump=False, peers_may_crash=True),
        # The whole-slide target: 65536^2 from host memory to host memory, float32 out.
        dict(sizes=[65536], backgrounds=[0.01], tilewave=["job-gpu", "job-both"], peers=[],
             dump=False),
    ],
}

# ---- the max-tree and the area opening (runner "maxtree", workloads "maxtree" and
# "area-open"): groups of sizes x inputs x connectivities (x area thresholds), the tilewave
# measurements of each (MT_TILEWAVE) and its peers. Inputs are bench/inputs.py names (files;
# tw_bench and the peers read the same one) or gen:field / gen:noise, generated inside
# tw_bench (no peer can see those: the whole-slide sizes). scikit-image's max_tree is close to
# quadratic in the image size: its peers stop at 1024^2 (max_pixels in bench/peers.py).
MT_AREA = 100
MT_CPU_PEERS = {"maxtree": ["higra-maxtree", "skimage-maxtree"],
                "area-open": ["higra-area-open", "skimage-area-open"]}
MT_MODES = {
    "quick": [
        dict(workload="maxtree", sizes=[1024], inputs=["tissue", "gray16"], conns=[4, 8],
             tilewave=["kernel-cpu"], peers=MT_CPU_PEERS["maxtree"]),
        dict(workload="maxtree", sizes=[4096], inputs=["tissue"], conns=[4],
             tilewave=["kernel-cpu", "job-cpu"], peers=["higra-maxtree"]),
        dict(workload="area-open", sizes=[1024], inputs=["tissue"], conns=[4], areas=[MT_AREA],
             tilewave=["job-cpu"], peers=MT_CPU_PEERS["area-open"]),
        dict(workload="area-open", sizes=[4096], inputs=["tissue"], conns=[4], areas=[MT_AREA],
             tilewave=["job-cpu"], peers=["higra-area-open"]),
    ],
    "full": [
        dict(workload="maxtree", sizes=[1024],
             inputs=["tissue", "natural:ihc", "gray16", "natural16:ihc"], conns=[4, 8],
             tilewave=["kernel-cpu", "job-cpu"], peers=MT_CPU_PEERS["maxtree"]),
        dict(workload="maxtree", sizes=[2048, 4096],
             inputs=["tissue", "natural:ihc", "gray16", "natural16:ihc"], conns=[4, 8],
             tilewave=["kernel-cpu", "job-cpu"], peers=["higra-maxtree"]),
        dict(workload="area-open", sizes=[1024],
             inputs=["tissue", "natural:ihc", "gray16", "natural16:ihc"], conns=[4, 8],
             areas=[MT_AREA, 10000], tilewave=["job-cpu"], peers=MT_CPU_PEERS["area-open"]),
        dict(workload="area-open", sizes=[2048, 4096],
             inputs=["tissue", "natural:ihc", "gray16", "natural16:ihc"], conns=[4, 8],
             areas=[MT_AREA], tilewave=["job-cpu"], peers=["higra-area-open"]),
    ],
    "gpu": [
        # The kernel targets: >= 24 MPix, 8-bit 4- and 8-connectivity, 16-bit. Higra takes
        # some 15 s a call at 32 MPix: one case only.
        dict(workload="maxtree", sizes=["8192x4096"], inputs=["tissue", "natural:ihc"],
             conns=[4, 8], tilewave=["kernel-cuda", "job-gpu", "kernel-cpu"], peers=[]),
        dict(workload="maxtree", sizes=["8192x4096"], inputs=["tissue"], conns=[4],
             tilewave=["kernel-cuda"], peers=["higra-maxtree"]),
        dict(workload="maxtree", sizes=[8192], inputs=["tissue"], conns=[4, 8],
             tilewave=["kernel-cuda"], peers=[]),
        dict(workload="maxtree", sizes=["8192x4096"], inputs=["gray16", "natural16:ihc"],
             conns=[4, 8], tilewave=["kernel-cuda", "kernel-cpu"], peers=[]),
        dict(workload="area-open", sizes=[8192], inputs=["tissue"], conns=[4, 8],
             areas=[MT_AREA], tilewave=["job-cuda", "job-hybrid", "job-cpu"], peers=[]),
        # The whole-slide target: 10 GPix 8-bit from host memory on one GPU (no check, no
        # dump: the naive reference would need 12 bytes a pixel).
        dict(workload="area-open", sizes=["100000x100000"], inputs=["gen:field"], conns=[4],
             areas=[MT_AREA], tilewave=["job-cuda", "job-hybrid"], peers=[], dump=False,
             repeat=1),
    ],
}

# ---- modes: sizes, inputs, repeats and a time budget (measurements past it are skipped);
# caps: honour the max_pixels of slow measurements (the timed modes), or run everything
MODES = {
    "quick": dict(sizes=[2048, 4096], inputs=["tissue", "natural:ihc"], repeat=3,
                  budget_s=105, caps=True, runtime_workers=[1, 2], runtime_tasks=100000,
                  transfer_mib=64, edt=EDT_MODES["quick"], maxtree=MT_MODES["quick"]),
    "full": dict(sizes=[2048, 4096, 8192, 16384],
                 inputs=["tissue", "natural:ihc", "natural:hubble_deep_field",
                         "natural:retina"],
                 repeat=5, budget_s=None, caps=False, runtime_workers=[1, 2],
                 runtime_tasks=200000,
                 transfer_mib=256, edt=EDT_MODES["full"], maxtree=MT_MODES["full"]),
    # Under the 10-minute device call with the build: see bench/gpu.sh.
    "gpu": dict(sizes=[2048, 4096, 8192, 16384], inputs=["tissue", "natural:ihc"], repeat=5,
                budget_s=390, caps=True, runtime_workers=[1, -1], runtime_tasks=200000,
                transfer_mib=256, edt=EDT_MODES["gpu"], maxtree=MT_MODES["gpu"]),
}
# Images of at least this many pixels get at most LARGE_REPEAT timed runs.
LARGE_PIXELS = 8192 * 8192
LARGE_REPEAT = 3

# ---- the registry
#
# A workload of runner "image" lists:
#   name, op        table label and the tilewave operation
#   inputs          input names of bench/inputs.py; None = the mode's inputs
#   tilewave        tilewave measurements, each:
#       name        label ("cpu", "gpu", ...)
#       kind        "file" (file -> file), "memory" (host array -> host array, no file I/O) or
#                   "device-memory" (data already on the GPU); peers compare with tilewave
#                   measurements of the same kind
#       device      "cpu" or "gpu" (what does the work)
#       cmd         argv template: {tw_bench} {tilewave} {input} {w} {h} {outdir} {repeat}
#                   {repeat_fast} (at least 10, for in-memory timings of milliseconds)
#       tool        "tw_bench" (prints JSON lines) or "cli" (timed like a CLI peer)
#       per_input   False when the measurement ignores the input (generated in memory)
#       output      the file it writes (checked against the reference), optional
#       compare     False: shown, but no peer is compared with it
#       max_pixels  skipped above this size in the timed modes (slow and not central)
#       timings     for tw_bench lines with a "timing" field: timing -> (name, kind)
#       note        what is timed
#   reference       the tilewave measurement whose output the others are checked against
#   peers           names in bench/peers.py PEERS (which may set max_pixels too)
TW_GRAY = ["{tw_bench}", "gray", "--input", "{input}", "--repeat", "{repeat}",
           "--output", "{outdir}"]
NOCOMP = ["--set", "io.compression=none"]

HDOME = ["{tilewave}", "hmax", "{input}", "--h", "40", "--dome", "--quiet", "--set",
         "io.compression=none", "-o"]

# tilewave's EDT measurements (runner "edt"): like the image workloads' entries, with argv
# fields {tw_bench} {w} {h} {pattern} {bg} {seed} {repeat} {repeat_fast}.
TW_EDT = ["{tw_bench}", "edt", "--size", "{w}x{h}", "--pattern", "{pattern}", "--background",
          "{bg}", "--seed", "{seed}"]
EDT_TILEWAVE = {
    "kernel-cpu": dict(
        kind="memory", device="cpu",
        cmd=TW_EDT + ["--kernel", "cpu", "--repeat", "{repeat_fast}"],
        note="twi_omp_edt (Meijster, exact) alone on the whole image in host memory, all cores "
             "(OpenMP), float32 out; checked against brute force on 20000 sampled pixels"),
    "job-cpu": dict(
        kind="memory", device="cpu",
        cmd=TW_EDT + ["--job", "--variant", "cpu", "--repeat", "{repeat}"],
        note="tw_edt_submit from host memory to host memory, CPU workers: the runtime, the "
             "column pass over tiles and the bands"),
    "wavefront-cpu": dict(
        kind="memory", device="cpu", compare=False, max_pixels=2048 * 2048,
        cmd=TW_EDT + ["--kernel", "cpu", "--method", "wavefront", "--check", "full",
                      "--repeat", "{repeat}"],
        note="twi_omp_edt_wavefront (IWPP, approximate, one thread); its errors against the "
             "exact transform on every pixel"),
    "kernel-cuda": dict(
        kind="device-memory", device="gpu",
        cmd=TW_EDT + ["--kernel", "cuda", "--repeat", "{repeat_fast}"],
        note="twi_cuda_edt (PBA+, exact) with input, output and scratch on the GPU, CUDA "
             "events around the launch, float32 out (as CuPy is timed)"),
    "wavefront-cuda": dict(
        kind="device-memory", device="gpu", compare=False, max_pixels=8192 * 8192,
        cmd=TW_EDT + ["--kernel", "cuda", "--method", "wavefront", "--check", "full",
                      "--repeat", "{repeat}"],
        note="twi_cuda_edt_wavefront (IWPP, approximate); its errors against the exact "
             "transform on every pixel"),
    "job-gpu": dict(
        kind="memory", device="gpu",
        cmd=TW_EDT + ["--job", "--variant", "gpu", "--repeat", "{repeat}"],
        note="tw_edt_submit from host memory to host memory (float32), GPU workers only: "
             "end to end, copies over the host link included"),
    "job-both": dict(
        kind="memory", device="cpu+gpu",
        cmd=TW_EDT + ["--job", "--variant", "both", "--repeat", "{repeat}"],
        note="the same with CPU and GPU workers (the defaults)"),
}

# tilewave's max-tree and area-opening measurements (runner "maxtree"): argv fields
# {tw_bench} {conn} {area} {repeat} {repeat_fast}; run.py appends the input (--input PATH, or
# --input KIND --size WxH for gen:KIND), --dump and --check.
TW_MT = ["{tw_bench}", "maxtree", "--conn", "{conn}"]
TW_AO = ["{tw_bench}", "area-open", "--job", "--conn", "{conn}", "--area", "{area}"]
MT_TILEWAVE = {
    "maxtree": {
        "kernel-cpu": dict(
            kind="memory", device="cpu",
            cmd=TW_MT + ["--kernel", "cpu", "--repeat", "{repeat_fast}"],
            note="twi_omp_maxtree alone on the whole image in host memory, all cores (blocks "
                 "built in parallel, merged with CONNECT), canonical parent image (uint32) "
                 "out; checked against a naive union-find reference up to 64 MPix"),
        "job-cpu": dict(
            kind="memory", device="cpu",
            cmd=TW_MT + ["--job", "--variant", "cpu", "--repeat", "{repeat}"],
            note="tw_maxtree_submit from host memory to a parent image in host memory, CPU "
                 "workers (the runtime around the kernel)"),
        "kernel-cuda": dict(
            kind="device-memory", device="gpu",
            cmd=TW_MT + ["--kernel", "cuda", "--repeat", "{repeat_fast}"],
            note="twi_cuda_maxtree with the image, parent image and scratch on the GPU, CUDA "
                 "events around the call"),
        "job-gpu": dict(
            kind="memory", device="gpu",
            cmd=TW_MT + ["--job", "--variant", "cuda", "--repeat", "{repeat}"],
            note="tw_maxtree_submit from host memory to host memory, GPU worker: copies "
                 "over the host link included"),
    },
    "area-open": {
        "job-cpu": dict(
            kind="memory", device="cpu",
            cmd=TW_AO + ["--variant", "cpu", "--repeat", "{repeat}"],
            note="tw_attr_filter_submit (area opening) from host memory to host memory, CPU "
                 "workers, default tiles: local trees, border max-trees, their merge, the "
                 "filtering pass; checked against a naive filter up to 64 MPix"),
        "job-cuda": dict(
            kind="memory", device="gpu",
            cmd=TW_AO + ["--variant", "cuda", "--tile", "4096x4096", "--repeat", "{repeat}"],
            note="the same with GPU workers only and 4096x4096 tiles: both tile passes (tree, "
                 "attributes, border max-tree; tree, filter) and the merge on the GPU; the "
                 "GPU manager thread also reads and writes the tiles"),
        "job-hybrid": dict(
            kind="memory", device="cpu+gpu",
            cmd=TW_AO + ["--variant", "hybrid", "--tile", "4096x4096", "--repeat", "{repeat}"],
            note="the same with CPU and GPU workers (the defaults): tile passes and merge on "
                 "the GPU, reading and writing tiles on the CPU workers"),
    },
}

WORKLOADS = [
    dict(name="runtime", runner="runtime"),
    dict(name="transfer", runner="transfer"),
    dict(
        name="gray", op="gray", runner="image", inputs=None,
        tilewave=[
            dict(name="cpu", kind="file", device="cpu",
                 cmd=TW_GRAY + ["--variant", "cpu"] + NOCOMP,
                 output="{outdir}/tw_bench_gray_cpu.tif",
                 note="tw_bench gray: CPU workers only, uncompressed output"),
            dict(name="gpu", kind="file", device="gpu",
                 cmd=TW_GRAY + ["--variant", "gpu"] + NOCOMP,
                 output="{outdir}/tw_bench_gray_gpu.tif",
                 note="GPU workers only (they also run the I/O tasks)"),
            dict(name="both", kind="file", device="cpu+gpu",
                 cmd=TW_GRAY + ["--variant", "both"] + NOCOMP,
                 output="{outdir}/tw_bench_gray_both.tif",
                 note="CPU and GPU workers (the defaults)"),
            dict(name="cli-cpu", kind="file", device="cpu", tool="cli",
                 cmd=["{tilewave}", "gray", "{input}", "-o", "{outdir}/cli.tif", "--gpus",
                      "none", "--quiet"] + NOCOMP,
                 note="the tilewave CLI, whole process (start, runtime, job), as the vips "
                      "CLI is timed"),
            dict(name="cpu-deflate", kind="file", device="cpu", compare=False,
                 max_pixels=8192 * 8192,
                 cmd=["{tw_bench}", "gray", "--input", "{input}", "--repeat", "{repeat}",
                      "--variant", "cpu"],
                 note="CPU, default deflate output (the codec's cost)"),
            dict(name="kernel-cpu", kind="memory", device="cpu", per_input=False,
                 cmd=["{tw_bench}", "gray-kernel", "--size", "{w}x{h}", "--variant", "cpu",
                      "--repeat", "{repeat_fast}"],
                 note="twi_omp_gray alone, all cores, generated image"),
            dict(name="kernel-gpu", kind="memory", device="gpu", per_input=False,
                 cmd=["{tw_bench}", "gray-kernel", "--size", "{w}x{h}", "--variant", "gpu",
                      "--repeat", "{repeat_fast}"],
                 timings={"kernel": ("kernel-gpu", "device-memory"),
                          "with_transfers": ("kernel-gpu+xfer", "memory")},
                 note="twi_cuda_gray, CUDA events; +xfer adds pinned H2D and D2H"),
        ],
        reference="cpu",
        peers=["numpy", "opencv", "skimage", "cupy", "cupy-xfer", "opencv-file",
               "tifffile-numpy-file", "vips-colourspace", "vips-extract_band"],
    ),
    # Reconstruction through its h-dome filter: image - rho_image(max(image - 40, 0)), the
    # whole image held as tiles, BP rounds until stable. File to file through the CLI (the
    # RGB input converted to luminance on load), against scikit-image in memory.
    dict(
        name="hdome", op="hdome", runner="image", inputs=["tissue"],
        tilewave=[
            dict(name="cli-cpu", kind="file", device="cpu", tool="cli",
                 cmd=HDOME + ["{outdir}/cpu.tif", "--gpus", "none"],
                 output="{outdir}/cpu.tif",
                 note="tilewave hmax --h 40 --dome, CPU workers, 1024^2 tiles, whole process"),
            dict(name="cli-gpu", kind="file", device="gpu", tool="cli", needs_gpu=True,
                 cmd=HDOME + ["{outdir}/gpu.tif", "--cpu-workers", "0", "--tile",
                              "4096x4096"],
                 output="{outdir}/gpu.tif",
                 note="GPU worker only (it also runs the loads and stores), 4096^2 tiles"),
            dict(name="cli-both", kind="file", device="cpu+gpu", tool="cli", needs_gpu=True,
                 cmd=HDOME + ["{outdir}/both.tif", "--tile", "4096x4096"],
                 output="{outdir}/both.tif",
                 note="CPU and GPU workers (FCFS), 4096^2 tiles"),
        ],
        reference="cli-cpu",
        peers=["skimage-hdome"],
    ),
    # Exact Euclidean distance transform of random binary images generated in memory (the
    # same pixels on both sides): cases per mode in EDT_MODES, measurements in EDT_TILEWAVE.
    dict(name="edt", op="edt", runner="edt"),
    # The canonical max-tree and the area opening (MT_MODES, MT_TILEWAVE): natural-like 8-
    # and 16-bit images, against Higra and scikit-image in memory, the same image file.
    dict(name="maxtree", op="maxtree", runner="maxtree"),
    dict(name="area-open", op="area-open", runner="maxtree"),
]


class Budget:
    """Wall-clock budget of a mode; past it, measurements are recorded as skipped."""

    def __init__(self, seconds):
        self.deadline = None if seconds is None else time.monotonic() + seconds

    def left(self):
        return None if self.deadline is None else self.deadline - time.monotonic()

    def spent(self):
        left = self.left()
        return left is not None and left <= 0

    def timeout(self):
        """Timeout for one child: what is left (at least 20 s), or 1 hour without a budget."""
        left = self.left()
        return 3600 if left is None else max(20.0, left)


# ---- helpers

def median(v):
    s = sorted(v)
    n = len(s)
    return 0.0 if n == 0 else (s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2]))


def fmt_time(s):
    if s is None:
        return "-"
    if s < 0.01:  # GPU kernels of a millisecond or less
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


def parse_size(text):
    w, _, h = text.partition("x")
    return int(w), int(h or w)


def run_child(argv, budget):
    """Run argv; return (stdout, error line or None)."""
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=budget.timeout())
    except subprocess.TimeoutExpired:
        return "", f"timed out after {budget.timeout():.0f} s"
    except OSError as e:
        return "", str(e)
    if r.returncode != 0:
        lines = (r.stderr or r.stdout).strip().splitlines()
        return r.stdout, lines[-1] if lines else f"exit status {r.returncode}"
    return r.stdout, None


def json_lines(text):
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def sh(argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def hardware():
    hw = {"cpu_model": platform.processor() or "?", "logical_cpus": os.cpu_count()}
    lscpu = {}
    for line in sh(["lscpu"]).splitlines():
        k, _, v = line.partition(":")
        lscpu[k.strip()] = v.strip()
    if "Model name" in lscpu:
        hw["cpu_model"] = lscpu["Model name"]
    elif os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    hw["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    try:
        hw["cores"] = int(lscpu["Core(s) per socket"]) * int(lscpu["Socket(s)"])
    except (KeyError, ValueError):
        hw["cores"] = os.cpu_count()
    try:
        with open("/proc/meminfo") as f:
            hw["mem_gib"] = round(int(f.readline().split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    gpus = []
    if shutil.which("nvidia-smi"):
        for line in sh(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                        "--format=csv,noheader"]).splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 3:
                gpus.append({"name": parts[0], "memory": parts[1], "driver": parts[2]})
    hw["gpus"] = gpus
    return hw


def commit():
    c = sh(["git", "-C", REPO, "rev-parse", "--short", "HEAD"])
    return c if c else "uncommitted"


def subst(template, ctx):
    return [a.format(**ctx) for a in template]


# ---- runners

class Run:
    def __init__(self, args, mode):
        self.args = args
        self.mode = mode
        self.budget = Budget(mode["budget_s"])
        self.build = os.path.abspath(args.build)
        self.tw_bench = os.path.join(self.build, "tw_bench")
        self.tilewave = os.path.join(self.build, "tilewave")
        self.cache = os.path.abspath(args.cache or os.path.join(self.build, "bench-inputs"))
        self.results = []  # measurement records, in order
        self.meta = {}

    def save(self, final=False):
        """Write the JSON (after every case too, so that a run cut short keeps its results)."""
        if not self.args.json:
            return
        tmp = self.args.json + ".part"
        with open(tmp, "w") as f:
            json.dump(dict(meta=dict(self.meta, complete=final), measurements=self.results,
                           comparisons=comparisons(self.results)), f, indent=1)
        os.replace(tmp, self.args.json)

    def record(self, **rec):
        self.results.append(rec)
        if rec.get("skipped"):
            what = " ".join(str(rec.get(k)) for k in ("workload", "size", "input", "name")
                            if rec.get(k))
            print(f"  skipped: {what}: {rec['skipped']}", file=sys.stderr)
        return rec

    def capped(self, entry, w, h):
        return bool(self.mode["caps"] and entry.get("max_pixels") and
                    w * h > entry["max_pixels"])

    def repeat_for(self, w, h):
        r = self.args.repeat or self.mode["repeat"]
        return min(r, LARGE_REPEAT) if w * h >= LARGE_PIXELS and not self.args.repeat else r

    # runtime: tw_bench runtime for each worker count of the mode
    def runtime(self, wl):
        for workers in self.mode["runtime_workers"]:
            base = dict(workload="runtime", name=f"workers={workers}")
            if self.budget.spent():
                self.record(**base, skipped="time budget")
                continue
            out, err = run_child([self.tw_bench, "runtime", "--workers", str(workers),
                                  "--tasks", str(self.mode["runtime_tasks"]), "--repeat",
                                  str(self.args.repeat or 5)], self.budget)
            if err:
                self.record(**base, skipped=err, failed=True)
                continue
            for line in json_lines(out):
                self.record(workload="runtime", name=line["pattern"], **line)

    def transfer(self, wl):
        base = dict(workload="transfer", name="transfer")
        if self.budget.spent():
            self.record(**base, skipped="time budget")
            return
        out, err = run_child([self.tw_bench, "transfer", "--mib",
                              str(self.mode["transfer_mib"])], self.budget)
        if err:
            self.record(**base, skipped=err, failed=True)
            return
        for line in json_lines(out):
            if "skipped" in line:
                self.record(**base, skipped=line["skipped"])
            else:
                self.record(workload="transfer", name=f"{line['memory']} {line['direction']}",
                            **line)

    # edt: generated binary images, tw_bench edt against the EDT peers (EDT_MODES)
    def edt(self, wl):
        for group in self.mode["edt"]:
            sizes = ([parse_size(x) for x in self.args.sizes.split(",")] if self.args.sizes
                     else [parse_size(str(x)) for x in group["sizes"]])
            for (w, h) in sizes:
                for bg in group["backgrounds"]:
                    self.edt_case(wl, group, w, h, bg)

    def edt_case(self, wl, group, w, h, bg):
        size = f"{w}x{h}"
        pattern = group.get("pattern", "random")
        base = dict(workload=wl["name"], op=wl["op"], size=size, w=w, h=h,
                    input=f"random {bg * 100:g}% bg" if pattern == "random" else pattern,
                    pattern=pattern, background=bg, seed=EDT_SEED)
        if self.budget.spent():
            self.record(**base, side="all", name="*", skipped="time budget")
            return
        print(f"edt {size} {base['input']}", file=sys.stderr)
        outdir = os.path.join(self.build, "bench-out", f"edt-{size}-{pattern}-{bg}")
        os.makedirs(outdir, exist_ok=True)
        dump = os.path.join(outdir, "tilewave.f32") if group.get("dump", True) else None
        repeat = self.repeat_for(w, h)
        ctx = dict(tw_bench=self.tw_bench, w=w, h=h, pattern=pattern, bg=bg, seed=EDT_SEED,
                   repeat=repeat, repeat_fast=max(10, repeat))
        ref_bg, ref_name = None, None
        for i, name in enumerate(group["tilewave"]):
            tw = EDT_TILEWAVE[name]
            rec = dict(base, side="tilewave", name=name, kind=tw["kind"], device=tw["device"],
                       compare=tw.get("compare", True), note=tw["note"], repeat=repeat)
            if self.capped(tw, w, h):
                self.record(**rec, skipped=f"above {tw['max_pixels'] / 1e6:.0f} MP in this mode")
                continue
            if self.budget.spent():
                self.record(**rec, skipped="time budget")
                continue
            argv = subst(tw["cmd"], ctx)
            if dump and i == 0:
                argv += ["--dump", dump]
            out, err = run_child(argv, self.budget)
            if err:
                self.record(**rec, skipped=err, failed=True)
                continue
            line = json_lines(out)[-1]
            if "skipped" in line:
                self.record(**rec, skipped=line["skipped"])
                continue
            r = self.record(**rec, median_s=line["median_s"], min_s=line["min_s"],
                            max_s=line["max_s"], mpix_per_s=w * h / 1e6 / line["median_s"],
                            peak_rss_mib=line.get("peak_rss_mib"), bg_pixels=line["bg_pixels"],
                            raw=line)
            r["repeat"] = line.get("repeat", repeat)
            if ref_bg is None:
                ref_bg, ref_name = line["bg_pixels"], name
            elif line["bg_pixels"] != ref_bg:
                r["failed"] = True
                r["skipped"] = f"input differs from {ref_name}'s"
        for peer_name in group["peers"]:
            self.measure_edt_peer(base, peer_name, group, dump, repeat, ref_bg)
        shutil.rmtree(outdir, ignore_errors=True)
        self.save()

    def measure_edt_peer(self, base, peer_name, group, dump, repeat, ref_bg):
        peer = peers.PEERS[peer_name]
        rec = dict(base, side="peer", name=peer_name, kind=peer["kind"],
                   device=peer["device"], note=peer["note"], repeat=repeat,
                   against=peer.get("against", []))
        why = peers.missing(peer)
        if why:
            self.record(**rec, skipped=why)
            return
        if self.capped(peer, rec["w"], rec["h"]):
            self.record(**rec, skipped=f"above {peer['max_pixels'] / 1e6:.0f} MP in this mode")
            return
        if self.budget.spent():
            self.record(**rec, skipped="time budget")
            return
        argv = [sys.executable, os.path.join(HERE, "peers.py"), peer_name, "--size",
                rec["size"], "--background", str(rec["background"]), "--pattern",
                rec["pattern"], "--seed", str(rec["seed"]), "--repeat", str(repeat)]
        if dump and os.path.exists(dump):
            argv += ["--reference", dump]
        out, err = run_child(argv, self.budget)
        if err:
            if group.get("peers_may_crash"):
                self.record(**rec, skipped=f"crashed: {err}", crashed=True)
            else:
                self.record(**rec, skipped=err, failed=True)
            return
        res = json_lines(out)[-1]
        if "skipped" in res:
            self.record(**rec, skipped=res["skipped"])
            return
        t = res["times"]
        rec["repeat"] = len(t)
        r = self.record(**rec, median_s=median(t), min_s=min(t), max_s=max(t),
                        mpix_per_s=rec["w"] * rec["h"] / 1e6 / median(t),
                        peak_rss_mib=res.get("peak_rss_mib"), bg_pixels=res["bg_pixels"],
                        max_abs_diff=res.get("max_abs_diff"),
                        differing_pixels=res.get("differing_pixels"),
                        pool_mib=res.get("pool_mib"), result_shape=res.get("result_shape"))
        if ref_bg is not None and res["bg_pixels"] != ref_bg:
            r["failed"] = True  # not the same input: the comparison means nothing
            r["skipped"] = f"input differs: {res['bg_pixels']} background pixels, " \
                           f"tilewave {ref_bg}"
        elif peer.get("exact") and res.get("differing_pixels"):
            r["failed"] = True  # an exact peer disagrees with tilewave's exact transform
            r["skipped"] = f"{res['differing_pixels']} pixels differ from tilewave's"

    # maxtree / area-open: one case per size x input x connectivity (x area threshold)
    def maxtree(self, wl):
        # Groups that meet on a case (--sizes / --inputs make them all meet) run it once,
        # with the union of their measurements.
        cases = {}
        for group in self.mode["maxtree"]:
            if group["workload"] != wl["name"]:
                continue
            sizes = ([parse_size(x) for x in self.args.sizes.split(",")] if self.args.sizes
                     else [parse_size(str(x)) for x in group["sizes"]])
            names = self.args.inputs.split(",") if self.args.inputs else group["inputs"]
            for (w, h) in sizes:
                for name in names:
                    for conn in group["conns"]:
                        for area in group.get("areas", [None]):
                            key = (w, h, name, conn, area)
                            if key not in cases:
                                cases[key] = dict(group, tilewave=[], peers=[])
                            c = cases[key]
                            c["tilewave"] += [t for t in group["tilewave"]
                                              if t not in c["tilewave"]]
                            c["peers"] += [p for p in group["peers"] if p not in c["peers"]]
        for (w, h, name, conn, area), group in cases.items():
            self.maxtree_case(wl, group, name, w, h, conn, area)

    def maxtree_case(self, wl, group, name, w, h, conn, area):
        size = f"{w}x{h}"
        label = f"{name} {conn}-conn" + (f" area {area}" if area else "")
        base = dict(workload=wl["name"], op=wl["op"], size=size, w=w, h=h, input=label,
                    image=name, conn=conn, threshold=area)
        if self.budget.spent():
            self.record(**base, side="all", name="*", skipped="time budget")
            return
        print(f"{wl['name']} {size} {label}", file=sys.stderr)
        if name.startswith("gen:"):
            path, src = None, ["--input", name[4:], "--size", size]
        else:
            out, err = run_child([sys.executable, os.path.join(HERE, "inputs.py"), name,
                                  str(w), str(h), self.cache, self.tilewave], self.budget)
            if err:
                self.record(**base, side="all", name="*",
                            skipped=err.replace("unavailable: ", ""),
                            failed=not err.startswith("unavailable: "))
                return
            path = out.strip().splitlines()[-1]
            src = ["--input", path]
        outdir = os.path.join(self.build, "bench-out",
                              f"{wl['name']}-{name}-{size}-{conn}-{area}".replace(":", "-"))
        os.makedirs(outdir, exist_ok=True)
        repeat = group.get("repeat") or self.repeat_for(w, h)
        ctx = dict(tw_bench=self.tw_bench, conn=conn, area=area, repeat=repeat,
                   repeat_fast=max(10, repeat))
        dump = group.get("dump", True)
        ref = None  # (name, dump path, nodes) of the first tilewave measurement
        for tname in group["tilewave"]:
            tw = MT_TILEWAVE[wl["name"]][tname]
            rec = dict(base, side="tilewave", name=tname, kind=tw["kind"], device=tw["device"],
                       compare=tw.get("compare", True), note=tw["note"], repeat=repeat)
            if self.capped(tw, w, h):
                self.record(**rec, skipped=f"above {tw['max_pixels'] / 1e6:.0f} MP in this mode")
                continue
            if self.budget.spent():
                self.record(**rec, skipped="time budget")
                continue
            argv = subst(tw["cmd"], ctx) + src
            mine = os.path.join(outdir, f"tilewave-{tname}.raw") if dump else None
            if mine:
                argv += ["--dump", mine]
            else:
                argv += ["--check", "none"]
            out, err = run_child(argv, self.budget)
            if err:
                self.record(**rec, skipped=err, failed=True)
                continue
            line = json_lines(out)[-1]
            if "skipped" in line:
                self.record(**rec, skipped=line["skipped"])
                continue
            if line.get("input"):
                # the cached input's name, not this machine's path to it
                line["input"] = os.path.basename(line["input"])
            r = self.record(**rec, median_s=line["median_s"], min_s=line["min_s"],
                            max_s=line["max_s"], mpix_per_s=w * h / 1e6 / line["median_s"],
                            peak_rss_mib=line.get("peak_rss_mib"), type=line.get("type"),
                            nodes=line.get("nodes"), raw=line)
            r["repeat"] = line.get("repeat", repeat)
            if ref is None:
                ref = (tname, mine, line.get("nodes"))
            elif wl["name"] == "maxtree" and line.get("nodes") != ref[2]:
                r["failed"] = True
                r["skipped"] = f"{line.get('nodes')} nodes, {ref[0]} {ref[2]}"
            elif mine and ref[1] and not filecmp.cmp(mine, ref[1], shallow=False):
                r["failed"] = True  # the variants must give the same bytes
                r["skipped"] = f"output differs from {ref[0]}'s"
        for peer_name in group["peers"]:
            self.measure_mt_peer(base, peer_name, path, conn, area, repeat, ref)
        shutil.rmtree(outdir, ignore_errors=True)
        self.save()

    def measure_mt_peer(self, base, peer_name, path, conn, area, repeat, ref):
        peer = peers.PEERS[peer_name]
        rec = dict(base, side="peer", name=peer_name, kind=peer["kind"],
                   device=peer["device"], note=peer["note"], repeat=repeat,
                   against=peer.get("against", []))
        why = peers.missing(peer)
        if why:
            self.record(**rec, skipped=why)
            return
        if self.capped(peer, rec["w"], rec["h"]):
            self.record(**rec, skipped=f"above {peer['max_pixels'] / 1e6:.0f} MP in this mode")
            return
        if self.budget.spent():
            self.record(**rec, skipped="time budget")
            return
        argv = [sys.executable, os.path.join(HERE, "peers.py"), peer_name, "--input", path,
                "--conn", str(conn), "--repeat", str(repeat)]
        if area:
            argv += ["--area", str(area)]
        if ref and ref[1] and os.path.exists(ref[1]):
            argv += ["--reference", ref[1]]
        out, err = run_child(argv, self.budget)
        if err:
            self.record(**rec, skipped=err, failed=True)
            return
        res = json_lines(out)[-1]
        if "skipped" in res:
            self.record(**rec, skipped=res["skipped"])
            return
        t = res["times"]
        rec["repeat"] = len(t)
        r = self.record(**rec, median_s=median(t), min_s=min(t), max_s=max(t),
                        mpix_per_s=rec["w"] * rec["h"] / 1e6 / median(t),
                        peak_rss_mib=res.get("peak_rss_mib"), type=res.get("type"),
                        nodes=res.get("nodes"), max_abs_diff=res.get("max_abs_diff"),
                        differing_pixels=res.get("differing_pixels"))
        if ref and res.get("nodes") is not None and ref[2] is not None and \
                res["nodes"] != ref[2]:
            r["failed"] = True  # another tree: the comparison means nothing
            r["skipped"] = f"{res['nodes']} nodes, tilewave {ref[2]}"
        elif peer.get("exact") and res.get("differing_pixels"):
            r["failed"] = True
            r["skipped"] = f"{res['differing_pixels']} pixels differ from tilewave's"
        elif res.get("diff_error"):
            r["failed"] = True
            r["skipped"] = res["diff_error"]

    def image(self, wl):
        names = self.args.inputs.split(",") if self.args.inputs else (
            wl["inputs"] or self.mode["inputs"])
        sizes = ([parse_size(s) for s in self.args.sizes.split(",")] if self.args.sizes
                 else [(s, s) for s in self.mode["sizes"]])
        for (w, h) in sizes:
            done_generic = set()  # measurements that ignore the input run once per size
            for name in names:
                self.image_case(wl, name, w, h, done_generic)

    def image_case(self, wl, input_name, w, h, done_generic):
        size = f"{w}x{h}"
        base = dict(workload=wl["name"], op=wl["op"], size=size, w=w, h=h, input=input_name)
        if self.budget.spent():
            self.record(**base, side="all", name="*", skipped="time budget")
            return
        print(f"{wl['name']} {size} {input_name}", file=sys.stderr)
        # Generated in a child, so that this driver never holds a whole image.
        out, err = run_child([sys.executable, os.path.join(HERE, "inputs.py"), input_name,
                              str(w), str(h), self.cache, self.tilewave], self.budget)
        if err:
            # A missing package (inputs.py exit 3, "unavailable: ...") skips; others fail.
            self.record(**base, side="all", name="*", skipped=err.replace("unavailable: ", ""),
                        failed=not err.startswith("unavailable: "))
            return
        path = out.strip().splitlines()[-1]
        outdir = os.path.join(self.build, "bench-out", f"{wl['name']}-{input_name}-{size}"
                              .replace(":", "-"))
        os.makedirs(outdir, exist_ok=True)
        repeat = self.repeat_for(w, h)
        ctx = dict(tw_bench=self.tw_bench, tilewave=self.tilewave, input=path, w=w, h=h,
                   repeat=repeat, repeat_fast=max(10, repeat), outdir=outdir)
        outputs, records = {}, {}  # tilewave name -> output file, record
        for tw in wl["tilewave"]:
            generic = tw.get("per_input", True) is False
            if generic and tw["name"] in done_generic:
                continue
            rec = dict(base, side="tilewave", name=tw["name"], kind=tw["kind"],
                       device=tw["device"], compare=tw.get("compare", True),
                       note=tw.get("note", ""), repeat=repeat)
            if generic:
                rec["input"] = "generated"
                done_generic.add(tw["name"])
            if self.capped(tw, w, h):
                self.record(**rec, skipped=f"above {tw['max_pixels'] / 1e6:.0f} MP in this mode")
                continue
            if self.budget.spent():
                self.record(**rec, skipped="time budget")
                continue
            if tw.get("needs_gpu") and not shutil.which("nvidia-smi"):
                self.record(**rec, skipped="no GPU")
                continue
            if tw.get("tool") == "cli":
                if self.measure_cli(rec, subst(tw["cmd"], ctx), repeat) and tw.get("output"):
                    outputs[tw["name"]] = tw["output"].format(**ctx)
                    records[tw["name"]] = self.last
                continue
            out, err = run_child(subst(tw["cmd"], ctx), self.budget)
            if err:
                self.record(**rec, skipped=err, failed=True)
                continue
            for line in json_lines(out):
                r = dict(rec)
                if "timing" in line and tw.get("timings"):
                    r["name"], r["kind"] = tw["timings"][line["timing"]]
                if "skipped" in line:
                    self.record(**r, skipped=line["skipped"])
                    continue
                r.update(repeat=line.get("repeat", r["repeat"]),
                         median_s=line["median_s"], min_s=line["min_s"], max_s=line["max_s"],
                         mpix_per_s=w * h / 1e6 / line["median_s"],
                         peak_rss_mib=line.get("peak_rss_mib"), raw=line)
                records[r["name"]] = self.record(**r)
                if tw.get("output"):
                    outputs[tw["name"]] = tw["output"].format(**ctx)
        self.save()
        self.check_outputs(wl, outputs, records)
        ref = outputs.get(wl.get("reference"))
        for peer_name in wl["peers"]:
            self.measure_peer(base, peer_name, path, outdir, ref, repeat)
        shutil.rmtree(outdir, ignore_errors=True)
        self.save()

    def check_outputs(self, wl, outputs, records):
        """Pixel agreement of each tilewave file output with the reference variant's, in a
        child process so that this driver stays small (its peak RSS leaks into children's
        ru_maxrss)."""
        ref = outputs.get(wl.get("reference"))
        for name, path in outputs.items():
            if not ref or name == wl["reference"] or name not in records:
                continue
            out, err = run_child([sys.executable, os.path.join(HERE, "peers.py"), "diff",
                                  "--input", path, "--reference", ref], self.budget)
            if err:
                records[name]["max_abs_diff"] = f"check failed: {err}"
            else:
                records[name]["max_abs_diff"] = json_lines(out)[-1]["max_abs_diff"]
                if records[name]["max_abs_diff"] != 0:  # the variants must agree exactly
                    records[name]["failed"] = True

    def measure_cli(self, rec, argv, repeat):
        out, err = run_child([sys.executable, os.path.join(HERE, "peers.py"), "cmd",
                              "--argv", json.dumps(argv), "--repeat", str(repeat)], self.budget)
        if err:
            self.record(**rec, skipped=err, failed=True)
            return False
        res = json_lines(out)[-1]
        t = res["times"]
        self.last = self.record(**rec, median_s=median(t), min_s=min(t), max_s=max(t),
                                mpix_per_s=rec["w"] * rec["h"] / 1e6 / median(t),
                                peak_rss_mib=res["peak_rss_mib"],
                                rss_floor_mib=res["rss_floor_mib"])
        return True

    def measure_peer(self, base, peer_name, path, outdir, ref, repeat):
        peer = peers.PEERS[peer_name]
        rec = dict(base, side="peer", name=peer_name, kind=peer["kind"],
                   device=peer["device"], note=peer["note"], repeat=repeat,
                   against=peer.get("against", []))
        why = peers.missing(peer)
        if why:
            self.record(**rec, skipped=why)
            return
        if self.capped(peer, rec["w"], rec["h"]):
            self.record(**rec, skipped=f"above {peer['max_pixels'] / 1e6:.0f} MP in this mode")
            return
        if self.budget.spent():
            self.record(**rec, skipped="time budget")
            return
        argv = [sys.executable, os.path.join(HERE, "peers.py"), peer_name, "--input", path,
                "--output", os.path.join(outdir, f"peer-{peer_name}.tif"), "--repeat",
                str(repeat)]
        if ref and os.path.exists(ref):
            argv += ["--reference", ref]
        out, err = run_child(argv, self.budget)
        if err:
            self.record(**rec, skipped=err, failed=True)
            return
        res = json_lines(out)[-1]
        if "skipped" in res:
            self.record(**rec, skipped=res["skipped"])
            return
        t = res["times"]
        rec["repeat"] = len(t)
        self.record(**rec, median_s=median(t), min_s=min(t), max_s=max(t),
                    mpix_per_s=rec["w"] * rec["h"] / 1e6 / median(t),
                    peak_rss_mib=res.get("peak_rss_mib"),
                    max_abs_diff=res.get("max_abs_diff"), startup_s=res.get("startup_s"),
                    rss_floor_mib=res.get("rss_floor_mib"))


# ---- comparisons and output

def comparisons(results):
    """One row per (peer, tilewave measurement of the same kind, size and input)."""
    rows = []
    tw = [r for r in results if r.get("side") == "tilewave" and "median_s" in r
          and r.get("compare", True)]
    for p in results:
        if p.get("side") != "peer" or "median_s" not in p:
            continue
        for t in tw:
            if (t["workload"], t["size"]) != (p["workload"], p["size"]) or (
                    t["kind"] != p["kind"] and t["kind"] not in p.get("against", ())):
                continue
            if t["input"] not in (p["input"], "generated"):
                continue
            rows.append(dict(workload=p["workload"], size=p["size"], input=p["input"],
                             tilewave=t["name"], tilewave_s=t["median_s"],
                             tilewave_mpix_per_s=t["mpix_per_s"],
                             tilewave_rss_mib=t.get("peak_rss_mib"), peer=p["name"],
                             peer_s=p["median_s"], peer_mpix_per_s=p["mpix_per_s"],
                             peer_rss_mib=p.get("peak_rss_mib"),
                             ratio=p["median_s"] / t["median_s"],
                             max_abs_diff=p.get("max_abs_diff")))
    return rows


def table(headers, rows):
    """Plain-text table; columns whose cells all look numeric are right-aligned."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def numeric(text):
        return text == "-" or text.replace(".", "", 1).split(" ")[0].lstrip("-").isdigit()

    right = [bool(cells) and all(numeric(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(h.rjust(widths[i]) if right[i] else h.ljust(widths[i])
                       for i, h in enumerate(headers)).rstrip(),
             "  ".join("-" * w for w in widths)]
    for r in cells:
        lines.append("  ".join(c.rjust(widths[i]) if right[i] else c.ljust(widths[i])
                               for i, c in enumerate(r)).rstrip())
    return "\n".join(lines)


def rss(v):
    return "-" if v is None else f"{v:.0f}"


def print_report(meta, results, rows):
    hw = meta["hardware"]
    gpus = ", ".join(g["name"] for g in hw["gpus"]) or "none"
    print(f"tilewave bench ({meta['mode']}), {meta['date']}, commit {meta['commit']}")
    print(f"CPU: {hw['cpu_model']}, {hw['cores']} cores ({hw['logical_cpus']} logical); "
          f"GPU: {gpus}")
    print("load average (1 min) at start / end: "
          f"{meta['loadavg_start'][0]:.2f} / {meta['loadavg_end'][0]:.2f}")
    rt = [r for r in results if r["workload"] == "runtime" and "median_s" in r]
    if rt:
        print("\nRuntime: empty tasks (median; time covers create + submit + run + wait)\n")
        print(table(["pattern", "workers", "tasks", "us/task", "tasks/s", "CPU us/task"],
                    [[r["pattern"], r["workers"], r["tasks"], f"{r['us_per_task']:.3f}",
                      f"{r['tasks_per_s']:.3g}", f"{r['cpu_us_per_task']:.3f}"] for r in rt]))
    xf = [r for r in results if r["workload"] == "transfer" and "gb_per_s" in r]
    if xf:
        print(f"\nTransfer: host <-> {xf[0]['device']} (median)\n")
        print(table(["memory", "direction", "MiB", "GB/s (events)", "GB/s (wall)"],
                    [[r["memory"], r["direction"], r["mib"], f"{r['gb_per_s']:.2f}",
                      f"{r['wall_gb_per_s']:.2f}"] for r in xf]))
    img = [r for r in results if r.get("side") in ("tilewave", "peer") and "median_s" in r]
    if img:
        print("\nImage workloads: every measurement (median)\n")
        print(table(["workload", "size", "input", "side", "name", "kind", "time", "MPix/s",
                     "RSS MiB", "diff"],
                    [[r["workload"], r["size"], r["input"], r["side"], r["name"], r["kind"],
                      fmt_time(r["median_s"]), f"{r['mpix_per_s']:.0f}",
                      rss(r.get("peak_rss_mib")),
                      "-" if r.get("max_abs_diff") is None else r["max_abs_diff"]]
                     for r in img]))
    if rows:
        print("\nTilewave against peers (ratio = peer time / tilewave time; > 1: tilewave "
              "faster)\n")
        print(table(["workload", "size", "input", "tilewave", "time", "MPix/s", "peer",
                     "peer time", "peer MPix/s", "ratio"],
                    [[r["workload"], r["size"], r["input"], r["tilewave"],
                      fmt_time(r["tilewave_s"]), f"{r['tilewave_mpix_per_s']:.0f}", r["peer"],
                      fmt_time(r["peer_s"]), f"{r['peer_mpix_per_s']:.0f}",
                      f"{r['ratio']:.2f}"] for r in rows]))
    edt = [r for r in results if r["workload"] == "edt" and "median_s" in r]
    if edt:
        print("\nEDT agreement (tilewave: its own check, against brute force on sampled pixels "
              "or the exact kernel on all; peers: pixels whose float32 distance differs from "
              "tilewave's)\n")
        rows = []
        for r in edt:
            raw = r.get("raw", {})
            if r["side"] == "tilewave":
                rows.append([r["size"], r["input"], r["name"], raw.get("check", "-"),
                             raw.get("checked", "-"), raw.get("wrong", "-"),
                             f"{raw.get('max_abs_err', 0):.3g}"])
            else:
                d = r.get("max_abs_diff")
                rows.append([r["size"], r["input"], r["name"], "vs tilewave",
                             f"{r['w'] * r['h']}" if r.get("differing_pixels") is not None
                             else "-", "-" if r.get("differing_pixels") is None
                             else r["differing_pixels"],
                             "-" if d is None else (d if isinstance(d, str) else f"{d:.3g}")])
        print(table(["size", "input", "name", "check", "pixels", "wrong", "max abs err"], rows))
    mt = [r for r in results if r["workload"] in ("maxtree", "area-open") and "median_s" in r]
    if mt:
        print("\nMax-tree and area-opening agreement (tilewave: nodes, and pixels wrong against "
              "the naive reference of tw_bench; peers: their node count, or pixels differing "
              "from tilewave's output)\n")
        rows = []
        for r in mt:
            raw = r.get("raw", {})
            if r["side"] == "tilewave":
                rows.append([r["workload"], r["size"], r["input"], r["name"],
                             r.get("type") or "-", "-" if r.get("nodes") is None else r["nodes"],
                             raw.get("check", "-"), raw.get("wrong", "-")])
            else:
                rows.append([r["workload"], r["size"], r["input"], r["name"],
                             r.get("type") or "-", "-" if r.get("nodes") is None else r["nodes"],
                             "vs tilewave", "-" if r.get("differing_pixels") is None
                             else r["differing_pixels"]])
        print(table(["workload", "size", "input", "name", "type", "nodes", "check", "wrong"],
                    rows))
    skipped = [r for r in results if r.get("skipped")]
    if skipped:
        print("\nSkipped\n")
        seen = set()
        for r in skipped:
            key = (r["workload"], r.get("name"), r["skipped"])
            if key in seen:
                continue
            seen.add(key)
            print(f"  {r['workload']} {r.get('name', '')}: {r['skipped']}")
    notes = {}
    for r in results:
        if r.get("note") and r.get("side") in ("tilewave", "peer"):
            notes.setdefault(f"{r['side']} {r['name']}", r["note"])
    if notes:
        print("\nNotes\n")
        for k, v in notes.items():
            print(f"  {k}: {v}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    m = ap.add_mutually_exclusive_group()
    m.add_argument("--quick", action="store_const", dest="mode", const="quick",
                   help="small sizes, under 2 minutes on 2 cores (default)")
    m.add_argument("--full", action="store_const", dest="mode", const="full",
                   help="sizes up to 16384^2 and every natural image")
    m.add_argument("--gpu", action="store_const", dest="mode", const="gpu",
                   help="the GPU machine: all cores, GPU variants, under 8 minutes")
    ap.add_argument("--build", default=os.path.join(REPO, "build"),
                    help="build folder holding tilewave and tw_bench (default: build)")
    ap.add_argument("--sizes", help="comma list of N or WxH, e.g. 2048,4096x2048")
    ap.add_argument("--inputs", help="comma list of inputs, e.g. tissue,natural:retina")
    ap.add_argument("--repeat", type=int, help="timed runs per measurement")
    ap.add_argument("--workloads", help="comma list of workloads (default: all): " +
                    ", ".join(w["name"] for w in WORKLOADS))
    ap.add_argument("--cache", help="input cache folder (default: BUILD/bench-inputs)")
    ap.add_argument("--budget", type=float, help="seconds after which the rest is skipped "
                    "(default: the mode's; 0 = none)")
    ap.add_argument("--json", help="also write the results as JSON to this file")
    args = ap.parse_args()
    mode_name = args.mode or "quick"
    mode = dict(MODES[mode_name])
    if args.budget is not None:
        mode["budget_s"] = args.budget or None
    run = Run(args, mode)
    for exe in (run.tw_bench, run.tilewave):
        if not os.access(exe, os.X_OK):
            print(f"run.py: {exe} not found; build first (cmake --build {args.build})",
                  file=sys.stderr)
            return 1
    wanted = set(args.workloads.split(",")) if args.workloads else None
    if wanted and wanted - {w["name"] for w in WORKLOADS}:
        print(f"run.py: unknown workloads {sorted(wanted - {w['name'] for w in WORKLOADS})}",
              file=sys.stderr)
        return 2
    t0 = time.monotonic()
    meta = dict(mode=mode_name, date=datetime.datetime.now().astimezone().isoformat(
        timespec="seconds"), commit=commit(), hardware=hardware(),
        tilewave=sh([run.tilewave, "--version"]), python=platform.python_version(),
        versions=peers.versions(["numpy", "cv2", "skimage", "scipy", "tifffile", "vips",
                                  "higra"]),
        sizes=args.sizes or mode["sizes"], repeat=args.repeat or mode["repeat"],
        budget_s=mode["budget_s"], loadavg_start=os.getloadavg())
    run.meta = meta
    for wl in WORKLOADS:
        if wanted and wl["name"] not in wanted:
            continue
        getattr(run, wl["runner"])(wl)
        run.save()
    meta["elapsed_s"] = round(time.monotonic() - t0, 1)
    # Other work on the machine skews timings; the load average lets a reader tell.
    meta["loadavg_end"] = os.getloadavg()
    print_report(meta, run.results, comparisons(run.results))
    print(f"\n(elapsed {meta['elapsed_s']} s)")
    run.save(final=True)
    failed = [r for r in run.results if r.get("failed")]
    if failed:
        # Errors, not missing packages or devices: a wrong output or a crashed command.
        print(f"run.py: {len(failed)} measurement(s) failed: " + "; ".join(
            f"{r['workload']} {r.get('size', '')} {r.get('name', '')}: "
            f"{r.get('skipped') or 'output differs from the reference'}" for r in failed),
            file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
