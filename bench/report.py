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


def main(paths):
    meta, ms = load(paths)
    hw = meta["hardware"]
    gpus = ", ".join(f"{g['name']} ({g['memory']}, driver {g['driver']})"
                     for g in hw.get("gpus", [])) or "none"
    print(textwrap.fill(
        f"Run: `{meta['mode']}` mode, {meta['date']}, commit `{meta['commit']}`, "
        f"{meta.get('tilewave', '')}; CPU: {hw['cpu_model']}, {hw['cores']} cores "
        f"({hw['logical_cpus']} logical), {hw.get('mem_gib', '?')} GiB; GPU: {gpus}; "
        f"load average at start/end {meta['loadavg_start'][0]:.2f}/"
        f"{meta.get('loadavg_end', ['?'])[0]:.2f}; peers: " +
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
