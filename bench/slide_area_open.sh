#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tilewave bench: whole-slide area opening from host memory on the GPU machine (issue 6's
# "10 GPix at >= 2 GPix/s on one GPU" target), with traces of the large runs.
#
# From the repo root on the GPU machine (device tool: carry [".devdeps"], timeout 600 s):
#   source .devdeps/use-deps.sh && bash bench/slide_area_open.sh
# SIZES (default "100000x100000") and TILES (default "4096x4096 8192x8192") override the
# large runs. Results land in $OUT (or ./slide-out): slide-area-open.jsonl (one tw_bench JSON
# line per run), slide-area-open.log, env.txt, and a trace and its PNG for the first large run.
set -uo pipefail
# shellcheck source=bench/device_env.sh
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
out=${OUT:-slide-out}
mkdir -p "$out"
build=${BUILD:-build-slide} # an existing CUDA build directory may be given (tests built too)
log="$out/slide-area-open.log"
res="$out/slide-area-open.jsonl"
twb_tw_bench slide_area_open.sh "$out" "$build" "$log"
: > "$res"
# One line per run: time, rate, pixels wrong (check), TP tasks per device, border nodes, passes.
summary=$(cat <<'PY'
import json, sys
r = json.loads(sys.stdin.read())
g = r.get
print("{:34s} {:8.3f} s {:6.3f} GPix/s check={} wrong={} TP cpu/gpu={}/{} border={} tree={} "
      "merge={} filter={} rss={} MiB".format(sys.argv[1], r["median_s"], r["gpix_per_s"],
      g("check"), g("wrong"), g("tp_cpu"), g("tp_cuda"), g("border_nodes"), g("tree_s"),
      g("merge_s"), g("filter_s"), g("peak_rss_mib")))
PY
)
run() { # label, tw_bench args...
    local label=$1
    shift
    echo "== $label: $*" >> "$log"
    if "$bench" "$@" >> "$res" 2>> "$log"; then
        tail -1 "$res" | python3 -c "$summary" "$label"
    else
        echo "$label: FAILED (see the log)"
        tail -5 "$log"
    fi
}
# Checked against the naive filter at 8192^2 (67 MPix): every variant, 8- and 16-bit.
for v in cuda hybrid cpu; do
    run "8192^2 u8 4-conn $v" area-open --job --input field --size 8192x8192 --conn 4 \
        --area 100 --variant "$v" --tile 4096x4096 --repeat 3
done
run "8192^2 u8 8-conn hybrid" area-open --job --input field --size 8192x8192 --conn 8 \
    --area 100 --variant hybrid --tile 4096x4096 --repeat 3
run "8192^2 u16 4-conn hybrid" area-open --job --input field --type u16 --size 8192x8192 \
    --conn 4 --area 100 --variant hybrid --tile 4096x4096 --repeat 3
run "8192^2 u8 area-close hybrid" area-close --job --input field --size 8192x8192 --conn 4 \
    --area 100 --variant hybrid --tile 4096x4096 --repeat 3
# The whole-slide runs: no check (the naive reference would need 12 bytes a pixel).
first=1
for size in ${SIZES:-100000x100000}; do
    for tile in ${TILES:-4096x4096 8192x8192}; do
        extra=()
        if [ $first = 1 ]; then
            extra=(--set "runtime.trace=$out/trace-area-open.json")
            first=0
        fi
        run "$size u8 hybrid tiles $tile" area-open --job --input field --size "$size" \
            --conn 4 --area 100 --variant hybrid --tile "$tile" --repeat 1 --check none \
            "${extra[@]}"
    done
done
[ -f "$out/trace-area-open.json" ] &&
    python3 bench/trace_png.py "$out/trace-area-open.json" -o "$out/trace-area-open.png" \
        --title "area-open, 10 GPix, H100 + CPU workers" >> "$log" 2>&1
echo "slide_area_open.sh: total $((SECONDS - t0)) s" | tee -a "$log"
