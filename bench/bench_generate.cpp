// Generation speed: characters per second of folio generate's loop at config S
// (4 layers, 4 heads, n_embd 128, block_size 64, vocab 65), greedy, from a one-
// character prompt, with the KV cache (infer::Decoder; the context drops block_size/2
// characters at once when full, so the cache is rebuilt every 32 characters; with
// --pos rope it rolls and is never rebuilt) and without it (the whole context
// recomputed for every character). Run at 1 thread, the way a user samples while a
// machine trains:
//   build/bench/bench_generate --threads=1
//
// Decode and Prefill: the decoder alone (infer/decoder.h), per weight format (--weights
// f32, bf16, int8), on three shapes with random weights: S (above), 25M (8 layers of
// 512, a character vocabulary, the model) and GPT-2 small (12 layers of 768,
// vocabulary 50257, 124M). Decode reports tokens/s, the bytes of matrices a token reads
// (MB/token) and what that is as a fraction of this machine's triad bandwidth
// (bench/triad.h, measured once at start on the same threads): 1.0 would be a decode
// bound by nothing but reading the weights. Prefill runs a 512-token prompt. Decode's
// `threads` is the decoder's (Decoder::set_threads): 1, or 2 with each large product's
// rows split across two threads; run it with --threads=2 for the triad of two.
//   build/bench/bench_generate --threads=1 --benchmark_filter='Decode.*threads:1|Prefill'
//   build/bench/bench_generate --threads=2 --benchmark_filter='Decode.*threads:2'
// With int8 weights, FOLIO_INT8_KERNEL picks the decoder's integer kernel (plain, avx2,
// vnni; unset: the fastest the CPU runs), or "widened" for a prompt's products on
// weights widened to fp32 (infer/decoder_matrices.h); the label names the choice:
//   for k in widened avx2 vnni; do
//     FOLIO_INT8_KERNEL=$k build/bench/bench_generate --threads=2 --benchmark_filter='Prefill/size:[12]/weights:2'
//   done
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "bench/bench_common.h"
#include "bench/triad.h"
#include "infer/generator.h"
#include "infer/decoder.h"

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

// The shapes Decode and Prefill run: 0 S, 1 25M, 2 GPT-2 small (124M), random weights.
const nn::GPT& model_of_size(int64_t size) {
  static std::unique_ptr<nn::GPT> models[3];
  if (!models[size]) {
    const nn::GPTConfig configs[3] = {
        {.vocab_size = 65, .block_size = 512, .n_layer = 4, .n_head = 4, .n_embd = 128, .seed = 1},
        {.vocab_size = 65, .block_size = 512, .n_layer = 8, .n_head = 8, .n_embd = 512, .seed = 1},
        {.vocab_size = 50257, .block_size = 1024, .n_layer = 12, .n_head = 12, .n_embd = 768, .seed = 1}};
    models[size] = std::make_unique<nn::GPT>(configs[size]);
    models[size]->eval();
  }
  return *models[size];
}

double triad_gb_per_s() {
  static const double gb = bench::triad().gb_per_s;
  return gb;
}

const char* kSizes[] = {"S", "25M", "124M"};

// "25M int8", and with FOLIO_INT8_KERNEL set, int8's kernel: "25M int8 avx2".
std::string label(int64_t size, nn::Weights weights) {
  const char* kernel = std::getenv("FOLIO_INT8_KERNEL");
  return std::string(kSizes[size]) + " " + to_string(weights) +
         (kernel && weights == nn::Weights::int8 ? std::string(" ") + kernel : "");
}

// args: size (0 S, 1 25M, 2 124M), weights (0 f32, 1 bf16, 2 int8), threads (the decoder's)
void BM_Decode(benchmark::State& state) {
  const nn::GPT& model = model_of_size(state.range(0));
  const nn::Weights weights = nn::kAllWeights[size_t(state.range(1))];
  state.SetLabel(label(state.range(0), weights));
  infer::Decoder decoder(model, 1, weights);
  decoder.set_threads(int(state.range(2)));
  const int64_t V = model.config().vocab_size, block = model.config().block_size;
  const std::vector<int32_t> prompt{0};
  int64_t tokens = 0;
  std::span<const float> logits = decoder.restart(prompt);
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    if (decoder.length() == block) logits = decoder.restart(prompt);  // (rare: once per block_size tokens)
    const int32_t next = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin()) % int32_t(V);
    logits = decoder.step(next);
    ++tokens;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double mb = double(decoder.matrix_bytes()) / 1e6, per_s = double(tokens) / seconds;
  state.counters["tokens/s"] = per_s;
  state.counters["MB/token"] = mb;
  // The weights' GB/s as a fraction of the triad's: MB/token x tokens/s / bandwidth.
  state.counters["bw_fraction"] = mb / 1e3 * per_s / triad_gb_per_s();
  state.counters["triad_GB/s"] = triad_gb_per_s();
}
BENCHMARK(BM_Decode)
    ->ArgNames({"size", "weights", "threads"})
    ->ArgsProduct({{0, 1, 2}, {0, 1, 2}, {1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();

// Decode after a long prompt, as bench/peer/llamacpp/decode.sh measures it: the 128
// tokens after a 512-token prompt (the prefill untimed), where a step's attention reads
// 512 to 640 positions of cached keys and values per layer and splits its heads across
// the decoder's threads (infer/decoder.h, kSplitCacheFloats). f32 weights; `threads`
// the decoder's, as Decode's.
//   build/bench/bench_generate --threads=2 --benchmark_filter='DecodeAfterPrompt'
void BM_DecodeAfterPrompt(benchmark::State& state) {
  const nn::GPT& model = model_of_size(state.range(0));
  state.SetLabel(kSizes[state.range(0)]);
  infer::Decoder decoder(model, 1);
  decoder.set_threads(int(state.range(1)));
  constexpr int64_t kPrompt = 512, kDecoded = 128;
  const int32_t V = int32_t(model.config().vocab_size);
  std::vector<int32_t> prompt(kPrompt);
  for (size_t t = 0; t < prompt.size(); ++t) prompt[t] = int32_t((7 * t + 3) % 65);
  std::span<const float> logits = decoder.restart(prompt);
  for (auto _ : state) {
    if (decoder.length() == kPrompt + kDecoded) {
      state.PauseTiming();
      logits = decoder.restart(prompt);
      state.ResumeTiming();
    }
    const int32_t next = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin()) % V;
    logits = decoder.step(next);
  }
  state.counters["tokens/s"] = benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_DecodeAfterPrompt)
    ->ArgNames({"size", "threads"})
    ->ArgsProduct({{1, 2}, {1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();

// A 512-token prompt (the decoder's prefill), per weight format: prompt tokens/s.
void BM_Prefill(benchmark::State& state) {
  const nn::GPT& model = model_of_size(state.range(0));
  const nn::Weights weights = nn::kAllWeights[size_t(state.range(1))];
  state.SetLabel(label(state.range(0), weights));
  infer::Decoder decoder(model, 1, weights);
  std::vector<int32_t> prompt(512);
  for (size_t t = 0; t < prompt.size(); ++t) prompt[t] = int32_t((7 * t + 3) % 65);
  for (auto _ : state) benchmark::DoNotOptimize(decoder.restart(prompt).data());
  state.counters["prompt tokens/s"] =
      benchmark::Counter(double(state.iterations()) * double(prompt.size()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Prefill)
    ->ArgNames({"size", "weights"})
    ->ArgsProduct({{0, 1, 2}, {0, 1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

int main(int argc, char** argv) { return folio::bench::run_registered(argc, argv); }
