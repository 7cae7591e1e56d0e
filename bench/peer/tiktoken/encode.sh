#!/usr/bin/env bash
# GPT-2 encoding speed (MB/s of UTF-8 text) of folio's bytebpe tokenizer against
# js-tiktoken (pure JavaScript) and @dqbd/tiktoken (the Rust tiktoken compiled to WASM),
# on the same text, each pinned to one core. folio reads GPT-2's ranks from the
# .tiktoken file tests/bytebpe_reference.mjs writes from js-tiktoken's (the file its
# test checks it with), and is timed by build/bench/bench_tokenizer (encode only, not
# the load); the npm sides are timed inside node after a warm-up. All three must give
# identical ids before anything is printed.
#
#   bash bench/peer/tiktoken/encode.sh [TEXT] [RUNS] [CORE]
#     TEXT  UTF-8 text to encode (default data/tinyshakespeare.txt, 1.1 MB)
#     RUNS  timed runs per side (default 5); the table shows the median and the best
#     CORE  the core taskset pins every side to (default 0)
#
# The packages go into $TIKTOKEN_NPM_DIR (default build/bench/tiktoken-npm), once.
# Run it on an idle machine: a side that shares its core with another job is slowed.
set -euo pipefail
here=$(cd "$(dirname "$0")/../../.." && pwd)
text=$(realpath "${1:-$here/data/tinyshakespeare.txt}") runs=${2:-5} core=${3:-0}
build=${FOLIO_BUILD:-$here/build}
npm_dir=${TIKTOKEN_NPM_DIR:-$build/bench/tiktoken-npm}
js_version=1.0.21 wasm_version=1.0.22
work=$(mktemp -d "${TMPDIR:-/tmp}/folio-tiktoken.XXXXXX")
trap 'rm -rf "$work"' EXIT

[ -x "$build/bench/bench_tokenizer" ] || {
  echo "build bench_tokenizer first: cmake --build $build --target bench_tokenizer" >&2
  exit 1
}
for spec in "js-tiktoken@$js_version" "@dqbd/tiktoken@$wasm_version"; do
  name=${spec%@*}
  installed=$(node -p "require('$npm_dir/node_modules/$name/package.json').version" 2>/dev/null || true)
  if [ "$installed" != "${spec##*@}" ]; then
    mkdir -p "$npm_dir"
    (cd "$npm_dir" && npm install --no-audit --no-fund --silent "$spec" >/dev/null)
  fi
done
export NODE_PATH="$npm_dir/node_modules"
# GPT-2's ranks as folio reads them (also writes HF files and test texts, unused here).
node "$here/tests/bytebpe_reference.mjs" "$work/ref" >/dev/null

pin=(taskset -c "$core")
FOLIO_BENCH_TOKENIZER="$work/ref/gpt2.tiktoken" FOLIO_BENCH_TEXT="$text" FOLIO_BENCH_IDS="$work/folio.ids" \
  "${pin[@]}" "$build/bench/bench_tokenizer" --threads=1 --benchmark_repetitions="$runs" \
  --benchmark_format=json --benchmark_out="$work/folio.json" --benchmark_out_format=json >/dev/null
for lib in js-tiktoken @dqbd/tiktoken; do
  "${pin[@]}" node "$here/bench/peer/tiktoken/encode.mjs" "$lib" "$text" "$runs" "$work/${lib//\//_}.ids" \
    >"$work/${lib//\//_}.json"
done

# Identical ids, or no table: a faster tokenizer that gives other tokens is not faster.
for lib in js-tiktoken @dqbd_tiktoken; do
  if ! cmp -s "$work/folio.ids" "$work/$lib.ids"; then
    echo "FAILED: folio's ids differ from $lib's on $text" >&2
    cmp "$work/folio.ids" "$work/$lib.ids" >&2 || true
    exit 1
  fi
done

python3 - "$work" "$text" "$runs" "$js_version" "$wasm_version" <<'PY'
import json, statistics, sys
work, text, runs, js_version, wasm_version = sys.argv[1:]
folio = json.load(open(f"{work}/folio.json"))
seconds = [b["real_time"] / 1e3 for b in folio["benchmarks"] if b.get("run_type") == "iteration"]  # ms -> s
tokens = int(next(b["tokens"] for b in folio["benchmarks"] if b.get("run_type") == "iteration"))
sides = [("folio bytebpe (C++, PCRE2)", tokens, seconds)]
size = None
for lib, label in (("js-tiktoken", f"js-tiktoken {js_version} (JavaScript)"),
                   ("@dqbd_tiktoken", f"@dqbd/tiktoken {wasm_version} (Rust tiktoken, WASM)")):
    r = json.load(open(f"{work}/{lib}.json"))
    size = r["bytes"]
    sides.append((label, r["tokens"], r["seconds"]))
assert len({t for _, t, _ in sides}) == 1, "token counts differ"
mb = size / 1e6
print(f"{text}: {mb:.2f} MB, {tokens} GPT-2 tokens, identical ids from all three; "
      f"one core each, {runs} timed runs\n")
print("| tokenizer | median MB/s | best MB/s | median s |\n|---|---:|---:|---:|")
rate = {}
for label, _, s in sides:
    med = statistics.median(s)
    rate[label] = mb / med
    print(f"| {label} | {mb / med:.2f} | {mb / min(s):.2f} | {med:.3f} |")
f = sides[0][0]
print()
for label, _, _ in sides[1:]:
    print(f"folio / {label.split(' (')[0]}: {rate[f] / rate[label]:.2f}x (medians)")
PY
