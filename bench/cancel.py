#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""How soon the CLI stops after SIGINT (issue 26: within 1 s on the 2-core machine).

    python3 bench/cancel.py --tw build/tilewave [--size 20000] [--work DIR]
                            [--ops edt,maxtree,...] [--points 5] [--out FILE.jsonl]

Makes a sample slide (`tilewave sample`, SIDE x SIDE, RGB, deflate, with its pyramid), runs
each command once to the end for its wall time T, then again once per point, sending SIGINT
at T * k / (points + 1) for k = 1..points, and measures the time from the signal to the
process's exit (the command has then removed its partial outputs and printed its line). It
checks that every canceled run exits 130 and leaves no output. Prints a table (the worst and
the median latency of each command); with --out, one JSON object per canceled run.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

# name -> the arguments after the binary; {s} the slide, {o} the output
OPS = {
    "gray": ["gray", "{s}", "-o", "{o}"],
    "area-open": ["area-open", "{s}", "--area", "500", "-o", "{o}"],
    "edt": ["edt", "{s}", "--threshold", "otsu", "--invert", "-o", "{o}"],
    "fill-holes": ["fill-holes", "{s}", "--threshold", "otsu", "-o", "{o}"],
    "maxtree": ["maxtree", "{s}", "--level", "1", "-o", "{o}"],
    "tos": ["tos", "{s}", "--level", "1", "-o", "{o}"],
    "grain": ["grain", "{s}", "--level", "1", "--area", "100", "-o", "{o}"],
}


def run(tw, args, delay):
    """Run tilewave; SIGINT after `delay` s (None: never). (exit status, wall s, latency s)."""
    t0 = time.monotonic()
    p = subprocess.Popen([tw] + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    lat = None
    if delay is not None:
        try:
            p.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            t1 = time.monotonic()
            p.send_signal(signal.SIGINT)
            p.wait()
            lat = time.monotonic() - t1
    err = p.communicate()[1].decode(errors="replace")
    return p.returncode, time.monotonic() - t0, lat, err.strip().splitlines()[-1:] or [""]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tw", required=True)
    ap.add_argument("--size", type=int, default=20000)
    ap.add_argument("--work", default=None)
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--points", type=int, default=5)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="tw-cancel-")
    os.makedirs(work, exist_ok=True)
    slide = os.path.join(work, "s%d.tif" % a.size)
    if not os.path.exists(slide):
        subprocess.run([a.tw, "sample", slide, "--size", "%dx%d" % (a.size, a.size), "--quiet"],
                       check=True)
    outf = open(a.out, "w") if a.out else None
    rows = []
    for name in a.ops.split(","):
        out = os.path.join(work, "out.tif")
        args = [x.format(s=slide, o=out) for x in OPS[name]]
        rc, wall, _, last = run(a.tw, args, None)
        if rc != 0:
            sys.exit("%s: exit %d: %s" % (name, rc, last[0]))
        lats = []
        for k in range(1, a.points + 1):
            if os.path.exists(out):
                os.unlink(out)
            delay = wall * k / (a.points + 1)
            rc, _, lat, last = run(a.tw, args, delay)
            if lat is None:
                continue  # ended before the signal (a faster run)
            if rc != 130 or os.path.exists(out):
                sys.exit("%s canceled at %.2f s: exit %d, output %s: %s"
                         % (name, delay, rc, "left" if os.path.exists(out) else "none",
                            last[0]))
            lats.append(lat)
            if outf:
                outf.write(json.dumps({"op": name, "size": a.size, "wall_s": round(wall, 3),
                                       "signal_at_s": round(delay, 3),
                                       "latency_s": round(lat, 3)}) + "\n")
        rows.append((name, wall, lats))
        print("%-10s run %7.2f s  SIGINT latency: worst %.2f s, median %.2f s (%d points)"
              % (name, wall, max(lats) if lats else float("nan"),
                 statistics.median(lats) if lats else float("nan"), len(lats)), flush=True)
    if not a.work:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
