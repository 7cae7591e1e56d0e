// One training step of a 2-layer MLP at the model's feed-forward shape:
//   x (B*T = 768, 128) -> linear 128->512 -> gelu -> linear 512->128 -> mean((y - t)^2)
// with requires_grad weights and biases (x and t are data), grads zeroed each step,
// then backward(). Reports ms per step and GFLOP/s of its matrix products (5 of them:
// two forward, dX of layer 2, dW of both layers; x needs no gradient), and, per step
// over the timed iterations after warm-up:
//   pool_fresh      folio::pool::stats().fresh delta: buffers the pool had to allocate
//   dnnl_new_prims  folio::kernels::matmul_primitives_created() delta
//   heap_allocs     malloc-family calls in the whole process (operator new included:
//                   libstdc++'s goes through malloc), counted by hooks in this binary
//   new_calls       of which C++ operator new (graph nodes, closures, tensor handles)
// MLP/matmuls_only runs the same 5 products through folio::kernels::matmul alone, to
// show how much of the step is matrix products.
//
// Threads: --threads=N or FOLIO_BENCH_THREADS=N (default: OMP_NUM_THREADS if set, else
// all cores).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "autograd/kernels/matmul.h"
#include "autograd/ops.h"
#include "autograd/pool.h"
#include "autograd/tensor.h"
#include "bench/bench_common.h"

#include "bench/alloc_hooks.h"

namespace {

constexpr int64_t kRows = 768, kIn = 128, kHidden = 512;  // B*T, C, 4C
constexpr double kMatmulFlops = 5 * 2.0 * kRows * kIn * kHidden;
constexpr int kWarmup = 5;

struct Counts {
  uint64_t fresh, primitives, heap, news;
  static Counts now() {
    return {folio::pool::stats().fresh, uint64_t(folio::kernels::matmul_primitives_created()),
            g_heap_allocs.load(), g_new_calls.load()};
  }
};

void report(benchmark::State& state, const Counts& before, const Counts& after) {
  const auto per_iter = benchmark::Counter::kAvgIterations;
  state.counters["GFLOP/s"] =
      benchmark::Counter(kMatmulFlops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["pool_fresh"] = benchmark::Counter(double(after.fresh - before.fresh), per_iter);
  state.counters["dnnl_new_prims"] =
      benchmark::Counter(double(after.primitives - before.primitives), per_iter);
  state.counters["heap_allocs"] = benchmark::Counter(double(after.heap - before.heap), per_iter);
  state.counters["new_calls"] = benchmark::Counter(double(after.news - before.news), per_iter);
}

folio::Tensor param(const folio::Shape& shape, folio::Rng& rng, float stddev) {
  folio::Tensor t = folio::Tensor::randn(shape, rng, stddev);
  t.set_requires_grad();
  return t;
}

void BM_MLPStep(benchmark::State& state) {
  folio::Rng rng(1234);
  const folio::Tensor x = folio::Tensor::randn({kRows, kIn}, rng);
  const folio::Tensor target = folio::Tensor::randn({kRows, kIn}, rng);
  const folio::Tensor w1 = param({kHidden, kIn}, rng, 0.02f), b1 = param({kHidden}, rng, 0.02f);
  const folio::Tensor w2 = param({kIn, kHidden}, rng, 0.02f), b2 = param({kIn}, rng, 0.02f);
  const folio::Tensor params[] = {w1, b1, w2, b2};
  float loss_value = 0.0f;
  auto step = [&] {
    for (const folio::Tensor& p : params) p.zero_grad();
    const folio::Tensor h = folio::gelu(folio::linear(x, w1, b1));
    const folio::Tensor d = folio::linear(h, w2, b2) - target;
    const folio::Tensor loss = folio::mean(d * d);
    loss.backward();
    loss_value = loss.item();
  };
  for (int i = 0; i < kWarmup; ++i) step();
  const Counts before = Counts::now();
  for (auto _ : state) step();
  const Counts after = Counts::now();
  benchmark::DoNotOptimize(loss_value);
  report(state, before, after);
}

// The step's 5 matrix products alone, as folio's linear/matmul backward issues them.
void BM_MLPMatmulsOnly(benchmark::State& state) {
  using folio::kernels::Gemm;
  folio::bench::Buffer x(kRows * kIn, 1), w1(kHidden * kIn, 2), b1(kHidden, 3), w2(kIn * kHidden, 4),
      b2(kIn, 5), h(kRows * kHidden, 6), y(kRows * kIn, 7), dy(kRows * kIn, 8),
      dh(kRows * kHidden, 9), dw1(kHidden * kIn, 10), dw2(kIn * kHidden, 11);
  Gemm fc1;  // h = x (768, 128) @ w1^T (128, 512) + b1
  fc1.M = kRows, fc1.K = kIn, fc1.N = kHidden, fc1.trans_b = true;
  Gemm fc2;  // y = h (768, 512) @ w2^T (512, 128) + b2
  fc2.M = kRows, fc2.K = kHidden, fc2.N = kIn, fc2.trans_b = true;
  Gemm dx2;  // dh (768, 512) += dy (768, 128) @ w2 (128, 512)
  dx2.M = kRows, dx2.K = kIn, dx2.N = kHidden, dx2.accumulate = true;
  Gemm dw2g;  // dw2 (128, 512) += dy^T (128, 768) @ h (768, 512)
  dw2g.M = kIn, dw2g.K = kRows, dw2g.N = kHidden, dw2g.trans_a = true, dw2g.accumulate = true;
  Gemm dw1g;  // dw1 (512, 128) += dh^T (512, 768) @ x (768, 128)
  dw1g.M = kHidden, dw1g.K = kRows, dw1g.N = kIn, dw1g.trans_a = true, dw1g.accumulate = true;
  auto step = [&] {
    folio::kernels::matmul(fc1, x.data(), w1.data(), h.data(), b1.data());
    folio::kernels::matmul(fc2, h.data(), w2.data(), y.data(), b2.data());
    folio::kernels::matmul(dx2, dy.data(), w2.data(), dh.data());
    folio::kernels::matmul(dw2g, dy.data(), h.data(), dw2.data());
    folio::kernels::matmul(dw1g, dh.data(), x.data(), dw1.data());
  };
  for (int i = 0; i < kWarmup; ++i) step();
  const Counts before = Counts::now();
  for (auto _ : state) step();
  const Counts after = Counts::now();
  benchmark::DoNotOptimize(dw1.data());
  report(state, before, after);
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = folio::bench::setup_threads(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  folio::bench::add_min_max(benchmark::RegisterBenchmark("MLP/step", BM_MLPStep))
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  folio::bench::add_min_max(benchmark::RegisterBenchmark("MLP/matmuls_only", BM_MLPMatmulsOnly))
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  // Sanity check of the hooks: they must see this allocation, or the counts mean nothing.
  const uint64_t seen = g_heap_allocs.load();
  void* volatile probe = std::malloc(32);
  std::free(probe);
  if (g_heap_allocs.load() == seen)
    std::fprintf(stderr, FOLIO_BENCH_HEAP_HOOKS ? "warning: malloc hook not active\n"
                                                : "note: sanitizer build, heap not counted\n");
  benchmark::RunSpecifiedBenchmarks();
  std::fprintf(stderr, "threads: %d\n", threads);
  benchmark::Shutdown();
  return 0;
}
