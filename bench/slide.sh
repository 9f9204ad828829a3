#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tilewave bench: the CLI on sample slides end to end, with the GPU and with --gpus none
# (issue 25): wall time, peak RSS, every worker's busy share, the bytes read, decoded and
# written, tiles decoded more than once, and the traces of the GPU runs (bench/slide.py).
#
# From the repo root on the GPU machine (device tool: carry [".devdeps"], timeout 600 s):
#   source .devdeps/use-deps.sh && bash bench/slide.sh
# TW: a tilewave binary already built (else this script builds one for sm_90 in
# build-slide); BASE: another build's binary to run after each command (ratios in one run);
# SIZE (default 32768), BIG (default 0: none; 100000 for the 10 GPix area opening), OPS and
# MODES are slide.py's. Results in $OUT (or ./slide-out): slide.jsonl, slide.md, slide.log,
# traces.tar, env.txt.
set -uo pipefail
# shellcheck source=bench/device_env.sh
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
out=${OUT:-slide-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
{
    twb_machine
    free -g | head -2
    df -h "${WORK:-/tmp}" | tail -1
} > "$out/env.txt" 2>&1
tw=${TW:-}
if [ -z "$tw" ]; then
    twb_build slide.sh build-slide "$out/build.log" tilewave_cli || exit 1
    tw=build-slide/tilewave
fi
args=(--tw "$tw" --size "${SIZE:-32768}" --big "${BIG:-0}" --out "$out")
[ -n "${BASE:-}" ] && args+=(--base "$BASE")
[ -n "${OPS:-}" ] && args+=(--ops "$OPS")
[ -n "${MODES:-}" ] && args+=(--modes "$MODES")
[ -n "${WORK:-}" ] && args+=(--work "$WORK")
python3 "$(dirname "${BASH_SOURCE[0]}")/slide.py" "${args[@]}"
