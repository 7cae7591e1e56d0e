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
  bool kv_cache = true;      // reuse keys and values of earlier positions
  void validate() const;
};

// Draws the next token from one row of logits (V). `scratch` avoids reallocation.
int32_t sample_token(std::span<const float> logits, const SampleOptions& opt, Rng& rng,
                     std::vector<std::pair<float, int32_t>>& scratch);

// Generates after `prompt` (non-empty). The model sees the last block_size tokens,
// as in training; with the KV cache the keys and values of positions already seen
// are reused until the window slides (absolute positions then shift, so the window
// is recomputed): the tokens are identical either way. Memory stays bounded
// however many tokens are generated.
void generate(const nn::GPT& model, std::span<const int32_t> prompt, const SampleOptions& opt, Rng& rng,
              const std::function<void(int32_t)>& emit);

}  // namespace folio
