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

# 1. Only tw_* symbols are exported.
extra=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^tw_' | grep -v '^_' || true)
[ -z "$extra" ] || bad "exported symbols without the tw_ prefix: $extra"

# 2. Library code never prints, exits or parses numbers by hand.
hits=$(grep -nE '\b(printf|fprintf|puts|exit|abort|sprintf|strcpy|atoi|atol|strtol)\s*\(' \
    base/*.c runtime/*.c io/*.c ops/*.c omp/*.c kern/*.c cuda/*.cu cuda/*.cuh 2>/dev/null |
    grep -v 'lint-allow' || true)
[ -z "$hits" ] || bad "banned call in library code:
$hits"

# 3. Device memory only from the pools; synchronisation only in the GPU worker.
hits=$(grep -nE '\bcuda(Malloc|Free|HostAlloc|FreeHost|MallocHost)\s*\(' \
    base/*.c runtime/*.c io/*.c ops/*.c omp/*.c kern/*.c cuda/*.cu cuda/*.cuh 2>/dev/null |
    grep -v '^runtime/mem_' || true)
[ -z "$hits" ] || bad "CUDA allocation outside runtime/mem_*.c:
$hits"
hits=$(grep -nE '\bcudaDeviceSynchronize\s*\(' base/*.c runtime/*.c io/*.c ops/*.c omp/*.c kern/*.c \
    cuda/*.cu cuda/*.cuh \
    2>/dev/null | grep -v '^runtime/worker_cuda.c' || true)
[ -z "$hits" ] || bad "cudaDeviceSynchronize outside runtime/worker_cuda.c:
$hits"

# 4. One-way dependencies: kern/ (the kernel contract) sees only public and system headers;
#    omp/ and cuda/ see kern/, their own folder and public headers, never each other; ops know
#    no device API; the CLI uses the public API only. A quoted include must name a
#    file of an allowed folder (a name that also exists elsewhere is read as the allowed one,
#    the way the compiler's include path, which CMake limits the same way, resolves it).
incl_ok() { # FILE ALLOWED_DIRS...: the quoted includes of FILE that none of the dirs holds
    local f=$1 inc d ok
    shift
    grep -oE '#include "[^"]+"' "$f" | sed 's/#include "//; s/"$//' | while read -r inc; do
        ok=0
        for d in "$@"; do [ -f "$d/$inc" ] && ok=1; done
        [ $ok = 1 ] || echo "$f: $inc"
    done
}
hits=$(for f in base/*.c base/*.h; do incl_ok "$f" base include "$binc"; done)
[ -z "$hits" ] || bad "base/ includes more than base/, public and system headers:
$hits"
hits=$(for f in kern/*.c kern/*.h; do incl_ok "$f" kern include "$binc"; done)
[ -z "$hits" ] || bad "kern/ includes more than kern/, public and system headers:
$hits"
hits=$(for f in io/*.c io/*.h; do incl_ok "$f" io base kern include "$binc"; done)
[ -z "$hits" ] || bad "io/ includes a header outside io/, base/, kern/ and the public ones:
$hits"
hits=$(for f in omp/*.c omp/*.h; do incl_ok "$f" omp kern include "$binc"; done)
[ -z "$hits" ] || bad "omp/ includes a header outside omp/, kern/ and the public ones:
$hits"
hits=$(for f in cuda/*.cu cuda/*.cuh cuda/*.h; do
    [ -f "$f" ] && incl_ok "$f" cuda kern include "$binc"; done)
[ -z "$hits" ] || bad "cuda/ includes a header outside cuda/, kern/ and the public ones:
$hits"
# (Calls across folders, which no include path can stop, are checked on the object files by
# tests/lint/layers.py.)
hits=$(grep -nE '#include [<"]cuda' ops/*.c ops/*.h io/*.c 2>/dev/null |
    grep -v 'cuda_kernels.h' || true)
[ -z "$hits" ] || bad "ops/ or io/ uses the CUDA API directly:
$hits"
hits=$(grep -nE '#include "' cli/*.c cli/*.h | grep -vE '"(tilewave\.h|tilewave/[a-z_]+\.h|cli\.h)"' || true)
[ -z "$hits" ] || bad "the CLI includes a private header:
$hits"

# 5. Every public header and every kern/ header compiles alone, as C11 and as C++.
for h in include/tilewave.h include/tilewave/*.h; do
    case $h in *.in) continue ;; esac
    echo "#include \"${h#include/}\"" > /tmp/tw-lint-$$.c
    cc -std=c11 -Wall -Wextra -Werror -fsyntax-only -Iinclude -I"$binc" /tmp/tw-lint-$$.c ||
        bad "$h does not compile alone as C11"
    c++ -x c++ -std=c++17 -Wall -Wextra -Werror -fsyntax-only -Iinclude -I"$binc" \
        /tmp/tw-lint-$$.c || bad "$h does not compile alone as C++"
done
# The kernel contract too: C kernels, CUDA kernels and ops include each kern/ header alone.
for h in kern/*.h; do
    echo "#include \"${h#kern/}\"" > /tmp/tw-lint-$$.c
    cc -std=c11 -Wall -Wextra -Werror -fsyntax-only -Ikern -Iinclude -I"$binc" /tmp/tw-lint-$$.c ||
        bad "$h does not compile alone as C11"
    c++ -x c++ -std=c++17 -Wall -Wextra -Werror -fsyntax-only -Ikern -Iinclude -I"$binc" \
        /tmp/tw-lint-$$.c || bad "$h does not compile alone as C++"
done
rm -f /tmp/tw-lint-$$.c
# 6. ops/ orchestrates only: a task kind's CPU and CUDA variants are separate functions (no
#    device branch inside one), no ops/ file dispatches on sample types (a pixel loop: omp/),
#    and an ops/ file over 1000 lines says at its top why it stays one file.
hits=$(awk '/\.cpu = [a-z_0-9]+/ { match($0, /\.cpu = [a-z_0-9]+/); cpu = substr($0, RSTART + 7, RLENGTH - 7) }
    /TWI_CUDA_VARIANT\([a-z_0-9]+/ { match($0, /TWI_CUDA_VARIANT\([a-z_0-9]+/)
        if (substr($0, RSTART + 17, RLENGTH - 17) == cpu) print FILENAME ":" FNR ": " cpu }' ops/*.c)
[ -z "$hits" ] || bad "a task kind passes one function as its CPU and CUDA variants:
$hits"
hits=$(grep -nE 'typedef (u?int[0-9]+_t|float|double) T;' ops/*.c || true)
[ -z "$hits" ] || bad "ops/ dispatches on sample types (pixel loops belong in omp/):
$hits"
for f in base/*.c kern/*.c io/*.c omp/*.c cuda/*.cu runtime/*.c ops/*.c; do
    [ -f "$f" ] || continue
    [ "$(wc -l < "$f")" -le 1000 ] || head -n 15 "$f" | grep -q 'Why one file' ||
        bad "$f has over 1000 lines and no 'Why one file' reason at its top"
done

[ $fail = 0 ] && echo "lint: all checks passed"
exit $fail
