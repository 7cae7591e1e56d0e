#include "infer/decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <omp.h>

#include "base/error.h"
#include "autograd/kernels/rows.h"
#include "autograd/kernels/swiglu.h"
#include "autograd/kernels/vecmath.h"

namespace folio::infer {

using namespace nn;  // the model the decoder reads
namespace {

const float* data_or_null(const Tensor& t) { return t.defined() ? t.data() : nullptr; }

// One row through a LayerNorm, or an RMSNorm (no bias) as LayerNorm::forward: x (C) -> out (C).
void norm_row(const float* x, const float* w, const float* b, float* out, int64_t C) {
  if (b) {
    kernels::layer_norm_row(x, w, b, out, C, kLayerNormEps);
    return;
  }
  kernels::rms_norm_row(x, out, C, kModelRmsNormEps);
  for (int64_t c = 0; c < C; ++c) out[c] *= w[c];
}

}  // namespace

std::shared_ptr<const DecoderMatrices> Decoder::store(const GPT& model, Weights weights) {
  return std::make_shared<const DecoderMatrices>(model, weights);
}

Decoder::Decoder(const GPT& model, int64_t streams, Weights weights) : Decoder(model, streams, store(model, weights)) {}

Decoder::Decoder(const GPT& model, int64_t streams, std::shared_ptr<const DecoderMatrices> matrices)
    : model_(model), config_(model.config()), weights_(matrices->weights), matrices_(std::move(matrices)),
      lm_head_(&matrices_->lm_head) {
  if (streams < 1) fail("decoder", "streams must be >= 1, got ", streams);
  if (matrices_->blocks.size() != 4 * model.blocks.size())
    fail("decoder", "matrices of ", matrices_->blocks.size() / 4, " blocks for a model of ", model.blocks.size());
  const int64_t C = config_.n_embd, cache = streams * config_.block_size * C;  // n_head * head_size == C
  for (size_t l = 0; l < model.blocks.size(); ++l) {
    const Block& b = *model.blocks[l];
    const StoredMatrix* m = matrices_->blocks.data() + 4 * l;
    const auto skip = config_.skip_into(int64_t(l));
    layers_.push_back({.ln1_w = b.ln1->weight.data(),
                       .ln1_b = data_or_null(b.ln1->bias),
                       .ln2_w = b.ln2->weight.data(),
                       .ln2_b = data_or_null(b.ln2->bias),
                       .qkv = m,
                       .proj = m + 1,
                       .fc = m + 2,
                       .fc2 = m + 3,
                       .x0_gate = model.x0_gates ? model.x0_gates->gate[l].data() : nullptr,
                       .value_embed = model.value_embeddings.empty() ? nullptr : model.value_embeddings[l]->weight.data(),
                       .skip_gate = skip ? model.skip_gates->gate[size_t(skip->gate)].data() : nullptr,
                       .skip_from = skip ? skip->from : 0,
                       .keeps_output = int64_t(l) < config_.skip_pairs(),
                       .k = std::vector<float>(streams * key_slots() * C),
                       .v = std::vector<float>(cache)});
  }
  length_.assign(size_t(streams), 0);
  last_id_.assign(size_t(streams), 0);
}

void Decoder::set_threads(int threads) {
  if (threads < 1) fail("decoder", "threads must be at least 1, got ", threads);
  scratch_.threads = threads;
}

int64_t Decoder::matrix_bytes() const {
  int64_t n = lm_head_->bytes();
  for (const Layer& L : layers_) n += L.qkv->bytes() + L.proj->bytes() + L.fc->bytes() + L.fc2->bytes();
  return n;
}

std::span<const float> Decoder::restart(std::span<const int32_t> ids, int64_t stream, bool every_position) {
  const int64_t T = int64_t(ids.size()), block = config_.block_size;
  if (T < 1 || T > block) fail("decoder", "restart with ", T, " tokens; expected 1 to block_size ", block);
  if (stream < 0 || stream >= streams()) fail("decoder", "stream ", stream, " outside [0, ", streams(), ")");
  for (int32_t id : ids) check_id(id);
  // The prompt's rows in order, so that each attends to the ones before it, which its
  // stream's cache holds by then; only the last needs logits.
  rows_.clear();
  for (int64_t t = 0; t < T; ++t)
    rows_.push_back({.stream = stream, .pos = t, .id = ids[size_t(t)], .previous = t > 0 ? ids[size_t(t - 1)] : 0});
  // Every position's logits (folio eval's loss): the rows run through the kernels a
  // decode step runs, not the prefill's, so that the loss measured is that of the
  // tokens generate produces (with int8 weights, the activations quantized as a
  // step's are).
  return run_rows(rows_, every_position ? T : 1, !every_position);
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

const float* Decoder::activate(float* f, int64_t rows) {
  const int64_t H = config_.ffn_width(), n = rows * H;
  // A long prompt's activations split across the prompt's threads, each value as alone:
  // GELU's tanh over 512 rows of 3072 was about 40 % of a 2-thread prefill of GPT-2
  // small's shape, on one thread while the other waited.
  const bool split = rows >= kPromptProductRows;
  switch (config_.activation) {
    case Activation::gelu:
#pragma omp parallel for if (split) schedule(static)
      for (int64_t i = 0; i < n; ++i) f[i] = kernels::gelu(f[i]);
      return f;
    case Activation::relu:
      for (int64_t i = 0; i < n; ++i) f[i] = f[i] > 0.0f ? f[i] : 0.0f;
      return f;
    case Activation::relu2:
      for (int64_t i = 0; i < n; ++i) f[i] = f[i] > 0.0f ? f[i] * f[i] : 0.0f;
      return f;
    case Activation::swiglu: {  // row r's [gate (H); up (H)] -> SiLU(gate) * up, autograd's kernel
      if (!split) {
        kernels::swiglu_rows(f, f, rows, H);  // in place, in order, row by row: never past what it reads
        return f;
      }
      // In place a row's output overwrites an earlier row's input, so split rows go to
      // a buffer of their own.
      act_.resize(size_t(n));
#pragma omp parallel
      {
        const int64_t t = omp_get_thread_num(), T = omp_get_num_threads();
        const int64_t first = rows * t / T, last = rows * (t + 1) / T;
        kernels::swiglu_rows(f + first * 2 * H, act_.data() + first * H, last - first, H);
      }
      return act_.data();
    }
    case Activation::gelu_tanh:
#pragma omp parallel for simd if (split) schedule(static)
      for (int64_t i = 0; i < n; ++i) f[i] = kernels::gelu_tanh(f[i]);
      return f;
  }
  return f;
}

void Decoder::softcap(float* logits, int64_t n) const {
  if (const float cap = config_.logit_softcap; cap > 0.0f)
    for (int64_t i = 0; i < n; ++i) logits[i] = cap * std::tanh(logits[i] * (1.0f / cap));  // as GPT::head's scale(tanh(scale()))
}

std::span<const float> Decoder::step(int32_t id, int64_t stream) {
  check_step(id, stream);
  const size_t s = size_t(stream);
  rows_.assign({{.stream = stream, .pos = length_[s], .id = id, .previous = last_id_[s]}});
  return run_rows(rows_, 1, false);
}

void Decoder::ensure_rows(int64_t B, int64_t with_logits) {
  const int64_t C = config_.n_embd, hs = C / config_.n_head;
  if (int64_t(logits_.size()) < with_logits * config_.vocab_size) logits_.resize(with_logits * config_.vocab_size);
  // a step's attention takes a thread's rows of att_ and rot_, attend_prompt a row's of rot_
  if (const int64_t threads = scratch_.threads; int64_t(att_.size()) < threads * config_.block_size)
    att_.resize(threads * config_.block_size);
  if (const int64_t rows = std::max<int64_t>(B, scratch_.threads); int64_t(rot_.size()) < rows * 2 * hs)
    rot_.resize(rows * 2 * hs);
  if (int64_t(x_.size()) >= B * C) return;
  const int64_t F = FeedForward::fc_outputs(C, config_.activation, int64_t(config_.ffn_hidden));  // H, or 2H
  x_.resize(B * C), x0_.resize(B * C), y_.resize(B * C), h_.resize(B * C), qkv_.resize(B * 3 * C), ff_.resize(B * F);
  cos_.resize(B * C), sin_.resize(B * C);
  kept_.resize(config_.skip_pairs() * B * C);
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
  const int64_t B = int64_t(rows.size()), C = config_.n_embd, V = config_.vocab_size;
  if (B == 0) return {};
  ensure_rows(B, with_logits);
  for (int64_t b = 0; b < B; ++b) embed(rows[b], x_.data() + b * C, cos_.data() + b * C, sin_.data() + b * C);
  std::copy(x_.begin(), x_.begin() + B * C, x0_.begin());
  for (size_t l = 0; l < layers_.size(); ++l) {
    Layer& L = layers_[l];
    if (L.x0_gate)  // as GPT::block_input
      for (int64_t b = 0; b < B; ++b)
        for (int64_t c = 0; c < C; ++c) x_[b * C + c] += L.x0_gate[c] * x0_[b * C + c];
    if (L.skip_gate) {
      const float* kept = kept_.data() + L.skip_from * B * C;  // (B, C)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t c = 0; c < C; ++c) x_[b * C + c] += L.skip_gate[c] * kept[b * C + c];
    }
    for (int64_t b = 0; b < B; ++b)
      norm_row(x_.data() + b * C, L.ln1_w, L.ln1_b, h_.data() + b * C, C);
    L.qkv->apply_rows(h_.data(), qkv_.data(), B, scratch_, prompt);  // (B, C) -> (B, 3C)
    for (int64_t b = 0; b < B; ++b) add_value_embedding(L, rows[b].id, qkv_.data() + b * 3 * C);
    if (prompt && B >= kPromptProductRows) {  // restart's rows: one stream, positions 0..B-1
      attend_prompt(L, rows[0].stream, B, qkv_.data(), y_.data());
    } else {
      attend_rows(L, rows, qkv_.data(), y_.data());
    }
    L.proj->apply_rows(y_.data(), h_.data(), B, scratch_, prompt);  // (B, C) -> (B, C)
    for (int64_t i = 0; i < B * C; ++i) x_[i] += h_[i];
    for (int64_t b = 0; b < B; ++b)
      norm_row(x_.data() + b * C, L.ln2_w, L.ln2_b, h_.data() + b * C, C);
    L.fc->apply_rows(h_.data(), ff_.data(), B, scratch_, prompt);  // (B, C) -> (B, H), or (B, 2H) with swiglu
    const float* act = activate(ff_.data(), B);  // (B, H)
    L.fc2->apply_rows(act, h_.data(), B, scratch_, prompt);  // (B, H) -> (B, C)
    for (int64_t i = 0; i < B * C; ++i) x_[i] += h_[i];
    if (L.keeps_output) std::copy_n(x_.begin(), B * C, kept_.begin() + int64_t(l) * B * C);
  }
  const int64_t first = B - with_logits;  // the rows whose logits are asked for: the last ones
  for (int64_t b = first; b < B; ++b)
    norm_row(x_.data() + b * C, model_.ln_f->weight.data(), data_or_null(model_.ln_f->bias), h_.data() + b * C, C);
  lm_head_->apply_rows(h_.data() + first * C, logits_.data(), with_logits, scratch_, prompt);  // (with_logits, C) -> (with_logits, V)
  softcap(logits_.data(), with_logits * V);
  for (const Row& r : rows) length_[size_t(r.stream)] = r.pos + 1, last_id_[size_t(r.stream)] = r.id;
  return {logits_.data(), size_t(with_logits * V)};
}

}  // namespace folio::infer
