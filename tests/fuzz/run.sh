#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tilewave: build (if needed) and run the libFuzzer targets of tests/fuzz.
#   tests/fuzz/run.sh TARGET|all SECONDS [JOBS]
# TARGET: tiff, config, cli, region, service (or fuzz_tiff ...), or all (each for SECONDS in
# turn). JOBS: parallel fuzzing processes (libFuzzer -jobs/-workers); 0 or absent: one, in
# process. TW_FUZZ_RUNS=N also stops a run after N executions (libFuzzer -runs).
# Builds build-fuzz (preset "fuzz"; TW_FUZZ_BUILD=DIR for another folder). The working corpus
# grows in tests/fuzz/findings/TARGET/corpus (seeds read from tests/fuzz/corpus/TARGET), crashes
# land in tests/fuzz/findings/TARGET/ (crash-*, leak-*, oom-*, timeout-*), the log beside them.
# Prints executions and exec/s; exits 1 when a target found something.
set -euo pipefail

if [ $# -lt 2 ]; then
    echo "usage: $0 TARGET|all SECONDS [JOBS]" >&2
    exit 2
fi
target=$1
seconds=$2
jobs=${3:-0}
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${TW_FUZZ_BUILD:-$src/build-fuzz}
case "$build" in /*) ;; *) build=$PWD/$build ;; esac

if [ "$target" = all ]; then
    rc=0
    for t in tiff config cli region service; do
        "$0" "$t" "$seconds" "$jobs" || rc=1
    done
    exit $rc
fi
name=fuzz_${target#fuzz_}

if [ ! -f "$build/CMakeCache.txt" ]; then
    if [ "$build" = "$src/build-fuzz" ]; then
        (cd "$src" && cmake --preset fuzz >/dev/null)
    else
        cmake -S "$src" -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
              -DTW_FUZZ=ON -DTW_ENABLE_CUDA=OFF -DTW_ENABLE_TESTING=OFF >/dev/null
    fi
fi
cmake --build "$build" --target "$name" -j2 2>&1 | grep -E "error:|Error [0-9]" || true
bin=$build/tests/fuzz/$name
[ -x "$bin" ] || { echo "$0: $bin was not built" >&2; exit 1; }

out=$src/tests/fuzz/findings/$name
mkdir -p "$out/corpus"
seeds=$src/tests/fuzz/corpus/$name
log=$out/run-$(date -u +%Y%m%dT%H%M%SZ).log
# OpenSlide's own TIFF parser (tifflike) first allocates what a tag claims (g_try_malloc,
# e.g. 21 GB for a corrupt ImageDescription count) and copes with NULL. Under ASan such an
# allocation succeeds and poisons gigabytes of shadow memory (48 s, 2.6 GB RSS for one
# input), which a normal build never does: allocations above 256 MiB return NULL here instead
# (max_allocation_size_mb, allocator_may_return_null), so the library's own NULL handling is
# exercised too. With a 2 GiB cap, claims of hundreds of MB each still page in their shadow
# (fuzz_tiff: 1,600 page faults an input, 350 exec/s); with 256 MiB, 3,600 exec/s on the
# same machine and corpus. No input of a few KB needs more. UB aborts
# (-fno-sanitize-recover); leaks are findings.
export ASAN_OPTIONS=${ASAN_OPTIONS:-allocator_may_return_null=1:max_allocation_size_mb=256:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
args=(-max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1
      -artifact_prefix="$out/" "$out/corpus" "$seeds")
[ -n "${TW_FUZZ_RUNS:-}" ] && args=(-runs="$TW_FUZZ_RUNS" "${args[@]}")
start=$(date +%s)
set +e
if [ "$jobs" -gt 0 ]; then
    rm -f "$out"/fuzz-*.log
    # libFuzzer prints each job's fuzz-N.log into its own output when the job ends
    (cd "$out" && "$bin" -jobs="$jobs" -workers="$jobs" "${args[@]}") >"$log" 2>&1
    rc=$?
    rm -f "$out"/fuzz-*.log
else
    (cd "$out" && "$bin" "${args[@]}") >"$log" 2>&1
    rc=$?
fi
set -e
elapsed=$(( $(date +%s) - start ))
execs=$(awk -F': *' '/stat::number_of_executed_units/ {s += $NF} END {print s + 0}' "$log")
rate=$(( elapsed > 0 ? execs / elapsed : execs ))
found=$(find "$out" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'oom-*' \
        -o -name 'timeout-*' -o -name 'slow-unit-*' \) | wc -l)
echo "$name: $execs executions in $elapsed s ($rate exec/s), corpus $(ls "$out/corpus" | wc -l)" \
     "files, $found finding(s) in $out, exit $rc, log $log"
if [ "$rc" -ne 0 ]; then
    grep -E "ERROR|runtime error|fuzz invariant|Test unit written" "$log" | head -5
    exit 1
fi
