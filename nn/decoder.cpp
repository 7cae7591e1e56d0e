#include "nn/decoder.h"

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "autograd/error.h"
#include "autograd/kernels/matmul.h"
#include "autograd/kernels/rows.h"

namespace folio::nn {
namespace {

const float* data_or_null(const Tensor& t) { return t.defined() ? t.data() : nullptr; }

// A block's products in Layer's order (qkv, proj, fc, fc2): weight and bias (none for qkv).
std::array<std::pair<const Tensor*, const Tensor*>, 4> block_products(const Block& b) {
  static const Tensor kNoBias;
  return {{{&b.attn->qkv_weight(), &kNoBias},
           {&b.attn->proj->weight, &b.attn->proj->bias},
           {&b.ffwd->fc->weight, &b.ffwd->fc->bias},
           {&b.ffwd->proj->weight, &b.ffwd->proj->bias}}};
}

}  // namespace

Decoder::PanelStore::PanelStore(int64_t floats) {
  constexpr size_t kHuge = size_t(2) << 20;
  const size_t bytes = (size_t(floats) * sizeof(float) + kHuge - 1) / kHuge * kHuge;
  if (bytes == 0) return;
  data_.reset(static_cast<float*>(std::aligned_alloc(kHuge, bytes)));
  if (!data_) throw std::bad_alloc();
  madvise(data_.get(), bytes, MADV_HUGEPAGE);  // a hint: without it, 4 KiB pages
  size_ = floats;
}

void Decoder::PanelStore::Free::operator()(float* p) const { std::free(p); }

float* Decoder::PanelStore::take(int64_t floats) {
  if (used_ + floats > size_) fail("decoder", "panel store of ", size_, " floats asked for ", used_ + floats);
  used_ += floats;
  return data_.get() + used_ - floats;
}

Decoder::Matrix::Matrix(const Tensor& weight, const Tensor& bias_, Precision p, PanelStore& store)
    : bias(data_or_null(bias_)), N(weight.size(0)), K(weight.size(1)) {
  const float* w = weight.data();
  if (p == Precision::bf16) {
    w16.resize(N * K);
    kernels::to_bf16(w, w16.data(), N * K);
    return;
  }
  float* out = store.take(panel_floats(weight));
  packed = out;
  for (int64_t first = 0; first < N; first += kPanel)  // written in order, rows past N as zeros
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = first; n < first + kPanel; ++n) *out++ = n < N ? w[n * K + k] : 0.0f;
}

void Decoder::Matrix::apply(const float* x, float* y, std::vector<kernels::bf16>& scratch) const {
  if (!packed) {  // bf16: both operands in bf16, as the model's bf16 products round them
    scratch.resize(K);
    kernels::to_bf16(x, scratch.data(), K);
    return kernels::matmul({.M = 1, .N = N, .K = K, .trans_b = true}, scratch.data(), w16.data(), y, bias);
  }
  // One panel of kPanel outputs at a time: its sums stay in registers while the
  // panel's weights stream past once, in order, with no sum across lanes at the end.
  for (int64_t p = 0; p * kPanel < N; ++p) {
    const float* w = packed + p * K * kPanel;
    float sums[kPanel] = {};
    for (int64_t k = 0; k < K; ++k) {
      const float xk = x[k];
#pragma omp simd
      for (int64_t i = 0; i < kPanel; ++i) sums[i] += xk * w[k * kPanel + i];
    }
    const int64_t first = p * kPanel, n = std::min(kPanel, N - first);
    for (int64_t i = 0; i < n; ++i) y[first + i] = sums[i] + (bias ? bias[first + i] : 0.0f);
  }
}

int64_t Decoder::panel_floats(const GPT& model) {
  if (model.precision() != Precision::fp32) return 0;
  int64_t n = Matrix::panel_floats(model.lm_head->weight);
  for (const auto& b : model.blocks)
    for (const auto& [weight, bias] : block_products(*b)) n += Matrix::panel_floats(*weight);
  return n;
}

Decoder::Decoder(const GPT& model)
    : model_(model), config_(model.config()), store_(panel_floats(model)),
      lm_head_(model.lm_head->weight, model.lm_head->bias, model.precision(), store_) {
  const int64_t C = config_.n_embd, cache = config_.block_size * C;  // n_head * head_size == C
  const Precision p = model.precision();
  for (const auto& b : model.blocks) {
    const auto products = block_products(*b);
    auto matrix = [&](int i) { return Matrix(*products[i].first, *products[i].second, p, store_); };
    layers_.push_back({b->ln1->weight.data(), b->ln1->bias.data(), b->ln2->weight.data(), b->ln2->bias.data(),
                       matrix(0), matrix(1), matrix(2), matrix(3), std::vector<float>(cache),
                       std::vector<float>(cache)});
  }
  x_.resize(C), h_.resize(2 * C), qkv_.resize(3 * C), att_.resize(config_.block_size), y_.resize(C);
  ff_.resize(4 * C), logits_.resize(config_.vocab_size), cos_.resize(C), sin_.resize(C);
}

