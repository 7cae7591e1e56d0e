#!/usr/bin/env bash
# folio generate against llama.cpp on the same model, prompt and threads: one stream,
# greedy, the prompt's evaluation (prefill, prompt tokens/s) and the decode after it
# (tokens/s). The model is exported with folio export (f32 GGUF; --dtype f16 or q8_0 also
# gives llama.cpp's speed on those), or given as a GGUF of the same weights (GGUF=...,
# as bench/peer/llamacpp/gpt2_small.sh writes); llama.cpp runs through node-llama-cpp
# 3.22.1: the install tests/test_gguf_llamacpp.cpp made ($FOLIO_GGUF_NPM_DIR or
# build/tests/gguf-npm), else installed there on first use.
#
#   bash bench/peer/llamacpp/decode.sh RUN [N] [THREADS] [DTYPE] [PROMPT_TOKENS]
#     RUN      an exportable run (folio train --no-bias --pos rope --norm rms --activation swiglu ...)
#     N        tokens to decode after the first (default 256; the prompt and N + 1 must fit
#              the model's block_size for learned positions)
#     THREADS  threads for both (default 1: on a busy 2-core machine llama.cpp's threads
#              wait at barriers for a core another job holds); folio's prompt runs on
#              --threads, its decode steps on --decode-threads, both THREADS
#     DTYPE    the GGUF's matrices: f32 (default), f16 or q8_0; folio runs the same format where it
#              has one (--weights int8 for q8_0, the same Q8_0 blocks) and fp32 for f16
#     PROMPT_TOKENS  the prompt: "ROMEO:" (default), or the first PROMPT_TOKENS tokens of
#              data/tinyshakespeare.txt (512 for the prefill figure)
#   GGUF (environment): this file instead of folio export's of RUN
#   LLAMA_BENCH (environment): llama-bench, built from the same llama.cpp source for this
#   CPU (GGML_NATIVE); default build/peer/llama-server-build/bin/llama-bench, which
#   server.sh builds. Where it exists, a third row gives its pp (the prompt, from an
#   empty cache) and tg (N tokens after a cache as long as the prompt, -d) figures on
#   the same GGUF and threads, 3 repetitions each: llama.cpp at its best, beside the
#   npm package's portable build.
#
# Both sides time the same two things: from the prompt's ids to the first token (the
# prefill, one sample included), then the N tokens after it, each a decode step and a
# greedy sample. folio's figures are folio generate --timings's, llama.cpp's its
# clock around node-llama-cpp's evaluate. Run it on an idle machine: neither side gets
# its cores otherwise.
set -euo pipefail
here=$(cd "$(dirname "$0")/../../.." && pwd)
run=$1 n=${2:-256} threads=${3:-1} dtype=${4:-f32} prompt_tokens=${5:-}
folio=${FOLIO:-$here/build/folio}
npm_dir=${LLAMACPP_NPM_DIR:-${FOLIO_GGUF_NPM_DIR:-$here/build/tests/gguf-npm}}
work=$(mktemp -d "${TMPDIR:-/tmp}/folio-decode.XXXXXX")
trap 'rm -rf "$work"' EXIT

source "$here/tests/npm_package.sh"  # the tests' install of node-llama-cpp, under their lock
llama_cpp_npm "$npm_dir"
gguf=${GGUF:-$work/model.gguf}
[ -n "${GGUF:-}" ] || "$folio" export --dtype "$dtype" "$run" "$gguf" 2>/dev/null

# The prompt as text for folio and as folio's ids for llama.cpp (its tokenizer plays no
# part). PROMPT_TOKENS tokens: the corpus cut where token PROMPT_TOKENS + 1 begins.
if [ -z "$prompt_tokens" ]; then
  printf 'ROMEO:' >"$work/prompt.txt"
else
  head -c $((prompt_tokens * 8)) "$here/data/tinyshakespeare.txt" >"$work/corpus.txt"
  "$folio" tokens --checkpoint "$run" --file "$work/corpus.txt" --format table |
    awk -v p="$prompt_tokens" '$1 == p && !done { print $3; done = 1 }' >"$work/cut"
  [ -s "$work/cut" ] || { echo "decode.sh: the corpus's first $((prompt_tokens * 8)) bytes hold fewer than $prompt_tokens tokens" >&2; exit 1; }
  head -c "$(cat "$work/cut")" "$work/corpus.txt" >"$work/prompt.txt"
