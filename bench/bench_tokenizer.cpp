// Encoding speed of a tokenizer read from a file (GPT-2's .tiktoken or vocab.json, a
// SentencePiece .model): the whole text encoded once per iteration, the load outside
// the clock. bench/peer/tiktoken/encode.sh runs it against js-tiktoken and
// @dqbd/tiktoken on the same text, and compares the ids it writes.
//   FOLIO_BENCH_TOKENIZER=gpt2.tiktoken FOLIO_BENCH_TEXT=data/tinyshakespeare.txt
//     build/bench/bench_tokenizer --benchmark_repetitions=5
// FOLIO_BENCH_IDS=FILE also writes the ids (space-separated, one line), after timing.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "data/tokenizer.h"

namespace {

using namespace folio;

void BM_Encode(benchmark::State& state) {
  const char* file = std::getenv("FOLIO_BENCH_TOKENIZER");
  const char* text_path = std::getenv("FOLIO_BENCH_TEXT");
  if (!file || !text_path) return state.SkipWithError("set FOLIO_BENCH_TOKENIZER and FOLIO_BENCH_TEXT");
  std::ifstream in(text_path, std::ios::binary);
  if (!in) return state.SkipWithError("cannot read FOLIO_BENCH_TEXT");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  TokenizerSpec spec;
  spec.name = file;
  const auto tok = make_tokenizer(spec, {});
  std::vector<int32_t> ids;
  for (auto _ : state) {
    ids = tok->encode(text);
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(text.size()));
  state.counters["tokens"] = double(ids.size());
  state.counters["MB_per_s"] =
      benchmark::Counter(double(text.size()) / 1e6, benchmark::Counter::kIsIterationInvariantRate);
  if (const char* out = std::getenv("FOLIO_BENCH_IDS")) {
    std::ostringstream line;
    for (size_t i = 0; i < ids.size(); ++i) line << (i ? " " : "") << ids[i];
    std::ofstream(out) << line.str() << "\n";
  }
}
// One encode per iteration is 0.1-1 s of work: the repetitions, not the iterations,
// give the spread (min/median over --benchmark_repetitions).
BENCHMARK(BM_Encode)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime()->Apply([](auto* b) {
  folio::bench::add_min_max(b);
});

}  // namespace

int main(int argc, char** argv) { return folio::bench::run_registered(argc, argv); }
