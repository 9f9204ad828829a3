#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tilewave: install the build into a temporary prefix and build an outside program against it.
# Checks the installed files, the SONAME, that only tw_* symbols are exported (and every TW_API
# function is), then builds tests/install/consumer both with `pkg-config --cflags --libs
# tilewave` and as a CMake project using find_package(tilewave) + tilewave::tilewave, and runs
# both against the installed library. Registered in tests/CMakeLists.txt as install/tree.
# Usage: install_test.sh SOURCE_DIR BUILD_DIR WORK_DIR CMAKE CC CXX GENERATOR PKG_CONFIG LIBDIR
#                        VERSION SONAME
# $TW_INSTALL_TEST_FLAGS: extra compile and link flags of the consumers (a sanitizer build's).
set -u
src=$1 build=$2 work=$3 cmake=$4 cc=$5 cxx=$6 generator=$7 pkgconfig=$8 libdir=$9
version=${10} soname=${11}
sanflags=${TW_INSTALL_TEST_FLAGS:-}
fail=0
bad() { echo "install: $*"; fail=1; }
die() { echo "install: $*"; exit 1; }

prefix=$work/prefix
rm -rf "$work"
mkdir -p "$work" || die "cannot create $work"

# 1. Install into an empty prefix.
"$cmake" --install "$build" --prefix "$prefix" > "$work/install.log" 2>&1 ||
    { cat "$work/install.log"; die "cmake --install failed"; }
lib=$prefix/$libdir/libtilewave.so.$version
for f in "$lib" "$prefix/$libdir/$soname" "$prefix/$libdir/libtilewave.so" \
         "$prefix/include/tilewave.h" "$prefix/include/tilewave/version.h" \
         "$prefix/bin/tilewave" "$prefix/share/tilewave/configs/default.ini" \
         "$prefix/$libdir/pkgconfig/tilewave.pc" \
         "$prefix/$libdir/cmake/tilewave/tilewaveConfig.cmake" \
         "$prefix/$libdir/cmake/tilewave/tilewaveConfigVersion.cmake" \
         "$prefix/$libdir/cmake/tilewave/tilewaveTargets.cmake"; do
    [ -e "$f" ] || bad "missing after install: ${f#"$prefix"/}"
