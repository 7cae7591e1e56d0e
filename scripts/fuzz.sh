#!/usr/bin/env bash
# Fuzzes the checkpoint reader (fuzz/fuzz_checkpoint.cpp: load_safetensors plus the
# model and training-state validation) with libFuzzer, ASan and UBSan, for SECONDS
# (default 60), then the GGUF reader folio import uses (fuzz/fuzz_gguf.cpp) for a
# quarter of that. Extra arguments go to libFuzzer (e.g. -jobs=2, -only_ascii=1).
#
#   bash scripts/fuzz.sh 600        # ten minutes
#   bash scripts/fuzz.sh 20         # the smoke run .ci/run does when clang is installed
#
# Installs clang, its runtime libraries (libFuzzer, sanitizers) and libomp when they
# are missing, builds into build-fuzz/ (clang, -fsanitize=fuzzer,address,undefined),
# seeds the corpus with real checkpoints from a tiny `folio train` run, and fuzzes.
# build-fuzz/corpus keeps what the fuzzer learnt between runs; fuzz/corpus (in git)
# holds the inputs worth keeping, which tests/test_fuzz_corpus.cpp replays in the
# normal suite. A crash is written to build-fuzz/artifacts/ and fails the script;
# reproduce it with `build-fuzz/fuzz/fuzz_checkpoint FILE`, shrink it with
# `-minimize_crash=1 -runs=10000 FILE`, and once fixed, copy it into fuzz/corpus/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true

bash scripts/setup.sh clang libclang-rt-14-dev libomp-14-dev

build=build-fuzz
jobs=$(nproc 2>/dev/null || echo 2)
# -O1 and line tables only, as libFuzzer's own guide builds its targets: the smoke run
# is mostly this build, and it compiles faster so than at -O2 -g.
CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFOLIO_FUZZ=ON \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
  -DFOLIO_BUILD_TESTS=OFF -DFOLIO_BUILD_BENCH=OFF >/dev/null
# The seed runs need a folio binary: FOLIO_SEED_BINARY names one already built (CI
# passes the suite's), else this build makes its own.
folio=${FOLIO_SEED_BINARY:-$build/folio}
if [ -n "${FOLIO_SEED_BINARY:-}" ]; then
  [ -x "$folio" ] || { echo "fuzz: FOLIO_SEED_BINARY=$folio is not an executable folio" >&2; exit 2; }
  cmake --build "$build" -j"$jobs" --target fuzz_checkpoint fuzz_gguf
else
  cmake --build "$build" -j"$jobs" --target fuzz_checkpoint fuzz_gguf folio_cli
fi

# Seeds: every kind of file folio writes (model, best, state), for two model shapes.
# Tiny models keep the inputs small (a few KB), so each execution is fast.
seeds=$build/seeds
if [ ! -s "$seeds/a-state.safetensors" ]; then
  rm -rf "$seeds" "$build/seed-runs"
  mkdir -p "$seeds" "$build/seed-runs"
  head -c 3000 data/tinyshakespeare.txt >"$build/seed-runs/corpus.txt"
  common=(--data "$build/seed-runs/corpus.txt" --n-layer 1 --block-size 4 --batch-size 2
          --max-iters 4 --eval-interval 2 --eval-iters 1 --threads 1 --quiet)
  "$folio" train "${common[@]}" --out "$build/seed-runs/a" --n-head 1 --n-embd 4
  "$folio" train "${common[@]}" --out "$build/seed-runs/b" --n-head 2 --n-embd 4 --no-bias \
    --activation relu --dropout 0.1
  for run in a b; do
    for f in model best state; do cp "$build/seed-runs/$run/$f.safetensors" "$seeds/$run-$f.safetensors"; done
  done
fi
# GGUF seeds: an exportable model (GELU, no biases) as gpt2 in f16 and gptneox in q8_0,
# and a llama one in q8_0, each under -max_len.
gguf_seeds=$build/seeds-gguf
if [ ! -s "$gguf_seeds/rope-q8.gguf" ]; then
  mkdir -p "$gguf_seeds"
  for pos in learned rope; do
    "$folio" train --data "$build/seed-runs/corpus.txt" --n-layer 1 --block-size 4 --batch-size 2 --max-iters 2 \
      --eval-interval 2 --eval-iters 1 --threads 1 --quiet --n-head 1 --n-embd 32 --activation gelu --no-bias \
      --pos $pos --out "$build/seed-runs/gguf-$pos"
  done
  "$folio" export --dtype f16 "$build/seed-runs/gguf-learned" "$gguf_seeds/learned-f16.gguf"
  "$folio" export --dtype q8_0 "$build/seed-runs/gguf-rope" "$gguf_seeds/rope-q8.gguf"
fi
if [ ! -s "$gguf_seeds/llama-q8.gguf" ]; then  # RMSNorm + SwiGLU + rope: llama's graph
  "$folio" train --data "$build/seed-runs/corpus.txt" --n-layer 1 --block-size 4 --batch-size 2 --max-iters 2 \
    --eval-interval 2 --eval-iters 1 --threads 1 --quiet --n-head 1 --n-embd 32 --no-bias --pos rope --norm rms \
    --activation swiglu --out "$build/seed-runs/gguf-llama"
  "$folio" export --dtype q8_0 "$build/seed-runs/gguf-llama" "$gguf_seeds/llama-q8.gguf"
fi

mkdir -p "$build/corpus" "$build/artifacts"
echo "[fuzz] fuzzing the checkpoint reader for ${seconds}s"
# -max_len: the seeds are a few KB; 64 KB leaves room to grow headers and tensors.
# -malloc_limit_mb: the reader never allocates more than the file holds (parsing the
# JSON header costs ~25x the header), so one allocation over 64 MB for an input of at
# most 64 KB is a bug, reported like a crash. -rss_limit_mb bounds the whole process
# (ASan's quarantine alone keeps up to 256 MB).
"$build/fuzz/fuzz_checkpoint" -max_total_time="$seconds" -print_final_stats=1 \
  -dict=fuzz/checkpoint.dict -max_len=65536 -timeout=10 -malloc_limit_mb=64 -rss_limit_mb=2048 \
  -artifact_prefix="$build/artifacts/" "$@" "$build/corpus" "$seeds" fuzz/corpus

mkdir -p "$build/corpus-gguf"
echo "[fuzz] fuzzing the GGUF reader for $((seconds / 4 + 1))s"
"$build/fuzz/fuzz_gguf" -max_total_time="$((seconds / 4 + 1))" -print_final_stats=1 \
  -max_len=65536 -timeout=10 -malloc_limit_mb=64 -rss_limit_mb=2048 \
  -artifact_prefix="$build/artifacts/" "$@" "$build/corpus-gguf" "$gguf_seeds" fuzz/corpus-gguf
