#!/usr/bin/env bash
# folio generate against llama.cpp on the same model, prompt and threads: single-stream
# greedy decode speed (tokens/s). The model is exported with folio export (f32 GGUF;
# --dtype f16 or q8_0 also gives llama.cpp's speed on those), llama.cpp runs through
# node-llama-cpp 3.22.1: the install tests/test_gguf_llamacpp.cpp made ($FOLIO_GGUF_NPM_DIR or
# build/tests/gguf-npm), else installed there on first use.
#
#   bash bench/peer/llamacpp/decode.sh RUN [N] [THREADS] [DTYPE]
#     RUN      an exportable run (folio train --no-bias --pos rope --norm rms --activation swiglu ...)
#     N        tokens to decode (default 256; at most the model's block_size minus the prompt
#              for learned positions)
#     THREADS  threads for both (default 1: on a busy 2-core machine llama.cpp's threads
#              wait at barriers for a core another job holds)
#     DTYPE    the GGUF's matrices: f32 (default), f16 or q8_0; folio runs the same format where it
#              has one (--weights int8 for q8_0, the same Q8_0 blocks) and fp32 for f16
#
# folio's figure is (time for N tokens - time for 0 tokens) / N, so the start-up and
# checkpoint load cancel; llama.cpp's clock starts after the prompt. Run it on an idle
# machine: neither side gets its cores otherwise.
set -euo pipefail
here=$(cd "$(dirname "$0")/../../.." && pwd)
run=$1 n=${2:-256} threads=${3:-1} dtype=${4:-f32}
folio=${FOLIO:-$here/build/folio}
npm_dir=${LLAMACPP_NPM_DIR:-${FOLIO_GGUF_NPM_DIR:-$here/build/tests/gguf-npm}}
work=$(mktemp -d "${TMPDIR:-/tmp}/folio-decode.XXXXXX")
trap 'rm -rf "$work"' EXIT

if [ ! -f "$npm_dir/node_modules/node-llama-cpp/dist/index.js" ]; then
  mkdir -p "$npm_dir"
  (cd "$npm_dir" && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm install --no-audit --no-fund --silent --omit=optional \
     node-llama-cpp@3.22.1 @node-llama-cpp/linux-x64@3.22.1 >/dev/null)
fi
"$folio" export --dtype "$dtype" "$run" "$work/model.gguf" 2>/dev/null
prompt="ROMEO:"
ids=$("$folio" tokens --checkpoint "$run" --text "$prompt" --format ids | tr ' ' ',')

# Wall seconds of a command (python3 rather than bc, which folio's setup does not install).
seconds() { python3 -c 'import subprocess, sys, time; t = time.perf_counter(); subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); print(time.perf_counter() - t)' "$@"; }
calc() { python3 -c "print($1)"; }
weights=f32; [ "$dtype" = q8_0 ] && weights=int8
gen=("$folio" generate --checkpoint "$run" --prompt "$prompt" --greedy --threads "$threads" --decode-threads "$threads"
  --weights "$weights")
t0=$(seconds "${gen[@]}" --max-new-tokens 0)
tn=$(seconds "${gen[@]}" --max-new-tokens "$n")
folio_tps=$(calc "$n / ($tn - $t0)")
llama_tps=$(NODE_PATH="$npm_dir/node_modules" node "$here/bench/peer/llamacpp/decode.mjs" "$work/model.gguf" "[$ids]" \
  "$n" "$threads" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens_per_s"])')

printf '| side | GGUF | threads | tokens | tokens/s |\n|---|---|---:|---:|---:|\n'
printf '| folio generate --weights %s | (the checkpoint) | %s | %s | %.1f |\n' "$weights" "$threads" "$n" "$folio_tps"
printf '| llama.cpp (node-llama-cpp 3.22.1) | %s | %s | %s | %.1f |\n' "$dtype" "$threads" "$n" "$llama_tps"
printf '\nfolio / llama.cpp: %.2f\n' "$(calc "$folio_tps / $llama_tps")"
