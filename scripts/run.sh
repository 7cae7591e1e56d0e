#!/usr/bin/env bash
# Set up, build, train on the bundled corpus, and print a sample.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
echo "[run] the folio CLI is not built yet; the test suite is: bash scripts/test.sh"
