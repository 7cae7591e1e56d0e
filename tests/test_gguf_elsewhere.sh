#!/usr/bin/env bash
# folio import of a GGUF made elsewhere: a llama-2-style file written by llama.cpp's own
# gguf-py (tests/gguf_elsewhere.py: random weights, a SentencePiece BPE vocabulary from
# Debian's spm_train, add_bos_token, a feed-forward width that is not folio's default, no
# folio.* keys) becomes a folio run that
#  1. llama.cpp (node-llama-cpp, tests/gguf_llamacpp.mjs) agrees with: its tokenization of
#     each prompt is folio's, its greedy continuation of BOS + the prompt is the text
#     folio generate --greedy writes, and its next-token probabilities are within 2e-3 of
#     folio's (tests/llama_probabilities.py: scripts/folio_numpy.py on the imported checkpoint);
#  2. folio eval reads and folio train --init-from trains a few steps from;
# and a file whose tokenizer.ggml.model is "bert" is refused with exit 2 naming it.
# Skipped (exit 77) without node, npm, numpy or spm_train, or when npm cannot install.
#   test_gguf_elsewhere.sh FOLIO_BINARY
set -euo pipefail
folio=$1
here=$(cd "$(dirname "$0")/.." && pwd)
command -v spm_train >/dev/null || { echo "skipped: no spm_train (Debian sentencepiece)"; exit 77; }
source "$here/tests/npm_package.sh"
llama_cpp_test gguf-elsewhere

# The file made elsewhere: a SentencePiece BPE vocabulary of 400 pieces with byte fallback.
head -c 200000 "$here/data/tinyshakespeare.txt" >"$work/corpus.txt"
spm_train --input="$work/corpus.txt" --model_prefix="$work/spm" --vocab_size=400 --model_type=bpe \
  --byte_fallback=true --minloglevel=2 >/dev/null 2>&1 || fail "spm_train"
PYTHONPATH="$src/gguf-py" "$python" "$here/tests/gguf_elsewhere.py" "$work/spm.vocab" "$work/model.gguf" ||
  fail "gguf-py could not write the file"
"$folio" import "$work/run" --from "$work/model.gguf" || fail "folio import of the file"
"$folio" info --checkpoint "$work/run" | grep -q -- "--ffn-hidden 96" || fail "the imported run's ffn_hidden is not 96"

# 1. llama.cpp and folio on the same prompts. Each prompt's ids are folio's, after the BOS
# (1) the file asks for; llama.cpp continues them 32 tokens.
prompts=("ROMEO:" $'First Citizen:\nWe are' "What is the king" "O, she doth teach the torches")
steps=32
prompt_ids "$work/run" "${prompts[@]}" | "$python" -c 'import json, sys
print(json.dumps([{"model": sys.argv[1], "prompts": [dict(p, ids=[1] + p["ids"]) for p in json.load(sys.stdin)]}]))' \
  "$work/model.gguf" >"$work/jobs.json"
NODE_PATH="$llama_npm/node_modules" node "$here/tests/gguf_llamacpp.mjs" "$work/jobs.json" "$steps" \
  >"$work/llama.json" 2>"$work/llama.err" || { cat "$work/llama.err"; fail "llama.cpp on the file"; }
# llama.cpp's ids as text, each token's own bytes (U+2581 a space, <0xNN> a byte, <s> nothing).
theirs() {
  "$python" - "$work/llama.json" "$work/model.gguf.tokens.json" "$1" <<'EOF'
import json, sys
run = json.load(open(sys.argv[1]))[0]["runs"][int(sys.argv[3])]
tokens = json.load(open(sys.argv[2], encoding="utf-8"))
out = b""
for t in (tokens[i] for i in run["ids"]):
    if len(t) == 6 and t.startswith("<0x"):
        out += bytes([int(t[3:5], 16)])
    elif t not in ("<s>", "</s>", "<unk>"):
        out += t.replace("\u2581", " ").encode()
# folio generate writes U+FFFD for bytes that are no UTF-8 character, as Python's "replace" does.
sys.stdout.write(out.decode("utf-8", "replace") + "\n")
EOF
}
expect_greedy_text "$work/run" "$steps"
"$python" "$here/tests/llama_probabilities.py" "$work/run" "$work/llama.json" "$work/jobs.json" --arch llama \
  --n-vocab 400 --bos --config ffn_hidden=96

# 2. eval and a few steps of training from the imported run.
"$folio" eval --checkpoint "$work/run" --data "$work/corpus.txt" --split all --max-windows 4 >"$work/eval.out" ||
  fail "folio eval on the imported run"
grep -q "loss" "$work/eval.out" || fail "folio eval printed no loss: $(cat "$work/eval.out")"
"$folio" train --data "$work/corpus.txt" --init-from "$work/run" --out "$work/tuned" --max-iters 3 --warmup-iters 1 --batch-size 2 \
  --eval-interval 3 --eval-iters 1 --threads 1 --quiet || fail "folio train --init-from the imported run"
"$folio" generate --checkpoint "$work/tuned" --prompt "ROMEO:" --max-new-tokens 8 --greedy >/dev/null ||
  fail "folio generate on the fine-tuned run"

# 3. Another tokenizer kind: refused, exit 2, naming the key and its value.
PYTHONPATH="$src/gguf-py" "$python" "$here/tests/gguf_elsewhere.py" "$work/spm.vocab" "$work/bert.gguf" bert >/dev/null
set +e
"$folio" import "$work/bert-run" --from "$work/bert.gguf" 2>"$work/bert.err"
code=$?
set -e
[ "$code" = 2 ] || fail "a bert vocabulary: exit $code, not 2: $(cat "$work/bert.err")"
grep -q 'tokenizer.ggml.model is "bert"' "$work/bert.err" || fail "the refusal does not name the key: $(cat "$work/bert.err")"
[ ! -e "$work/bert-run" ] || fail "a refused import left $work/bert-run"
echo "a GGUF made elsewhere imports: llama.cpp's greedy text and probabilities are folio's; eval and train run on it"
