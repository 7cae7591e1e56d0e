// The non-matmul pieces of a training step, each forward + backward at the shapes
// config S (B 12, T 64, C 128, 4 heads, vocab 65) and M (B 64, T 256, C 384, 6 heads)
// run them (and, for the fused attention only, G: B 2, T 1024, C 768, 12 heads, GPT-2
// small's body), so a regression shows where it happens:
//   LayerNorm/<cfg>      layer_norm over (B*T, C)
//   CausalSoftmax/<cfg>  scaled, masked softmax over (B, nh, T, T)
//   Attention/<cfg>      q k^T, causal softmax, @ v over (B, nh, T, hs) as three ops;
//   CausalAttention/<cfg> the same in one op (causal_attention). GFLOP/s of both count
//                        the composition's six full T x T products (fwd + bwd)
//   CausalAttentionBf16/<cfg> the one op in bf16 (its products on bf16 operands)
//   AttentionDropout/<cfg>, CausalAttentionDropout/<cfg>  both with dropout 0.2 on the
//                        weights (M's and nanoGPT's rate): dropout() between the
//                        composition's ops, or inside the one op
//   CrossEntropy/<cfg>   mean cross-entropy over (B*T, 65) logits
//   AdamW/<cfg>          one AdamW step over the GPT's parameters (one flat buffer)
//   ClipGradNorm/<cfg>   global-norm clipping of the same gradients
// GB/s counts each tensor read or written once per pass (forward: in + out; backward:
// grad in + saved + grad out; AdamW: p, g, m, v read, p, m, v written).
// Threads: --threads=N or FOLIO_BENCH_THREADS=N (default: OMP_NUM_THREADS, else all cores).
#include <cmath>

#include "autograd/ops.h"
#include "bench/bench_common.h"
#include "nn/transformer.h"
#include "train/adamw.h"

