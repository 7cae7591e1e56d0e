// The char tokenizer: one token per Unicode character of the training text, ids in
// code point order (data/vocab.h). Checkpoints store the characters as one UTF-8
// string under "vocab", as they always have, and no "tokenizer" entry. A vocabulary
// made for a token directory (folio tokenize) adds one id after the characters: the
// end-of-text token between documents, stored as "end_of_text": "after_vocab".
#include <algorithm>
#include <memory>

#include "base/error.h"
#include "data/tokenizer_kind.h"
#include "data/vocab.h"

namespace folio {
namespace {

class CharTokenizer final : public Tokenizer {
 public:
  CharTokenizer(Vocab vocab, bool end_of_text) : vocab_(std::move(vocab)), has_eot_(end_of_text) {}
  const char* kind() const override { return "char"; }
  int vocab_size() const override { return vocab_.size() + (has_eot_ ? 1 : 0); }
  std::optional<int32_t> end_of_text() const override {
    return has_eot_ ? std::optional<int32_t>(vocab_.size()) : std::nullopt;
  }

  std::vector<int32_t> encode(std::string_view utf8) const override {
    const std::vector<char32_t> text = decode_utf8(utf8);
    try {
      return vocab_.encode(text);
    } catch (const Error&) {
      unknown_characters(text);
    }
  }
  // The end-of-text id adds no text.
  std::string decode(std::span<const int32_t> ids) const override {
    if (!has_eot_) return vocab_.decode(ids);
    std::string text;
    for (const int32_t id : ids) text += token_bytes(id);
    return text;
  }
  std::string token_bytes(int32_t id) const override {
    return has_eot_ && id == vocab_.size() ? std::string() : vocab_.decode(std::span(&id, 1));
  }
  std::string describe() const override {
    return cat("char, ", vocab_.size(), " characters", has_eot_ ? " and end-of-text" : "");
  }
  std::optional<TokenizerSpec> as_flags() const override { return TokenizerSpec{"char", 0}; }
  TokenizerMetadata metadata() const override {
    if (!has_eot_) return {{"vocab", vocab_.to_utf8()}};
    return {{"vocab", vocab_.to_utf8()}, {"end_of_text", "after_vocab"}};
  }

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
         count == 1 ? " character of the text is not, " : " characters of the text are not, ", distinct.size() < 64 ? "" : "at least ",
         distinct.size(), " distinct; folio info --checkpoint RUN lists the vocabulary)");
  }

  Vocab vocab_;
  bool has_eot_;
};

std::unique_ptr<Tokenizer> train(const TokenizerSpec& spec, std::string_view train_text, std::string_view held_out) {
  if (spec.vocab_size != 0)
    fail("tokenizer", "--vocab-size goes with bpe or unigram: a char vocabulary is the text's characters");
  // Validation text is encoded with this vocabulary too, so its characters belong in it.
  std::vector<char32_t> text = decode_utf8(train_text);
  const std::vector<char32_t> rest = decode_utf8(held_out);
  text.insert(text.end(), rest.begin(), rest.end());
  return std::make_unique<CharTokenizer>(Vocab::from_text(text), spec.end_of_text);
}

std::unique_ptr<Tokenizer> load(const TokenizerMetadata& metadata, const std::string& where) {
  const std::string* chars = find_entry(metadata, "vocab");
  if (!chars) fail("checkpoint", where, ": __metadata__.vocab is missing (no tokenizer)");
  const std::string* eot = find_entry(metadata, "end_of_text");
  if (eot && *eot != "after_vocab")
    fail("checkpoint", where, ": __metadata__.end_of_text is '", *eot, "', expected 'after_vocab'");
  try {
    return std::make_unique<CharTokenizer>(Vocab::from_utf8(*chars), eot != nullptr);
  } catch (const Error& e) {
    fail("checkpoint", where, ": __metadata__.vocab: ", e.what());
  }
}

}  // namespace

const TokenizerKind kCharTokenizer = {"char", {"char", nullptr}, train, load, nullptr};

}  // namespace folio
