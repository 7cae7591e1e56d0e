#!/usr/bin/env bash
# GPT-2's tokenizer in folio against js-tiktoken's (npm js-tiktoken, which ships GPT-2's
# ranks and encoder: a vocabulary and an implementation no one here wrote):
#  1. tests/bytebpe_reference.mjs writes GPT-2's vocabulary as a .tiktoken rank file and
#     as HF's vocab.json + merges.txt, and js-tiktoken's ids for a broad set of texts;
#  2. folio trains a tiny model with each file as --tokenizer, and `folio tokens` on
#     its checkpoint gives js-tiktoken's ids for every text, from both files;
#  3. folio export --format hf of either model writes that vocab.json and merges.txt back.
# Skipped (exit 77) without node and npm, or when npm cannot install js-tiktoken.
#   test_bytebpe_tokenizer.sh FOLIO_BINARY
set -euo pipefail
folio=$1
here=$(cd "$(dirname "$0")/.." && pwd)
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "skipped: js-tiktoken needs node and npm, absent here (bash scripts/test.sh fetches Node 20 and npm into build/node)"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/folio-bytebpe.XXXXXX")
trap 'rm -rf "$work"' EXIT
npm_dir=${FOLIO_BYTEBPE_NPM_DIR:-$work/npm}
source "$here/tests/npm_package.sh"
npm_package "$npm_dir" js-tiktoken@1.0.21
NODE_PATH="$npm_dir/node_modules" node "$here/tests/bytebpe_reference.mjs" "$work/ref"
head -c 30000 "$here/data/tinyshakespeare.txt" >"$work/corpus.txt"
train=(--data "$work/corpus.txt" --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4
       --max-iters 2 --eval-interval 2 --eval-iters 1 --warmup-iters 0 --quiet --threads 1
       --activation gelu-tanh --tie-weights --gpt2-biases)  # GPT-2's shape, for folio export --format hf
for source in gpt2.tiktoken hf; do
  "$folio" train "${train[@]}" --tokenizer "$work/ref/$source" --out "$work/run-$source"
  n=0
  for text in "$work"/ref/texts/*.txt; do
    ours=$("$folio" tokens --checkpoint "$work/run-$source" --file "$text" --format ids)
    theirs=$(cat "${text%.txt}.ids")
    if [ "$ours" != "$theirs" ]; then
      printf 'FAILED (%s) on %s:\n folio:       %.400s\n js-tiktoken: %.400s\n' "$source" "$text" "$ours" "$theirs" >&2
      exit 1
    fi
    n=$((n + 1))
  done
  echo "--tokenizer $source: folio tokens == js-tiktoken's gpt2 encoding on $n texts"
done
"$folio" info --checkpoint "$work/run-hf" | grep -q "bytebpe (GPT-2's pattern), 50257 tokens"
for source in gpt2.tiktoken hf; do  # merges.txt recovered from the ranks, whichever file gave them
  "$folio" export --format hf "$work/run-$source" "$work/export-$source" 2>/dev/null
  cmp "$work/ref/hf/merges.txt" "$work/export-$source/merges.txt"
  node -e 'const [a, b] = process.argv.slice(1).map((f) => JSON.parse(require("fs").readFileSync(f, "utf8")));
    const same = Object.keys(a).length === Object.keys(b).length && Object.keys(a).every((k) => a[k] === b[k]);
    process.exit(same ? 0 : 1);' "$work/ref/hf/vocab.json" "$work/export-$source/vocab.json" ||
    { echo "FAILED: the exported vocab.json ($source) is not GPT-2's" >&2; exit 1; }
  echo "folio export --format hf ($source): GPT-2's vocab.json and merges.txt"
done
