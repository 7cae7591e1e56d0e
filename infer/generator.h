#pragma once
// All of inference behind one class: the decoder that runs the model, the context
// window and its shift, sampling, and the text of what is generated, cut at stop
// strings. folio generate, folio serve's slots and the benchmarks generate through it.
//
// A Generator holds `streams` sequences side by side on one Decoder (a stream per
// sequence; the packed weights are shared). logits() runs one step for the streams it
// is given: a prefill (the decoder's batched step over the context) for a stream whose
// context is new, one batched step, a product per weight matrix, for the rest.
// sample() draws a stream's next token from its row and moves its window on: past
// block_size, learned positions drop the oldest context_shift tokens and recompute the
// rest at the next logits(); rotary ones roll the cache a token at a time.
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "infer/sampling.h"
#include "infer/stop_filter.h"
#include "nn/transformer.h"
#include "nn/weights.h"

namespace folio::infer {

using nn::Weights;
class Decoder;
class DecoderMatrices;

class Generator {
 public:
  // The model must outlive the generator and not change while it generates. Without
  // the KV cache every token recomputes its whole context with the model's forward,
  // which reads the model's own weights: `weights` other than f32 need the cache.
  explicit Generator(const nn::GPT& model, int64_t streams = 1, bool kv_cache = true,
                     Weights weights = Weights::f32);
  // With the KV cache, on matrices stored once (store()) and shared with other
  // generators of the model: their format is the weights'.
  Generator(const nn::GPT& model, int64_t streams, std::shared_ptr<const DecoderMatrices> matrices);
  static std::shared_ptr<const DecoderMatrices> store(const nn::GPT& model, Weights weights);
  ~Generator();
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  // Starts a sequence in `stream` after `prompt` (non-empty); the model sees its last
  // block_size tokens. `rng` draws its samples and must outlive it. With a tokenizer,
  // each token also comes with its text (whole UTF-8 characters), cut at the first
  // of `stops`. `end_token` (a chat model's end of turn) ends the sequence when drawn:
  // that token is stopped, with no text, and is not added to the context.
  void start(int64_t stream, std::span<const int32_t> prompt, const SampleOptions& opt, Rng& rng,
             const Tokenizer* tokenizer = nullptr, std::vector<std::string> stops = {},
             std::optional<int32_t> end_token = std::nullopt);
  // The next token's logits for each of `streams` (distinct, started), (B, V) in their
  // order, valid until the next call.
  std::span<const float> logits(std::span<const int64_t> streams);
  // Whether logits() runs a prefill for the stream: its context is not in the cache.
  bool needs_prefill(int64_t stream) const { return at(stream).fresh; }

  struct Token {
    int32_t id = -1;
    std::string text;      // what may be shown now (with a tokenizer)
    bool stopped = false;  // a stop string came: text ends before it; the sequence is over
  };
  // Draws the stream's next token from its row of logits (V) and appends it to the
  // context.
  Token sample(int64_t stream, std::span<const float> logits);
  // The stream's next token: logits() and sample() for it alone.
  Token next(int64_t stream = 0);
  // The end of the stream's sequence: the text held back (an unfinished character, the
  // possible start of a stop string), which may complete a stop string.
  Token finish(int64_t stream = 0);

  int64_t streams() const { return int64_t(streams_.size()); }
  // The threads a decode step's products split across (Decoder::set_threads;
  // nothing without the KV cache, whose forward uses the OpenMP setting).
  void set_decode_threads(int threads);

 private:
  struct Stream {
    std::deque<int32_t> window;  // the context the model sees next, at most block_size tokens
    bool fresh = true;           // the cache holds none of the window
    bool started = false;
    SampleOptions opt;
    Rng* rng = nullptr;
    std::vector<std::pair<float, int32_t>> scratch;  // sample_token's (V)
    std::optional<TokenStream> text;
    std::optional<StopFilter> stops;
    std::optional<int32_t> end_token;
  };
  Stream& at(int64_t stream);
  const Stream& at(int64_t stream) const;
  // Without the cache: the model's forward over the stream's window; its last row (V).
  void recompute(const Stream& s, float* row) const;
  const nn::GPT& model_;
  std::unique_ptr<Decoder> decoder_;  // null without the KV cache
  std::vector<Stream> streams_;
  std::vector<int64_t> stepping_;  // (B) the streams of one batched step
  std::vector<int32_t> ids_;       // (B) their last tokens
  std::vector<float> rows_;        // (B, V) logits gathered from several calls
};

// Makes this thread's products run on one thread: a server's slots, not an OpenMP
// team per product, are its parallelism.
void decode_on_one_thread();

}  // namespace folio::infer

namespace folio {

// Generates up to opt.max_new_tokens after `prompt` (non-empty), passing on each id:
// one stream of an infer::Generator. Memory stays bounded however many tokens.
void generate(const nn::GPT& model, std::span<const int32_t> prompt, const SampleOptions& opt, Rng& rng,
              const std::function<void(int32_t)>& emit);

}  // namespace folio
