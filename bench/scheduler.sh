#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tilewave bench: issue 7's scheduler comparisons on the GPU machine: reconstruction and exact
# EDT of a 64K x 64K image from host memory under each policy, CPU+GPU against the GPUs alone,
# and 1 against 2 (or more) GPUs where the machine has them.
#
# From the repo root on the GPU machine (device tool: carry [".devdeps"], timeout 600 s):
#   source .devdeps/use-deps.sh && bash bench/scheduler.sh
# Environment: SIZE (default 65536), TILE (default 4096x4096), POLICIES (default
# "fcfs pats locality"; a policy this build does not know is reported and skipped), OPS
# (default "mrecon edt"), GPU_SETS (default "0" plus "0,1" ... when more GPUs are present),
# VARIANTS (default "gpu both"), REPEAT (default 1 timed run after a warm-up). Results land in
# $OUT (or ./sched-out):
# scheduler.jsonl (one tw_bench JSON line per run, with the policy, variant and GPU list
# added), scheduler.log, env.txt.
set -uo pipefail
# shellcheck source=bench/device_env.sh
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
out=${OUT:-sched-out}
mkdir -p "$out"
build=${BUILD:-build-sched}
log="$out/scheduler.log"
res="$out/scheduler.jsonl"
size=${SIZE:-65536}
tile=${TILE:-4096x4096}
repeat=${REPEAT:-1}
twb_tw_bench scheduler.sh "$out" "$build" "$log"
n_gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ -z "${GPU_SETS:-}" ]; then
    GPU_SETS="0"
    list="0"
    for ((g = 1; g < n_gpus; g++)); do
        list="$list,$g"
        GPU_SETS="$GPU_SETS $list"
    done
fi
: > "$res"
summary=$(cat <<'PY'
import json, sys
r = json.loads(sys.stdin.read())
g = r.get
dev = "TP cpu/gpu={}/{}".format(g("tp_cpu"), g("tp_cuda")) if g("bench") == "mrecon" else \
      "bands cpu/gpu={}/{}".format(g("bands_cpu"), g("bands_cuda"))
print("{:44s} {:8.3f} s {:6.3f} GPix/s {} rss={} MiB".format(sys.argv[1], r["median_s"],
      r["gpix_per_s"], dev, g("peak_rss_mib")))
PY
)
add_gpus='import json, sys
r = json.loads(sys.stdin.read())
r["gpus"] = sys.argv[1]
print(json.dumps(r))'
run() { # label, gpus, tw_bench args...
    local label=$1 gpus=$2 line
    shift 2
    echo "== $label: $*" >> "$log"
    if line=$("$bench" "$@" 2>> "$log") && [ -n "$line" ]; then
        line=$(printf '%s' "$line" | tail -1 | python3 -c "$add_gpus" "$gpus")
        echo "$line" >> "$res"
        printf '%s' "$line" | python3 -c "$summary" "$label"
    else
        echo "$label: FAILED (see the log)"
        tail -3 "$log"
    fi
}
for op in ${OPS:-mrecon edt}; do
    for gpus in $GPU_SETS; do
        for variant in ${VARIANTS:-gpu both}; do
            for policy in ${POLICIES:-fcfs pats locality}; do
                # The GPUs alone have nothing to choose between: one policy is enough.
                if [ "$variant" = gpu ] && [ "$policy" != fcfs ]; then continue; fi
                label="$op ${size}^2 gpus=$gpus $variant $policy"
                set_args=(--set "runtime.policy=$policy" --set "runtime.gpus=$gpus")
                if [ "$op" = mrecon ]; then
                    run "$label" "$gpus" mrecon --size "$size" --variant "$variant" \
                        --tile "$tile" --repeat "$repeat" "${set_args[@]}"
                else
                    run "$label" "$gpus" edt --job --size "$size" --variant "$variant" \
                        --tile "$tile" --repeat "$repeat" --check sample "${set_args[@]}"
                fi
            done
        done
    done
done
echo "scheduler.sh: total $((SECONDS - t0)) s" | tee -a "$log"
