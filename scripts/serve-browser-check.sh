#!/usr/bin/env bash
# folio serve's page in a real browser: starts the server on a checkpoint, opens the
# page in Debian's headless Chromium through puppeteer-core (from npm, into a folder
# of its own), types a prompt, waits for streamed text, hovers a token, checks that
# the heatmap's rows sum to 1, presses "Explore attention", and saves screenshots.
# Then the same against a server started with --api-key, the key typed into the page.
# ctest runs it as Serve.PageInChromium (tests/test_serve_page.sh), which skips where
# /usr/bin/chromium is absent; CI installs it (.ci/run).
#   bash scripts/serve-browser-check.sh RUN_DIR [OUT_DIR]   (default OUT_DIR: docs; -: no screenshots)
# FOLIO_BINARY: the folio to run (default build/folio); FOLIO_BROWSER_NPM_DIR: where
# puppeteer-core is installed.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
checkpoint=$1
out=${2:-$here/docs}
[ "$out" = - ] || { out=$(realpath -m "$out"); mkdir -p "$out"; }
folio=${FOLIO_BINARY:-$here/build/folio}
source "$here/scripts/serve-on-free-port.sh"
bash "$here/scripts/setup.sh" --only chromium
npm_dir=${FOLIO_BROWSER_NPM_DIR:-${TMPDIR:-/tmp}/folio-serve-browser-npm}
if [ ! -d "$npm_dir/node_modules/puppeteer-core" ]; then
  mkdir -p "$npm_dir"
  (cd "$npm_dir" && npm install --no-audit --no-fund --silent puppeteer-core@24)
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/folio-serve-browser.XXXXXX")
server=""
trap '[ -n "$server" ] && kill $server 2>/dev/null; rm -rf "$work"' EXIT

# Starts folio serve on a free port with the given options; sets $server and $port.
start() { serve_on_free_port "$work/serve.log" --checkpoint "$checkpoint" "$@" || exit 1; }
stop() { kill "$server"; wait "$server" || true; server=""; }

start
NODE_PATH="$npm_dir/node_modules" node "$here/scripts/serve_browser_check.mjs" "http://127.0.0.1:$port" "$out" \
  "$work/profile" || { cat "$work/serve.log"; exit 1; }
stop

key="page-key-$RANDOM"
echo "$key" >"$work/key"
start --api-key-file "$work/key"
NODE_PATH="$npm_dir/node_modules" node "$here/scripts/serve_browser_check.mjs" "http://127.0.0.1:$port" - \
  "$work/profile-key" "$key" || { cat "$work/serve.log"; exit 1; }
stop
