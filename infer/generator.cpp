#include "infer/generator.h"

#include <algorithm>
#include <cstring>

#include "autograd/parallel.h"
#include "base/error.h"
#include "infer/decoder.h"

namespace folio::infer {

namespace {
void check_generator(const nn::GPT& model, int64_t streams, bool kv_cache, Weights weights) {
  if (streams < 1) fail("generate", "streams must be >= 1, got ", streams);
  if (!kv_cache && weights != Weights::f32)
    fail("generate", "weights ", to_string(weights), " are read by the KV-cached decoder; without the cache every "
         "token runs the model's own f32 weights");
  if (model.training() && model.config().dropout > 0.0f)
    fail("generate", "the model is in training mode and would apply dropout while sampling: call eval() first");
}
}  // namespace

Generator::Generator(const nn::GPT& model, int64_t streams, bool kv_cache, Weights weights) : model_(model) {
  check_generator(model, streams, kv_cache, weights);
  if (kv_cache) decoder_ = std::make_unique<Decoder>(model, streams, weights);
  streams_.resize(size_t(streams));
}

std::shared_ptr<const DecoderMatrices> Generator::store(const nn::GPT& model, Weights weights) {
  return Decoder::store(model, weights);
}

Generator::Generator(const nn::GPT& model, int64_t streams, std::shared_ptr<const DecoderMatrices> matrices)
    : model_(model) {
  check_generator(model, streams, true, Weights::f32);
  decoder_ = std::make_unique<Decoder>(model, streams, std::move(matrices));
  streams_.resize(size_t(streams));
}

Generator::~Generator() = default;

Generator::Stream& Generator::at(int64_t stream) {
  return const_cast<Stream&>(std::as_const(*this).at(stream));
}

const Generator::Stream& Generator::at(int64_t stream) const {
  if (stream < 0 || stream >= streams()) fail("generate", "stream ", stream, " outside [0, ", streams(), ")");
  return streams_[size_t(stream)];
}

void Generator::start(int64_t stream, std::span<const int32_t> prompt, const SampleOptions& opt, Rng& rng,
                      const Tokenizer* tokenizer, std::vector<std::string> stops, std::optional<int32_t> end_token) {
  opt.validate();
  if (prompt.empty()) fail("generate", "the prompt is empty");
  const int64_t V = model_.config().vocab_size;
  for (int32_t id : prompt)
    if (id < 0 || id >= V) fail("generate", "prompt token id ", id, " outside the vocabulary of ", V);
  Stream& s = at(stream);
  const size_t block = size_t(model_.config().block_size);
  s.window.assign(prompt.size() > block ? prompt.end() - block : prompt.begin(), prompt.end());
  s.fresh = true, s.started = true;
  s.opt = opt;
  s.rng = &rng;
  s.text.reset(), s.stops.reset();
  s.end_token = end_token;
  if (tokenizer) s.text.emplace(*tokenizer), s.stops.emplace(std::move(stops));
}

void Generator::recompute(const Stream& s, float* row) const {
  const std::vector<int32_t> ids(s.window.begin(), s.window.end());
  const int64_t T = int64_t(ids.size()), V = model_.config().vocab_size;
  NoGradGuard no_grad;
  const Tensor logits = model_.forward(ids, 1, T).logits;  // (1, T, V)
  std::memcpy(row, logits.data() + (T - 1) * V, sizeof(float) * V);
}

std::span<const float> Generator::logits(std::span<const int64_t> streams) {
  const int64_t B = int64_t(streams.size()), V = model_.config().vocab_size;
  bool prefill = false;
  for (int64_t b = 0; b < B; ++b) {
    if (!at(streams[b]).started) fail("generate", "stream ", streams[b], " was not started");
    for (int64_t e = 0; e < b; ++e)
      if (streams[e] == streams[b]) fail("generate", "stream ", streams[b], " twice in one step");
    prefill = prefill || at(streams[b]).fresh;
  }
  // The common case, a step of streams whose contexts are cached: the decoder's rows
  // themselves.
  if (decoder_ && !prefill) {
    ids_.clear();
    for (int64_t stream : streams) ids_.push_back(at(stream).window.back());
    return decoder_->step_batch(streams, ids_);
  }
  rows_.resize(size_t(B * V));
  stepping_.clear(), ids_.clear();
  for (int64_t b = 0; b < B; ++b) {
    Stream& s = at(streams[b]);
    if (!decoder_) {
      recompute(s, rows_.data() + b * V);
    } else if (s.fresh) {
      const std::vector<int32_t> context(s.window.begin(), s.window.end());
      const std::span<const float> row = decoder_->restart(context, streams[b]);  // (V)
      std::copy(row.begin(), row.end(), rows_.begin() + b * V);
      s.fresh = false;
    } else {
      stepping_.push_back(streams[b]), ids_.push_back(s.window.back());
    }
  }
  if (!stepping_.empty()) {
    const std::span<const float> stepped = decoder_->step_batch(stepping_, ids_);  // (stepping, V)
    for (size_t i = 0, b = 0; i < stepping_.size(); ++b)
      if (streams[b] == stepping_[i]) std::copy_n(stepped.begin() + int64_t(i++) * V, V, rows_.begin() + b * V);
  }
  return rows_;
}

Generator::Token Generator::sample(int64_t stream, std::span<const float> logits) {
  Stream& s = at(stream);
  Token token;
  token.id = sample_token(logits, s.opt, *s.rng, s.scratch);
  if (s.end_token && token.id == *s.end_token) {  // the turn ends: what was held back is text, or the stop
    if (s.text) {
      token.text = s.stops->push(s.text->finish());
      if (!s.stops->matched()) token.text += s.stops->flush();
    }
    token.stopped = true;
    return token;
  }
  if (s.text) {
    token.text = s.stops->push(s.text->push(token.id));
    token.stopped = s.stops->matched();
  }
  const int64_t block = model_.config().block_size;
  s.window.push_back(token.id);
  if (int64_t(s.window.size()) > block) {
    if (decoder_ && decoder_->rolls()) {  // the cache keeps the last block_size positions itself
      s.window.pop_front();
    } else {  // drop the oldest: every position moves, so the rest is recomputed
      const int64_t shift = s.opt.context_shift > 0 ? std::min(s.opt.context_shift, block)
                                                     : std::max<int64_t>(block / 2, 1);
      s.window.erase(s.window.begin(), s.window.begin() + shift);
      s.fresh = true;
    }
  }
  return token;
}

Generator::Token Generator::next(int64_t stream) {
  const int64_t one[] = {stream};
  return sample(stream, logits(one));
}

Generator::Token Generator::finish(int64_t stream) {
  Stream& s = at(stream);
  Token token;
  if (s.text) {
    token.text = s.stops->push(s.text->finish());
    token.stopped = s.stops->matched();
    if (!token.stopped) token.text += s.stops->flush();
  }
  s.started = false;
  return token;
}

void Generator::set_decode_threads(int threads) {
  if (decoder_) decoder_->set_threads(threads);
}

void decode_on_one_thread() { set_num_threads(1); }

}  // namespace folio::infer

namespace folio {

void generate(const nn::GPT& model, std::span<const int32_t> prompt, const SampleOptions& opt, Rng& rng,
              const std::function<void(int32_t)>& emit) {
  infer::Generator generator(model, 1, opt.kv_cache);
  generator.start(0, prompt, opt, rng);
  for (int64_t n = 0; n < opt.max_new_tokens; ++n) emit(generator.next().id);
}

}  // namespace folio
