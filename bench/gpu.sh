#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tilewave bench: the one-call GPU benchmark run for the device machine (H100/H200).
#
# From the repo root on the GPU machine, with the Debian packages of .devdeps/ carried along
# (the device tool: command "bash bench/gpu.sh", carry [".devdeps"], timeout 600 s):
#   builds tilewave + tw_bench for sm_90 without the tests, runs bench/run.py --gpu (all
#   cores, CPU/GPU/both variants, CuPy and the other peers; at most 7.5 minutes) and draws the
#   chart. Everything lands in $OUT (or ./bench-gpu-out): bench-gpu.json, bench-gpu.txt (the
#   tables), bench-gpu.log (progress and build), bench-gray-gpu.png, env.txt.
set -uo pipefail
# shellcheck source=bench/device_env.sh
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
out=${OUT:-bench-gpu-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
if [ -f .devdeps/use-deps.sh ]; then
    # shellcheck disable=SC1091
    source .devdeps/use-deps.sh
fi
build="build-bench-gpu"
log="$out/bench-gpu.log"
{
    twb_machine
    python3 -c 'import sys; print(sys.version.split()[0])'
} > "$out/env.txt" 2>&1
t0=$SECONDS
twb_build --reconfigure gpu.sh "$build" "$log" tilewave_cli tw_bench || exit 1
# A last guard under the device call's 10 minutes; run.py's own budget normally ends it first,
# and it rewrites the JSON after every case, so a cut run keeps what it measured.
# TW_BENCH_ARGS adds run.py flags (e.g. "--sizes 1024 --budget 60" for a dry run, or
# "--workloads maxtree,area-open" for the max-tree kernels and the area opening alone: their
# 10 GPix whole-slide case needs about 24 GiB of host memory and no input file).
# shellcheck disable=SC2086
timeout 450 python3 bench/run.py --gpu --build "$build" --json "$out/bench-gpu.json" \
    ${TW_BENCH_ARGS:-} 2>> "$log" | tee "$out/bench-gpu.txt"
rc=${PIPESTATUS[0]}
python3 bench/plot.py "$out/bench-gpu.json" --out "$out" --tag gpu >> "$log" 2>&1 ||
    echo "gpu.sh: plot failed (see bench-gpu.log)"
echo "gpu.sh: run.py exit $rc, total $((SECONDS - t0)) s" | tee -a "$log"
exit "$rc"
