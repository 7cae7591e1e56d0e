// A prompt's attention in the decoder (Decoder::attend_prompt): restart's rows, all of
// one stream from position 0, attend a head at a time through two matrix products,
// scores = q k^T and y = softmax(scores) v, as the model's own forward computes
// attention, rather than a row at a time over the cache. Row by row, the scores of a
// 512-token prompt were a fifth of its prefill on one core and ran on one thread
// whatever --threads said; the products run at oneDNN's speed on the prompt's threads.
#include <cmath>
#include <cstring>

#include "autograd/kernels/matmul.h"
#include "autograd/kernels/rows.h"
#include "infer/decoder.h"

namespace folio::infer {

using namespace nn;  // the model the decoder reads

void Decoder::attend_prompt(Layer& L, int64_t stream, int64_t T, float* qkv, float* y) {
  const int64_t C = config_.n_embd, nh = config_.n_head, hs = C / nh;
  const float scale = 1.0f / std::sqrt(float(hs));
  pq_.resize(size_t(T * hs)), pk_.resize(pq_.size()), pv_.resize(pq_.size()), py_.resize(pq_.size());
  scores_.resize(size_t(T * T));
  for (int64_t h = 0; h < nh; ++h) {
    // Each row's key and value into the cache at slot t (t < block_size), as a step's
    // attend caches them; its q, k (as attend reads them) and v into (T, hs) matrices.
    for (int64_t t = 0; t < T; ++t) {
      float* kqv = qkv + t * 3 * C + h * 3 * hs;  // per head [k; q; v]
      const RowScratch s{nullptr, brot_.data(), bcos_.data() + t * C, bsin_.data() + t * C};
      const HeadQK qk = cache_head(L, stream, h, t, kqv, s);
      std::memcpy(pk_.data() + t * hs, qk.k, sizeof(float) * hs);
      std::memcpy(pq_.data() + t * hs, qk.q, sizeof(float) * hs);
      std::memcpy(pv_.data() + t * hs, kqv + 2 * hs, sizeof(float) * hs);
    }
    // (T, hs) x (T, hs)^T -> scores (T, T); row t's softmax over keys 0..t, zeros after.
    kernels::matmul({.M = T, .N = T, .K = hs, .trans_b = true}, pq_.data(), pk_.data(), scores_.data());
    for (int64_t t = 0; t < T; ++t) {
      float* row = scores_.data() + t * T;
      kernels::softmax_row(row, row, t + 1, T, scale);
    }
    // (T, T) x (T, hs) -> (T, hs), then into the heads' places in y (T, C)
    kernels::matmul({.M = T, .N = hs, .K = T}, scores_.data(), pv_.data(), py_.data());
    for (int64_t t = 0; t < T; ++t) std::memcpy(y + t * C + h * hs, py_.data() + t * hs, sizeof(float) * hs);
  }
}

}  // namespace folio::infer
