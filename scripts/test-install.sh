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
echo "test-install: the installed folio builds and runs examples/attention"
