#!/usr/bin/env bash
# Configures and builds folio into build/ (Release).
#   bash scripts/build.sh                  # everything: library, folio, tests, benchmarks
#   bash scripts/build.sh folio_cli        # only the named targets (scripts/run.sh)
#   bash scripts/build.sh -DFOLIO_NATIVE=OFF
# Arguments that start with '-' go to cmake's configure step, the others name targets.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
options=(); targets=()
for a in "$@"; do
  if [[ $a == -* ]]; then options+=("$a"); else targets+=(--target "$a"); fi
done
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${options[@]}" >/dev/null
cmake --build build -j"$jobs" "${targets[@]}"
