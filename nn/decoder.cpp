#include "nn/decoder.h"

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "base/error.h"
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
    : bias(data_or_null(bias_)), N(weight.size(0)), K(weight.size(1)), weight(weight.data()) {
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

namespace {

// R rows of x (R, K) against one panel (K, kPanel) of packed weights: sums (R, kPanel).
// Each weight is loaded once and used R times while R * kPanel sums stay in
// registers: the panel streams past once for all R rows.
template <int R, int64_t P>
void panel_rows(const float* panel, const float* x, int64_t K, float (&sums)[4][P]) {
  float acc[R][P] = {};
  for (int64_t k = 0; k < K; ++k) {
    const float* w = panel + k * P;
    for (int r = 0; r < R; ++r) {
      const float xr = x[r * K + k];
#pragma omp simd
      for (int64_t i = 0; i < P; ++i) acc[r][i] += xr * w[i];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int64_t i = 0; i < P; ++i) sums[r][i] = acc[r][i];
}

}  // namespace

void Decoder::Matrix::apply_rows(const float* x, float* y, int64_t M, std::vector<kernels::bf16>& scratch,
                                 bool prompt) const {
  if (prompt && packed)  // fp32: as the model's own forward computes its products
    return kernels::matmul({.M = M, .N = N, .K = K, .trans_b = true}, x, weight, y, bias);
  if (!packed) {  // bf16: one oneDNN product, as the model's own bf16 products
    scratch.resize(M * K);  // (M, K)
    kernels::to_bf16(x, scratch.data(), M * K);
    return kernels::matmul({.M = M, .N = N, .K = K, .trans_b = true}, scratch.data(), w16.data(), y, bias);
  }
  // Panel by panel; within a panel, rows four at a time. A panel (K * kPanel floats)
  // is read from memory for the first four rows and from cache for the rest.
  for (int64_t p = 0; p * kPanel < N; ++p) {
    const float* w = packed + p * K * kPanel;
    const int64_t first = p * kPanel, n = std::min(kPanel, N - first);
    float sums[4][kPanel];
    for (int64_t r0 = 0; r0 < M; r0 += 4) {
      const int64_t rows = std::min<int64_t>(4, M - r0);
      const float* xr = x + r0 * K;
      switch (rows) {
        case 4: panel_rows<4>(w, xr, K, sums); break;
        case 3: panel_rows<3>(w, xr, K, sums); break;
        case 2: panel_rows<2>(w, xr, K, sums); break;
        default: panel_rows<1>(w, xr, K, sums); break;
      }
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < n; ++i) y[(r0 + r) * N + first + i] = sums[r][i] + (bias ? bias[first + i] : 0.0f);
    }
  }
}

int64_t Decoder::panel_floats(const GPT& model) {
  if (model.precision() != Precision::fp32) return 0;
  int64_t n = Matrix::panel_floats(model.lm_head->weight);
  for (const auto& b : model.blocks)
    for (const auto& [weight, bias] : block_products(*b)) n += Matrix::panel_floats(*weight);
  return n;
}

Decoder::Decoder(const GPT& model, int64_t streams)
    : model_(model), config_(model.config()), store_(panel_floats(model)),
      lm_head_(model.lm_head->weight, model.lm_head->bias, model.precision(), store_) {
  if (streams < 1) fail("decoder", "streams must be >= 1, got ", streams);
  const int64_t C = config_.n_embd, cache = streams * config_.block_size * C;  // n_head * head_size == C
  const Precision p = model.precision();
  for (size_t l = 0; l < model.blocks.size(); ++l) {
    const Block& b = *model.blocks[l];
    const auto products = block_products(b);
    auto matrix = [&](int i) { return Matrix(*products[i].first, *products[i].second, p, store_); };
    const auto skip = config_.skip_into(int64_t(l));
    layers_.push_back({.ln1_w = b.ln1->weight.data(),
                       .ln1_b = b.ln1->bias.data(),
                       .ln2_w = b.ln2->weight.data(),
                       .ln2_b = b.ln2->bias.data(),
                       .qkv = matrix(0),
                       .proj = matrix(1),
                       .fc = matrix(2),
                       .fc2 = matrix(3),
                       .x0_gate = model.x0_gates ? model.x0_gates->gate[l].data() : nullptr,
                       .value_embed = model.value_embeddings.empty() ? nullptr : model.value_embeddings[l]->weight.data(),
                       .skip_gate = skip ? model.skip_gates->gate[size_t(skip->gate)].data() : nullptr,
                       .skip_from = skip ? skip->from : 0,
                       .keeps_output = int64_t(l) < config_.skip_pairs(),
                       .k = std::vector<float>(cache),
                       .v = std::vector<float>(cache)});
  }
  length_.assign(size_t(streams), 0);
  last_id_.assign(size_t(streams), 0);
  x_.resize(C), h_.resize(2 * C), qkv_.resize(3 * C), att_.resize(config_.block_size), y_.resize(C);
  ff_.resize(4 * C), logits_.resize(config_.vocab_size), cos_.resize(C), sin_.resize(C), x0_.resize(C);
  kept_.resize(config_.skip_pairs() * C);
}

std::span<const float> Decoder::restart(std::span<const int32_t> ids, int64_t stream) {
  const int64_t T = int64_t(ids.size()), block = config_.block_size;
  if (T < 1 || T > block) fail("decoder", "restart with ", T, " tokens; expected 1 to block_size ", block);
  if (stream < 0 || stream >= streams()) fail("decoder", "stream ", stream, " outside [0, ", streams(), ")");
  for (int32_t id : ids) check_id(id);
  // The prompt's rows in order, so that each attends to the ones before it, which its
  // stream's cache holds by then; only the last needs logits.
  rows_.clear();
  for (int64_t t = 0; t < T; ++t)
    rows_.push_back({.stream = stream, .pos = t, .id = ids[size_t(t)], .previous = t > 0 ? ids[size_t(t - 1)] : 0});
  return run_rows(rows_, 1, true);
}

void Decoder::attend(Layer& L, int64_t stream, int64_t pos, float* qkv, float* y_heads, const RowScratch& s) {
  const int64_t nh = config_.n_head, hs = config_.n_embd / nh, block = config_.block_size;
  const int64_t slot = pos % block, keys_seen = std::min(pos + 1, block);
  const float scale = 1.0f / std::sqrt(float(hs));
  float* att = s.att;
  for (int64_t h = 0; h < nh; ++h) {
    float *k = qkv + h * 3 * hs, *q = k + hs, *v = q + hs;  // per head [k; q; v]
    float* keys = L.k.data() + (stream * nh + h) * hs * block;
    float* values = L.v.data() + (stream * nh + h) * block * hs;
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
    for (int64_t d = 0; d < hs; ++d) keys[d * block + slot] = k[d];
    std::memcpy(values + slot * hs, v, sizeof(float) * hs);
    // The scores, a key dimension at a time: sums over the keys side by side, none
    // across a vector. The slots hold positions in rolling order; a softmax and a
    // weighted sum do not care about the order of their terms.
    for (int64_t j = 0; j < keys_seen; ++j) att[j] = 0.0f;
    for (int64_t d = 0; d < hs; ++d) {
      const float qd = q[d], *key_d = keys + d * block;
#pragma omp simd
      for (int64_t j = 0; j < keys_seen; ++j) att[j] += qd * key_d[j];
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
}

void Decoder::add_value_embedding(const Layer& L, int32_t id, float* qkv) const {
  if (!L.value_embed) return;
  const int64_t C = config_.n_embd, hs = C / config_.n_head;
  const float* ve = L.value_embed + int64_t(id) * C;  // (C): head h's slice at h * hs
  for (int64_t h = 0; h < config_.n_head; ++h)
    for (int64_t d = 0; d < hs; ++d) qkv[h * 3 * hs + 2 * hs + d] += ve[h * hs + d];  // per head [k; q; v]
}

void Decoder::check_id(int32_t id) const {
  if (id < 0 || id >= config_.vocab_size)
    fail("decoder", "token id ", id, " outside the vocabulary of ", config_.vocab_size);
}

void Decoder::check_step(int32_t id, int64_t stream) const {
  const int64_t block = config_.block_size;
  if (stream < 0 || stream >= streams()) fail("decoder", "stream ", stream, " outside [0, ", streams(), ")");
  if (length_[size_t(stream)] >= block && !rolls())
    fail("decoder", "the cache holds block_size ", block, " positions: restart");
  check_id(id);
}

void Decoder::embed(const Row& row, float* x, float* cos, float* sin) const {
  const int64_t C = config_.n_embd, V = config_.vocab_size, pos = row.pos, id = row.id;
  const float* tok = model_.token_embedding->weight.data() + id * C;
  std::memcpy(x, tok, sizeof(float) * C);
  if (model_.bigram_embedding) {  // as GPT::embed: row previous * V + id, previous V at the start
    const int64_t previous = pos == 0 ? V : row.previous;
    const float* pair = model_.bigram_embedding->weight.data() + (previous * V + id) * C;
    for (int64_t c = 0; c < C; ++c) x[c] += pair[c];
  }
  if (model_.position_embedding) {
    const float* where = model_.position_embedding->weight.data() + pos * C;
    for (int64_t c = 0; c < C; ++c) x[c] += where[c];
  } else {
    RotaryTables::row(pos, C / config_.n_head, cos, sin);
  }
}

void Decoder::activate(float* f, int64_t n) const {
  switch (config_.activation) {
    case Activation::gelu: for (int64_t i = 0; i < n; ++i) f[i] = kernels::gelu(f[i]); break;
    case Activation::relu: for (int64_t i = 0; i < n; ++i) f[i] = f[i] > 0.0f ? f[i] : 0.0f; break;
    case Activation::relu2: for (int64_t i = 0; i < n; ++i) f[i] = f[i] > 0.0f ? f[i] * f[i] : 0.0f; break;
    case Activation::gelu_tanh: for (int64_t i = 0; i < n; ++i) f[i] = kernels::gelu_tanh(f[i]); break;
  }
}

void Decoder::softcap(float* logits, int64_t n) const {
  if (const float cap = config_.logit_softcap; cap > 0.0f)
    for (int64_t i = 0; i < n; ++i) logits[i] = cap * std::tanh(logits[i] * (1.0f / cap));  // as GPT::head's scale(tanh(scale()))
}

std::span<const float> Decoder::step(int32_t id, int64_t stream) {
  check_step(id, stream);
  const int64_t C = config_.n_embd, pos = length_[size_t(stream)];
  embed({.stream = stream, .pos = pos, .id = id, .previous = last_id_[size_t(stream)]}, x_.data(), cos_.data(),
        sin_.data());
  x0_ = x_;
  const RowScratch s{att_.data(), h_.data(), cos_.data(), sin_.data()};  // h_ is free while attending
  for (size_t l = 0; l < layers_.size(); ++l) {
    Layer& L = layers_[l];
    if (L.x0_gate)  // as GPT::block_input
      for (int64_t c = 0; c < C; ++c) x_[c] += L.x0_gate[c] * x0_[c];
    if (L.skip_gate)
      for (int64_t c = 0; c < C; ++c) x_[c] += L.skip_gate[c] * kept_[L.skip_from * C + c];
    kernels::layer_norm_row(x_.data(), L.ln1_w, L.ln1_b, h_.data(), C, kLayerNormEps);
    L.qkv.apply(h_.data(), qkv_.data(), x16_);
    add_value_embedding(L, id, qkv_.data());
    attend(L, stream, pos, qkv_.data(), y_.data(), s);
    L.proj.apply(y_.data(), h_.data(), x16_);
    for (int64_t c = 0; c < C; ++c) x_[c] += h_[c];
    kernels::layer_norm_row(x_.data(), L.ln2_w, L.ln2_b, h_.data(), C, kLayerNormEps);
    L.fc.apply(h_.data(), ff_.data(), x16_);
    activate(ff_.data(), 4 * C);
    L.fc2.apply(ff_.data(), h_.data(), x16_);
    for (int64_t c = 0; c < C; ++c) x_[c] += h_[c];
    if (L.keeps_output) std::copy(x_.begin(), x_.end(), kept_.begin() + int64_t(l) * C);
  }
  kernels::layer_norm_row(x_.data(), model_.ln_f->weight.data(), model_.ln_f->bias.data(), h_.data(), C,
                          kLayerNormEps);
  lm_head_.apply(h_.data(), logits_.data(), x16_);
  softcap(logits_.data(), config_.vocab_size);
  ++length_[size_t(stream)];
  last_id_[size_t(stream)] = id;
  return logits_;
}

void Decoder::ensure_batch(int64_t B, int64_t with_logits) {
  const int64_t C = config_.n_embd, hs = C / config_.n_head;
  if (int64_t(blogits_.size()) < with_logits * config_.vocab_size) blogits_.resize(with_logits * config_.vocab_size);
  if (int64_t(bx_.size()) >= B * C) return;
  bx_.resize(B * C), by_.resize(B * C), bh_.resize(B * C), bqkv_.resize(B * 3 * C), bff_.resize(B * 4 * C);
  batt_.resize(B * config_.block_size), brot_.resize(B * 2 * hs);
  bcos_.resize(B * C), bsin_.resize(B * C), bx0_.resize(B * C), bkept_.resize(config_.skip_pairs() * B * C);
}

std::span<const float> Decoder::step_batch(std::span<const int64_t> streams, std::span<const int32_t> ids) {
  const int64_t B = int64_t(ids.size());
  if (int64_t(streams.size()) != B) fail("decoder", "step_batch with ", streams.size(), " streams and ", B, " ids");
  rows_.clear();
  for (int64_t b = 0; b < B; ++b) {
    check_step(ids[b], streams[b]);
    for (int64_t e = 0; e < b; ++e)  // two rows writing one cache position
      if (streams[e] == streams[b]) fail("decoder", "step_batch with stream ", streams[b], " twice");
    const size_t s = size_t(streams[b]);
    rows_.push_back({.stream = streams[b], .pos = length_[s], .id = ids[b], .previous = last_id_[s]});
  }
  return run_rows(rows_, B, false);
}

std::span<const float> Decoder::run_rows(std::span<const Row> rows, int64_t with_logits, bool prompt) {
  const int64_t B = int64_t(rows.size()), C = config_.n_embd, V = config_.vocab_size, hs = C / config_.n_head;
  if (B == 0) return {};
  ensure_batch(B, with_logits);
  for (int64_t b = 0; b < B; ++b) embed(rows[b], bx_.data() + b * C, bcos_.data() + b * C, bsin_.data() + b * C);
  std::copy(bx_.begin(), bx_.begin() + B * C, bx0_.begin());
  for (size_t l = 0; l < layers_.size(); ++l) {
    Layer& L = layers_[l];
    if (L.x0_gate)  // as GPT::block_input
      for (int64_t b = 0; b < B; ++b)
        for (int64_t c = 0; c < C; ++c) bx_[b * C + c] += L.x0_gate[c] * bx0_[b * C + c];
    if (L.skip_gate) {
      const float* kept = bkept_.data() + L.skip_from * B * C;  // (B, C)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t c = 0; c < C; ++c) bx_[b * C + c] += L.skip_gate[c] * kept[b * C + c];
    }
    for (int64_t b = 0; b < B; ++b)
      kernels::layer_norm_row(bx_.data() + b * C, L.ln1_w, L.ln1_b, bh_.data() + b * C, C, kLayerNormEps);
    L.qkv.apply_rows(bh_.data(), bqkv_.data(), B, x16_, prompt);  // (B, C) -> (B, 3C)
    for (int64_t b = 0; b < B; ++b) {  // in order: a row sees the keys of its stream's earlier rows
      add_value_embedding(L, rows[b].id, bqkv_.data() + b * 3 * C);
      const RowScratch s{batt_.data() + b * config_.block_size, brot_.data() + b * 2 * hs, bcos_.data() + b * C,
                         bsin_.data() + b * C};
      attend(L, rows[b].stream, rows[b].pos, bqkv_.data() + b * 3 * C, by_.data() + b * C, s);
    }
    L.proj.apply_rows(by_.data(), bh_.data(), B, x16_, prompt);  // (B, C) -> (B, C)
    for (int64_t i = 0; i < B * C; ++i) bx_[i] += bh_[i];
    for (int64_t b = 0; b < B; ++b)
      kernels::layer_norm_row(bx_.data() + b * C, L.ln2_w, L.ln2_b, bh_.data() + b * C, C, kLayerNormEps);
    L.fc.apply_rows(bh_.data(), bff_.data(), B, x16_, prompt);  // (B, C) -> (B, 4C)
    activate(bff_.data(), B * 4 * C);
    L.fc2.apply_rows(bff_.data(), bh_.data(), B, x16_, prompt);  // (B, 4C) -> (B, C)
    for (int64_t i = 0; i < B * C; ++i) bx_[i] += bh_[i];
    if (L.keeps_output) std::copy_n(bx_.begin(), B * C, bkept_.begin() + int64_t(l) * B * C);
  }
  const int64_t first = B - with_logits;  // the rows whose logits are asked for: the last ones
  for (int64_t b = first; b < B; ++b)
    kernels::layer_norm_row(bx_.data() + b * C, model_.ln_f->weight.data(), model_.ln_f->bias.data(),
                            bh_.data() + b * C, C, kLayerNormEps);
  lm_head_.apply_rows(bh_.data() + first * C, blogits_.data(), with_logits, x16_, prompt);  // (with_logits, C) -> (with_logits, V)
  softcap(blogits_.data(), with_logits * V);
  for (const Row& r : rows) length_[size_t(r.stream)] = r.pos + 1, last_id_[size_t(r.stream)] = r.id;
  return {blogits_.data(), size_t(with_logits * V)};
}

}  // namespace folio::nn
