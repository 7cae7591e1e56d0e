// The decoder's attention (infer/decoder.h): each row's keys and values into its
// stream's cache, and its query against the keys cached so far, a head of a row at a
// time, split across the decoder's threads when long enough (attend_rows); or a long
// prompt's rows, all of one stream from position 0, a head at a time through two
// matrix products (attend_prompt).
#include <algorithm>
#include <cmath>
#include <cstring>

#include <omp.h>

#include "autograd/kernels/matmul.h"
#include "autograd/kernels/rows.h"
#include "infer/decoder.h"
#include "infer/thread_split.h"

namespace folio::infer {

int64_t Decoder::key_slots(const nn::GPTConfig& c) { return (c.block_size + kKeyTile - 1) / kKeyTile * kKeyTile; }
int64_t Decoder::key_slots() const { return key_slots(config_); }

int64_t Decoder::cache_bytes_per_stream(const nn::GPTConfig& c) {
  return c.n_layer * (key_slots(c) + c.block_size) * c.n_embd * int64_t(sizeof(float));  // the constructor's k and v
}

float* Decoder::head_keys(Layer& L, int64_t stream, int64_t h) const {
  const int64_t nh = config_.n_head, hs = config_.n_embd / nh;
  return L.k.data() + (stream * nh + h) * hs * key_slots();
}

float* Decoder::head_values(Layer& L, int64_t stream, int64_t h) const {
  const int64_t nh = config_.n_head, hs = config_.n_embd / nh;
  return L.v.data() + (stream * nh + h) * config_.block_size * hs;
}

Decoder::HeadQK Decoder::cache_head(Layer& L, int64_t stream, int64_t h, int64_t slot, float* kqv, const RowScratch& s) {
  const int64_t hs = config_.n_embd / config_.n_head;
  float *k = kqv, *q = k + hs, *v = q + hs;
  // q and k as position_query_key() makes them: RMS-normalised, then rotated.
  if (config_.qk_norm) {
    kernels::rms_norm_row(k, k, hs, kRmsNormEps);
    kernels::rms_norm_row(q, q, hs, kRmsNormEps);
  }
  if (rolls()) {  // into the row's scratch: [rotated k; rotated q]
    kernels::rotate_half_row(k, s.rot, hs / 2, s.cos, s.sin, 1.0f);
    kernels::rotate_half_row(q, s.rot + hs, hs / 2, s.cos, s.sin, 1.0f);
    k = s.rot, q = s.rot + hs;
  }
  float* tile = head_keys(L, stream, h) + slot / kKeyTile * hs * kKeyTile;  // (hs, kKeyTile): this slot's
  for (int64_t d = 0; d < hs; ++d) tile[d * kKeyTile + slot % kKeyTile] = k[d];
  std::memcpy(head_values(L, stream, h) + slot * hs, v, sizeof(float) * hs);
  return {k, q};
}

void Decoder::attend_rows(Layer& L, std::span<const Row> rows, float* qkv, float* y) {
  const int64_t B = int64_t(rows.size()), C = config_.n_embd, nh = config_.n_head, hs = C / nh;
  const int64_t block = config_.block_size;
  // A restart's rows are one stream's positions in order, and head h of a row reads
  // the keys head h of the rows before it cached: a unit is a head, its rows in order.
  // step_batch's rows are distinct streams, which share nothing: a unit is a (row,
  // head) pair, the heads of a row side by side.
  const bool one_stream = B > 1 && rows[0].stream == rows[1].stream;
  const int64_t units = one_stream ? nh : B * nh;
  int64_t cache_floats = 0;  // the cached keys and values the rows read
  for (const Row& r : rows) cache_floats += std::min(r.pos + 1, block) * 2 * C;
  const int threads = cache_floats >= kSplitCacheFloats ? int(std::min<int64_t>(scratch_.threads, units)) : 1;
  split_indexed(threads, units, [&](int64_t thread, int64_t first, int64_t last) {
    float* att = att_.data() + thread * block;  // (block_size) this thread's scores
    float* rot = rot_.data() + thread * 2 * hs;  // (2 * head_size) and rotated [k; q]
    auto head = [&](int64_t b, int64_t h) {
      const RowScratch s{att, rot, cos_.data() + b * C, sin_.data() + b * C};
      attend_head(L, rows[b].stream, rows[b].pos, h, qkv + b * 3 * C, y + b * C, s);
    };
    for (int64_t u = first; u < last; ++u) {
      if (!one_stream) {
        head(u / nh, u % nh);
        continue;
      }
      for (int64_t b = 0; b < B; ++b) head(b, u);
    }
  });
}

void Decoder::attend_head(Layer& L, int64_t stream, int64_t pos, int64_t h, float* qkv, float* y_heads,
                          const RowScratch& s) {
  const int64_t hs = config_.n_embd / config_.n_head, block = config_.block_size;
  const int64_t slot = pos % block, keys_seen = std::min(pos + 1, block);
  const float scale = 1.0f / std::sqrt(float(hs));
  float* att = s.att;
  const float* q = cache_head(L, stream, h, slot, qkv + h * 3 * hs, s).q;  // per head [k; q; v]
  const float* keys = head_keys(L, stream, h);  // (key_slots / kKeyTile, hs, kKeyTile)
  const float* values = head_values(L, stream, h);  // (block, hs)
  // The scores, a tile of kKeyTile keys at a time: their sums side by side in one
  // vector, a key dimension at a time (none across a vector), each tile read as one
  // contiguous run. With the keys as one (hs, block) matrix the scores read hs rows
  // block_size floats apart, which at block 256 and 16 streams was twice the time
  // of the values' contiguous loop (perf). A partial last tile sums slots not yet
  // written (zeros or an earlier sequence's keys) and drops them. The slots hold
  // positions in rolling order; a softmax and a weighted sum do not care about the
  // order of their terms.
  for (int64_t t = 0; t * kKeyTile < keys_seen; ++t) {
    const float* key_tile = keys + t * hs * kKeyTile;  // (hs, kKeyTile)
    float sums[kKeyTile] = {};
    for (int64_t d = 0; d < hs; ++d) {
      const float qd = q[d], *key_d = key_tile + d * kKeyTile;
#pragma omp simd
      for (int64_t j = 0; j < kKeyTile; ++j) sums[j] += qd * key_d[j];
    }
    const int64_t n = std::min(kKeyTile, keys_seen - t * kKeyTile);
    for (int64_t j = 0; j < n; ++j) att[t * kKeyTile + j] = sums[j];
  }
  kernels::softmax_row(att, att, keys_seen, keys_seen, scale);
  float* y = y_heads + h * hs;  // heads side by side
  for (int64_t d = 0; d < hs; ++d) y[d] = 0.0f;
  for (int64_t j = 0; j < keys_seen; ++j) {
    const float w = att[j];
#pragma omp simd
    for (int64_t d = 0; d < hs; ++d) y[d] += w * values[j * hs + d];
  }
}

void Decoder::add_value_embedding(const Layer& L, int32_t id, float* qkv) const {
  if (!L.value_embed) return;
  const int64_t C = config_.n_embd, hs = C / config_.n_head;
  const float* ve = L.value_embed + int64_t(id) * C;  // (C): head h's slice at h * hs
  for (int64_t h = 0; h < config_.n_head; ++h)
    for (int64_t d = 0; d < hs; ++d) qkv[h * 3 * hs + 2 * hs + d] += ve[h * hs + d];  // per head [k; q; v]
}

// scores = q k^T and y = softmax(scores) v, as the model's own forward computes
// attention, rather than a row at a time over the cache. Row by row, the scores of a
// 512-token prompt were a fifth of its prefill on one core and ran on one thread
// whatever --threads said; the products run at oneDNN's speed on the prompt's threads.
void Decoder::attend_prompt(Layer& L, int64_t stream, int64_t T, float* qkv, float* y) {
  const int64_t C = config_.n_embd, nh = config_.n_head, hs = C / nh;
  const float scale = 1.0f / std::sqrt(float(hs));
  pq_.resize(size_t(T * hs)), pk_.resize(pq_.size()), pv_.resize(pq_.size()), py_.resize(pq_.size());
  scores_.resize(size_t(T * T));
  for (int64_t h = 0; h < nh; ++h) {
    // Each row's key and value into the cache at slot t (t < block_size), as a step's
    // attend caches them; its q, k (as attend reads them) and v into (T, hs) matrices.
    // This loop and the softmax below run on the prompt's threads, as the products do:
    // on one, the others waited for them (each row is computed alone, whichever thread
    // takes it, so the results are one thread's). Row t rotates into its own scratch,
    // rot_'s row t (B >= T rows).
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; ++t) {
      float* kqv = qkv + t * 3 * C + h * 3 * hs;  // per head [k; q; v]
      const RowScratch s{nullptr, rot_.data() + t * 2 * hs, cos_.data() + t * C, sin_.data() + t * C};
      const HeadQK qk = cache_head(L, stream, h, t, kqv, s);
      std::memcpy(pk_.data() + t * hs, qk.k, sizeof(float) * hs);
      std::memcpy(pq_.data() + t * hs, qk.q, sizeof(float) * hs);
      std::memcpy(pv_.data() + t * hs, kqv + 2 * hs, sizeof(float) * hs);
    }
    // (T, hs) x (T, hs)^T -> scores (T, T); row t's softmax over keys 0..t, zeros after.
    kernels::matmul({.M = T, .N = T, .K = hs, .trans_b = true}, pq_.data(), pk_.data(), scores_.data());
    // Row t's softmax is t + 1 long: rows dealt in chunks of 16, each thread long and
    // short ones alike.
#pragma omp parallel for schedule(static, 16)
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
