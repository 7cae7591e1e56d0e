#!/usr/bin/env bash
# Installs the folio built in BUILD_DIR (default build/) into a temporary prefix, builds
# examples/attention against it as a separate CMake project (find_package(folio)), runs
# it, and checks its output. Run by the suite (ctest: Install.ExampleAgainstPrefix).
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(realpath "${1:-build}")
work=$(mktemp -d "${TMPDIR:-/tmp}/folio-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
# No compiler flags or paths from folio's own build: only what the package exports.
cmake -S examples/attention -B "$work/example" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/example" -j"$(nproc 2>/dev/null || echo 2)" >/dev/null
"$work/example/attention" | tee "$work/out.txt"
# The last query sees every key: the seed notebook's SelfAttention output for "step".
grep -qE '^ +step +0\.2990 +0\.8040$' "$work/out.txt" || { echo "test-install: wrong output for 'step'" >&2; exit 1; }
"$work/prefix/bin/folio" --version
# docs/library.md's lines as they stand, in a project that says nothing else (no C++
# standard of its own, as examples/attention sets): what the package exports suffices.
mkdir "$work/doc"
{
  echo 'cmake_minimum_required(VERSION 3.20)'
  echo 'project(doc_example LANGUAGES CXX)'
  grep -E '^find_package\(folio' docs/library.md
  echo 'add_executable(my_program main.cpp)'
  grep -E '^target_link_libraries\(my_program' docs/library.md
} >"$work/doc/CMakeLists.txt"
[ "$(grep -c folio "$work/doc/CMakeLists.txt")" = 2 ] ||
  { echo "test-install: docs/library.md's find_package and target_link_libraries lines are not found" >&2; exit 1; }
cat >"$work/doc/main.cpp" <<'CPP'
#include <folio/autograd/ops.h>
#include <folio/nn/attention.h>
#include <folio/version.h>
#include <cstdio>
int main() { std::printf("folio %s as a library\n", FOLIO_VERSION); }
CPP
cmake -S "$work/doc" -B "$work/doc/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/doc/build" >"$work/doc/build.log" 2>&1 ||
  { tail -n 20 "$work/doc/build.log" >&2; echo "test-install: docs/library.md's lines do not build a program" >&2; exit 1; }
"$work/doc/build/my_program" | grep -qF "folio $("$work/prefix/bin/folio" --version | cut -d' ' -f2) as a library" ||
  { echo "test-install: the program of docs/library.md's lines does not run" >&2; exit 1; }
# The bundled corpus is installed, and found beside bin/ (the default --data) even in a
# moved prefix; without it, folio train asks for --data instead of failing to open a
# path of the build machine.
mv "$work/prefix" "$work/moved"
corpus="$work/moved/share/folio/tinyshakespeare.txt"
help=$("$work/moved/bin/folio" train --help)  # not piped into grep -q, which may close the pipe early
grep -qF -- "--data arg (=$corpus)" <<<"$help" ||
  { echo "test-install: the installed folio does not default to $corpus" >&2; exit 1; }
"$work/moved/bin/folio" train --out "$work/run" --n-layer 1 --n-head 1 --n-embd 8 --block-size 8 --batch-size 2 \
  --max-iters 1 --warmup-iters 0 --eval-iters 1 --quiet
# import folio, where the prefix keeps Python packages: for the default prefix
# /usr/local, the directory Debian's python3 reads (sysconfig's platlib). Only when the
# build made the module (not under the sanitizers).
if [ -f "$build/python/folio/__init__.py" ]; then
  python=/usr/bin/python3
  site=$("$python" -c 'import sysconfig; print(sysconfig.get_path("platlib"))')
  site=${site#/usr/local/}
  [ -f "$work/moved/$site/folio/__init__.py" ] ||
    { echo "test-install: the Python package is not in PREFIX/$site/folio" >&2; exit 1; }
  PYTHONPATH="$work/moved/$site" "$python" -c 'import folio, sys; m = folio.load(sys.argv[1]); assert folio.__file__.startswith(sys.argv[2]); print("import folio:", m.generate("a", max_new_tokens=3, seed=1) is not None)' "$work/run" "$work/moved/$site" ||
    { echo "test-install: the installed Python package does not import" >&2; exit 1; }
fi
rm "$corpus"
code=0; "$work/moved/bin/folio" train --out "$work/run2" 2>"$work/err" || code=$?
[[ $code == 2 ]] && grep -q -- "give --data FILE" "$work/err" ||
  { echo "test-install: without its corpus, folio train exited $code: $(cat "$work/err")" >&2; exit 1; }
echo "test-install: the installed folio builds and runs examples/attention, and trains on its installed corpus"
