#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# tilewave bench: Markdown tables from bench/run.py JSON, for docs/benchmarks.md.
"""Print Markdown tables of one or more bench/run.py results (merged; later files win).

    python3 bench/report.py RESULT.json [MORE.json ...]

Per operation and kind of measurement: a throughput table (MPix/s, median; higher is
better) and a ratio table (peer time / tilewave time; above 1 means tilewave is faster), one
row per size, input and tilewave variant. Plus the runtime and transfer tables.
"""
import json
import sys
import textwrap

KIND_TITLES = {"file": "file -> file", "memory": "in memory (host arrays)",
               "device-memory": "in memory (data already on the GPU)"}

# Issue 5's targets for the EDT: minimum ratio (peer time / tilewave time) per peer, and the
# whole-slide job's time.
EDT_TARGETS = {"scipy-edt": (20.0, ">= 20x (2 cores)"), "opencv-edt": (1.5, ">= 1.5x (2 cores)"),
               "cupy-edt": (2.0, ">= 2x (<= 0.5x CuPy's time)")}
EDT_JOB_TARGET = (65536 * 65536, 1.0)  # pixels, seconds: 65536^2 from host memory in <= 1 s


def load(paths):
    meta, runs, order = None, {}, []
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        meta = meta or data["meta"]
        for m in data["measurements"]:
            key = (m["workload"], m.get("size"), m.get("input"), m.get("side"), m.get("name"),
                   m.get("pattern"), m.get("workers"), m.get("memory"), m.get("direction"))
            if key not in runs:
                order.append(key)
            runs[key] = m
    return meta, [runs[k] for k in order]


def md_table(headers, rows):
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def size_key(m):
    return m["w"] * m["h"]


def fmt_s(s):
    if s < 0.01:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


def edt_tables(ms):
    """The EDT's own tables: ratios against the issue's targets, the whole-image job, the
    wavefront's errors against the exact transform, and peers that crashed."""
    edt = [m for m in ms if m["workload"] == "edt"]
    tw = [m for m in edt if m.get("side") == "tilewave" and "median_s" in m]
    pe = [m for m in edt if m.get("side") == "peer" and "median_s" in m]
    rows = []
    for t in tw:
        if not t.get("compare", True):
            continue
        for p in pe:
            if (p["size"], p["input"]) != (t["size"], t["input"]) or (
                    p["kind"] != t["kind"] and t["kind"] not in p.get("against", ())):
                continue
            ratio = p["median_s"] / t["median_s"]
            goal = EDT_TARGETS.get(p["name"])
            rows.append([t["size"], t["input"], t["name"], fmt_s(t["median_s"]),
                         f"{t['w'] * t['h'] / t['median_s'] / 1e9:.3f}", p["name"],
                         fmt_s(p["median_s"]), f"{ratio:.2f}", goal[1] if goal else "-",
                         ("yes" if ratio >= goal[0] else "**no**") if goal else "-"])
    if rows:
        print("`edt`: tilewave against the peers on the same generated image (ratio = peer "
              "time / tilewave time; targets of issue 5):\n")
        print(md_table(["size", "input", "tilewave", "time", "GPix/s", "peer", "peer time",
                        "ratio", "target", "met"], rows))
        print()
    jobs = [m for m in tw if m["name"].startswith("job-")]
    if jobs:
        print("`edt`, the whole job from host memory to host memory (tw_edt_submit, float32 "
              "out, median):\n")
        rows = []
        for m in jobs:
            raw = m.get("raw", {})
            target = "-"
            if m["w"] * m["h"] >= EDT_JOB_TARGET[0]:
                target = "yes" if m["median_s"] <= EDT_JOB_TARGET[1] else "**no**"
            rows.append([m["size"], m["input"], m["name"], fmt_s(m["median_s"]),
                         f"{m['w'] * m['h'] / m['median_s'] / 1e9:.3f}",
                         f"{raw.get('bands', '-')} ({raw.get('bands_cpu', '-')} CPU, "
                         f"{raw.get('bands_cuda', '-')} GPU)",
                         "-" if m.get("peak_rss_mib") is None else f"{m['peak_rss_mib']:.0f}",
                         target])
        print(md_table(["size", "input", "variant", "time", "GPix/s", "bands",
                        "peak RSS MiB", "<= 1 s at 65536^2"], rows))
        print()
    wave = [m for m in tw if m.get("raw", {}).get("method") == "wavefront"]
    if wave:
        print("`edt --method wavefront` against the exact transform (every pixel; error in "
              "pixels):\n")
        rows = []
        for m in wave:
            raw = m["raw"]
            exact = next((t for t in tw if (t["size"], t["input"], t["kind"]) ==
                          (m["size"], m["input"], m["kind"]) and
                          t.get("raw", {}).get("method") == "exact"), None)
            n = raw.get("checked") or 1
            rows.append([m["size"], m["input"], m["name"], fmt_s(m["median_s"]),
                         "-" if exact is None else fmt_s(exact["median_s"]),
                         f"{raw.get('wrong', 0)} ({100.0 * raw.get('wrong', 0) / n:.4f} %)",
                         f"{raw.get('max_abs_err', 0):.3g}",
                         f"{raw.get('mean_abs_err', 0):.3g}"])
        print(md_table(["size", "input", "variant", "time", "exact time", "wrong pixels",
                        "max abs error", "mean abs error (all pixels)"], rows))
        print()
    crashed = [m for m in edt if m.get("crashed")]
    if crashed:
        print("Peers that failed on inputs tilewave handles:\n")
        print(md_table(["size", "input", "peer", "what happened"],
                       [[m["size"], m["input"], m["name"], m["skipped"]] for m in crashed]))
        print()