done
# Public headers only: the installed ones are exactly include/ plus the generated version.h.
want=$( (cd "$src/include" && ls tilewave.h tilewave/*.h; echo tilewave/version.h) | sort -u)
got=$(cd "$prefix/include" && find . -type f | sed 's|^\./||' | sort)
[ "$want" = "$got" ] || bad "installed headers differ from the public ones:
$(diff <(echo "$want") <(echo "$got"))"
# Nothing internal is installed: no static archive, no object files.
internal=$(find "$prefix" -name '*.a' -o -name '*.o' -o -name 'tw_internal.h')
[ -z "$internal" ] || bad "internal files installed: $internal"
[ $fail = 0 ] || exit 1

# 2. SONAME: versioned, and the name the .so.N link has.
so=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$so" = "$soname" ] || bad "SONAME is '$so', expected '$soname'"
case $so in libtilewave.so.[0-9]*) ;; *) bad "SONAME '$so' is not versioned" ;; esac

# 3. Exported symbols: tw_* only (plus the linker's own markers); every TW_API function is there.
syms=$(nm -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//')
[ -n "$syms" ] || bad "nm -D found no symbols in $lib"
stray=$(echo "$syms" | grep -v '^tw_' | grep -vxE '_init|_fini|_edata|_end|__bss_start' || true)
[ -z "$stray" ] || bad "exported symbols without the tw_ prefix:
$stray"
declared=$(grep -h 'TW_API' "$src"/include/tilewave/*.h | grep -oE '\btw_[a-z0-9_]+\(' |
           tr -d '(' | sort -u)
for f in $declared; do
    echo "$syms" | grep -qx "$f" || bad "TW_API function $f is not exported"
done
[ $fail = 0 ] || exit 1

# 4. The installed CLI finds the installed library by itself (RUNPATH $ORIGIN/...).
out=$(env -u LD_LIBRARY_PATH "$prefix/bin/tilewave" --version 2>&1) ||
    bad "installed tilewave --version failed: $out"
case $out in "tilewave $version "*) ;; *) bad "installed CLI says '$out'" ;; esac
ldd "$prefix/bin/tilewave" | grep -q "libtilewave.*=> $prefix/" ||
    bad "installed CLI does not load the installed library: $(ldd "$prefix/bin/tilewave" |
        grep libtilewave)"

export LD_LIBRARY_PATH=$prefix/$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
consumer=$src/tests/install/consumer

# 5. An outside program built with pkg-config.
export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
pcver=$("$pkgconfig" --modversion tilewave 2>&1) || bad "pkg-config --modversion: $pcver"
[ "$pcver" = "$version" ] || bad "pkg-config says version '$pcver', expected $version"
flags=$("$pkgconfig" --cflags --libs tilewave 2>&1) || die "pkg-config --cflags --libs: $flags"
echo "pkg-config: $flags"
# shellcheck disable=SC2086 # the flags are words
"$cc" -std=c11 -Wall -Wextra -Werror -pedantic $sanflags "$consumer/consumer.c" $flags \
    -o "$work/consumer-pc" || die "building the consumer with pkg-config failed"
ldd "$work/consumer-pc" | grep -q "libtilewave.*=> $prefix/" ||
    bad "the pkg-config consumer does not load the installed library"
mkdir -p "$work/run-pc"
out=$("$work/consumer-pc" "$work/run-pc" "$version" 2>&1) || bad "pkg-config consumer: $out"
echo "$out" | grep -q "^consumer ok: tilewave $version" || bad "pkg-config consumer said: $out"
echo "$out"
# The same source as C++ links too: the headers give the functions C linkage.
if [ -n "$cxx" ]; then
    # shellcheck disable=SC2086
    "$cxx" -x c++ -std=c++17 -Wall -Wextra -Werror $sanflags "$consumer/consumer.c" -x none \
        $flags -o "$work/consumer-cxx" || bad "the consumer as C++ does not build or link"
    out=$("$work/consumer-cxx" "$work/run-pc" "$version" 2>&1) || bad "C++ consumer: $out"
fi

# 6. The same program as a CMake project: find_package(tilewave) and tilewave::tilewave.
"$cmake" -S "$consumer" -B "$work/cmake" -G "$generator" -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
    -DTW_WANT_VERSION="${version%.*}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_FLAGS="$sanflags" -DCMAKE_EXE_LINKER_FLAGS="$sanflags" > "$work/cmake.log" 2>&1 ||
    { cat "$work/cmake.log"; die "configuring the CMake consumer failed"; }
grep -q "found tilewave $version in $prefix/" "$work/cmake.log" ||
    bad "find_package(tilewave) did not find $version under $prefix:
$(grep 'found' "$work/cmake.log")"
"$cmake" --build "$work/cmake" > "$work/cmake-build.log" 2>&1 ||
    { cat "$work/cmake-build.log"; die "building the CMake consumer failed"; }
ldd "$work/cmake/consumer" | grep -q "libtilewave.*=> $prefix/" ||
    bad "the CMake consumer does not load the installed library"
mkdir -p "$work/run-cmake"
out=$("$work/cmake/consumer" "$work/run-cmake" "$version" 2>&1) || bad "CMake consumer: $out"
echo "$out" | grep -q "^consumer ok: tilewave $version" || bad "CMake consumer said: $out"
echo "$out"

# find_package with an incompatible version must fail (tilewaveConfigVersion.cmake works).
major=${version%%.*}
"$cmake" -S "$consumer" -B "$work/cmake-badver" -G "$generator" -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
    -DTW_WANT_VERSION=$((major + 1)).0 > "$work/cmake-badver.log" 2>&1 &&
    bad "find_package(tilewave $((major + 1)).0) succeeded against $version"
grep -q 'compatible with requested version' "$work/cmake-badver.log" ||
    bad "find_package(tilewave $((major + 1)).0) failed for another reason:
$(cat "$work/cmake-badver.log")"

[ $fail = 0 ] || exit 1
rm -rf "$work"
echo "install: all checks passed"
