// The ids tokenizer: a vocabulary size and nothing else, for token files made by other
// tools (nanoGPT's train.bin, llm.c's shards: GPT-2's 50,257 ids) whose tokenizer folio
// does not hold. A model trained on them works in ids: it cannot encode text, and it
// decodes an id as "<|id|>". Checkpoints store "tokenizer": "ids" and "vocab_size".
#include <charconv>
#include <memory>

#include "base/error.h"
#include "data/tokenizer_kind.h"

namespace folio {
namespace {

class IdTokenizer final : public Tokenizer {
 public:
  explicit IdTokenizer(int vocab_size) : vocab_size_(vocab_size) {}
  const char* kind() const override { return "ids"; }
  int vocab_size() const override { return vocab_size_; }
  std::vector<int32_t> encode(std::string_view) const override {
    fail("tokenizer", "this model was trained on token ids from files without a tokenizer (", describe(),
         "): it cannot encode text");
  }
  std::string decode(std::span<const int32_t> ids) const override {
    std::string text;
    for (const int32_t id : ids) text += token_bytes(id);
    return text;
  }
  std::string token_bytes(int32_t id) const override {
    if (id < 0 || id >= vocab_size_) fail("tokenizer", "id ", id, " is outside [0, ", vocab_size_, ")");
    return cat("<|", id, "|>");
  }
  std::string describe() const override { return cat("ids, ", vocab_size_, " token ids (no tokenizer)"); }
  std::optional<TokenizerSpec> as_flags() const override { return TokenizerSpec{"char", vocab_size_}; }
  TokenizerMetadata metadata() const override {
    return {{"tokenizer", "ids"}, {"vocab_size", std::to_string(vocab_size_)}};
  }

 private:
  int vocab_size_;
};

std::unique_ptr<Tokenizer> load(const TokenizerMetadata& metadata, const std::string& where) {
  const std::string* size = find_entry(metadata, "vocab_size");
  int64_t n = 0;
  if (!size || std::from_chars(size->data(), size->data() + size->size(), n).ec != std::errc() || n < 1 ||
      n > TokenizerSpec::kMaxVocab)
    fail("checkpoint", where, ": __metadata__.vocab_size must be a number in [1, ", TokenizerSpec::kMaxVocab,
         "] for an ids tokenizer");
  return std::make_unique<IdTokenizer>(int(n));
}

}  // namespace

std::unique_ptr<Tokenizer> make_id_tokenizer(int64_t vocab_size) {
  if (vocab_size < 1 || vocab_size > TokenizerSpec::kMaxVocab)
    fail("tokenizer", "--vocab-size ", vocab_size, " is outside [1, ", TokenizerSpec::kMaxVocab, "]");
  return std::make_unique<IdTokenizer>(int(vocab_size));
}

const TokenizerKind kIdTokenizer = {"ids", {nullptr, nullptr}, nullptr, load, nullptr};

}  // namespace folio
