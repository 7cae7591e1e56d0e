// The int8 matrix-vector product a decode step runs (--weights int8), kernel against
// kernel: one activation row (M = 1, K = 512, the 25M model's n_embd) against Q8_0
// weights of N = 1536 (its qkv) and 2048 (its fc) rows.
//   widening  kernels::q8_rows: each weight widened to fp32, FMA with fp32 activations
//   integer   kernels::quantize_rows_q8 + q8q8_rows: the activation row quantized
//             (counted in the time), int8 x int8 dots per block
//   repacked  the same on the decoder's layout (kernels::repack_q8x8, q8x8_rows):
//             8 rows' blocks together, one stream, one conversion per 8 block sums
// `from_memory:1` cycles through copies of the weights (64 MB in all, more than the
// caches hold), as a decode step does through its layers; `from_memory:0` reads one
// copy, in cache after the first pass: the kernel's arithmetic alone. Reports the
// weights' bytes read per second (GB/s).
//   build/bench/bench_quant --threads=1
//   build/bench/bench_quant --threads=1 --benchmark_repetitions=5 --benchmark_filter='N:1536'
#include <benchmark/benchmark.h>

#include <vector>

#include "infer/kernels/quant.h"
#include "bench/bench_common.h"

namespace {

using namespace folio;
using kernels::BlockQ8;

constexpr int64_t kK = 512;

// Copies of one (N, K) matrix of Q8_0 blocks: (copies, N, q8_blocks(K)).
struct Weights {
  std::vector<BlockQ8> blocks;
  int64_t copies, per_copy;
  Weights(int64_t N, bool from_memory) {
    const int64_t nb = kernels::q8_blocks(kK);
    per_copy = N * nb;
    const int64_t bytes = per_copy * int64_t(sizeof(BlockQ8));
    copies = from_memory ? (int64_t(64) << 20) / bytes + 1 : 1;
    blocks.resize(size_t(copies * per_copy));
    bench::Buffer w(size_t(N * kK), 3);  // (N, K)
    for (int64_t c = 0; c < copies; ++c)
      for (int64_t n = 0; n < N; ++n)
        kernels::quantize_q8(w.data() + n * kK, kK, blocks.data() + c * per_copy + n * nb);
  }
  const BlockQ8* copy(int64_t i) const { return blocks.data() + (i % copies) * per_copy; }
};

// The same copies repacked in groups of 8 rows: (copies, ceil(N / 8), q8_blocks(K)).
struct Repacked {
  std::vector<kernels::BlockQ8x8> groups;
  int64_t copies, per_copy;
  Repacked(const Weights& W, int64_t N) : copies(W.copies) {
    per_copy = kernels::q8x8_groups(N) * kernels::q8_blocks(kK);
    groups.resize(size_t(copies * per_copy));
    for (int64_t c = 0; c < copies; ++c) kernels::repack_q8x8(W.copy(c), N, kK, groups.data() + c * per_copy);
  }
  const kernels::BlockQ8x8* copy(int64_t i) const { return groups.data() + (i % copies) * per_copy; }
};

void report(benchmark::State& state, int64_t N) {
  const double bytes = double(N * kernels::q8_blocks(kK) * int64_t(sizeof(BlockQ8)));
  state.counters["GB/s"] = benchmark::Counter(bytes * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

void Q8Gemv_Widening(benchmark::State& state) {
  const int64_t N = state.range(0);
  const Weights W(N, state.range(1) != 0);
  bench::Buffer x(size_t(kK), 1);  // (1, K)
  std::vector<float> y(static_cast<size_t>(N));  // (1, N)
  int64_t i = 0;
  for (auto _ : state) {
    kernels::q8_rows(W.copy(i++), x.data(), y.data(), 1, N, kK, nullptr);
    benchmark::DoNotOptimize(y.data());
  }
  report(state, N);
}

void Q8Gemv_Integer(benchmark::State& state) {
  const int64_t N = state.range(0), nb = kernels::q8_blocks(kK);
  const Weights W(N, state.range(1) != 0);
  bench::Buffer x(size_t(kK), 1);             // (1, K)
  std::vector<int8_t> xq(static_cast<size_t>(nb * 32));  // (1, nb * 32)
  std::vector<float> xs(static_cast<size_t>(nb)), y(static_cast<size_t>(N));  // (1, nb), (1, N)
  int64_t i = 0;
  for (auto _ : state) {
    kernels::quantize_rows_q8(x.data(), 1, kK, xq.data(), xs.data());
    kernels::q8q8_rows(W.copy(i++), xq.data(), xs.data(), y.data(), 1, N, kK, nullptr);
    benchmark::DoNotOptimize(y.data());
  }
  report(state, N);
}

void Q8Gemv_Repacked(benchmark::State& state) {
  const int64_t N = state.range(0), nb = kernels::q8_blocks(kK);
  const Repacked W(Weights(N, state.range(1) != 0), N);
  bench::Buffer x(size_t(kK), 1);             // (1, K)
  std::vector<int8_t> xq(static_cast<size_t>(nb * 32));  // (1, nb * 32)
  std::vector<float> xs(static_cast<size_t>(nb)), y(static_cast<size_t>(N));  // (1, nb), (1, N)
  int64_t i = 0;
  for (auto _ : state) {
    kernels::quantize_rows_q8(x.data(), 1, kK, xq.data(), xs.data());
    kernels::q8x8_rows(W.copy(i++), xq.data(), xs.data(), y.data(), 1, N, kK, nullptr, 0, kernels::q8x8_groups(N));
    benchmark::DoNotOptimize(y.data());
  }
  report(state, N);
}

void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"N", "from_memory"});
  for (int64_t N : {1536, 2048})
    for (int64_t mem : {0, 1}) b->Args({N, mem});
  bench::add_min_max(b);
}

BENCHMARK(Q8Gemv_Widening)->Apply(shapes);
BENCHMARK(Q8Gemv_Integer)->Apply(shapes);
BENCHMARK(Q8Gemv_Repacked)->Apply(shapes);

}  // namespace

int main(int argc, char** argv) { return folio::bench::run_registered(argc, argv); }
