// The tokens an attention map shows (data/attention_prompt.h).
#include "data/attention_prompt.h"

#include <algorithm>
#include <optional>

namespace folio {

std::vector<int32_t> attention_ids(const Tokenizer& tokenizer, std::vector<int32_t> ids, int64_t block_size,
                                   int64_t* dropped) {
  if (const std::optional<int32_t> bos = tokenizer.prompt_start()) ids.insert(ids.begin(), *bos);
  const int64_t cut = std::max<int64_t>(0, int64_t(ids.size()) - block_size);
  ids.erase(ids.begin(), ids.begin() + cut);
  if (dropped) *dropped = cut;
  return ids;
}

std::string attention_label(const Tokenizer& tokenizer, int32_t id) {
  return id == tokenizer.prompt_start() ? "<bos>" : visible_token(tokenizer.token_bytes(id));
}

}  // namespace folio
