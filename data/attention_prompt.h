#pragma once
// The tokens a model's attention weights are shown over, and their labels: one place,
// so that folio attention, the Python module's Model.attention and folio serve's
// /v1/attention (its page) show the same forward pass the same way.
#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace folio {

// A prompt's `ids` (non-empty) after the BOS its tokenizer asks for (prompt_start: a
// model imported from a llama-family GGUF), as generate and serve give them to the
// model; of a prompt longer than the context, the last block_size tokens, the ones the
// model attends over when it continues it. `dropped`: how many were cut from the front.
std::vector<int32_t> attention_ids(const Tokenizer& tokenizer, std::vector<int32_t> ids, int64_t block_size,
                                   int64_t* dropped = nullptr);
// A token's label in an attention map: visible_token of its text, and "<bos>" for the
// prompt_start id, whose text is empty (a blank label reads as a missing one).
std::string attention_label(const Tokenizer& tokenizer, int32_t id);

}  // namespace folio
