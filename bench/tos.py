#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# tilewave bench: the tree of shapes' thread scaling and Higra, one command, one table.
"""Time the tree of shapes (tw_bench tos) with 1, 2, 4, ... threads and Higra on the same
images, in one run, and print a Markdown table.

    python3 bench/tos.py --build build                      # this machine's cores, 2 sizes
    python3 bench/tos.py --build build --sizes 4096 --inputs natural:ihc,natural16:ihc
    python3 bench/tos.py --build build --json tos.json      # the raw measurements too

For each input (bench/inputs.py names, generated into --cache) and size it runs
  kernel  tw_bench tos --kernel --threads T: twi_omp_tos, the sort's parts as OpenMP tasks,
          the max-tree of the ranks and the rest as parallel loops; parent image out
  job     tw_bench tos --job --threads T: tw_tos_submit on a runtime of T CPU workers, every
          step a task (the sort's parts split off for idle workers)
  job gpu with --gpus LIST: the job on T CPU workers and those GPUs (tw_bench --gpus), the
          max-tree of the ranks one task on a GPU; its max-tree column says where it ran
  grain   the job's grain filter (tw_grain_submit, --grain-area), once with all threads,
          compared pixel for pixel with Higra's
  higra   bench/peers.py higra-tos (component_tree_tree_of_shapes_image2d, one thread) and
          higra-grain, in their own processes; their node count and output must equal
          tilewave's
T runs over 1, 2, 4, ... up to the cores (and the core count itself). Every tilewave run
with T > 1 is checked against the one-thread kernel's bytes. Speed-up = the one-thread
kernel's time / this row's; vs Higra = Higra's time / this row's. Memory: scratch bytes a
pixel (the peak resident set above what the image and outputs hold) and the peak RSS.
Stages (tw_bench's medians): sort (the propagation into F_ord, with its parts split off and
its large batches shared with idle threads; "parts / shared batches" counts them, the job
reports parts only), max-tree of the ranks + un-interpolation, attributes (grain only), each
with its speed-up against the one-thread kernel's stage. The scaling run for issue 30:

    python3 bench/tos.py --build build --inputs natural:ihc,natural16:ihc --sizes 2048,4096 \
        --threads 1,2,4,8,16 --no-higra --json tos-scaling.json

and with the GPU (issue 30's target: the whole tree of a 4096^2 8-bit natural image 3 times
faster than the 16-thread CPU job):

    python3 bench/tos.py --build build --inputs natural:ihc --sizes 4096 --threads 16 \
        --gpus 0 --no-higra --json tos-gpu.json

Exit status 1 when a run fails or an output differs.
"""
import argparse
import datetime
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from run import Budget, commit, hardware, json_lines, median, parse_size, run_child  # noqa: E402
import inputs  # noqa: E402


def thread_counts(cores):
    t, out = 1, []
    while t < cores:
        out.append(t)
        t *= 2
    return out + [cores]


def tw_bench(args, budget, tw, mode, threads, path, extra=()):
    argv = [tw, "tos", f"--{mode}", "--threads", str(threads), "--input", path,
            "--repeat", str(args.repeat), *extra]
    out, err = run_child(argv, budget)
    if err:
        return {"error": err}
    return json_lines(out)[-1]


def peer(args, budget, name, path, extra=()):
    argv = [sys.executable, os.path.join(HERE, "peers.py"), name, "--input", path,
            "--repeat", str(args.higra_repeat), *extra]
    out, err = run_child(argv, budget)
    if err:
        return {"error": err}
    res = json_lines(out)[-1]
    if "times" in res:
        res["median_s"] = median(res["times"])
    return res


def fmt_s(s):
    return "-" if s is None else (f"{s * 1e3:.0f} ms" if s < 1 else f"{s:.2f} s")