# Issue 6's targets for the max-tree and the area opening: minimum ratio (peer time /
# tilewave time) of the CPU measurements per peer (2 cores), GPU kernel throughput (GPix/s,
# 8-bit at >= 24 MPix and 16-bit), 8-connectivity against 4, and the whole-slide filter.
MT_TARGETS = {"higra-maxtree": (2.0, ">= 2x (CPU)"), "higra-area-open": (2.0, ">= 2x (CPU)"),
              "skimage-maxtree": (100.0, ">= 100x (CPU)"),
              "skimage-area-open": (100.0, ">= 100x (CPU)")}
MT_GPU_U8 = (24e6, 10.0)     # pixels at least, GPix/s at least
MT_GPU_U16 = 0.5             # GPix/s
MT_CONN8_SLOWDOWN = 1.2      # 8-conn time / 4-conn time at most
MT_SLIDE = (1e10, 2.0)       # pixels at least, GPix/s at least (one GPU, from host memory)


def met(ok):
    return "yes" if ok else "**no**"


def mt_tables(ms):
    """The max-tree's and the area opening's tables: ratios against the issue's targets, the
    GPU kernel's throughput, and the whole-slide filter."""
    mt = [m for m in ms if m["workload"] in ("maxtree", "area-open")]
    tw = [m for m in mt if m.get("side") == "tilewave" and "median_s" in m]
    pe = [m for m in mt if m.get("side") == "peer" and "median_s" in m]
    rows = []
    for t in tw:
        if not t.get("compare", True):
            continue
        for p in pe:
            if (p["workload"], p["size"], p["input"]) != (t["workload"], t["size"],
                                                          t["input"]) or p["kind"] != t["kind"]:
                continue
            ratio = p["median_s"] / t["median_s"]
            goal = MT_TARGETS.get(p["name"]) if t.get("device") == "cpu" else None
            rows.append([t["workload"], t["size"], t["input"], t.get("type") or "-", t["name"],
                         fmt_s(t["median_s"]), f"{t['w'] * t['h'] / t['median_s'] / 1e9:.3f}",
                         p["name"], fmt_s(p["median_s"]), f"{ratio:.2f}",
                         goal[1] if goal else "-", met(ratio >= goal[0]) if goal else "-"])
    if rows:
        print("`maxtree` and `area-open`: tilewave against the peers on the same image (ratio = "
              "peer time / tilewave time; targets of issue 6):\n")
        print(md_table(["workload", "size", "input", "type", "tilewave", "time", "GPix/s",
                        "peer", "peer time", "ratio", "target", "met"], rows))
        print()
    kern = [m for m in tw if m["workload"] == "maxtree" and m["name"] == "kernel-cuda"]
    if kern:
        rows = []
        for m in kern:
            gpix = m["w"] * m["h"] / m["median_s"] / 1e9
            u16 = m.get("type") == "u16"
            target, ok = "-", None
            if u16:
                target, ok = f">= {MT_GPU_U16} GPix/s", gpix >= MT_GPU_U16
            elif m["w"] * m["h"] >= MT_GPU_U8[0]:
                target, ok = f">= {MT_GPU_U8[1]:g} GPix/s", gpix >= MT_GPU_U8[1]
            slow = "-"
            if m.get("conn") == 8:
                four = next((k for k in kern if (k["size"], k.get("image"), k.get("conn")) ==
                             (m["size"], m.get("image"), 4)), None)
                if four:
                    r = m["median_s"] / four["median_s"]
                    slow = f"{r:.2f} ({met(r <= MT_CONN8_SLOWDOWN)})"
            rows.append([m["size"], m["input"], m.get("type") or "-", fmt_s(m["median_s"]),
                         f"{gpix:.2f}", target, "-" if ok is None else met(ok), slow])
        print("`maxtree`, the CUDA kernel with the data on the GPU (CUDA events; 8-conn / 4-conn: "
              f"time ratio, target <= {MT_CONN8_SLOWDOWN}):\n")
        print(md_table(["size", "input", "type", "time", "GPix/s", "target", "met",
                        "8-conn / 4-conn"], rows))
        print()
    jobs = [m for m in tw if m["workload"] == "area-open" and m["name"].startswith("job-")]
    if jobs:
        rows = []
        for m in jobs:
            raw = m.get("raw", {})
            gpix = m["w"] * m["h"] / m["median_s"] / 1e9
            slide = m["w"] * m["h"] >= MT_SLIDE[0] and m["name"] == "job-cuda"
            rows.append([m["size"], m["input"], m["name"], fmt_s(m["median_s"]), f"{gpix:.3f}",
                         f"{raw.get('tiles', '-')} ({raw.get('tp_cpu', '-')} CPU, "
                         f"{raw.get('tp_cuda', '-')} GPU)", raw.get("border_nodes", "-"),
                         f"{raw.get('tree_s', 0):.2f} / {raw.get('merge_s', 0):.2f} / "
                         f"{raw.get('filter_s', 0):.2f}",
                         "-" if m.get("peak_rss_mib") is None else f"{m['peak_rss_mib']:.0f}",
                         met(gpix >= MT_SLIDE[1]) if slide else "-"])
        print("`area-open`, the whole tiled job from host memory to host memory "
              "(tw_attr_filter_submit; tree / merge / filter: seconds of the last run's "
              f"passes; target: >= {MT_SLIDE[1]:g} GPix/s on one GPU at >= 10 GPix):\n")
        print(md_table(["size", "input", "variant", "time", "GPix/s", "tile tasks",
                        "border nodes", "tree / merge / filter s", "peak RSS MiB",
                        "slide target met"], rows))
        print()


