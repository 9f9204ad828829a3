#!/usr/bin/env bash
# Build tilewave with CUDA on the GPU machine, run the whole test suite, then the CUDA tests
# under compute-sanitizer (memcheck, racecheck, synccheck). Logs go to $OUT (or ./gpu-out).
# Usage (device tool, from the repo root):
#   source .devdeps/use-deps.sh && bash tests/gpu/validate.sh
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out"
build=build-gpu
{
    echo "== $(date -u +%FT%TZ) $(hostname)"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    nvcc --version | tail -1
    git rev-parse --short HEAD 2>/dev/null || true
} 2>&1 | tee "$out/env.txt"
cmake -S . -B $build -DCMAKE_CUDA_ARCHITECTURES=90 -DTW_WERROR=ON -DTW_ENABLE_CUDA=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$out/cmake.log" 2>&1 || { tail -30 "$out/cmake.log"; exit 1; }
cmake --build $build -j16 > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
(cd $build && ctest --output-on-failure -j4) > "$out/ctest.log" 2>&1
rc=$?
tail -25 "$out/ctest.log"
# The CUDA tests again, verbosely (Criterion prints skips), then under compute-sanitizer. The
# sanitizers run the small cases of the slow programs (the full random sweeps take minutes
# under racecheck); the filters name them.
declare -A filter=(
    [cuda_test_mrecon_cuda]='mrecon_cuda/small*'
    [cuda_test_mrecon_job]='mrecon_job/large_tiles*'
    [cuda_test_edt_cuda]='edt_cuda/small*'
    [cuda_test_edt_job]='edt_job_cuda/spacing*'
    [cuda_test_maxtree_cuda]='maxtree_cuda/small*'
    [cuda_test_attr_filter_cuda]='attr_filter_cuda/small*'
    [cuda_test_maxtree_merge_cuda]='maxtree_merge_cuda/small_u8*'
    [cuda_test_maxtree_job]='maxtree_job_cuda/in_memory*'
    [cuda_test_watershed_cuda]='watershed_cuda/small*'
    [cuda_test_tos_cuda]='tos_cuda/u32_small*'
)
declare -A tools=([cuda_test_mrecon_job]='memcheck' [cuda_test_edt_job]='memcheck'
    [cuda_test_maxtree_job]='memcheck')
: > "$out/sanitizer.log"
for t in $build/tests/cuda_test_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    echo "== $t --verbose" >> "$out/cuda-tests.log"
    "$t" --verbose --jobs 1 >> "$out/cuda-tests.log" 2>&1 || rc=1
    f=${filter[$name]:-}
    for tool in ${tools[$name]:-memcheck racecheck synccheck}; do
        echo "== compute-sanitizer --tool $tool $name ${f:+--filter $f}" | tee -a "$out/sanitizer.log"
        compute-sanitizer --tool $tool --target-processes all --error-exitcode 99 \
            "$t" --jobs 1 ${f:+--filter "$f"} >> "$out/sanitizer.log" 2>&1
        s=$?
        echo "   exit $s" | tee -a "$out/sanitizer.log"
        [ $s = 0 ] || rc=1
    done
done
# Criterion runs every test in a child process. How many processes did compute-sanitizer
# report on? (One summary per process it followed; 1 means the children were not followed.)
n=$(compute-sanitizer --tool memcheck --target-processes all $build/tests/cuda_test_gray_cuda \
    --jobs 1 2>&1 | grep -c "ERROR SUMMARY")
echo "== compute-sanitizer followed $n process(es) of cuda_test_gray_cuda" | tee -a "$out/sanitizer.log"
# Single-process drivers, which the sanitizers certainly see (random small cases, checked).
for drv in edt maxtree maxtree_merge label; do
    for tl in memcheck:150 racecheck:60 synccheck:60 initcheck:100; do
        IFS=: read -r tool ncase <<< "$tl"
        echo "== compute-sanitizer --tool $tool gpu_sanitize_$drv $ncase" | tee -a "$out/sanitizer.log"
        compute-sanitizer --tool $tool --error-exitcode 99 $build/tests/gpu_sanitize_$drv $ncase \
            >> "$out/sanitizer.log" 2>&1
        s=$?
        echo "   exit $s" | tee -a "$out/sanitizer.log"
        [ $s = 0 ] || rc=1
    done
done
grep -E "ERROR SUMMARY|Synthesis|Tested|sanitize_(edt|maxtree|maxtree_merge|label):" "$out/sanitizer.log" "$out/cuda-tests.log" | tail -40
# The CLI end to end on the GPU: the default sample through gray on GPU workers only, CPU
# workers only, and both with an odd tile size; times on stderr go to the log.
b=$build/tilewave
$b devices | tee "$out/devices.txt"
{ $b sample "$out/s.tif" &&
  $b gray "$out/s.tif" -o "$out/g-gpu.tif" --cpu-workers 0 &&
  $b gray "$out/s.tif" -o "$out/g-cpu.tif" --gpus none &&
  $b gray "$out/s.tif" -o "$out/g-mix.tif" --tile 1000x700 &&
  $b edt "$out/g-mix.tif" --threshold otsu --invert -o "$out/d-gpu.tif" --cpu-workers 0 --format sq32 &&
  $b edt "$out/g-mix.tif" --threshold otsu --invert -o "$out/d-cpu.tif" --gpus none --format sq32 \
      --tile 999x777 &&
  python3 -c "import tifffile,sys; a=tifffile.imread(sys.argv[1]); b=tifffile.imread(sys.argv[2]); print('edt CLI GPU == CPU:', (a==b).all()); sys.exit(0 if (a==b).all() else 1)" \
      "$out/d-gpu.tif" "$out/d-cpu.tif" &&
  $b area-close "$out/g-mix.tif" --area 500 --conn 8 -o "$out/a-gpu.tif" --cpu-workers 0 \
      --tile 777x555 --trace "$out/trace-area-close.json" &&
  $b area-close "$out/g-mix.tif" --area 500 --conn 8 -o "$out/a-cpu.tif" --gpus none &&
  python3 -c "import tifffile,sys; a=tifffile.imread(sys.argv[1]); b=tifffile.imread(sys.argv[2]); print('area-close CLI GPU == CPU:', (a==b).all()); sys.exit(0 if (a==b).all() else 1)" \
      "$out/a-gpu.tif" "$out/a-cpu.tif"; } 2>&1 | tee "$out/cli.txt" || rc=1
rm -f "$out"/*.tif
echo "validate: exit $rc"
exit $rc
