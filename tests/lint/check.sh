#!/usr/bin/env bash
# House-style checks that CI runs as a test: exported symbols, banned calls in library code,
# CUDA allocation and synchronisation confined to their files, one-way includes, and every
# public header compiling alone as C11 and as C++.
# Usage: check.sh SOURCE_DIR LIBTILEWAVE_SO BUILD_INCLUDE_DIR
set -u
src=$1 lib=$2 binc=$3
cd "$src" || exit 1
fail=0
bad() { echo "lint: $*"; fail=1; }

# 1. Only tw_* symbols are exported (house style rule 6).
extra=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^tw_' | grep -v '^_' || true)
[ -z "$extra" ] || bad "exported symbols without the tw_ prefix: $extra"

# 2. Library code never prints, exits or parses numbers by hand (rule 49).
hits=$(grep -nE '\b(printf|fprintf|puts|exit|abort|sprintf|strcpy|atoi|atol|strtol)\s*\(' \
    base/*.c runtime/*.c io/*.c ops/*.c omp/*.c cuda/*.cu 2>/dev/null | grep -v 'lint-allow' || true)
[ -z "$hits" ] || bad "banned call in library code:
$hits"

# 3. Device memory only from the pools; synchronisation only in the GPU worker (rules 20, 31).
hits=$(grep -nE '\bcuda(Malloc|Free|HostAlloc|FreeHost|MallocHost)\s*\(' \
    base/*.c runtime/*.c io/*.c ops/*.c omp/*.c cuda/*.cu 2>/dev/null | grep -v '^runtime/mem_' || true)
[ -z "$hits" ] || bad "CUDA allocation outside runtime/mem_*.c:
$hits"
hits=$(grep -nE '\bcudaDeviceSynchronize\s*\(' runtime/*.c io/*.c ops/*.c omp/*.c cuda/*.cu \
    2>/dev/null | grep -v '^runtime/worker_cuda.c' || true)
[ -z "$hits" ] || bad "cudaDeviceSynchronize outside runtime/worker_cuda.c:
$hits"

# 4. One-way dependencies: kernels see only the tile view and public headers; ops know no
#    device API; the CLI uses the public API only (rule 1).
hits=$(grep -nE '#include "' omp/*.c omp/*.h cuda/*.cu cuda/*.h 2>/dev/null |
    grep -vE '"(tw_tile_view\.h|tilewave/[a-z_]+\.h|omp_kernels\.h|omp_stop\.h|cuda_kernels\.h)"' || true)
[ -z "$hits" ] || bad "omp/ or cuda/ includes a scheduler or I/O header:
$hits"
hits=$(grep -nE '#include [<"]cuda' ops/*.c ops/*.h io/*.c 2>/dev/null |
    grep -v 'cuda_kernels.h' || true)
[ -z "$hits" ] || bad "ops/ or io/ uses the CUDA API directly:
$hits"
# base/ is the bottom layer: its own header, public headers and system headers only. io/ sees
# base/, its own headers, the public headers and the tile type, never the runtime's or ops'
# (CMake gives tw_io no such folder; this names the offender when someone adds one).
hits=$(grep -nE '#include "' base/*.c base/*.h 2>/dev/null |
    grep -vE '"(tw_base\.h|tilewave\.h|tilewave/[a-z_]+\.h)"' || true)
[ -z "$hits" ] || bad "base/ includes a header of another folder:
$hits"
hits=$(grep -nE '#include "' io/*.c io/*.h 2>/dev/null |
    grep -vE '"(tw_base\.h|io_internal\.h|tw_io\.h|sample_internal\.h|tw_tile_view\.h|tilewave\.h|tilewave/[a-z_]+\.h)"' ||
    true)
[ -z "$hits" ] || bad "io/ includes a header other than base/, io/, the tile view and public ones:
$hits"
hits=$(grep -nE '#include "' cli/*.c cli/*.h | grep -vE '"(tilewave\.h|tilewave/[a-z_]+\.h|cli\.h)"' || true)
[ -z "$hits" ] || bad "the CLI includes a private header:
$hits"

# 5. Calls across folders, from the object files of the build the library came from (what an
#    include directory cannot stop: a declaration written by hand): base/ calls only itself,
#    io/ only itself and base/.
objs=$(dirname "$lib")/CMakeFiles
defined() { nm --defined-only "$@" 2>/dev/null | awk 'NF == 3 {print $3}' | sort -u; }
calls() { nm -u "$@" 2>/dev/null | awk '{print $NF}' | grep -E '^twi?_' | sort -u; }
if [ -d "$objs/tw_base.dir" ] && [ -d "$objs/tw_io.dir" ]; then
    base_o=$(find "$objs/tw_base.dir" -name '*.o') io_o=$(find "$objs/tw_io.dir" -name '*.o')
    # shellcheck disable=SC2086
    hits=$(comm -23 <(calls $base_o) <(defined $base_o))
    [ -z "$hits" ] || bad "base/ calls functions defined outside base/: $hits"
    # shellcheck disable=SC2086
    hits=$(comm -23 <(calls $io_o) <(defined $io_o $base_o))
    [ -z "$hits" ] || bad "io/ calls functions defined outside io/ and base/: $hits"
else
    bad "no object files of tw_base and tw_io beside $lib"
fi

# 6. Every public header compiles alone, as C11 and as C++ (rule 42).
for h in include/tilewave.h include/tilewave/*.h; do
    case $h in *.in) continue ;; esac
    echo "#include \"${h#include/}\"" > /tmp/tw-lint-$$.c
    cc -std=c11 -Wall -Wextra -Werror -fsyntax-only -Iinclude -I"$binc" /tmp/tw-lint-$$.c ||
        bad "$h does not compile alone as C11"
    c++ -x c++ -std=c++17 -Wall -Wextra -Werror -fsyntax-only -Iinclude -I"$binc" \
        /tmp/tw-lint-$$.c || bad "$h does not compile alone as C++"
done
rm -f /tmp/tw-lint-$$.c
[ $fail = 0 ] && echo "lint: all checks passed"
exit $fail
