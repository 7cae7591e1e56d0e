#!/usr/bin/env bash
# GPT-2 small's shape (12 layers × 768, 12 heads, context 1024, GPT-2's 50,257-token
# vocabulary, biases, tied output: 124M parameters) as one folio run and two GGUF files of
# the same weights, for decode.sh and prefill.sh to set folio beside llama.cpp at the size
# people know. folio's own GGUF exporter writes only SentencePiece-style vocabularies and
# no Linear biases, so the files come the way GPT-2's do: folio export --format hf, then
# llama.cpp's gguf-py (tests/hf_gpt2_ggufpy.py; q8_0 as its converter's --outtype q8_0).
# The weights are one training step from random: decoding costs the same whatever they are.
#
#   bash bench/peer/llamacpp/gpt2_small.sh [OUT]
#     OUT   where the run and the files go (default build/peer/gpt2-small): OUT/run,
#           OUT/model-f32.gguf, OUT/model-q8_0.gguf; kept, so a second call redoes nothing
# Then, for instance:
#   GGUF=OUT/model-q8_0.gguf bash bench/peer/llamacpp/decode.sh OUT/run 256 1 q8_0
set -euo pipefail
here=$(cd "$(dirname "$0")/../../.." && pwd)
out=${1:-$here/build/peer/gpt2-small}
folio=${FOLIO:-$here/build/folio}
[ -x "$folio" ] || { echo "gpt2_small.sh: no folio binary at $folio (build folio first, or set FOLIO)" >&2; exit 2; }
python=/usr/bin/python3  # Debian's, with python3-numpy (scripts/setup.sh)
source "$here/tests/npm_package.sh"
cache=$here/build/tests  # the installs and the clone the tests make, shared with them
mkdir -p "$out"

# GPT-2's tokenizer files, written from js-tiktoken's ranks (as test_hf_gpt2_ggufpy.sh does).
if [ ! -f "$out/ref/hf/vocab.json" ]; then
  npm_package "${FOLIO_BYTEBPE_NPM_DIR:-$cache/bytebpe-npm}" js-tiktoken@1.0.21
  NODE_PATH="${FOLIO_BYTEBPE_NPM_DIR:-$cache/bytebpe-npm}/node_modules" node "$here/tests/bytebpe_reference.mjs" \
    "$out/ref" >/dev/null
fi
if [ ! -f "$out/run/model.safetensors" ]; then
  rm -rf "$out/run"
  "$folio" train --data "$here/data/tinyshakespeare.txt" --tokenizer "$out/ref/hf" --out "$out/run" \
    --n-layer 12 --n-head 12 --n-embd 768 --block-size 1024 --batch-size 1 --max-iters 1 --eval-interval 1 \
    --eval-iters 1 --warmup-iters 1 --activation gelu-tanh --tie-weights --gpt2-biases --quiet
fi
llama_npm=${FOLIO_GGUF_NPM_DIR:-$cache/gguf-npm}
llama_cpp_npm "$llama_npm"
src=$cache/llama-cpp-src
llama_cpp_source "$llama_npm" "$src" || { echo "gpt2_small.sh: could not clone node-llama-cpp's llama.cpp bundle" >&2; exit 1; }
[ -f "$out/hf/model.safetensors" ] || "$folio" export --format hf "$out/run" "$out/hf" >/dev/null
for dtype in f32 q8_0; do
  [ -f "$out/model-$dtype.gguf" ] && continue
  PYTHONPATH="$src/gguf-py" "$python" "$here/tests/hf_gpt2_ggufpy.py" "$out/hf" "$out/model-$dtype.gguf.tmp" "$dtype" \
    >"$out/convert-$dtype.log"
  mv "$out/model-$dtype.gguf.tmp" "$out/model-$dtype.gguf"
done
"$folio" info --checkpoint "$out/run" | head -n 3
ls -l "$out"/model-*.gguf
