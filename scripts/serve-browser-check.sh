#!/usr/bin/env bash
# folio serve's page in a real browser: starts the server on a checkpoint, opens the
# page in Debian's headless Chromium through puppeteer-core (from npm, into a folder
# of its own), types a prompt, waits for streamed text, hovers a token, checks that
# the heatmap's rows sum to 1, and saves screenshots. Not part of ctest: it needs
# Chromium, which CI does not install.
#   bash scripts/serve-browser-check.sh RUN_DIR [OUT_DIR]   (default OUT_DIR: docs)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
checkpoint=$1
out=$(realpath -m "${2:-$here/docs}")
mkdir -p "$out"
bash "$here/scripts/setup.sh" --only chromium
npm_dir=${FOLIO_BROWSER_NPM_DIR:-${TMPDIR:-/tmp}/folio-serve-browser-npm}
if [ ! -d "$npm_dir/node_modules/puppeteer-core" ]; then
  mkdir -p "$npm_dir"
  (cd "$npm_dir" && npm install --no-audit --no-fund --silent puppeteer-core@24)
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/folio-serve-browser.XXXXXX")
"$here/build/folio" serve --checkpoint "$checkpoint" --port 0 >"$work/serve.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; rm -rf "$work"' EXIT
port=""
for _ in $(seq 200); do
  port=$(sed -n 's|.*on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$work/serve.log")
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$work/serve.log"; exit 1; }
NODE_PATH="$npm_dir/node_modules" node "$here/scripts/serve_browser_check.mjs" "http://127.0.0.1:$port" "$out" \
  "$work/profile"
