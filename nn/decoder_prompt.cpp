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
#include "nn/decoder.h"

namespace folio::nn {

void Decoder::attend_prompt(Layer& L, int64_t stream, int64_t T, float* qkv, float* y) {
  const int64_t C = config_.n_embd, nh = config_.n_head, hs = C / nh, block = config_.block_size;
  const int64_t key_slots = (block + kKeyTile - 1) / kKeyTile * kKeyTile;
  const float scale = 1.0f / std::sqrt(float(hs));
  pq_.resize(size_t(T * hs)), pk_.resize(pq_.size()), pv_.resize(pq_.size()), py_.resize(pq_.size());
  scores_.resize(size_t(T * T));
  for (int64_t h = 0; h < nh; ++h) {
    float* keys = L.k.data() + (stream * nh + h) * hs * key_slots;  // (key_slots / kKeyTile, hs, kKeyTile)
    float* values = L.v.data() + (stream * nh + h) * block * hs;    // (block, hs)
    // Each row's q and k as attend makes them (RMS-normalised, then rotated), into
    // (T, hs) matrices; its key and value into the cache, at slot t (t < block_size).
    for (int64_t t = 0; t < T; ++t) {
      float *k = qkv + t * 3 * C + h * 3 * hs, *q = k + hs, *v = q + hs;  // per head [k; q; v]
      if (config_.qk_norm) {
        kernels::rms_norm_row(k, k, hs, kRmsNormEps);
        kernels::rms_norm_row(q, q, hs, kRmsNormEps);
      }
      float *kt = pk_.data() + t * hs, *qt = pq_.data() + t * hs;
      if (rolls()) {
        const float *cos = bcos_.data() + t * C, *sin = bsin_.data() + t * C;
        kernels::rotate_half_row(k, kt, hs / 2, cos, sin, 1.0f);
        kernels::rotate_half_row(q, qt, hs / 2, cos, sin, 1.0f);
      } else {
        std::memcpy(kt, k, sizeof(float) * hs);
        std::memcpy(qt, q, sizeof(float) * hs);
      }
      std::memcpy(pv_.data() + t * hs, v, sizeof(float) * hs);
      float* tile = keys + t / kKeyTile * hs * kKeyTile;  // (hs, kKeyTile): slot t's
      for (int64_t d = 0; d < hs; ++d) tile[d * kKeyTile + t % kKeyTile] = kt[d];
      std::memcpy(values + t * hs, v, sizeof(float) * hs);
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

}  // namespace folio::nn
