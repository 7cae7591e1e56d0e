// The C++ twin of the Python module's Model.logits, for bench/python_logits.py, which
// times both alternately: a checkpoint's forward pass over 64 token ids (ids[i] =
// 7i mod V), without gradients, the (T, V) logits copied out as the module copies them
// into its numpy array.
//   FOLIO_BENCH_CHECKPOINT=runs/x build/bench/bench_logits --threads=1
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench/bench_common.h"
#include "io/checkpoint.h"

namespace {

using namespace folio;

void BM_Logits(benchmark::State& state) {
  const char* path = std::getenv("FOLIO_BENCH_CHECKPOINT");
  if (!path) return state.SkipWithError("set FOLIO_BENCH_CHECKPOINT to a run directory or .safetensors file");
  const ModelCheckpoint ck = load_model(path);
  ck.model->eval();
  const int64_t V = ck.model->config().vocab_size, T = std::min<int64_t>(state.range(0), ck.model->config().block_size);
  std::vector<int32_t> ids(static_cast<size_t>(T));  // (T)
  for (int64_t i = 0; i < T; ++i) ids[size_t(i)] = int32_t(7 * i % V);
  std::vector<float> out(size_t(T * V));  // (T, V)
  for (auto _ : state) {
    NoGradGuard no_grad;
    const Tensor x = ck.model->forward(ids, 1, T).logits;  // (1, T, V)
    std::memcpy(out.data(), x.data(), out.size() * sizeof(float));
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["T"] = double(T);
}
BENCHMARK(BM_Logits)->ArgNames({"T"})->Arg(64)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) { return folio::bench::run_registered(argc, argv); }
