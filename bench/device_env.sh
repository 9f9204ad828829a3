# SPDX-License-Identifier: MIT
# tilewave bench: the machine record and the CUDA build that the GPU-machine scripts share.
#
# Sourced (not run) by bench/gpu.sh, bench/scheduler.sh and bench/slide_area_open.sh, from the
# repo root; defines functions only, so sourcing it runs nothing (twb_tw_bench sets t0 and bench).
# shellcheck shell=bash

# twb_machine: the lines every env.txt starts with (time, host, GPUs, nvcc, cores); the caller
# appends its own (memory, Python) and redirects the lot.
twb_machine()
{
    echo "== $(date -u +%FT%TZ) $(hostname)"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    nvcc --version | tail -1
    nproc
}

# twb_build [--reconfigure] NAME BUILD LOG TARGET...: configures BUILD for sm_90 with CUDA and
# without the tests, then builds TARGET... on every core. The configure step is skipped when
# BUILD already has a CMakeCache.txt (so that an existing CUDA build directory, tests built too,
# can be given), unless --reconfigure. The configure output replaces LOG and the build's is
# appended. Prints "NAME: built in N s" (to LOG too) and returns 0, or prints LOG's tail and
# "NAME: build failed" and returns 1; the caller exits on failure.
twb_build()
{
    local reconfigure=0 name build log t
    if [ "$1" = --reconfigure ]; then
        reconfigure=1
        shift
    fi
    name=$1 build=$2 log=$3
    shift 3
    t=$SECONDS
    if { { [ "$reconfigure" = 1 ] || [ ! -f "$build/CMakeCache.txt" ]; } &&
            ! cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
                -DCMAKE_CUDA_ARCHITECTURES=90 -DTW_ENABLE_CUDA=ON -DTW_ENABLE_TESTING=OFF \
                > "$log" 2>&1; } ||
        ! cmake --build "$build" -j"$(nproc)" --target "$@" >> "$log" 2>&1; then
        tail -40 "$log"
        echo "$name: build failed"
        return 1
    fi
    echo "$name: built in $((SECONDS - t)) s" | tee -a "$log"
}

# twb_tw_bench NAME OUT BUILD LOG: how the tw_bench scripts start: OUT/env.txt (the machine and
# its memory), then tw_bench built in BUILD (twb_build); sets t0 (the start, for the total) and
# bench (the binary), or exits 1 when the build fails.
# shellcheck disable=SC2034 # t0 and bench are the sourcing script's
twb_tw_bench()
{
    local name=$1 out=$2 build=$3 log=$4
    {
        twb_machine
        free -g | head -2
    } > "$out/env.txt" 2>&1
    t0=$SECONDS
    twb_build "$name" "$build" "$log" tw_bench || exit 1
    bench="$build/tw_bench"
}
