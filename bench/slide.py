#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The CLI on a sample slide, end to end, with the GPU and with --gpus none (issue 25).

    python3 bench/slide.py --tw build/tilewave [--base old/tilewave] [--size 32768]
                           [--big 100000] [--out DIR] [--work DIR] [--ops gray,edt,...]

For each operation it runs the command users run on a sample slide (`tilewave sample`, RGB,
deflate) and records the wall time, the peak RSS of the process (wait4), and what --summary
says: every worker's busy share, the bytes read, decoded and written, the tiles decoded more
than once. With --base, the same commands of another build run right after, in the same run,
for ratios. --big SIDE adds the whole-slide area opening of a SIDE x SIDE sample (10 GPix at
100000) with the GPU. GPU runs keep their traces (drawn as PNGs with bench/trace_png.py when
matplotlib is there) in DIR/traces.tar. Results: DIR/slide.jsonl (one JSON object a run) and
DIR/slide.md (the table of docs/benchmarks.md).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

# name -> the arguments after the binary; {s} the slide, {g} its gray level 0, {o} the output
OPS = {
    "gray": ["gray", "{s}", "-o", "{o}"],
    "convert": ["convert", "{s}", "-o", "{o}"],
    "area-close": ["area-close", "{s}", "--area", "500", "-o", "{o}"],
    "area-open": ["area-open", "{s}", "--area", "500", "-o", "{o}"],
    "edt": ["edt", "{s}", "--threshold", "otsu", "--invert", "-o", "{o}"],
    "edt-u16": ["edt", "{s}", "--threshold", "otsu", "--invert", "--format", "u16", "-o", "{o}"],
    "fill-holes": ["fill-holes", "{s}", "--threshold", "otsu", "-o", "{o}"],
    "hmax": ["hmax", "{s}", "--h", "20", "--dome", "-o", "{o}"],
    "reconstruct": ["reconstruct", "--marker", "{m}", "--mask", "{g}", "--clamp-marker",
                    "-o", "{o}"],
}


