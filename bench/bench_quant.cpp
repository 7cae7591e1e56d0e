// The int8 products the decoder runs (--weights int8), kernel against kernel, on Q8_0
// weights of N = 1536 (the 25M model's qkv) and 2048 (its fc) rows of K = 512:
//   Q8Gemv_Widening  kernels::q8_rows: each weight widened to fp32, FMA with the fp32
//                    activation row (M = 1)
//   Q8Rows           kernels::quantize_rows_q8 + one kernel of q8x8_rows on the
//                    decoder's layout (repack_q8x8): `kernel` 0 plain, 1 avx2, 2 vnni
//                    (skipped where the CPU has not it), for M = 1 (a decode step),
//                    4 to 32 (a batch of streams, a short prompt) and 128 (a prompt's
//                    rows, panels of 4 or 8 rows per pass, VNNI's of two groups from 16)
//   Q8Rows_Widened   a prompt's rows as the decoder ran them before the integer
//                    kernels (FOLIO_INT8_KERNEL=widened): the blocks widened to fp32
//                    (dequantize_q8x8_groups), then oneDNN's fp32 product
//   QuantizeRows     kernels::quantize_rows_q8 alone, by loop (row_quantizers: 0 plain,
//                    1 avx2, 2 avx512, skipped where the CPU has not it), on 512 rows
//                    of K = 512 and 3072 (a prompt's activations before fc2 at 124M)
// `from_memory:1` cycles through copies of the weights (64 MB in all, more than the
// caches hold), as a decode step does through its layers; `from_memory:0` reads one
// copy, in cache after the first pass: the kernel's arithmetic alone. Reports the
// weights' bytes read per second (GB/s) and, for M > 1, activation rows per second.
//   build/bench/bench_quant --threads=1
//   build/bench/bench_quant --threads=1 --benchmark_repetitions=5 --benchmark_filter='Q8Rows.*M:128'
//   build/bench/bench_quant --threads=1 --benchmark_filter=QuantizeRows
#include <benchmark/benchmark.h>

#include <string_view>
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

// args: N, from_memory, kernel (index into integer_kernels' names), M
void Q8Rows(benchmark::State& state) {
  const int64_t N = state.range(0), nb = kernels::q8_blocks(kK), M = state.range(3);
  const char* names[] = {"plain", "avx2", "vnni"};
  const kernels::IntegerKernel* kernel = kernels::find_integer_kernel(names[state.range(2)]);
  if (!kernel) return state.SkipWithError("this CPU does not run the kernel");
  state.SetLabel(kernel->name);
  const Repacked W(Weights(N, state.range(1) != 0), N);
  bench::Buffer x(size_t(M * kK), 1);                    // (M, K)
  std::vector<int8_t> xq(static_cast<size_t>(M * nb * 32));  // (M, nb * 32)
  std::vector<float> xs(static_cast<size_t>(M * nb)), y(static_cast<size_t>(M * N));  // (M, nb), (M, N)
  int64_t i = 0;
  for (auto _ : state) {
    kernels::quantize_rows_q8(x.data(), M, kK, xq.data(), xs.data());
    kernel->rows(W.copy(i++), xq.data(), xs.data(), y.data(), M, N, kK, nullptr, 0, kernels::q8x8_groups(N));
    benchmark::DoNotOptimize(y.data());
  }
  report(state, N);
  state.counters["rows/s"] = benchmark::Counter(double(M) * double(state.iterations()), benchmark::Counter::kIsRate);
}

// args: N, from_memory, M: the blocks widened to fp32 (N, K), then x (M, K) W^T in fp32.
void Q8Rows_Widened(benchmark::State& state) {
  const int64_t N = state.range(0), M = state.range(2);
  const Repacked W(Weights(N, state.range(1) != 0), N);
  bench::Buffer x(size_t(M * kK), 1);  // (M, K)
  std::vector<float> wide(size_t(kernels::q8x8_groups(N) * kernels::kQ8Group * kK)), y(size_t(M * N));  // (N, K), (M, N)
  int64_t i = 0;
  for (auto _ : state) {
    kernels::dequantize_q8x8_groups(W.copy(i++), 0, kernels::q8x8_groups(N), N, kK, wide.data());
    kernels::matmul({.M = M, .N = N, .K = kK, .trans_b = true}, x.data(), wide.data(), y.data(), nullptr);
    benchmark::DoNotOptimize(y.data());
  }
  report(state, N);
  state.counters["rows/s"] = benchmark::Counter(double(M) * double(state.iterations()), benchmark::Counter::kIsRate);
}

// args: loop (index into row_quantizers' names), K: 512 rows (512, K) -> int8 blocks.
void QuantizeRows(benchmark::State& state) {
  const int64_t M = 512, K = state.range(1), nb = kernels::q8_blocks(K);
  const char* names[] = {"plain", "avx2", "avx512"};
  const kernels::RowQuantizer* loop = nullptr;
  for (const kernels::RowQuantizer& q : kernels::row_quantizers())
    if (std::string_view(q.name) == names[state.range(0)]) loop = &q;
  if (!loop) return state.SkipWithError("this CPU does not run the loop");
  state.SetLabel(loop->name);
  bench::Buffer x(size_t(M * K), 1);                         // (M, K)
  std::vector<int8_t> xq(static_cast<size_t>(M * nb * 32));  // (M, nb * 32)
  std::vector<float> xs(static_cast<size_t>(M * nb));        // (M, nb)
  for (auto _ : state) {
    loop->rows(x.data(), M, K, xq.data(), xs.data());
    benchmark::DoNotOptimize(xq.data());
  }
  state.counters["rows/s"] = benchmark::Counter(double(M) * double(state.iterations()), benchmark::Counter::kIsRate);
}

void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"N", "from_memory"});
  for (int64_t N : {1536, 2048})
    for (int64_t mem : {0, 1}) b->Args({N, mem});
  bench::add_min_max(b);
}

void kernel_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"N", "from_memory", "kernel", "M"});
  for (int64_t N : {1536, 2048})
    for (int64_t kernel : {0, 1, 2}) {
      for (int64_t M : {1, 4, 8, 16, 32})
        for (int64_t mem : {0, 1}) b->Args({N, mem, kernel, M});
      b->Args({N, 0, kernel, 128});
    }
  bench::add_min_max(b);
}

void widened_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"N", "from_memory", "M"});
  for (int64_t N : {1536, 2048}) b->Args({N, 0, 128});
  bench::add_min_max(b);
}

BENCHMARK(Q8Gemv_Widening)->Apply(shapes);
BENCHMARK(Q8Rows)->Apply(kernel_shapes);
BENCHMARK(Q8Rows_Widened)->Apply(widened_shapes);
BENCHMARK(QuantizeRows)->ArgNames({"loop", "K"})->ArgsProduct({{0, 1, 2}, {512, 3072}});

}  // namespace

int main(int argc, char** argv) { return folio::bench::run_registered(argc, argv); }
