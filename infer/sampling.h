#pragma once
// How the next token is drawn from a row of logits, and the options that say so.
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "base/rng.h"

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
  // (infer::Decoder::step). The first layer then sees exactly what a recompute of the last
  // block_size tokens would; deeper layers' cached keys also carry what their tokens
  // saw before the window moved on, as in sliding-window attention.
  int64_t context_shift = 0;
  void validate() const;
};

// Draws the next token from one row of logits (V). `scratch` avoids reallocation.
int32_t sample_token(std::span<const float> logits, const SampleOptions& opt, Rng& rng,
                     std::vector<std::pair<float, int32_t>>& scratch);

}  // namespace folio