fi
ids=$("$folio" tokens --checkpoint "$run" --file "$work/prompt.txt" --format ids | tr ' ' ',')
got=$(($(tr -cd , <<<"$ids" | wc -c) + 1))
[ -z "$prompt_tokens" ] || [ "$got" = "$prompt_tokens" ] ||
  { echo "decode.sh: the cut prompt is $got tokens, not $prompt_tokens" >&2; exit 1; }

weights=f32; [ "$dtype" = q8_0 ] && weights=int8
"$folio" generate --checkpoint "$run" --prompt-file "$work/prompt.txt" --greedy --threads "$threads" \
  --decode-threads "$threads" --weights "$weights" --max-new-tokens $((n + 1)) --timings 2>"$work/folio.err" >/dev/null ||
  { cat "$work/folio.err" >&2; exit 1; }
# "timings: prompt P tokens in X ms (R tokens/s); generated N more tokens in Y ms (S tokens/s)"
read -r folio_prompt folio_tps < <(sed -n 's/^timings: prompt .* tokens in .* ms (\(.*\) tokens\/s); generated .* (\(.*\) tokens\/s)$/\1 \2/p' "$work/folio.err")
NODE_PATH="$npm_dir/node_modules" node "$here/bench/peer/llamacpp/decode.mjs" "$gguf" "[$ids]" "$n" "$threads" >"$work/llama.json"
read -r llama_prompt llama_tps < <(python3 -c 'import json,sys; j = json.load(open(sys.argv[1])); print(j["prompt_tokens_per_s"], j["tokens_per_s"])' "$work/llama.json")
calc() { python3 -c "print($1)"; }
bench=${LLAMA_BENCH:-$here/build/peer/llama-server-build/bin/llama-bench}
if [ -x "$bench" ]; then
  # pp: the prompt from an empty cache; tg: N tokens after a cache of the prompt's
  # length (-d), as the other two rows decode after their prompt.
  { "$bench" -m "$gguf" -p "$got" -n 0 -t "$threads" -r 3 -o json >"$work/pp.json" &&
    "$bench" -m "$gguf" -p 0 -n "$n" -d "$got" -t "$threads" -r 3 -o json >"$work/tg.json"; } 2>"$work/bench.err" ||
    { cat "$work/bench.err" >&2; exit 1; }
  read -r bench_prompt bench_tps < <(python3 -c 'import json, sys
pp, tg = (json.load(open(f))[0]["avg_ts"] for f in sys.argv[1:3])
print(pp, tg)' "$work/pp.json" "$work/tg.json")
fi

printf '| side | GGUF | threads | prompt tokens | prompt tokens/s | decoded tokens | tokens/s |\n|---|---|---:|---:|---:|---:|---:|\n'
printf '| folio generate --weights %s | (the checkpoint) | %s | %s | %.1f | %s | %.1f |\n' "$weights" "$threads" "$got" "$folio_prompt" "$n" "$folio_tps"
printf '| llama.cpp (node-llama-cpp 3.22.1) | %s | %s | %s | %.1f | %s | %.1f |\n' "$dtype" "$threads" "$got" "$llama_prompt" "$n" "$llama_tps"
[ -x "$bench" ] && printf '| llama-bench (the bundled source, GGML_NATIVE; pp%s, tg%s @ d%s) | %s | %s | %s | %.1f | %s | %.1f |\n' \
  "$got" "$n" "$got" "$dtype" "$threads" "$got" "$bench_prompt" "$n" "$bench_tps"
printf '\nfolio / llama.cpp: decode %.2f, prompt %.2f\n' "$(calc "$folio_tps / $llama_tps")" "$(calc "$folio_prompt / $llama_prompt")"
[ -x "$bench" ] && printf 'folio / llama-bench: decode %.2f, prompt %.2f\n' "$(calc "$folio_tps / $bench_tps")" "$(calc "$folio_prompt / $bench_prompt")"
exit 0
