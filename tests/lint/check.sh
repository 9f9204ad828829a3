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
    runtime/*.c io/*.c ops/*.c omp/*.c kern/*.c cuda/*.cu cuda/*.cuh 2>/dev/null |
    grep -v 'lint-allow' || true)
[ -z "$hits" ] || bad "banned call in library code:
$hits"

# 3. Device memory only from the pools; synchronisation only in the GPU worker (rules 20, 31).
hits=$(grep -nE '\bcuda(Malloc|Free|HostAlloc|FreeHost|MallocHost)\s*\(' \
    runtime/*.c io/*.c ops/*.c omp/*.c kern/*.c cuda/*.cu cuda/*.cuh 2>/dev/null |
    grep -v '^runtime/mem_' || true)
[ -z "$hits" ] || bad "CUDA allocation outside runtime/mem_*.c:
$hits"
hits=$(grep -nE '\bcudaDeviceSynchronize\s*\(' runtime/*.c io/*.c ops/*.c omp/*.c kern/*.c \
    cuda/*.cu cuda/*.cuh \
    2>/dev/null | grep -v '^runtime/worker_cuda.c' || true)
[ -z "$hits" ] || bad "cudaDeviceSynchronize outside runtime/worker_cuda.c:
$hits"

# 4. One-way dependencies: kern/ (the kernel contract) sees only public and system headers;
#    omp/ and cuda/ see kern/, their own folder and public headers, never each other; ops know
#    no device API; the CLI uses the public API only (rule 1). A quoted include must name a
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
hits=$(for f in kern/*.c kern/*.h; do incl_ok "$f" kern include; done)
[ -z "$hits" ] || bad "kern/ includes more than kern/, public and system headers:
$hits"
hits=$(for f in omp/*.c omp/*.h; do incl_ok "$f" omp kern include; done)
[ -z "$hits" ] || bad "omp/ includes a header outside omp/, kern/ and the public ones:
$hits"
hits=$(for f in cuda/*.cu cuda/*.cuh cuda/*.h; do
    [ -f "$f" ] && incl_ok "$f" cuda kern include; done)
[ -z "$hits" ] || bad "cuda/ includes a header outside cuda/, kern/ and the public ones:
$hits"
# The same on the objects, where a declaration written by hand would escape the includes: no
# symbol that omp/'s objects need is defined by cuda/'s, and the reverse; kern/'s objects need
# nothing of omp/, cuda/, ops/, io/ or runtime/ (only public tw_* functions and libc).
objdir=$(dirname "$lib")/CMakeFiles
objs() { [ -d "$objdir/$1.dir" ] && find "$objdir/$1.dir" -name '*.o'; }
defs() { objs "$1" | xargs -r nm --defined-only | awk 'NF == 3 && $2 ~ /[TDRB]/ {print $3}' |
    sort -u; }
undefs() { objs "$1" | xargs -r nm --undefined-only | awk '{print $NF}' | sort -u; }
if [ -d "$objdir/tw_omp.dir" ] && [ -d "$objdir/tw_kern.dir" ]; then
    hits=$(comm -12 <(undefs tw_omp) <(defs tw_cuda))
    [ -z "$hits" ] || bad "omp/ objects use symbols defined in cuda/: $hits"
    hits=$(comm -12 <(undefs tw_cuda) <(defs tw_omp))
    [ -z "$hits" ] || bad "cuda/ objects use symbols defined in omp/: $hits"
    hits=$(comm -12 <(undefs tw_kern) <(for t in tw_omp tw_cuda tw_ops tw_io tw_runtime; do
        defs $t; done | grep -v '^tw_' | sort -u))
    [ -z "$hits" ] || bad "kern/ objects use symbols of a layer above: $hits"
else
    bad "no object files under $objdir (tw_omp.dir, tw_kern.dir) for the symbol checks"
fi
hits=$(grep -nE '#include [<"]cuda' ops/*.c ops/*.h io/*.c 2>/dev/null |
    grep -v 'cuda_kernels.h' || true)
[ -z "$hits" ] || bad "ops/ or io/ uses the CUDA API directly:
$hits"
hits=$(grep -nE '#include "' cli/*.c cli/*.h | grep -vE '"(tilewave\.h|tilewave/[a-z_]+\.h|cli\.h)"' || true)
[ -z "$hits" ] || bad "the CLI includes a private header:
$hits"

# 5. runtime/ knows no operation: no symbol a runtime object needs is defined by an ops
#    object (proved on the object files the library is built from, next to it).
objs=$(dirname "$lib")/CMakeFiles
if [ -d "$objs/tw_runtime.dir" ] && [ -d "$objs/tw_ops.dir" ]; then
    need=$(find "$objs/tw_runtime.dir" -name '*.o' -exec nm -u {} + | awk 'NF == 2 {print $2}' |
        sort -u)
    have=$(find "$objs/tw_ops.dir" -name '*.o' -exec nm --defined-only {} + |
        awk 'NF == 3 && $2 ~ /[A-Z]/ {print $3}' | sort -u)
    hits=$(comm -12 <(echo "$need") <(echo "$have"))
    [ -z "$hits" ] || bad "runtime/ calls into ops/: $hits"
else
    bad "no object files of runtime/ and ops/ under $objs"
fi

# 6. Every public header and every kern/ header compiles alone, as C11 and as C++ (rule 42).
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
[ $fail = 0 ] && echo "lint: all checks passed"
exit $fail
