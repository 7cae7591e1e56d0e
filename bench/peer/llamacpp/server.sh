#!/usr/bin/env bash
# folio serve beside llama-server on the same model, the same threads and the same load
# client (bench/serve_load.py): aggregate tokens/s and time to first token p50/p99 at 1,
# 4 and 16 concurrent streams, printed as one side-by-side table.
#
#   bash bench/peer/llamacpp/server.sh [--run RUN] [--dtype f32|q8_0] [--streams 1,4,16]
#                                      [--seconds 30] [--threads 1] [--max-tokens 128]
#     --run         an exportable run (folio train --no-bias --pos rope --norm rms
#                   --activation swiglu ...); default: config M's shape (6 layers × 384,
#                   6 heads, block 256, the char vocabulary) trained for one step into
#                   build/peer/m-llama (decoding costs the same whatever the weights)
#     --dtype       the GGUF's matrices: f32, or q8_0 with folio serve --weights int8 (the
#                   same Q8_0 blocks)
#     --threads     llama-server's -t and -tb, and folio serve's --threads (folio's batched
#                   scheduler decodes every slot on one thread whatever this says)
#   LLAMA_SERVER (environment): a llama-server built elsewhere instead of building one
#   LLAMA_SERVER_ARGS (environment): more llama-server options, e.g. "-ctk f32 -ctv f32"
#   for an fp32 KV cache as folio's (llama-server's default is f16, half the bytes)
#
# What it does, each step cached under build/peer/ so a second run redoes none of them:
#  1. installs node-llama-cpp 3.22.1 (the same install decode.sh uses) and clones the
#     llama.cpp source it bundles (llama/gitRelease.bundle);
#  2. builds only the llama-server and llama-bench targets from it (decode.sh uses the
#     second): Release, CPU, GGML_NATIVE, no curl,
#     no OpenSSL, no web UI (nothing downloaded at build time), under nice;
#  3. writes the run if none is given and folio-exports it to GGUF;
#  4. for each stream count, runs each server alone: folio serve --slots 16 (started by
#     serve_load.py), then llama-server --parallel 16 with a context of 16 × block_size
#     (block_size per slot), each on loopback, each request max_tokens tokens from the
#     same prompt ids ("ROMEO:\n" in folio's tokenizer; llama-server gets ignore_eos so
#     it generates all of them, and the ids so that its tokenizer plays no part).
# Run it on an idle machine: under load the figures say nothing. A short --seconds
# checks that it works end to end.
set -euo pipefail
here=$(cd "$(dirname "$0")/../../.." && pwd)
run="" dtype=f32 streams=1,4,16 seconds=30 threads=1 max_tokens=128
usage() { echo "usage: bash bench/peer/llamacpp/server.sh [--run RUN] [--dtype f32|q8_0] [--streams 1,4,16] [--seconds S] [--threads T] [--max-tokens N]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || usage
  case $1 in
    --run) run=$2 ;; --dtype) dtype=$2 ;; --streams) streams=$2 ;; --seconds) seconds=$2 ;;
    --threads) threads=$2 ;; --max-tokens) max_tokens=$2 ;;
    *) echo "server.sh: unknown option '$1'" >&2; usage ;;
  esac
  shift 2