def stage(r, key, base):
    """A stage's median time, and its speed-up against the one-thread kernel's."""
    s = r.get(key)
    if not s:
        return "-"
    b = base.get(key) if base else None
    return fmt_s(s) + (f" ({b / s:.2f}x)" if b and r is not base else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build", help="build folder with tw_bench and tilewave")
    ap.add_argument("--inputs", default="natural:ihc,gray16",
                    help="bench/inputs.py names, comma-separated")
    ap.add_argument("--sizes", default="1024,4096", help="WxH or W, comma-separated")
    ap.add_argument("--threads", help="thread counts (default: 1, 2, 4, ... and all cores)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs of tilewave (median)")
    ap.add_argument("--higra-repeat", type=int, default=1, help="timed runs of Higra")
    ap.add_argument("--grain-area", type=int, default=100)
    ap.add_argument("--no-higra", action="store_true")
    ap.add_argument("--gpus", help="also run the job with these GPUs (runtime.gpus: 0, all, ...)")
    ap.add_argument("--cache", default=None, help="input cache (default BUILD/bench-inputs)")
    ap.add_argument("--budget", type=float, default=None, help="seconds for the whole run")
    ap.add_argument("--json", help="also write every measurement here")
    args = ap.parse_args()

    build = os.path.abspath(args.build)
    tw = os.path.join(build, "tw_bench")
    cli = os.path.join(build, "tilewave")
    cache = args.cache or os.path.join(build, "bench-inputs")
    hw = hardware()
    cores = hw.get("cores") or os.cpu_count()
    threads = ([int(t) for t in args.threads.split(",")] if args.threads
               else thread_counts(cores))
    budget = Budget(args.budget)
    when = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    records, failed, table = [], False, []
    for name in args.inputs.split(","):
        for size in args.sizes.split(","):
            w, h = parse_size(size)
            try:
                path = inputs.make(cache, name, w, h, cli)
            except inputs.Unavailable as e:
                print(f"tos.py: {name} {w}x{h}: skipped ({e})", file=sys.stderr)
                continue
            print(f"tos.py: {name} {w}x{h}", file=sys.stderr)
            rows = []
            modes = [("kernel", "kernel", ()), ("job", "job", ())]
            if args.gpus:
                modes.append(("job gpu", "job", ("--gpus", args.gpus)))
            for variant, mode, extra in modes:
                for t in threads:
                    r = tw_bench(args, budget, tw, mode, t, path, extra)
                    r.update(variant=variant, threads=t)
                    rows.append(r)
                    print(f"tos.py:   {variant} {t} threads: {r.get('median_s')} s "
                          f"(max-tree {r.get('mt_s')} s on {r.get('mt_device')})",
                          file=sys.stderr, flush=True)
            grain_dump = os.path.join(build, "bench-out-tos-grain.raw")
            g = tw_bench(args, budget, tw, "job", threads[-1], path,
                         ["--grain", str(args.grain_area), "--dump", grain_dump])
            g.update(variant=f"job grain {args.grain_area}", threads=threads[-1])
            rows.append(g)
            hg_tree = hg_grain = None
            if not args.no_higra:
                hg_tree = peer(args, budget, "higra-tos", path)
                hg_tree.update(variant="higra", threads=1)
                hg_grain = peer(args, budget, "higra-grain", path,
                                ["--area", str(args.grain_area), "--reference", grain_dump])
                hg_grain.update(variant=f"higra grain {args.grain_area}", threads=1)
                rows += [hg_tree, hg_grain]
            if os.path.exists(grain_dump):
                os.remove(grain_dump)
            base = next((r.get("median_s") for r in rows
                         if r["variant"] == "kernel" and r["threads"] == 1), None)
            base_stages = next((r for r in rows
                                if r["variant"] == "kernel" and r["threads"] == 1), None)
            nodes = next((r.get("nodes") for r in rows if r.get("nodes") is not None), None)
            for r in rows:
                r.update(input=name, w=w, h=h)
                why = r.get("error") or r.get("skipped")
                if r.get("wrong"):
                    why = f"{r['wrong']} pixels differ from the one-thread kernel"
                if r["variant"] == "higra" and r.get("nodes") is not None and \
                        nodes is not None and r["nodes"] != nodes:
                    why = f"Higra's tree has {r['nodes']} nodes, tilewave's {nodes}"
                if r["variant"].startswith("higra grain") and r.get("differing_pixels"):
                    why = f"{r['differing_pixels']} pixels differ from tilewave's grain"
                if why:
                    failed = failed or not str(why).endswith("not installed")
                    r["failed"] = why
                records.append(r)
                hg_t = (hg_grain if "grain" in r["variant"] else hg_tree) or {}
                s = r.get("median_s")
                table.append("| {} {}x{} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |"
                             .format(
                    name, w, h, r["variant"], r["threads"], fmt_s(s),
                    f"{base / s:.2f}x" if s and base and not r["variant"].startswith("higra")
                    and "grain" not in r["variant"] else "-",
                    f"{hg_t['median_s'] / s:.1f}x" if s and hg_t.get("median_s") and
                    not r["variant"].startswith("higra") else "-",
                    stage(r, "sort_s", base_stages),
                    stage(r, "tree_s", base_stages) +
                    (f" [max-tree {fmt_s(r.get('mt_s'))} on {r['mt_device']}]"
                     if r.get("mt_device") == "cuda" else ""),
                    stage(r, "attr_s", None),
                    "-" if r.get("parts") is None else
                    f"{r['parts']}" + (f" / {r['crews']}" if r.get("crews", -1) >= 0 else ""),
                    f"{r['scratch_bytes_per_px']:.1f}" if r.get("scratch_bytes_per_px")
                    is not None else "-",
                    r.get("failed") or f"{r.get('peak_rss_mib', '-')} MiB"))
    print(f"Tree of shapes, {hw.get('cpu_model')} ({cores} cores, {hw.get('mem_gib')} GiB), "
          f"{when}, commit {commit()}, load {load if load is None else round(load, 1)} at the "
          f"start; tw_bench tos, median of {args.repeat}; Higra one thread, median of "
          f"{args.higra_repeat}.\n")
    print("| image | variant | threads | time | speed-up vs 1 thread | vs Higra | sort "
          "(speed-up) | max-tree + un-interpolation (speed-up) | attributes | parts / shared "
          "batches | scratch B/px | peak RSS |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(table))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"hardware": hw, "date": when, "commit": commit(), "load": load,
                       "records": records}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
