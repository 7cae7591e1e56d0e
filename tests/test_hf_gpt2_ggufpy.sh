#!/usr/bin/env bash
# folio's HF GPT-2 export, converted to GGUF by llama.cpp's own gguf-py, runs in llama.cpp
# as folio runs it. The independent path from folio to llama.cpp: not folio's GGUF
# exporter but llama.cpp's tensor names (TensorNameMap), writer and tokenizer layout.
#  1. folio trains a tiny GPT-2-shaped model with GPT-2's own 50,257-token vocabulary
#     (tests/bytebpe_reference.mjs, from npm js-tiktoken) and exports it --format hf;
#  2. tests/hf_gpt2_ggufpy.py, with gguf-py from the llama.cpp source node-llama-cpp
#     ships (its git bundle, cloned once into the build tree), writes a gpt2 GGUF;
#  3. llama.cpp (node-llama-cpp, tests/hf_gpt2_ggufpy.mjs) continues folio's prompt ids
#     greedily: its text equals folio generate --greedy's, its tokenization of the
#     prompts equals folio's, and its next-token probabilities along the way are within
#     2e-3 of folio's (tests/llama_probabilities.py: scripts/folio_numpy.py on the checkpoint, which
#     Interop.NumpyForwardMatchesEval holds to folio's own forward), over all 50,257.
# Skipped (exit 77) without node, npm or numpy, or when npm cannot install the packages.
#   test_hf_gpt2_ggufpy.sh FOLIO_BINARY
set -euo pipefail
folio=$1
here=$(cd "$(dirname "$0")/.." && pwd)
source "$here/tests/npm_package.sh"
llama_cpp_test ggufpy
npm_package "${FOLIO_BYTEBPE_NPM_DIR:-$cache/bytebpe-npm}" js-tiktoken@1.0.21

# 1. A GPT-2-shaped model with GPT-2's vocabulary. 5,000 bytes and 40 steps: what fits
# the test's time with a 50,257-row output layer; the text it writes is mostly newlines,
# which is why the probabilities over every token are compared, not the text alone.
NODE_PATH="${FOLIO_BYTEBPE_NPM_DIR:-$cache/bytebpe-npm}/node_modules" node "$here/tests/bytebpe_reference.mjs" "$work/ref" >/dev/null
head -c 5000 "$here/data/tinyshakespeare.txt" >"$work/corpus.txt"
"$folio" train --data "$work/corpus.txt" --val-fraction 0.1 --tokenizer "$work/ref/hf" --out "$work/run" \
  --n-layer 2 --n-head 2 --n-embd 32 --block-size 64 --batch-size 4 --max-iters 40 --eval-interval 40 --eval-iters 1 \
  --warmup-iters 5 --lr 1e-2 --threads 2 --quiet --activation gelu-tanh --tie-weights --gpt2-biases
"$folio" export --format hf "$work/run" "$work/hf" >/dev/null 2>&1

# 2. gguf-py's GGUF of the HF directory.
PYTHONPATH="$src/gguf-py" "$python" "$here/tests/hf_gpt2_ggufpy.py" "$work/hf" "$work/model.gguf" >"$work/convert.log" ||
  { cat "$work/convert.log"; fail "gguf-py's conversion"; }
tail -n 1 "$work/convert.log"

# 3. Prompt ids from folio's tokenizer; each prompt plus its 32 tokens fits the 64 positions.
prompts=("ROMEO:" $'First Citizen:\nWe are' "What says the king")
steps=32
prompt_ids "$work/run" "${prompts[@]}" >"$work/prompts.json"
NODE_PATH="$llama_npm/node_modules" node "$here/tests/hf_gpt2_ggufpy.mjs" "$work/model.gguf" "$work/prompts.json" \
  "$steps" "$work" 2>"$work/llama.err" || { cat "$work/llama.err"; fail "llama.cpp on gguf-py's file"; }
theirs() {
  "$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["runs"][int(sys.argv[2])]["text"])' "$work/llama.json" "$1"
}
expect_greedy_text "$work/run" "$steps"
"$python" "$here/tests/llama_probabilities.py" "$work/run" "$work/llama.json" "$work/prompts.json" --arch gpt2 \
  --n-vocab 50257 --probs "$work/probs.f32"
echo "gguf-py's GGUF of folio's HF export: llama.cpp's greedy text and probabilities are folio's"
