#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tilewave bench: what running in bands over MPI ranks costs on one machine (issue 12,
# docs/mpi.md): reconstruction, EDT and area opening of the sample slide in one process (all
# cores), under mpirun with 1 rank (the same, plus mpirun's start), and with 2 and 4 ranks
# sharing those cores (one CPU worker a rank: 4 ranks oversubscribe 2 cores); median wall
# time and CPU time (user + system of every rank) of R runs, the largest peak RSS of a rank,
# and what the runs report: exchange rounds, border bytes, result bytes sent to rank 0. Every
# MPI output is checked against the one-process output, pixel for pixel (vips).
#
# From the repo root, after a build with MPI (not part of ctest):
#   cmake -S . -B build-mpi -DTW_ENABLE_MPI=ON -DTW_ENABLE_CUDA=OFF && cmake --build build-mpi -j2
#   bash bench/mpi.sh
# TW (default build-mpi/tilewave); SIZES (default "4096x4096 8192x8192"); R (default 3); WORKERS
# (default: nproc) the workers of the one-process run; WORK (default a new folder under /tmp,
# removed unless KEEP=1); OUT (default mpi-out) gets mpi.log (every command and its report) and
# mpi.md (the table of docs/mpi.md, "Measured overhead").
set -uo pipefail
tw=${TW:-build-mpi/tilewave}
sizes=${SIZES:-4096x4096 8192x8192}
reps=${R:-3}
workers=${WORKERS:-$(nproc)}
out=${OUT:-mpi-out}
work=${WORK:-$(mktemp -d /tmp/tw-mpi-XXXXXX)}
mkdir -p "$out" "$work"
log="$out/mpi.log"
md="$out/mpi.md"
: > "$log"
[ -x "$tw" ] || { echo "mpi.sh: no tilewave binary at $tw (set TW)"; exit 1; }
[ -x /usr/bin/time ] || { echo "mpi.sh: needs GNU time (/usr/bin/time)"; exit 1; }
command -v mpirun > /dev/null || { echo "mpi.sh: needs mpirun (Debian: openmpi-bin)"; exit 1; }
tw=$(realpath "$tw")
# Open MPI as root, in a container, on fewer cores than ranks (tests/mpi do the same).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none

{
    echo "== $(date -u +%FT%TZ) $(hostname)"
    grep -m1 'model name' /proc/cpuinfo
    echo "cores: $(nproc); memory: $(free -g | awk '/Mem:/ { print $2 }') GiB"
    echo "tilewave: $("$tw" --version)"
    echo "mpirun: $(mpirun --version 2>/dev/null | head -1)"
} | tee -a "$log"

# median of the arguments
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# same A B: every page of B has A's pixels (vips), else prints what differs
same() {
    local n p
    command -v vips > /dev/null || return 0
    n=$(vipsheader -f n-pages "$1" 2> /dev/null || echo 1)
    for ((p = 0; p < n; p++)); do
        vips relational "$1[page=$p]" "$2[page=$p]" "$work/eq.v" equal 2>> "$log" &&
            [ "$(vips min "$work/eq.v")" = "255.000000" ] || echo "page $p differs"
    done
}

rows=()
# bench LABEL NP OP ARGS...: NP 0 = one process with all workers, else mpirun -np NP with
# one worker a rank. Appends a row; the output is $work/out-NP.tif.
bench() {
    local label=$1 np=$2 op=$3 walls=() cpus=() rss=0 line="" t0 t1 r f m diff re
    shift 3
    for ((r = 0; r < reps; r++)); do
        rm -f "$work"/rss.* "$work/out-$np.tif"
        t0=$(date +%s.%N)
        if [ "$np" = 0 ]; then
            /usr/bin/time -f "%M %U %S" -o "$work/rss.0" "$tw" "$op" "$@" \
                -o "$work/out-$np.tif" --cpu-workers "$workers" >> "$log" 2>&1
        else
            # each rank under GNU time: its peak RSS and CPU time in rss.RANK; one rank gets
            # every core, several one worker each
            mpirun -np "$np" --bind-to none \
                sh -c '/usr/bin/time -f "%M %U %S" -o "$0/rss.$OMPI_COMM_WORLD_RANK" "$@"' \
                "$work" "$tw" "$op" "$@" -o "$work/out-$np.tif" \
                --cpu-workers "$([ "$np" = 1 ] && echo "$workers" || echo 1)" > "$work/run.log" 2>&1
        fi || { echo "$label: FAILED (see $log)"; cat "$work/run.log" >> "$log" 2>/dev/null;
                rows+=("$label|failed"); return; }
        t1=$(date +%s.%N)
        [ "$np" = 0 ] || { cat "$work/run.log" >> "$log"; line=$(grep 'mpi: ' "$work/run.log"); }
        walls+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')")
        cpus+=("$(tail -q -n1 "$work"/rss.* | awk '{ c += $2 + $3 } END { printf "%.2f", c }')")
        for f in "$work"/rss.*; do
            m=$(tail -1 "$f" | awk '{ print $1 }')
            [ "$m" -gt "$rss" ] && rss=$m
        done
    done
    diff=""
    [ "$np" = 0 ] || diff=$(same "$work/out-0.tif" "$work/out-$np.tif")
    [ -z "$diff" ] || echo "$label: OUTPUT DIFFERS: $diff" | tee -a "$log"
    # the mpi line of rank 0 as table cells
    re='.*bands of ([0-9.]+) rows, ([0-9]+) exchange rounds?, (.*) exchanged, '
    re+='(.*) of results sent to rank 0, waits up to (.*) s$'
    [ -z "$line" ] || line=$(echo "$line" | sed -E "s/$re/\\1|\\2|\\3|\\4|\\5/")
    rows+=("$label|$(median "${walls[@]}")|$(median "${cpus[@]}")|$((rss / 1024))|${line:-||||}$(
        [ -n "$diff" ] && echo " DIFFERS")")
}

for size in $sizes; do
    "$tw" sample "$work/s.tif" --size "$size" --quiet
    "$tw" gray "$work/s.tif" -o "$work/g.tif" --quiet
    # the marker of an h-dome: the image lowered by 40
    if command -v vips > /dev/null; then
        vips linear "$work/g.tif" "$work/m.tif" 1 " -40" --uchar
    else
        "$tw" hmax "$work/g.tif" --h 40 --dome -o "$work/m.tif" --quiet
    fi
    for spec in "reconstruct|--marker $work/m.tif --mask $work/g.tif" \
                "edt|$work/s.tif --threshold otsu --invert" \
                "area-open|$work/g.tif --area 500"; do
        op=${spec%%|*}
        args=${spec#*|}
        for np in 0 1 2 4; do
            # shellcheck disable=SC2086
            bench "$op $size, $([ "$np" = 0 ] && echo "1 process, $workers workers" ||
                echo "mpirun -np $np")" "$np" "$op" $args
        done
    done
done

{
    echo -n "| run | wall s (median of $reps) | CPU s, all ranks | max RSS of a rank MiB "
    echo "| band rows | rounds | border bytes | results to rank 0 | longest wait s |"
    echo "|---|---|---|---|---|---|---|---|---|"
    for r in "${rows[@]}"; do echo "| $r |"; done
} | tee "$md"
[ "${KEEP:-0}" = 1 ] || rm -rf "$work"
