#!/usr/bin/env bash
# Renders a page or picture (an SVG from folio attention or folio plot, an HTML file)
# to a PNG with headless Chromium, to look at what folio shows a person.
#   bash scripts/screenshot.sh runs/x/loss.svg loss.png [WIDTHxHEIGHT]
# Installs Debian's chromium when it is missing.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: scripts/screenshot.sh FILE OUT.png [WIDTHxHEIGHT]" >&2; exit 2; }
input=$(realpath "$1")
out=$(realpath -m "$2")
size=${3:-1000x700}
bash "$(dirname "$0")/setup.sh" --only chromium
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
# The background-networking flags keep Chromium from calling out (this machine has
# no network but Debian's mirror); a fresh profile keeps runs independent.
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$profile" --hide-scrollbars --window-size="${size/x/,}" \
  --screenshot="$out" "file://$input" 2>/dev/null
echo "wrote $out"
