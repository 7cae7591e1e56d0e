#pragma once
// A tokenizer for tests that need a model's prompt start: bytes as ids, with id 200 put
// before every prompt, as an imported llama GGUF's BOS.
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer.h"

namespace folio::testing {

class BytesWithStart : public Tokenizer {
 public:
  const char* kind() const override { return "test"; }
  int vocab_size() const override { return 256; }
  std::vector<int32_t> encode(std::string_view s) const override {
    return std::vector<int32_t>(reinterpret_cast<const unsigned char*>(s.data()),
                                reinterpret_cast<const unsigned char*>(s.data()) + s.size());
  }
  std::string decode(std::span<const int32_t> ids) const override { return std::string(ids.begin(), ids.end()); }
  std::string token_bytes(int32_t id) const override { return std::string(1, char(id)); }
  std::optional<int32_t> prompt_start() const override { return 200; }
  std::string describe() const override { return "bytes"; }
  TokenizerMetadata metadata() const override { return {}; }
  std::optional<TokenizerSpec> as_flags() const override { return std::nullopt; }
};

}  // namespace folio::testing
