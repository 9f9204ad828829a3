#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tilewave bench: slide I/O on this machine (issue 8): a 1 GPix sample slide through a no-op
# (`tilewave convert --pyramid`), through the area opening with --mem-budget 1G, and through
# `vips tiffsave --tile --pyramid --bigtiff` on the same slide in the same run; wall time,
# throughput and peak RSS of each (GNU time).
#
# From the repo root, after a Release build (not part of ctest):
#   cmake -S . -B build-rel -DCMAKE_BUILD_TYPE=Release && cmake --build build-rel -j2
#   bash bench/io.sh
# TW (default build-rel/tilewave) is the binary; SIZE (default 32768x32768) the slide; WORK
# (default a new folder under /tmp, removed at the end unless KEEP=1) holds the slides, about
# 4 GB at 1 GPix; OUT (default io-out) gets io.log (every command and GNU time's report) and
# io.md (the table of docs/benchmarks.md, "Slide I/O (issue 8)").
set -uo pipefail
tw=${TW:-build-rel/tilewave}
size=${SIZE:-32768x32768}
out=${OUT:-io-out}
work=${WORK:-$(mktemp -d /tmp/tw-io-XXXXXX)}
mkdir -p "$out" "$work"
log="$out/io.log"
md="$out/io.md"
: > "$log"
[ -x "$tw" ] || { echo "io.sh: no tilewave binary at $tw (set TW)"; exit 1; }
[ -x /usr/bin/time ] || { echo "io.sh: needs GNU time (/usr/bin/time)"; exit 1; }
mpix=$(awk -v s="$size" 'BEGIN { split(s, a, "x"); printf "%.1f", a[1] * a[2] / 1e6 }')

{
    echo "== $(date -u +%FT%TZ) $(hostname)"
    grep -m1 'model name' /proc/cpuinfo
    echo "cores: $(nproc); memory: $(free -g | awk '/Mem:/ { print $2 }') GiB"
    echo "tilewave: $("$tw" --version)"
    echo "vips: $(vips --version 2>/dev/null || echo 'not installed')"
    echo "disk: $(df -h "$work" | tail -1)"
} | tee -a "$log"

# run LABEL CMD...: run under GNU time; appends "LABEL|wall s|MPix/s|peak RSS MiB|MB written"
# to rows (what it wrote: out.tif, or in.tif for the sample).
rows=()
run() {
    local label=$1 t wall rss f mb rate
    shift
    echo "== $label: $*" >> "$log"
    t=$(mktemp)
    if ! /usr/bin/time -v -o "$t" "$@" >> "$log" 2>&1; then
        cat "$t" >> "$log"
        echo "$label: FAILED (see $log)"
        rows+=("$label|failed|||")
        rm -f "$t"
        return
    fi
    cat "$t" >> "$log"
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, p, ":"); s = 0;
                       for (i = 1; i <= n; i++) s = s * 60 + p[i]; printf "%.1f", s }' "$t")
    rss=$(awk -F': ' '/Maximum resident set size/ { printf "%.0f", $2 / 1024 }' "$t")
    rm -f "$t"
    f="$work/out.tif"
    [ -f "$f" ] || f="$work/in.tif"
    mb=$(stat -c %s "$f" | awk '{ printf "%.0f", $1 / 1e6 }')
    rate=$(awk -v m="$mpix" -v w="$wall" 'BEGIN { printf "%.1f", m / w }')
    rows+=("$label|$wall|$rate|$rss|$mb")
    echo "$label: $wall s, $rss MiB peak RSS, $mb MB written" | tee -a "$log"
    # drop the output at once: the next run should not compete for the page cache
    rm -f "$work"/out.tif
}

in="$work/in.tif"
run "tilewave sample $size" "$tw" sample "$in" --size "$size" --quiet
ls -l "$in" >> "$log"
run "tilewave convert --pyramid (512 tiles)" "$tw" convert "$in" -o "$work/out.tif" --pyramid \
    --mem-budget 1G --quiet
run "tilewave convert --pyramid (256 tiles)" "$tw" convert "$in" -o "$work/out.tif" --pyramid \
    --mem-budget 1G --set io.tiff_tile=256x256 --quiet
if command -v vips > /dev/null; then
    run "vips tiffsave --pyramid (256 tiles)" vips tiffsave "$in" "$work/out.tif" --tile \
        --pyramid --bigtiff --compression deflate --tile-width 256 --tile-height 256
    # vips' default predictor is horizontal differencing (smaller files, more work); tilewave
    # writes no predictor, like this run
    run "vips tiffsave --pyramid (256 tiles, no predictor)" vips tiffsave "$in" "$work/out.tif" \
        --tile --pyramid --bigtiff --compression deflate --tile-width 256 --tile-height 256 \
        --predictor none
fi
run "tilewave area-open --area 500" "$tw" area-open "$in" --area 500 -o "$work/out.tif" \
    --mem-budget 1G --quiet

{
    echo "| $size RGB ($mpix MPix) | wall s | MPix/s | peak RSS MiB | MB written |"
    echo "|---|---:|---:|---:|---:|"
    for r in "${rows[@]}"; do
        IFS='|' read -r a b c d e <<< "$r"
        echo "| $a | $b | $c | $d | $e |"
    done
} | tee "$md"
if [ "${KEEP:-0}" != 1 ]; then
    rm -rf "$work"
fi
