#!/usr/bin/env bash
# Installs a built nee into a scratch prefix (`cmake --install`) and checks
# what a user of the installed package gets:
#   - the layout: headers, libnee.so.X.Y.Z with SONAME libnee.so.X and its
#     links, the CMake package, the pkg-config file, the CLI;
#   - the shared library exports exactly the C API: every function nee.h
#     declares and nothing else (no C++ symbol of nee or of libstdc++);
#   - a consumer builds against it both ways and runs: a small CMake project
#     (find_package(nee) -> nee::nee; tests/install/consumer) and cc/c++ with
#     `pkg-config --cflags --libs nee`; each program must load libnee from the
#     prefix, not from the build tree.
# Usage: check_install.sh BUILD_DIR   (run by ctest as `install_consumer`)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src="$(cd "$here/../.." && pwd)"
build="$(cd "${1:?usage: check_install.sh BUILD_DIR}" && pwd)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >/dev/null

# ---- layout
version=$(sed -n 's/^project(nee VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
major=${version%%.*}
for f in include/nee/nee.h include/nee/nee.hpp "lib/libnee.so.$version" lib/cmake/nee/neeConfig.cmake \
         lib/cmake/nee/neeConfigVersion.cmake lib/cmake/nee/neeTargets.cmake lib/pkgconfig/nee.pc bin/nee; do
  [ -f "$prefix/$f" ] || fail "$f not installed"
done
[ "$(readlink "$prefix/lib/libnee.so.$major")" = "libnee.so.$version" ] || fail "lib/libnee.so.$major is not a link to libnee.so.$version"
[ "$(readlink "$prefix/lib/libnee.so")" = "libnee.so.$major" ] || fail "lib/libnee.so is not a link to libnee.so.$major"
soname=$(objdump -p "$prefix/lib/libnee.so.$version" | awk '$1 == "SONAME" {print $2}')
[ "$soname" = "libnee.so.$major" ] || fail "SONAME is '$soname', expected libnee.so.$major"

# ---- exports: exactly the functions nee.h declares
nm -D --defined-only "$prefix/lib/libnee.so.$version" | awk '{print $3}' | sort -u >"$work/exported"
grep -o 'NEE_API[^(]*(' "$src/include/nee/nee.h" | grep -o 'nee_[a-z0-9_]*($' | tr -d '(' | sort -u >"$work/declared"
if ! diff -u "$work/declared" "$work/exported" >"$work/exports.diff"; then
  cat "$work/exports.diff" >&2
  fail "libnee.so's dynamic symbols differ from the functions declared in nee.h (- declared only, + exported only)"
fi
echo "install: layout ok, SONAME $soname, $(wc -l <"$work/exported") symbols exported, all and only nee.h's"

model="$src/examples/models/digits_logreg.onnx"
x="$src/examples/models/digits_test_x.npy"
uses_prefix() {  # the program resolves libnee.so.X from the install prefix
  local libs
  libs=$(ldd "$1")
  grep -q "libnee.so.$major => $prefix/lib/" <<<"$libs" || { echo "$libs" >&2; fail "$1 does not load libnee from $prefix/lib"; }
}

# ---- way 1: find_package(nee) in a CMake project
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$here/consumer" -B "$work/cmake-consumer" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
  -DNEE_EXAMPLE_C="$src/examples/classify.c" "${launcher[@]}" >/dev/null
cmake --build "$work/cmake-consumer" -j2 >/dev/null
for p in classify consumer_cpp; do uses_prefix "$work/cmake-consumer/$p"; done
"$work/cmake-consumer/classify" "$model" >"$work/out1"
"$work/cmake-consumer/consumer_cpp" "$model" "$x" >"$work/out2"
grep -q "^label = " "$work/out2" || { cat "$work/out2" >&2; fail "consumer_cpp printed no output value"; }
echo "find_package(nee): $(tail -1 "$work/out1")"

# ---- way 2: pkg-config and the compiler alone
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
[ "$(pkg-config --modversion nee)" = "$version" ] || fail "pkg-config --modversion nee is not $version"
libdir=$(pkg-config --variable=libdir nee)
# shellcheck disable=SC2046  # pkg-config's flags are meant to be split
cc -O2 -o "$work/classify_pc" "$src/examples/classify.c" $(pkg-config --cflags --libs nee) -Wl,-rpath,"$libdir"
# shellcheck disable=SC2046
c++ -std=c++17 -O2 -o "$work/consumer_pc" "$here/consumer/consumer.cc" $(pkg-config --cflags --libs nee) -Wl,-rpath,"$libdir"
for p in classify_pc consumer_pc; do uses_prefix "$work/$p"; done
"$work/classify_pc" "$model" >"$work/out3"
"$work/consumer_pc" "$model" "$x" >"$work/out4"
cmp -s "$work/out1" "$work/out3" && cmp -s "$work/out2" "$work/out4" || fail "the pkg-config builds print other results than the CMake ones"
echo "pkg-config nee: $(tail -1 "$work/out3")"

# ---- the installed CLI
"$prefix/bin/nee" --help >/dev/null 2>&1 || [ $? -eq 2 ] || fail "installed bin/nee --help failed"
"$prefix/bin/nee" run "$model" --input "$(awk '/^input /{sub(":", "", $2); print $2; exit}' "$work/out2")=$x" >/dev/null \
  || fail "installed bin/nee run failed"
echo "install check passed"
