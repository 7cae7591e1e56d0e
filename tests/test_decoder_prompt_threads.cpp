// A long prompt (infer::kPromptProductRows rows or more) runs on the calling thread's
// OpenMP threads: its products, and its attention's caching and softmax rows
// (infer/decoder_attention.cpp). Each row is computed alone, whichever thread takes it,
// so two threads give one thread's logits, and cache the same keys and values (the
// steps after the prompt read them), in every weight format: exactly where oneDNN's
// products run a row's sums in one order whatever the threads (its AVX-512 kernels),
// and to rounding on an AVX2 CPU, where its sgemm splits a product's sums between
// threads. A race on the decoder's own rows (a shared scratch) is far beyond that.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <dnnl.hpp>

#include <span>
#include <vector>

#include "infer/decoder.h"

namespace folio {
namespace {

// The logits of a prompt of T tokens and of two steps after it, on `threads` threads.
std::vector<float> prompt_and_steps(const nn::GPT& model, nn::Weights w, int threads, int64_t T) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  std::vector<int32_t> ids(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) ids[size_t(t)] = int32_t((7 * t + 3) % model.config().vocab_size);
  infer::Decoder decoder(model, 1, w);
  const std::span<const float> first = decoder.restart(ids);
  std::vector<float> logits(first.begin(), first.end());
  for (int32_t id : {2, 5}) {
    const std::span<const float> next = decoder.step(id);
    logits.insert(logits.end(), next.begin(), next.end());
  }
  omp_set_num_threads(before);
  return logits;
}

// Whether oneDNN's fp32 products add a row's sums in one order at any thread count:
// its brgemm kernels (AVX-512) split rows and columns between threads, its AVX2 sgemm
// (gemm:jit) also the sums (1 thread against 2 differed by ~1e-7 there).
bool products_keep_sum_order() {
  const unsigned isa = unsigned(dnnl::get_effective_cpu_isa()), need = unsigned(dnnl::cpu_isa::avx512_core);
  return (isa & need) == need;
}

TEST(DecoderPromptThreads, TwoThreadsGiveOnesLogits) {
  const float tolerance = products_keep_sum_order() ? 0.0f : 1e-5f;  // relative
  const nn::GPTConfig base{.vocab_size = 13, .block_size = 128, .n_layer = 2, .n_head = 4, .n_embd = 64};
  nn::GPTConfig rotary = base;  // the rotation's scratch, a row each
  rotary.pos = nn::Positions::rope;
  rotary.qk_norm = true;
  for (const nn::GPTConfig& config : {base, rotary}) {
    nn::GPT model(config);
    model.eval();
    NoGradGuard no_grad;
    for (const nn::Weights w : nn::kAllWeights) {
      const int64_t T = 121;  // rows that split unevenly, long enough for a race to show
      const std::vector<float> one = prompt_and_steps(model, w, 1, T), two = prompt_and_steps(model, w, 2, T);
      ASSERT_EQ(one.size(), two.size());
      for (size_t i = 0; i < one.size(); ++i)
        ASSERT_LE(std::abs(one[i] - two[i]), tolerance * (1.0f + std::abs(one[i]))) << nn::to_string(w) << ", rope " << (config.pos == nn::Positions::rope) << ", logit "
                                  << i;
    }
  }
}

}  // namespace
}  // namespace folio
