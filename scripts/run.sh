#!/usr/bin/env bash
# Set up, build, train the 3-minute recipe (configs/shakespeare-3min.ini) on the bundled
# corpus, and print a sample. Extra arguments go to `folio train` and override the
# recipe (e.g. --max-iters 100 for a quicker run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh folio_cli   # only what the main job needs; test.sh builds the rest
# A directory of its own each time: runs/shakespeare-3min, then -2, -3, ... A run made
# before (and perhaps resumed or extended since) is never replaced; `folio train
# --resume --out DIR` continues one.
out=runs/shakespeare-3min
for ((n = 2; ; n++)); do
  [ -e "$out" ] || break
  out=runs/shakespeare-3min-$n
done
echo "run.sh: training into $out"
build/folio train --config configs/shakespeare-3min.ini --out "$out" "$@"
echo
echo "=== a sample from $out/best.safetensors ==="
build/folio generate --checkpoint "$out/best.safetensors" --max-new-tokens 500
