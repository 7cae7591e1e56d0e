#pragma once
// Autoregressive sampling from a GPT, streaming each token as it is produced.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "nn/transformer.h"

namespace folio {

struct SampleOptions {
  int64_t max_new_tokens = 500;
  float temperature = 1.0f;  // > 0
  int64_t top_k = 0;         // keep the k most likely tokens; 0: all
  float top_p = 1.0f;        // keep the smallest set whose probability reaches p; in (0, 1]
  bool greedy = false;       // always the most likely token (no sampling, no random draws)
  bool kv_cache = true;      // reuse keys and values of earlier positions
  // When the context is full, how many of its oldest tokens are dropped at once
  // (0: block_size / 2). With learned positions every drop moves every position, so
  // the cache goes stale and the rest of the context is recomputed: 1 slides the
  // window a token at a time (the model always sees block_size tokens, and recomputes
  // them for every token); block_size / 2 recomputes once every block_size / 2 tokens,
  // and the model sees between block_size / 2 and block_size tokens.
  // Rotary positions (--pos rope) with the cache ignore it: a key rotated by its own
  // position stays valid, so the cache rolls a token at a time and never recomputes
  // (nn::Decoder::step). The first layer then sees exactly what a recompute of the last
  // block_size tokens would; deeper layers' cached keys also carry what their tokens
  // saw before the window moved on, as in sliding-window attention.
  int64_t context_shift = 0;
  void validate() const;
};

// Draws the next token from one row of logits (V). `scratch` avoids reallocation.
int32_t sample_token(std::span<const float> logits, const SampleOptions& opt, Rng& rng,
                     std::vector<std::pair<float, int32_t>>& scratch);

// Generates after `prompt` (non-empty). The model sees at most the last block_size
// tokens, as in training, dropped context_shift at a time (see SampleOptions); with
// the KV cache the keys and values of the positions in the context are reused until
// the next drop. With learned positions the context is the same with and without the
// cache, so are the tokens; with rotary positions the cache rolls instead (see
// context_shift). Memory stays bounded however many tokens are generated.
void generate(const nn::GPT& model, std::span<const int32_t> prompt, const SampleOptions& opt, Rng& rng,
              const std::function<void(int32_t)>& emit);

}  // namespace folio
