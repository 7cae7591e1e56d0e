// The model at the configurations, forward + backward:
//   Block/<cfg>        one Block on x (B, T, C)
//   MultiHead/<cfg>    the fast path (packed QKV, batched attention) ...
//   Heads/<cfg>        ... and the same module run head by head (the specification)
//   GPT/<cfg>          the whole model with its loss
//   TrainStep/<cfg>    GPT forward + backward + clip + AdamW + zero_grad: tokens/s, as
//                      `folio train` runs it: data-parallel, one batch shard per thread
//   TrainStepOps/<cfg> the same step with the threads inside each op instead
//   TrainStepBf16/<cfg> TrainStep with every matrix product in bf16 (fp32 accumulation);
//                      GFLOP/s counts the same fp32-equivalent FLOPs as TrainStep
//   DivergenceGuard    the guards' own work in a step (begin, verdict, accepted) on a full
//                      window, the default --spike-window 100; printed at the end as a
//                      fraction of TrainStep/S. The gradient norm it judges is the clip's,
//                      which TrainStep computes with or without the guards.
//   Peak/fp32, Peak/bf16 one large product (GPT-2 small's feed-forward, 2048 x 768 @
//                      768 x 3072) on all threads: the products' peak on this machine,
//                      which the summary divides each step's GFLOP/s by
// Configs: T 2L/4H/64d block 32 batch 16; S 4L/4H/128d block 64 batch 12;
//          M 6L/6H/384d block 256 batch 64, dropout 0.2;
//          G GPT-2 small (124M): 12L/12H/768d block 1024, GPT-2's 50,257-token vocabulary
//          and layout (tied embedding, GELU-tanh, GPT-2's biases), one sequence per
//          thread (FOLIO_BENCH_GPT2_BATCH=N: N sequences), TrainStep and TrainStepBf16 only,
//          one warm-up and one timed step.
// GFLOP/s is "effective": 3x the forward matmul FLOPs (causal attention counted in full).
// Memory per TrainStep: step_MB, what the pool held at the step's peak beyond what it
// held before it (activations, their gradients, scratch); pool_MB, the pool's peak in
// all (with the weights, gradients and optimizer state); peak_RSS_MB, the process's
// (ru_maxrss since it started: run one benchmark per process for a benchmark's own).
// Per step after warm-up: pool_fresh (buffers the pool had to allocate), dnnl_new_prims
// (oneDNN primitives created), heap_allocs (malloc-family calls, whole process),
// bf16_rounded_M (millions of elements rounded fp32 -> bf16 for the products).
// Threads: --threads=N or FOLIO_BENCH_THREADS=N (default: OMP_NUM_THREADS, else all cores).
#include <sys/resource.h>

#include <cstdio>
#include <map>
#include <optional>
#include <string>

#include "autograd/kernels/matmul.h"
#include "autograd/pool.h"
#include "bench/alloc_hooks.h"
#include "bench/bench_common.h"
#include "nn/transformer.h"
#include "train/adamw.h"
#include "train/data_parallel.h"
#include "train/divergence_guard.h"