done
case $dtype in f32) weights=f32 ;; q8_0) weights=int8 ;; *) echo "server.sh: --dtype must be f32 or q8_0, got '$dtype'" >&2; exit 2 ;; esac
[[ $threads =~ ^[1-9][0-9]*$ ]] || { echo "server.sh: --threads must be a positive integer, got '$threads'" >&2; exit 2; }
[[ $streams =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || { echo "server.sh: --streams must be like 1,4,16, got '$streams'" >&2; exit 2; }
folio=${FOLIO:-$here/build/folio}
[ -x "$folio" ] || { echo "server.sh: no folio binary at $folio (build folio first, or set FOLIO)" >&2; exit 2; }
peer=${FOLIO_PEER_DIR:-$here/build/peer}
npm_dir=${LLAMACPP_NPM_DIR:-${FOLIO_GGUF_NPM_DIR:-$here/build/tests/gguf-npm}}
mkdir -p "$peer"
work=$(mktemp -d "${TMPDIR:-/tmp}/folio-server-bench.XXXXXX")
server_pid=""
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

# 1. The package and the llama.cpp source it bundles.
source "$here/tests/npm_package.sh"  # the tests' install and clone, each under their lock
llama_cpp_npm "$npm_dir"
src=$peer/llama-cpp-src
llama_cpp_source "$npm_dir" "$src" || { echo "server.sh: could not clone node-llama-cpp's llama.cpp bundle" >&2; exit 1; }

# 2. llama-server and llama-bench alone (over an hour on 2 cores shared with other builds; the log is in
#    build/peer/).
server=${LLAMA_SERVER:-$peer/llama-server-build/bin/llama-server}  # LLAMA_SERVER: one built elsewhere
if [ ! -x "$server" ]; then
  echo "building llama-server (log: $peer/llama-server-build.log)" >&2
  { nice -n 5 cmake -S "$src" -B "$peer/llama-server-build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
      -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_CCACHE=OFF &&
    nice -n 5 cmake --build "$peer/llama-server-build" --target llama-server llama-bench -j"$(nproc)"; } \
    >"$peer/llama-server-build.log" 2>&1 || { echo "server.sh: building llama-server failed: see $peer/llama-server-build.log" >&2; exit 1; }
fi

# 3. The model, on both sides.
if [ -z "$run" ]; then
  run=$peer/m-llama
  if ! "$folio" info --checkpoint "$run" >/dev/null 2>&1; then
    echo "writing an M-shaped llama-exportable run into $run" >&2
    "$folio" train --out "$run" --overwrite --n-layer 6 --n-head 6 --n-embd 384 --block-size 256 --batch-size 1 \
      --no-bias --pos rope --norm rms --activation swiglu --max-iters 1 --warmup-iters 0 --eval-iters 1 --quiet >/dev/null
  fi
fi
"$folio" info --checkpoint "$run" >"$work/info" || { echo "server.sh: --run $run is not a run folio can load" >&2; exit 2; }
block=$(sed -n 's/.*block_size \([0-9]*\).*/\1/p' "$work/info")
gguf=$work/model.gguf
"$folio" export --dtype "$dtype" "$run" "$gguf" >/dev/null 2>"$work/export.log" ||
  { echo "server.sh: folio export --dtype $dtype $run failed:" >&2; cat "$work/export.log" >&2; exit 2; }
ids=$("$folio" tokens --checkpoint "$run" --text 'ROMEO:\n' --format ids | tr -s ' \n' ',,' | sed 's/,$//')
load=(python3 "$here/bench/serve_load.py" load --seconds "$seconds" --max-tokens "$max_tokens" --json-only)

# 4. Each server alone, per stream count.
"${load[@]}" --binary "$folio" --checkpoint "$run" --streams "$streams" --slots 16 --threads "$threads" \
  --weights "$weights" >"$work/folio.jsonl"
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
for n in ${streams//,/ }; do
  port=$(free_port)
  "$server" -m "$gguf" --host 127.0.0.1 --port "$port" -t "$threads" -tb "$threads" --parallel 16 \
    -c $((16 * block)) --no-webui ${LLAMA_SERVER_ARGS:-} >"$work/llama-server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 600); do
    python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
      "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
    kill -0 "$server_pid" 2>/dev/null || { echo "server.sh: llama-server exited:" >&2; tail -20 "$work/llama-server.log" >&2; exit 1; }
    sleep 0.1
  done
  "${load[@]}" --url "http://127.0.0.1:$port" --pid "$server_pid" --streams "$n" --prompt-ids "$ids" \
    --body '{"ignore_eos": true}' >>"$work/llama.jsonl"
  kill "$server_pid"; wait "$server_pid" 2>/dev/null || true
  server_pid=""
done

python3 - "$work/folio.jsonl" "$work/llama.jsonl" "$dtype" "$weights" "$threads" "$seconds" "$max_tokens" <<'EOF'
import json, sys
folio, llama = ([json.loads(l) for l in open(p) if l.startswith("{")] for p in sys.argv[1:3])
dtype, weights, threads, seconds, max_tokens = sys.argv[3:]
print(f"folio serve --weights {weights} --slots 16 against llama-server --parallel 16 ({dtype} GGUF), "
      f"{threads} thread(s), {max_tokens} tokens a request, {seconds} s per row\n")
print("| streams | folio tokens/s | llama-server tokens/s | folio / llama | folio TTFT p50 / p99 (ms) "
      "| llama-server TTFT p50 / p99 (ms) | folio RSS (MiB) | llama-server RSS (MiB) | errors (folio, llama) |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for f, l in zip(folio, llama):
    ratio = f["tokens_per_s"] / l["tokens_per_s"] if l["tokens_per_s"] else float("nan")
    print(f"| {f['streams']} | {f['tokens_per_s']:.0f} | {l['tokens_per_s']:.0f} | {ratio:.2f} | "
          f"{f['ttft_p50_ms']:.1f} / {f['ttft_p99_ms']:.1f} | {l['ttft_p50_ms']:.1f} / {l['ttft_p99_ms']:.1f} | "
          f"{f['rss_max_mib']:.0f} | {l['rss_max_mib']:.0f} | {f['errors'] + f['503']}, {l['errors'] + l['503']} |")
for name, rows in (("folio", folio), ("llama-server", llama)):
    if len(rows) > 1 and rows[0]["tokens_per_s"]:
        print(f"\n{name}: {rows[-1]['streams']} streams / 1 stream = {rows[-1]['tokens_per_s'] / rows[0]['tokens_per_s']:.2f}x",
              end="")
print()
EOF
