#!/usr/bin/env bash
# folio serve's page in headless Chromium (scripts/serve-browser-check.sh), without and
# with an API key, on a tiny trained checkpoint. Skipped (exit 77) where Debian's
# chromium is absent (bash scripts/setup.sh --tests installs it) or npm cannot
# install puppeteer-core.
#   test_serve_page.sh FOLIO_BINARY
set -euo pipefail
folio=$1
here=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -x /usr/bin/chromium ]; then
  echo "skipped: /usr/bin/chromium is absent (bash scripts/setup.sh --tests installs it)"
  exit 77
fi
command -v npm >/dev/null && command -v node >/dev/null || { echo "skipped: no node or npm (bash scripts/test.sh fetches Node 20 and npm into build/node)"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/folio-serve-page.XXXXXX")
trap 'rm -rf "$work"' EXIT
npm_dir=${FOLIO_BROWSER_NPM_DIR:-$work/npm}
source "$here/tests/npm_package.sh"
npm_package "$npm_dir" puppeteer-core@24
head -c 20000 "$here/data/tinyshakespeare.txt" >"$work/corpus.txt"
"$folio" train --data "$work/corpus.txt" --out "$work/run" --n-layer 1 --n-head 2 --n-embd 16 --block-size 32 \
  --batch-size 4 --max-iters 10 --eval-interval 10 --eval-iters 2 --quiet --threads 1
FOLIO_BINARY=$folio FOLIO_BROWSER_NPM_DIR=$npm_dir bash "$here/scripts/serve-browser-check.sh" "$work/run" -