std::span<const float> Decoder::restart(std::span<const int32_t> ids) {
  const int64_t T = int64_t(ids.size()), hs = config_.n_embd / config_.n_head, block = config_.block_size;
  if (T < 1 || T > block) fail("decoder", "restart with ", T, " tokens; expected 1 to block_size ", block);
  NoGradGuard no_grad;
  std::vector<KVCache> caches;
  const Tensor logits = model_.forward_cached(ids, 1, T, caches);  // (1, T, V)
  for (size_t l = 0; l < layers_.size(); ++l)  // (1, n_head, T, hs) -> keys (n_head, hs, block), values (n_head, block, hs)
    for (int64_t h = 0; h < config_.n_head; ++h) {
      const float* k = caches[l].k.data() + h * T * hs;
      float* keys = layers_[l].k.data() + h * hs * block;
      for (int64_t t = 0; t < T; ++t)
        for (int64_t d = 0; d < hs; ++d) keys[d * block + t] = k[t * hs + d];
      std::memcpy(layers_[l].v.data() + h * block * hs, caches[l].v.data() + h * T * hs, sizeof(float) * T * hs);
    }
  length_ = T;
  std::memcpy(logits_.data(), logits.data() + (T - 1) * config_.vocab_size, sizeof(float) * config_.vocab_size);
  return logits_;
}

void Decoder::attend(Layer& L, int64_t pos) {
  const int64_t nh = config_.n_head, hs = config_.n_embd / nh, block = config_.block_size;
  const int64_t slot = pos % block, keys_seen = std::min(pos + 1, block);
  const float scale = 1.0f / std::sqrt(float(hs));
  for (int64_t h = 0; h < nh; ++h) {
    float *k = qkv_.data() + h * 3 * hs, *q = k + hs, *v = q + hs;  // per head [k; q; v]
    float *keys = L.k.data() + h * hs * block, *values = L.v.data() + h * block * hs;
    // q and k as position_query_key() makes them: RMS-normalised, then rotated.
    if (config_.qk_norm) {
      kernels::rms_norm_row(k, k, hs, kRmsNormEps);
      kernels::rms_norm_row(q, q, hs, kRmsNormEps);
    }
    if (rolls()) {  // into h_, free at this point: [rotated k; rotated q]
      kernels::rotate_half_row(k, h_.data(), hs / 2, cos_.data(), sin_.data(), 1.0f);
      kernels::rotate_half_row(q, h_.data() + hs, hs / 2, cos_.data(), sin_.data(), 1.0f);
      k = h_.data(), q = h_.data() + hs;
    }
    for (int64_t d = 0; d < hs; ++d) keys[d * block + slot] = k[d];
    std::memcpy(values + slot * hs, v, sizeof(float) * hs);
    // The scores, a key dimension at a time: sums over the keys side by side, none
    // across a vector. The slots hold positions in rolling order; a softmax and a
    // weighted sum do not care about the order of their terms.
    for (int64_t j = 0; j < keys_seen; ++j) att_[j] = 0.0f;
    for (int64_t d = 0; d < hs; ++d) {
      const float qd = q[d], *key_d = keys + d * block;
#pragma omp simd
      for (int64_t j = 0; j < keys_seen; ++j) att_[j] += qd * key_d[j];
    }
    kernels::softmax_row(att_.data(), att_.data(), keys_seen, keys_seen, scale);
    float* y = y_.data() + h * hs;  // heads side by side
    for (int64_t d = 0; d < hs; ++d) y[d] = 0.0f;
    for (int64_t j = 0; j < keys_seen; ++j) {
      const float w = att_[j];
#pragma omp simd
      for (int64_t d = 0; d < hs; ++d) y[d] += w * values[j * hs + d];
    }
  }
}

std::span<const float> Decoder::step(int32_t id) {
  const int64_t C = config_.n_embd, block = config_.block_size, V = config_.vocab_size, pos = length_;
  if (pos >= block && !rolls()) fail("decoder", "the cache holds block_size ", block, " positions: restart");
  if (id < 0 || id >= V) fail("decoder", "token id ", id, " outside the vocabulary of ", V);
  const float* tok = model_.token_embedding->weight.data() + id * C;
  if (model_.position_embedding) {
    const float* where = model_.position_embedding->weight.data() + pos * C;
    for (int64_t c = 0; c < C; ++c) x_[c] = tok[c] + where[c];
  } else {
    std::memcpy(x_.data(), tok, sizeof(float) * C);
    RotaryTables::row(pos, C / config_.n_head, cos_.data(), sin_.data());
  }
  for (Layer& L : layers_) {
    kernels::layer_norm_row(x_.data(), L.ln1_w, L.ln1_b, h_.data(), C, kLayerNormEps);
    L.qkv.apply(h_.data(), qkv_.data(), x16_);
    attend(L, pos);
    L.proj.apply(y_.data(), h_.data(), x16_);
    for (int64_t c = 0; c < C; ++c) x_[c] += h_[c];
    kernels::layer_norm_row(x_.data(), L.ln2_w, L.ln2_b, h_.data(), C, kLayerNormEps);
    L.fc.apply(h_.data(), ff_.data(), x16_);
    switch (config_.activation) {
      case Activation::gelu: for (float& f : ff_) f = kernels::gelu(f); break;
      case Activation::relu: for (float& f : ff_) f = f > 0.0f ? f : 0.0f; break;
      case Activation::relu2: for (float& f : ff_) f = f > 0.0f ? f * f : 0.0f; break;
    }
    L.fc2.apply(ff_.data(), h_.data(), x16_);
    for (int64_t c = 0; c < C; ++c) x_[c] += h_[c];
  }
  kernels::layer_norm_row(x_.data(), model_.ln_f->weight.data(), model_.ln_f->bias.data(), h_.data(), C,
                          kLayerNormEps);
  lm_head_.apply(h_.data(), logits_.data(), x16_);
  if (const float cap = config_.logit_softcap; cap > 0.0f)
    for (float& l : logits_) l = cap * std::tanh(l * (1.0f / cap));  // as GPT::head's scale(tanh(scale()))
  ++length_;
  return logits_;
}

}  // namespace folio::nn