namespace {

using namespace folio;

struct Config {
  const char* name;
  int64_t n_layer, n_head, n_embd, block, batch;
  float dropout;
  int64_t vocab = 65;
  bool gpt2 = false;  // GPT-2's layout: tied embedding, GELU's tanh form, GPT-2's biases
  int warmup = 2;     // steps before the timed ones
};
// G's batch 0: one sequence per thread, or FOLIO_BENCH_GPT2_BATCH (main decides).
const Config kConfigs[] = {{"T", 2, 4, 64, 32, 16, 0.0f},
                           {"S", 4, 4, 128, 64, 12, 0.0f},
                           {"M", 6, 6, 384, 256, 64, 0.2f},
                           {"G", 12, 12, 768, 1024, 0, 0.0f, 50257, true, 1}};

// GPT-2's activation, named apart: bench/peer/compare.sh reads the T, S and M steps'
// activation from an assignment of an Activation in this file, and G's is not theirs.
constexpr nn::Activation kGpt2Activation = nn::Activation::gelu_tanh;

nn::GPTConfig gpt_config(const Config& c) {
  nn::GPTConfig g{.vocab_size = c.vocab, .block_size = c.block, .n_layer = c.n_layer, .n_head = c.n_head,
                  .n_embd = c.n_embd, .dropout = c.dropout};
  if (c.gpt2) g.activation = kGpt2Activation, g.tie_weights = true, g.gpt2_biases = true;
  return g;
}

// Forward matmul FLOPs of one Block and of the GPT on (B, T).
double block_flops(const Config& c) {
  const double BT = double(c.batch) * c.block, C = double(c.n_embd);
  return 24.0 * BT * C * C + 4.0 * BT * c.block * C;
}
double gpt_flops(const Config& c) { return c.n_layer * block_flops(c) + 2.0 * c.batch * c.block * c.n_embd * c.vocab; }

// Counts what a step allocates, over the timed iterations.
struct AllocCounter {
  uint64_t fresh = pool::stats().fresh, prims = uint64_t(kernels::matmul_primitives_created());
  uint64_t heap = g_heap_allocs.load();
  int64_t rounded = kernels::bf16_rounded();
  void report(benchmark::State& state) const {
    const double n = double(state.iterations());
    state.counters["pool_fresh"] = double(pool::stats().fresh - fresh) / n;
    state.counters["dnnl_new_prims"] = double(kernels::matmul_primitives_created() - prims) / n;
    state.counters["heap_allocs"] = double(g_heap_allocs.load() - heap) / n;
    state.counters["bf16_rounded_M"] = double(kernels::bf16_rounded() - rounded) / n * 1e-6;
  }
};

void flops_counter(benchmark::State& state, double flops_per_iter) {
  state.counters["GFLOP/s"] = benchmark::Counter(flops_per_iter * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

std::pair<std::vector<int32_t>, std::vector<int32_t>> random_batch(const Config& c, uint64_t seed) {
  Rng r(seed);
  std::vector<int32_t> x(c.batch * c.block), y(c.batch * c.block);
  for (auto& v : x) v = int32_t(r.below(uint64_t(c.vocab)));
  for (auto& v : y) v = int32_t(r.below(uint64_t(c.vocab)));
  return {x, y};
}

constexpr double kMB = 1024.0 * 1024.0;

// The memory counters of a step (see the header), around timed().
struct MemoryCounter {
  uint64_t before = 0;
  void start() {
    before = pool::stats().bytes_in_use;
    pool::reset_peak();
  }
  void report(benchmark::State& state) const {
    const uint64_t peak = pool::stats().bytes_in_use_peak;
    state.counters["step_MB"] = double(peak - before) / kMB;
    state.counters["pool_MB"] = double(peak) / kMB;
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    state.counters["peak_RSS_MB"] = double(usage.ru_maxrss) / 1024.0;
  }
};

// Runs `step` `warmup` times, then times it with the allocation counters (and the
// memory counters, given one: from after the warm-up, when the optimizer's state and
// every lazily made buffer exist).
template <class Step>
void timed(benchmark::State& state, Step step, int warmup = 2, MemoryCounter* memory = nullptr) {
  for (int i = 0; i < warmup; ++i) step();
  if (memory) memory->start();
  AllocCounter counter;
  for (auto _ : state) step();
  counter.report(state);
}

void BM_Block(benchmark::State& state, Config c) {
  Rng init(1);
  nn::Block block(c.n_embd, c.n_head, c.block, c.dropout, true, nn::Activation::gelu, init);
  Rng xr(2);
  const Tensor x0 = Tensor::randn({c.batch, c.block, c.n_embd}, xr);
  timed(state, [&] {
    Tensor x = x0.detach().set_requires_grad();
    sum(block.forward(x)).backward();
    block.zero_grad();
  });
  flops_counter(state, 3 * block_flops(c));
}

void BM_Attention(benchmark::State& state, Config c, bool fast) {
  Rng init(1);
  nn::MultiHead mh(c.n_embd, c.n_head, c.n_embd / c.n_head, c.block, c.dropout, true, init);
  Rng xr(2);
  const Tensor x0 = Tensor::randn({c.batch, c.block, c.n_embd}, xr);
  timed(state, [&] {
    Tensor x = x0.detach().set_requires_grad();
    sum(fast ? mh.forward(x) : mh.forward_heads(x)).backward();
    mh.zero_grad();
  });
  const double BT = double(c.batch) * c.block, C = double(c.n_embd);
  flops_counter(state, 3 * (8.0 * BT * C * C + 4.0 * BT * c.block * C));
}

void BM_GPT(benchmark::State& state, Config c) {
  nn::GPT gpt(gpt_config(c));
  const auto [x, y] = random_batch(c, 3);
  timed(state, [&] {
    gpt.forward(x, c.batch, c.block, y).loss.backward();
    gpt.zero_grad();
  });
  flops_counter(state, 3 * gpt_flops(c));
}

void BM_TrainStep(benchmark::State& state, Config c, bool data_parallel, Precision precision) {
  nn::GPT gpt(gpt_config(c));
  gpt.set_precision(precision);
  AdamW opt(gpt.named_parameters(), {});
  std::optional<DataParallel> dp;  // replicas only for the data-parallel step
  if (data_parallel) dp.emplace(gpt, num_threads());
  const std::vector<Tensor> params = gpt.parameters();
  const auto [x, y] = random_batch(c, 3);
  MemoryCounter memory;
  timed(state, [&] {
    if (dp)
      dp->forward_backward(x, y, c.batch, c.block);
    else
      gpt.forward(x, c.batch, c.block, y).loss.backward();
    clip_grad_norm(params, 1.0f);
    opt.step(1e-4f);
    gpt.zero_grad();
  }, c.warmup, &memory);
  memory.report(state);
  flops_counter(state, 3 * gpt_flops(c));
  state.counters["tokens/s"] =
      benchmark::Counter(double(c.batch * c.block), benchmark::Counter::kIsIterationInvariantRate);
}

// The products' peak on this machine: one large product on all threads (oneDNN splits
// it), GPT-2 small's feed-forward over 2048 tokens, x (2048, 768) @ W^T, W (3072, 768)
// as a Linear stores it; in bf16 from operands rounded once, outside the loop.
void BM_Peak(benchmark::State& state, bool bf16) {
  kernels::Gemm g;
  g.M = 2048, g.K = 768, g.N = 3072, g.trans_b = true;
  const folio::bench::Buffer a(size_t(g.M * g.K), 1), w(size_t(g.N * g.K), 2), c(size_t(g.M * g.N), 3);
  std::vector<kernels::bf16> a16(a.n), w16(w.n);
  kernels::to_bf16(a.data(), a16.data(), int64_t(a.n));
  kernels::to_bf16(w.data(), w16.data(), int64_t(w.n));
  auto product = [&] {
    bf16 ? kernels::matmul(g, a16.data(), w16.data(), c.data()) : kernels::matmul(g, a.data(), w.data(), c.data());
  };
  product();  // the primitive made, the operands in cache
  for (auto _ : state) product();
  flops_counter(state, 2.0 * double(g.M) * double(g.N) * double(g.K));
}

void BM_DivergenceGuard(benchmark::State& state) {
  DivergenceGuard guard(TrainConfig{}, GuardState{});
  int64_t step = 0;
  auto one_step = [&] {
    // A loss and a norm that wander, as a run's do, and never spike.
    const float loss = 2.0f + 0.01f * float(step % 7), norm = 0.5f + 0.01f * float(step % 5);
    guard.begin(step++);
    benchmark::DoNotOptimize(guard.verdict(loss, norm));
    guard.accepted(loss, norm, false);
  };
  for (int i = 0; i < 200; ++i) one_step();  // the window full, as in a run after its first 100 steps
  for (auto _ : state) one_step();
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = folio::bench::setup_threads(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  for (const bool bf16 : {false, true})
    folio::bench::add_min_max(benchmark::RegisterBenchmark(bf16 ? "Peak/bf16" : "Peak/fp32",
                                                           [bf16](benchmark::State& s) { BM_Peak(s, bf16); }))
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  std::vector<Config> configs(std::begin(kConfigs), std::end(kConfigs));
  for (Config& c : configs) {
    if (c.batch > 0) continue;
    const char* env = std::getenv("FOLIO_BENCH_GPT2_BATCH");
    char* end = nullptr;
    c.batch = env ? std::strtoll(env, &end, 10) : threads;
    if (c.batch < 1 || (env && *end)) {
      std::fprintf(stderr, "FOLIO_BENCH_GPT2_BATCH=%s: expected a whole number of sequences >= 1\n", env);
      return 2;
    }
  }
  for (const Config& c : configs) {
    const std::string n = c.name;
    // M and G steps take seconds: a fixed, small count
    const int iters = n == "M" ? 2 : n == "G" ? 1 : 0;
    auto reg = [&](const std::string& name, auto fn) {
      auto* b = folio::bench::add_min_max(benchmark::RegisterBenchmark(name.c_str(), fn));
      b->UseRealTime()->Unit(benchmark::kMillisecond);
      if (iters) b->Iterations(iters);
    };
    if (c.gpt2) {  // the training step alone: its parts at this size would take minutes
      reg("TrainStep/" + n, [c](benchmark::State& s) { BM_TrainStep(s, c, true, Precision::fp32); });
      reg("TrainStepBf16/" + n, [c](benchmark::State& s) { BM_TrainStep(s, c, true, Precision::bf16); });
      continue;
    }
    reg("Block/" + n, [c](benchmark::State& s) { BM_Block(s, c); });
    reg("MultiHead/" + n, [c](benchmark::State& s) { BM_Attention(s, c, true); });
    reg("Heads/" + n, [c](benchmark::State& s) { BM_Attention(s, c, false); });
    reg("GPT/" + n, [c](benchmark::State& s) { BM_GPT(s, c); });
    reg("TrainStep/" + n, [c](benchmark::State& s) { BM_TrainStep(s, c, true, Precision::fp32); });
    reg("TrainStepBf16/" + n, [c](benchmark::State& s) { BM_TrainStep(s, c, true, Precision::bf16); });
    reg("TrainStepOps/" + n, [c](benchmark::State& s) { BM_TrainStep(s, c, false, Precision::fp32); });
  }
  folio::bench::add_min_max(benchmark::RegisterBenchmark("DivergenceGuard", BM_DivergenceGuard))
      ->Unit(benchmark::kMicrosecond);
  folio::bench::CollectingReporter reporter(folio::bench::display_format(argc, argv));
  benchmark::RunSpecifiedBenchmarks(&reporter);
  double guard_s = 0, step_s = 0;
  if (folio::bench::time_of(reporter.runs(), "DivergenceGuard", "median", guard_s) &&
      folio::bench::time_of(reporter.runs(), "TrainStep/S", "median", step_s) && step_s > 0)
    std::fprintf(stderr, "the guards' work in a step / TrainStep/S: %.2g us / %.3g ms = %.2g%%\n", guard_s * 1e6,
                 step_s * 1e3, 100.0 * guard_s / step_s);
  // MultiHead fast path against head by head, from this run.
  for (const Config& c : configs) {
    double fast = 0, heads = 0;
    const std::string n = c.name;
    if (folio::bench::counter_of(reporter.runs(), "MultiHead/" + n, "GFLOP/s", "median", fast) &&
        folio::bench::counter_of(reporter.runs(), "Heads/" + n, "GFLOP/s", "median", heads) && heads > 0)
      std::fprintf(stderr, "MultiHead fast path / head by head, config %s: %.2fx\n", c.name, fast / heads);
    // bf16 against fp32, from this run: tokens/s and effective GFLOP/s (medians).
    double tok[2] = {}, gflops[2] = {};
    bool found = true;
    for (int i = 0; i < 2; ++i) {
      const std::string name = (i ? "TrainStepBf16/" : "TrainStep/") + n;
      found = found && folio::bench::counter_of(reporter.runs(), name, "tokens/s", "median", tok[i]) &&
              folio::bench::counter_of(reporter.runs(), name, "GFLOP/s", "median", gflops[i]);
    }
    if (found && tok[0] > 0)
      std::fprintf(stderr, "TrainStep config %s, fp32 -> bf16: %.0f -> %.0f tokens/s, %.0f -> %.0f GFLOP/s: %.2fx\n",
                   c.name, tok[0], tok[1], gflops[0], gflops[1], tok[1] / tok[0]);
    // Each step's effective GFLOP/s as a fraction of this run's product peak, per dtype.
    for (int i = 0; i < 2; ++i) {
      const std::string name = (i ? "TrainStepBf16/" : "TrainStep/") + n;
      double step = 0, peak = 0, step_mb = 0;
      if (folio::bench::counter_of(reporter.runs(), name, "GFLOP/s", "median", step) &&
          folio::bench::counter_of(reporter.runs(), i ? "Peak/bf16" : "Peak/fp32", "GFLOP/s", "max", peak) &&
          peak > 0) {
        folio::bench::counter_of(reporter.runs(), name, "step_MB", "median", step_mb);
        std::fprintf(stderr, "%s (batch %lld x %lld): %.0f GFLOP/s = %.0f%% of the %s product peak (%.0f GFLOP/s); %.0f MB a step\n",
                     name.c_str(), (long long)c.batch, (long long)c.block, step, 100.0 * step / peak,
                     i ? "bf16" : "fp32", peak, step_mb);
      }
    }
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::fprintf(stderr, "threads: %d, peak RSS %.0f MB\n", threads, double(usage.ru_maxrss) / 1024.0);
  benchmark::Shutdown();
  return 0;
}
