// The char tokenizer: one token per Unicode character of the training text, ids in
// code point order (data/vocab.h). Checkpoints store the characters as one UTF-8
// string under "vocab", as they always have, and no "tokenizer" entry.
#include <algorithm>
#include <memory>

#include "autograd/error.h"
#include "data/tokenizer_kind.h"
#include "data/vocab.h"

namespace folio {
namespace {

class CharTokenizer final : public Tokenizer {
 public:
  explicit CharTokenizer(Vocab vocab) : vocab_(std::move(vocab)) {}
  const char* kind() const override { return "char"; }
  int vocab_size() const override { return vocab_.size(); }

  std::vector<int32_t> encode(std::string_view utf8) const override {
    const std::vector<char32_t> text = decode_utf8(utf8);
    try {
      return vocab_.encode(text);
    } catch (const Error&) {
      unknown_characters(text);
    }
  }
  std::string decode(std::span<const int32_t> ids) const override { return vocab_.decode(ids); }
  std::string token_bytes(int32_t id) const override { return vocab_.decode(std::span(&id, 1)); }
  std::string describe() const override { return cat("char, ", vocab_.size(), " characters"); }
  TokenizerMetadata metadata() const override { return {{"vocab", vocab_.to_utf8()}}; }

 private:
  // Names the first character the vocabulary lacks, where it is, and how many there are.
  [[noreturn]] void unknown_characters(const std::vector<char32_t>& text) const {
    size_t first = text.size(), count = 0;
    std::vector<char32_t> distinct;
    for (size_t i = 0; i < text.size(); ++i) {
      if (vocab_.contains(text[i])) continue;
      if (first == text.size()) first = i;
      ++count;
      if (distinct.size() < 64 && std::find(distinct.begin(), distinct.end(), text[i]) == distinct.end())
        distinct.push_back(text[i]);
    }
    fail("tokenizer", "character ", describe_char(text[first]), " at position ", first,
         " is not in the model's vocabulary of ", vocab_.size(), " characters (", count,
         count == 1 ? " character" : " characters", " of the text are not, ", distinct.size() < 64 ? "" : "at least ",
         distinct.size(), " distinct; folio info --checkpoint RUN lists the vocabulary)");
  }

  Vocab vocab_;
};

std::unique_ptr<Tokenizer> train(const TokenizerSpec& spec, std::string_view train_text, std::string_view held_out) {
  if (spec.vocab_size != 0)
    fail("tokenizer", "--vocab-size goes with bpe or unigram: a char vocabulary is the text's characters");
  // Validation text is encoded with this vocabulary too, so its characters belong in it.
  std::vector<char32_t> text = decode_utf8(train_text);
  const std::vector<char32_t> rest = decode_utf8(held_out);
  text.insert(text.end(), rest.begin(), rest.end());
  return std::make_unique<CharTokenizer>(Vocab::from_text(text));
}

std::unique_ptr<Tokenizer> load(const TokenizerMetadata& metadata, const std::string& where) {
  const std::string* chars = find_entry(metadata, "vocab");
  if (!chars) fail("checkpoint", where, ": __metadata__.vocab is missing (no tokenizer)");
  try {
    return std::make_unique<CharTokenizer>(Vocab::from_utf8(*chars));
  } catch (const Error& e) {
    fail("checkpoint", where, ": __metadata__.vocab: ", e.what());
  }
}

}  // namespace

const TokenizerKind kCharTokenizer = {"char", {"char", nullptr}, train, load, nullptr};

}  // namespace folio