namespace {

using namespace folio;

struct Config {
  const char* name;
  int64_t n_layer, n_head, n_embd, block, batch;
};
const Config kConfigs[] = {{"S", 4, 4, 128, 64, 12}, {"M", 6, 6, 384, 256, 64}, {"G", 12, 12, 768, 1024, 2}};
constexpr int64_t kVocab = 65;

// One untimed run first: a fresh buffer costs a page fault per 4 KiB, which is not
// what a training step pays (the pool keeps its buffers).
template <class Body>
void timed(benchmark::State& state, Body body) {
  body();
  for (auto _ : state) body();
}

void bytes_counter(benchmark::State& state, double floats_per_iter) {
  state.counters["GB/s"] = benchmark::Counter(floats_per_iter * 4e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_LayerNorm(benchmark::State& state, Config c) {
  Rng r(1);
  const Tensor x0 = Tensor::randn({c.batch * c.block, c.n_embd}, r);
  const Tensor w = Tensor::ones({c.n_embd}).set_requires_grad(), b = Tensor::zeros({c.n_embd}).set_requires_grad();
  const Tensor g = Tensor::randn({c.batch * c.block, c.n_embd}, r);
  timed(state, [&] {
    Tensor x = x0.detach().set_requires_grad();
    layer_norm(x, w, b).backward(g);
  });
  bytes_counter(state, 5.0 * double(x0.numel()));
}

void BM_Attention(benchmark::State& state, Config c, bool fused, float p = 0.0f,
                  Precision precision = Precision::fp32) {
  Rng r(3);
  const int64_t hs = c.n_embd / c.n_head;
  const Shape shape{c.batch, c.n_head, c.block, hs};
  const Tensor q0 = Tensor::randn(shape, r), k0 = Tensor::randn(shape, r), v0 = Tensor::randn(shape, r);
  const Tensor g = Tensor::randn(shape, r);
  const float scale = 1.0f / std::sqrt(float(hs));
  Rng drops(4);
  timed(state, [&] {
    Tensor q = q0.detach().set_requires_grad(), k = k0.detach().set_requires_grad(), v = v0.detach().set_requires_grad();
    const Tensor y = fused ? causal_attention(q, k, v, scale, {p, drops.next_u64()}, precision)
                           : matmul(dropout(causal_softmax(matmul(q, k, false, true), scale), p, true, drops), v);
    y.backward(g);
  });
  state.counters["GFLOP/s"] = benchmark::Counter(6.0 * 2.0 * double(c.batch * c.n_head * c.block * c.block * hs) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void BM_CausalSoftmax(benchmark::State& state, Config c) {
  Rng r(2);
  const Tensor s0 = Tensor::randn({c.batch, c.n_head, c.block, c.block}, r);
  const Tensor g = Tensor::randn(s0.shape(), r);
  timed(state, [&] {
    Tensor s = s0.detach().set_requires_grad();
    causal_softmax(s, 0.125f).backward(g);
  });
  bytes_counter(state, 5.0 * double(s0.numel()));
}

void BM_CrossEntropy(benchmark::State& state, Config c) {
  Rng r(3);
  const Tensor l0 = Tensor::randn({c.batch * c.block, kVocab}, r);
  std::vector<int32_t> targets(size_t(c.batch * c.block));
  for (auto& t : targets) t = int32_t(r.below(kVocab));
  timed(state, [&] {
    Tensor l = l0.detach().set_requires_grad();
    cross_entropy(l, targets).backward();
  });
  bytes_counter(state, 3.0 * double(l0.numel()));
}

nn::GPTConfig gpt_config(const Config& c) {
  return {.vocab_size = kVocab, .block_size = c.block, .n_layer = c.n_layer, .n_head = c.n_head, .n_embd = c.n_embd};
}

void fill_grads(const nn::GPT& gpt) {
  Rng r(4);
  const Tensor& flat = gpt.flat_parameters();
  float* g = flat.grad_data();
  for (int64_t i = 0; i < flat.numel(); ++i) g[i] = 1e-3f * r.normal();
}

void BM_AdamW(benchmark::State& state, Config c) {
  nn::GPT gpt(gpt_config(c));
  fill_grads(gpt);
  AdamW opt(gpt.named_parameters(), {});
  timed(state, [&] { opt.step(1e-4f); });
  bytes_counter(state, 7.0 * double(gpt.num_parameters()));
  state.counters["params"] = double(gpt.num_parameters());
}

void BM_ClipGradNorm(benchmark::State& state, Config c) {
  nn::GPT gpt(gpt_config(c));
  fill_grads(gpt);
  const std::vector<Tensor> params = gpt.parameters();
  timed(state, [&] { benchmark::DoNotOptimize(clip_grad_norm(params, 1e9f)); });  // the norm only
  bytes_counter(state, double(gpt.num_parameters()));
}

}  // namespace

int main(int argc, char** argv) {
  folio::bench::setup_threads(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  for (const Config& c : kConfigs) {
    const std::string n = c.name;
    auto reg = [&](const std::string& name, auto fn) {
      folio::bench::add_min_max(benchmark::RegisterBenchmark(name.c_str(), fn))
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    };
    reg("CausalAttention/" + n, [c](benchmark::State& s) { BM_Attention(s, c, true); });
    reg("CausalAttentionBf16/" + n, [c](benchmark::State& s) { BM_Attention(s, c, true, 0.0f, Precision::bf16); });
    if (n == "G") continue;  // its composition's (T, T) tensors alone take 300 MB each
    reg("LayerNorm/" + n, [c](benchmark::State& s) { BM_LayerNorm(s, c); });
    reg("CausalSoftmax/" + n, [c](benchmark::State& s) { BM_CausalSoftmax(s, c); });
    reg("Attention/" + n, [c](benchmark::State& s) { BM_Attention(s, c, false); });
    reg("AttentionDropout/" + n, [c](benchmark::State& s) { BM_Attention(s, c, false, 0.2f); });
    reg("CausalAttentionDropout/" + n, [c](benchmark::State& s) { BM_Attention(s, c, true, 0.2f); });
    reg("CrossEntropy/" + n, [c](benchmark::State& s) { BM_CrossEntropy(s, c); });
    reg("AdamW/" + n, [c](benchmark::State& s) { BM_AdamW(s, c); });
    reg("ClipGradNorm/" + n, [c](benchmark::State& s) { BM_ClipGradNorm(s, c); });
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