def run(cmd, log):
    """Run cmd; returns (exit status, wall seconds, peak RSS MiB, stderr text)."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    log.write("$ " + " ".join(cmd) + "\n" + err + "\n")
    log.flush()
    return p.returncode, wall, ru.ru_maxrss / 1024.0, err


def parse_summary(err):
    """Busy shares of the CPU workers and GPU managers, and the io line, from --summary."""
    cpu, gpu = [], []
    for m in re.finditer(r"^\s+(cpu worker|gpu \d+ manager).*busy [\d.]+ s \((\d+)%\)", err,
                         re.M):
        (gpu if m.group(1).startswith("gpu") else cpu).append(int(m.group(2)))
    io = {}
    m = re.search(r"io: read (\S+ \S+), decoded (\S+ \S+) \((\d+) tiles, (\d+) decoded more "
                  r"than once\), encoded (\S+ \S+), wrote (\S+ \S+)(; input (.*))?", err)
    if m:
        io = {"read": m.group(1), "decoded": m.group(2), "tiles": int(m.group(3)),
              "redecoded": int(m.group(4)), "encoded": m.group(5), "wrote": m.group(6),
              "kept": m.group(8) or ""}
    return cpu, gpu, io


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tw", default="build/tilewave")
    ap.add_argument("--base", help="another build's tilewave, run after each command")
    ap.add_argument("--size", type=int, default=32768)
    ap.add_argument("--big", type=int, default=0)
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--modes", default="gpu,cpu", help="gpu (all GPUs), cpu (--gpus none)")
    ap.add_argument("--out", default="slide-out")
    ap.add_argument("--set", action="append", default=[],
                    help="KEY=VALUE for every command of the new build (--set of the CLI)")
    ap.add_argument("--label", default="new", help="the new build's name in the results")
    ap.add_argument("--work", default="")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    work = a.work or tempfile.mkdtemp(prefix="tw-slide-")
    os.makedirs(work, exist_ok=True)
    log = open(os.path.join(a.out, "slide.log"), "a")
    res = open(os.path.join(a.out, "slide.jsonl"), "a")
    traces = os.path.join(work, "traces")
    os.makedirs(traces, exist_ok=True)
    builds = [(a.label, a.tw)] + ([("base", a.base)] if a.base else [])
    s = os.path.join(work, "s.tif")
    g = os.path.join(work, "g.tif")
    m = os.path.join(work, "m.tif")
    o = os.path.join(work, "o.tif")
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"slide.py {date}, {os.cpu_count()} cores, work {work}", flush=True)
    size = f"{a.size}x{a.size}"
    stamp = os.path.join(work, f"inputs-{a.size}")
    if not os.path.exists(stamp):  # a --work folder keeps the inputs of an earlier run
        rc, wall, _, err = run([a.tw, "sample", s, "--size", size], log)
        print(f"sample {size}: {wall:.1f} s, {os.path.getsize(s) / 1e9:.2f} GB", flush=True)
        if rc != 0:
            print(err)
            return 1
        for path, mode in ((g, "luminance"), (m, "b")):
            if run([a.tw, "gray", s, "--mode", mode, "-o", path], log)[0] != 0:
                print("slide.py: cannot make the gray inputs")
                return 1
        open(stamp, "w").close()
    rows = []
    for op in a.ops.split(","):
        for mode in a.modes.split(","):
            for name, tw in builds:
                args = [x.format(s=s, g=g, m=m, o=o) for x in OPS[op]]
                cmd = [tw] + args + ["--summary"]
                if name != "base":
                    for kv in a.set:
                        cmd += ["--set", kv]
                if mode == "cpu":
                    cmd += ["--gpus", "none"]
                trace = ""
                if mode == "gpu" and name != "base":
                    trace = os.path.join(traces, f"{op}-{a.size}-{name}.json")
                    cmd += ["--trace", trace]
                if os.path.exists(o):
                    os.unlink(o)
                rc, wall, rss, err = run(cmd, log)
                cpu, gpu, io = parse_summary(err)
                r = {"op": op, "size": a.size, "mode": mode, "build": name, "rc": rc,
                     "wall_s": round(wall, 3), "rss_mib": round(rss), "cpu_busy": cpu,
                     "gpu_busy": gpu, "io": io, "date": date}
                res.write(json.dumps(r) + "\n")
                res.flush()
                rows.append(r)
                mean = sum(cpu) / len(cpu) if cpu else 0
                print(f"{op:12s} {mode:3s} {name:4s} rc={rc} {wall:7.2f} s  rss {rss:7.0f} MiB  "
                      f"cpu busy {mean:3.0f}% (min {min(cpu) if cpu else 0}%)  gpu busy {gpu}  "
                      f"redecoded {io.get('redecoded', '?')} {io.get('kept', '')}", flush=True)
                if rc != 0:
                    print(err[-2000:])
    if a.big:
        big = os.path.join(work, "big.tif")
        for f in (s, g, m, stamp):
            if os.path.exists(f):
                os.unlink(f)
        size = f"{a.big}x{a.big}"
        rc, wall, _, err = run([a.tw, "sample", big, "--size", size], log)
        print(f"sample {size}: {wall:.1f} s, rc={rc}", flush=True)
        if rc == 0:
            trace = os.path.join(traces, f"area-open-{a.big}.json")
            rc, wall, rss, err = run([a.tw, "area-open", big, "--area", "500", "-o", o,
                                      "--summary", "--trace", trace], log)
            cpu, gpu, io = parse_summary(err)
            r = {"op": "area-open", "size": a.big, "mode": "gpu", "build": a.label, "rc": rc,
                 "wall_s": round(wall, 3), "rss_mib": round(rss), "cpu_busy": cpu,
                 "gpu_busy": gpu, "io": io, "date": date}
            res.write(json.dumps(r) + "\n")
            rows.append(r)
            print(f"area-open {size} gpu: rc={rc} {wall:.2f} s rss {rss:.0f} MiB "
                  f"cpu busy {cpu} gpu busy {gpu} {io}", flush=True)
    # the table: one row per op and mode, the builds side by side
    with open(os.path.join(a.out, "slide.md"), "w") as f:
        f.write(f"| command | size | build | mode | wall s | peak RSS MiB | CPU busy (mean) | "
                f"GPU manager busy | tiles decoded again | base wall s |\n|---|---|---|---|---|"
                f"---|---|---|---|---|\n")
        for r in rows:
            if r["build"] == "base":
                continue
            base = [b for b in rows if b["build"] == "base" and b["op"] == r["op"] and
                    b["mode"] == r["mode"] and b["size"] == r["size"]]
            cpu = r["cpu_busy"]
            f.write(f"| {r['op']} | {r['size']} | {r['build']} | {r['mode']} | {r['wall_s']:.2f} | "
                    f"{r['rss_mib']} | {sum(cpu) / len(cpu) if cpu else 0:.0f}% | "
                    f"{r['gpu_busy']} | {r['io'].get('redecoded', '')} | "
                    f"{base[0]['wall_s'] if base else ''} |\n")
    # traces, drawn where matplotlib is
    here = os.path.dirname(os.path.abspath(__file__))
    for t in sorted(os.listdir(traces)):
        if t.endswith(".json"):
            subprocess.run([sys.executable, os.path.join(here, "trace_png.py"),
                            os.path.join(traces, t), "-o",
                            os.path.join(traces, t[:-5] + ".png")],
                           stdout=log, stderr=log, check=False)
    with tarfile.open(os.path.join(a.out, "traces.tar"), "w") as tf:
        for t in sorted(os.listdir(traces)):
            if t.endswith(".png") or os.path.getsize(os.path.join(traces, t)) < 4 << 20:
                tf.add(os.path.join(traces, t), arcname=t)
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
