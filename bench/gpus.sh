#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tilewave bench: issue 13's GPU scaling on a multi-GPU machine: reconstruction and exact EDT
# of a 64K x 64K image and the area opening of a 10 GPix image (100000 x 100000), from host
# memory, on 1, 2, ... N GPUs, the GPUs alone and with every CPU core; time, speed-up over
# one GPU, bytes copied each way and the share of the GPUs' active time spent in copies.
#
# From the repo root on the GPU machine (device tool: carry [".devdeps"], timeout 600 s):
#   source .devdeps/use-deps.sh && bash bench/gpus.sh
# Environment: OPS (default "mrecon edt area-open"), VARIANTS (default "gpu both"), MAX_GPUS
# (default: all), COUNTS (the GPU counts to run, default "1 2 ... MAX_GPUS"), REPEAT (default 1
# timed run after a warm-up), MRECON_SIZE / EDT_SIZE (default 65536), AO_SIZE (default
# 100000x100000), TILE (default 4096x4096), KEEP_TRACES (set: keep each run's trace as
# trace-LABEL.json.gz, gathered into traces.tar at the end). Results land in $OUT (or
# ./gpus-out): gpus.jsonl (one tw_bench JSON line per run, plus "gpus" and the copy share from
# its trace), gpus.log, env.txt.
set -uo pipefail
# shellcheck source=bench/device_env.sh
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
out=${OUT:-gpus-out}
mkdir -p "$out"
build=${BUILD:-build-gpus}
log="$out/gpus.log"
res="$out/gpus.jsonl"
tile=${TILE:-4096x4096}
repeat=${REPEAT:-1}
twb_tw_bench gpus.sh "$out" "$build" "$log"
n_gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
max=${MAX_GPUS:-$n_gpus}
: > "$res"
# Adds "gpus" and, from the run's trace (lanes: 4 per worker, 1 uploads, 2 kernels, 3
# downloads), the seconds of copies and of kernels summed over the GPUs and the copies' share
# of the two (copies on their own streams may overlap kernels: a share, not a wall time).
annotate=$(cat <<'PY'
import json, sys
r = json.loads(sys.stdin.read())
r["gpus"] = sys.argv[1]
try:
    tr = json.load(open(sys.argv[2]))
    ev = tr["traceEvents"] if isinstance(tr, dict) else tr
    copy = kern = 0.0
    for e in ev:
        if e.get("ph") == "X" and e.get("cat") == "cuda":
            lane = e["tid"] % 4
            if lane in (1, 3):
                copy += e["dur"]
            elif lane == 2:
                kern += e["dur"]
    runs = r.get("repeat", 1) + 1
    r["copy_s"] = round(copy / 1e6 / runs, 4)
    r["kernel_s"] = round(kern / 1e6 / runs, 4)
    r["copy_share"] = round(copy / (copy + kern), 4) if copy + kern > 0 else None
except (OSError, ValueError, KeyError) as e:
    r["trace_error"] = str(e)
print(json.dumps(r))
PY
)
summary=$(cat <<'PY'
import json, sys
r = json.loads(sys.stdin.read())
g = r.get
print("{:36s} {:8.3f} s {:6.3f} GPix/s up {:6.2f} GB down {:6.2f} GB copy share {} "
      "gpu busy {:.2f} s cpu busy {:.2f} s".format(sys.argv[1], r["median_s"], r["gpix_per_s"],
      g("gpu_bytes_up", 0) / 1e9, g("gpu_bytes_down", 0) / 1e9, g("copy_share"),
      g("gpu_busy_s", 0), g("cpu_busy_s", 0)))
PY
)
run() { # label, gpus, tw_bench args...
    local label=$1 gpus=$2 line trace="$out/trace.json"
    shift 2
    echo "== $label: $*" >> "$log"
    rm -f "$trace"
    if line=$("$bench" "$@" --set "runtime.gpus=$gpus" --set "runtime.trace=$trace" \
              2>> "$log") && [ -n "$line" ]; then
        line=$(printf '%s' "$line" | tail -1 | python3 -c "$annotate" "$gpus" "$trace")
        echo "$line" >> "$res"
        printf '%s' "$line" | python3 -c "$summary" "$label"
        if [ -n "${KEEP_TRACES:-}" ] && [ -f "$trace" ]; then
            gzip -c "$trace" > "$out/trace-$(printf '%s' "$label" | tr ' ,' '_-' | tr -d '=').json.gz"
        fi
    else
        echo "$label: FAILED (see the log)"
        tail -3 "$log"
    fi
    rm -f "$trace"
}
for op in ${OPS:-mrecon edt area-open}; do
    list=""
    for ((g = 0; g < max; g++)); do
        list="${list:+$list,}$g"
        case " ${COUNTS:-$(seq -s ' ' 1 "$max")} " in *" $((g + 1)) "*) ;; *) continue ;; esac
        for variant in ${VARIANTS:-gpu both}; do
            label="$op gpus=$list $variant"
            case $op in
            mrecon)
                run "$label" "$list" mrecon --size "${MRECON_SIZE:-65536}" --variant "$variant" \
                    --tile "$tile" --repeat "$repeat" ;;
            edt)
                run "$label" "$list" edt --job --size "${EDT_SIZE:-65536}" --variant "$variant" \
                    --tile "$tile" --repeat "$repeat" ;;
            area-open)
                run "$label" "$list" area-open --job --input field --size \
                    "${AO_SIZE:-100000x100000}" --conn 4 --area 500 \
                    --variant "$([ "$variant" = gpu ] && echo cuda || echo hybrid)" \
                    --tile "$tile" --repeat "$repeat" ;;
            esac
        done
    done
done
# one file for the traces: the device tool brings back a limited number of files
if [ -n "${KEEP_TRACES:-}" ] && ls "$out"/trace-*.json.gz > /dev/null 2>&1; then
    tar -C "$out" -cf "$out/traces.tar" $(cd "$out" && ls trace-*.json.gz) &&
        rm -f "$out"/trace-*.json.gz
fi
echo "gpus.sh: total $((SECONDS - t0)) s" | tee -a "$log"