def main(paths):
    meta, ms = load(paths)
    hw = meta["hardware"]
    gpus = ", ".join(f"{g['name']} ({g['memory']}, driver {g['driver']})"
                     for g in hw.get("gpus", [])) or "none"
    # A run cut short (its JSON saved after each case) has no end load average.
    load_end = f"{meta['loadavg_end'][0]:.2f}" if meta.get("loadavg_end") else "?"
    print(textwrap.fill(
        f"Run: `{meta['mode']}` mode, {meta['date']}, commit `{meta['commit']}`, "
        f"{meta.get('tilewave', '')}; CPU: {hw['cpu_model']}, {hw['cores']} cores "
        f"({hw['logical_cpus']} logical), {hw.get('mem_gib', '?')} GiB; GPU: {gpus}; "
        f"load average at start/end {meta['loadavg_start'][0]:.2f}/"
        f"{load_end}; peers: " +
        ", ".join(f"{k} {v}" for k, v in meta["versions"].items()) + ".", 100) + "\n")
    rt = [m for m in ms if m["workload"] == "runtime" and "median_s" in m]
    if rt:
        print("Runtime, empty tasks (median of the repeats):\n")
        print(md_table(["pattern", "workers", "tasks", "µs/task (wall)", "tasks/s",
                        "CPU µs/task"],
                       [[m["pattern"], m["workers"], m["tasks"], f"{m['us_per_task']:.3f}",
                         f"{m['tasks_per_s'] / 1e6:.2f} M", f"{m['cpu_us_per_task']:.3f}"]
                        for m in rt]))
        print()
    xf = [m for m in ms if m["workload"] == "transfer" and "gb_per_s" in m]
    if xf:
        print(f"Host <-> GPU copies ({xf[0]['mib']} MiB, median):\n")
        print(md_table(["host memory", "direction", "GB/s (CUDA events)", "GB/s (host clock)"],
                       [[m["memory"], m["direction"], f"{m['gb_per_s']:.1f}",
                         f"{m['wall_gb_per_s']:.1f}"] for m in xf]))
        print()
    img = [m for m in ms if m.get("side") in ("tilewave", "peer") and "median_s" in m]
    for op in dict.fromkeys(m["op"] for m in img):
        for kind in KIND_TITLES:
            sel = [m for m in img if m["op"] == op and m["kind"] == kind]
            if not sel:
                continue
            tw = list(dict.fromkeys(m["name"] for m in sel if m["side"] == "tilewave"))
            pe = list(dict.fromkeys(m["name"] for m in sel if m["side"] == "peer"))
            inputs = list(dict.fromkeys(m["input"] for m in sel))
            cases = sorted({(m["w"], m["h"], m["input"]) for m in sel if m["input"] !=
                            "generated"} or {(m["w"], m["h"], "generated") for m in sel},
                           key=lambda c: (c[0] * c[1], inputs.index(c[2])))

            def find(side, name, w, h, inp):
                for m in sel:
                    if (m["side"], m["name"], m["w"], m["h"]) == (side, name, w, h) and \
                            m["input"] in (inp, "generated"):
                        return m
                return None

            print(f"`{op}`, {KIND_TITLES[kind]}: throughput in MPix/s (median; peak RSS "
                  "MiB in brackets):\n")
            rows = []
            for (w, h, inp) in cases:
                row = [f"{w}x{h}", inp]
                for side, names in (("tilewave", tw), ("peer", pe)):
                    for n in names:
                        m = find(side, n, w, h, inp)
                        if m is None:
                            row.append("-")
                        else:
                            rss = m.get("peak_rss_mib")
                            row.append(f"{m['mpix_per_s']:.0f}" +
                                       (f" ({rss:.0f})" if rss is not None else ""))
                rows.append(row)
            print(md_table(["size", "input"] + [f"tilewave {n}" for n in tw] + pe, rows))
            print()
            comp = [m for m in sel if m["side"] == "tilewave" and m.get("compare", True)]
            if not pe or not comp:
                continue
            print(f"`{op}`, {KIND_TITLES[kind]}: ratio = peer time / tilewave time "
                  "(> 1: tilewave faster):\n")
            rows = []
            for (w, h, inp) in cases:
                for n in dict.fromkeys(m["name"] for m in comp):
                    t = find("tilewave", n, w, h, inp)
                    if t is None:
                        continue
                    row = [f"{w}x{h}", inp, n]
                    for p in pe:
                        m = find("peer", p, w, h, inp)
                        row.append("-" if m is None else f"{m['median_s'] / t['median_s']:.2f}")
                    rows.append(row)
            print(md_table(["size", "input", "tilewave"] + pe, rows))
            print()
    edt_tables(ms)
    mt_tables(ms)
    skipped = {}
    for m in ms:
        if m.get("skipped"):
            name = m.get("name", "")
            key = m["workload"] if name in ("", m["workload"]) else f"{m['workload']} {name}"
            skipped.setdefault(key, m["skipped"])
    if skipped:
        print(textwrap.fill("Skipped: " + "; ".join(f"{k} ({v})" for k, v in skipped.items())
                            + ".", 100) + "\n")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
