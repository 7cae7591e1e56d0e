// Generation speed: characters per second of folio generate's loop at config S
// (4 layers, 4 heads, n_embd 128, block_size 64, vocab 65), greedy, from a one-
// character prompt, with the KV cache (nn::Decoder; the context drops block_size/2
// characters at once when full, so the cache is rebuilt every 32 characters; with
// --pos rope it rolls and is never rebuilt) and without it (the whole context
// recomputed for every character). Run at 1 thread, the way a user samples while a
// machine trains:
//   build/bench/bench_generate --threads=1
#include <benchmark/benchmark.h>

#include "bench/bench_common.h"
#include "infer/generator.h"

namespace {

using namespace folio;

const nn::GPT& model_s(bool rope) {
  auto make = [](nn::Positions pos) {
    nn::GPT m({.vocab_size = 65, .block_size = 64, .n_layer = 4, .n_head = 4, .n_embd = 128, .seed = 1, .pos = pos});
    m.eval();
    return m;
  };
  static nn::GPT learned = make(nn::Positions::learned), rotary = make(nn::Positions::rope);
  return rope ? rotary : learned;
}

// args: characters, cache (1/0), context_shift (0: block_size/2), rope (1/0)
void BM_Generate(benchmark::State& state) {
  const int64_t n = state.range(0);
  const SampleOptions opt{.max_new_tokens = n, .greedy = true, .kv_cache = state.range(1) != 0,
                          .context_shift = state.range(2)};
  const std::vector<int32_t> prompt{0};
  int64_t produced = 0;
  for (auto _ : state) {
    Rng rng(1);
    generate(model_s(state.range(3) != 0), prompt, opt, rng, [&](int32_t) { ++produced; });
  }
  state.counters["chars/s"] = benchmark::Counter(double(produced), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Generate)
    ->ArgNames({"chars", "cache", "shift", "rope"})
    ->Args({1000, 1, 0, 0})
    ->Args({1000, 1, 1, 0})
    ->Args({1000, 0, 0, 0})
    ->Args({1000, 1, 0, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  folio::bench::setup_threads(argc, argv);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
