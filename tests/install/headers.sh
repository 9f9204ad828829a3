#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tilewave: every public header compiles alone, as C11 (-pedantic) and as C++11 and C++17.
# One translation unit per header, holding only its #include, compiled to an object file with
# warnings as errors: a header that needs another included first, uses a C-only construct, or
# lacks extern "C" fails. Registered in tests/CMakeLists.txt as install/headers.
# Usage: headers.sh SOURCE_DIR BUILD_INCLUDE_DIR WORK_DIR CC CXX
set -u
src=$1 binc=$2 work=$3 cc=$4 cxx=$5
fail=0
rm -rf "$work" && mkdir -p "$work" || exit 1

headers=$(cd "$src/include" && ls tilewave.h tilewave/*.h)
[ -f "$binc/tilewave/version.h" ] ||
    { echo "headers: no generated $binc/tilewave/version.h"; exit 1; }
headers="$headers tilewave/version.h"
n=0
for h in $headers; do
    tu=$work/$(echo "$h" | tr '/.' '__')
    # The typedef keeps a header of macros only (export.h, version.h) from being an empty
    # translation unit, which -pedantic rejects in C.
    printf '#include "%s"\ntypedef int tw_header_test_tu;\n' "$h" > "$tu.c"
    cp "$tu.c" "$tu.cpp"
    "$cc" -std=c11 -Wall -Wextra -Werror -pedantic -I"$src/include" -I"$binc" -c "$tu.c" \
        -o "$tu.c.o" || { echo "headers: $h does not compile alone as C11"; fail=1; }
    for std in c++11 c++17; do
        "$cxx" -x c++ -std=$std -Wall -Wextra -Werror -pedantic -I"$src/include" -I"$binc" \
            -c "$tu.cpp" -o "$tu.$std.o" ||
            { echo "headers: $h does not compile alone as C++ ($std)"; fail=1; }
    done
    n=$((n + 1))
done
[ $fail = 0 ] || exit 1
rm -rf "$work"
echo "headers: all $n public headers compile alone as C11, C++11 and C++17"
