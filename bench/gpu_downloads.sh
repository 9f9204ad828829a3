#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tilewave bench: lazy against eager GPU downloads (runtime.gpu_downloads, issue 7) on the GPU
# machine: fill-holes, exact EDT and area opening of the sample slide through the CLI, once
# with each setting; wall time, peak RSS, bytes copied from the GPUs (the --summary lines) and
# whether both outputs hold the same pixels.
#
# From the repo root on the GPU machine, after building the CLI into BUILD:
#   source .devdeps/use-deps.sh && BUILD=build-dev bash bench/gpu_downloads.sh
# Environment: SIZE (sample edge, default 16384), GPUS (default 0), OUT (default dl-out).
set -uo pipefail
# shellcheck source=bench/device_env.sh
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
out=${OUT:-dl-out}
mkdir -p "$out"
tw=${BUILD:-build-dev}/tilewave
size=${SIZE:-16384}
gpus=${GPUS:-0}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
twb_machine > "$out/env.txt" 2>&1
"$tw" sample "$work/s.tif" --size "${size}x${size}" --quiet || exit 1
res="$out/downloads.txt"
: > "$res"
run()
{
    local name=$1 mode
    shift
    for mode in lazy eager; do
        local t0=$SECONDS log="$out/$name-$mode.log"
        TILEWAVE_RUNTIME_GPU_DOWNLOADS=$mode /usr/bin/time -f "rss_kb %M" \
            "$tw" "$@" -o "$work/$name-$mode.tif" --gpus "$gpus" --summary > "$log" 2>&1
        local rc=$?
        echo "$name $mode rc=$rc wall_s=$((SECONDS - t0)) $(grep rss_kb "$log")" | tee -a "$res"
        grep -E "gpu [0-9]+ manager|host tiles" "$log" | sed 's/^/    /' | tee -a "$res"
    done
    # Same pixels (not the same file bytes: tiles are appended in the order they finish).
    if python3 -c 'import tifffile' 2> /dev/null; then
        python3 - "$work/$name-lazy.tif" "$work/$name-eager.tif" << 'PY' | tee -a "$res"
import sys, numpy, tifffile
a, b = (tifffile.imread(p) for p in sys.argv[1:3])
print("%s pixels: %s" % (sys.argv[1].split("/")[-1], "identical" if numpy.array_equal(a, b)
                         else "DIFFER"))
PY
    else
        echo "$name: pixels not compared (no Python tifffile here)" | tee -a "$res"
    fi
}
run fill-holes fill-holes "$work/s.tif"
run edt edt "$work/s.tif" --threshold 200 --invert
run area-open area-open "$work/s.tif" --area 500
