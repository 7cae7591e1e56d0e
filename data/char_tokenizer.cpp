// The char tokenizer: UTF-8 decoding and encoding, the vocabulary of characters
// (data/vocab.h declares both), and the Tokenizer over it: one token per Unicode
// character of the training text, ids in code point order. Checkpoints store the
// characters as one UTF-8 string under "vocab", as they always have, and no
// "tokenizer" entry. A vocabulary made for a token directory (folio tokenize) adds
// one id after the characters: the end-of-text token between documents, stored as
// "end_of_text": "after_vocab".
#include <algorithm>
#include <cstdio>
#include <memory>

#include "base/error.h"
#include "data/tokenizer_kind.h"
#include "data/vocab.h"

namespace folio {
namespace {

constexpr char32_t kMaxCodePoint = 0x10FFFF;
constexpr char32_t kDenseLimit = 0x10000;  // the Basic Multilingual Plane

bool is_surrogate(char32_t c) { return c >= 0xD800 && c <= 0xDFFF; }
bool is_valid_code_point(char32_t c) { return c <= kMaxCodePoint && !is_surrogate(c); }

std::string hex_byte(unsigned char b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", unsigned(b));
  return buf;
}

std::string u_plus(char32_t c) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", unsigned(c));
  return buf;
}


[[noreturn]] void invalid_utf8(std::string_view source, size_t at, const std::string& why) {
  fail("utf8", source, ": invalid UTF-8 at byte offset ", at, " (", why, ")");
}

}  // namespace

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xC0 | (c >> 6));
    out += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += char(0xE0 | (c >> 12));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  } else {
    out += char(0xF0 | (c >> 18));
    out += char(0x80 | ((c >> 12) & 0x3F));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  }
}

namespace {

// Calls on_code_point(c) for every code point of `bytes`, in order; invalid UTF-8
// throws as decode_utf8 documents.
template <class OnCodePoint>
void for_each_code_point(std::string_view bytes, std::string_view source, OnCodePoint on_code_point) {
  const size_t n = bytes.size();
  size_t i = 0;
  auto bad = [&](size_t at, const std::string& why) { invalid_utf8(source, at, why); };
  while (i < n) {
    const auto lead = static_cast<unsigned char>(bytes[i]);
    if (lead < 0x80) {  // ASCII, the common case
      on_code_point(char32_t(lead));
      ++i;
      continue;
    }
    // Sequence length and the payload bits of the lead byte.
    int len = 0;
    char32_t cp = 0;
    if (lead < 0xC0) bad(i, "unexpected continuation byte " + hex_byte(lead));
    if (lead < 0xE0) len = 2, cp = lead & 0x1F;
    else if (lead < 0xF0) len = 3, cp = lead & 0x0F;
    else if (lead < 0xF5) len = 4, cp = lead & 0x07;
    else bad(i, "invalid lead byte " + hex_byte(lead));  // F5..FF would exceed U+10FFFF or never occur
    for (int k = 1; k < len; ++k) {
      if (i + k >= n) bad(i, "truncated sequence at end of input");
      const auto b = static_cast<unsigned char>(bytes[i + k]);
      if ((b & 0xC0) != 0x80) bad(i, "bad continuation byte " + hex_byte(b) + " at offset " + std::to_string(i + k));
      cp = (cp << 6) | (b & 0x3F);
    }
    // Each length has a smallest code point; anything below it had a shorter
    // encoding (overlong forms are a classic way to smuggle '/' or NUL past checks).
    static constexpr char32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len]) bad(i, "overlong encoding of " + u_plus(cp));
    if (is_surrogate(cp)) bad(i, "surrogate " + u_plus(cp));
    if (cp > kMaxCodePoint) bad(i, "code point above U+10FFFF");
    on_code_point(cp);
    i += len;
  }
}

}  // namespace

std::vector<char32_t> decode_utf8(std::string_view bytes, std::string_view source) {
  std::vector<char32_t> out;
  out.reserve(bytes.size());  // an upper bound: at least one byte per code point
  for_each_code_point(bytes, source, [&](char32_t c) { out.push_back(c); });
  return out;
}

size_t count_utf8(std::string_view bytes, std::string_view source) {
  size_t count = 0;
  for_each_code_point(bytes, source, [&](char32_t) { ++count; });
  return count;
}

std::string encode_utf8(std::span<const char32_t> cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t c : cps) {
    if (!is_valid_code_point(c)) fail("utf8", "cannot encode ", u_plus(c), ": not a Unicode scalar value");
    append_utf8(out, c);
  }
  return out;
}

std::string describe_char(char32_t c) {
  std::string glyph;
  switch (c) {
    case '\n': glyph = "\\n"; break;
    case '\t': glyph = "\\t"; break;
    case '\r': glyph = "\\r"; break;
    default:
      // Other controls and invalid values print as their code only.
      if (c < 0x20 || c == 0x7F || !is_valid_code_point(c)) return u_plus(c);
      append_utf8(glyph, c);
  }
  return "'" + glyph + "' (" + u_plus(c) + ")";
}

Vocab::Vocab(std::vector<char32_t> chars) : chars_(std::move(chars)) {
  for (size_t i = 0; i < chars_.size(); ++i) {
    const char32_t c = chars_[i];
    if (!is_valid_code_point(c)) fail("vocab", "character ", i, " is ", u_plus(c), ", not a Unicode scalar value");
    if (i > 0 && c == chars_[i - 1]) fail("vocab", "character ", describe_char(c), " appears twice (at ", i - 1, " and ", i, ")");
    if (i > 0 && c < chars_[i - 1])
      fail("vocab", "characters must be sorted: ", describe_char(c), " at ", i, " follows ", describe_char(chars_[i - 1]));
  }
  // Dense table up to the largest BMP character present.
  const auto end_bmp = std::lower_bound(chars_.begin(), chars_.end(), kDenseLimit);
  const size_t dense_size = end_bmp == chars_.begin() ? 0 : size_t(end_bmp[-1]) + 1;
  dense_.assign(dense_size, -1);
  for (auto it = chars_.begin(); it != end_bmp; ++it) dense_[*it] = int32_t(it - chars_.begin());
}

Vocab Vocab::from_text(std::span<const char32_t> text) {
  // A bitmap for the BMP avoids sorting a million characters; the rest are rare.
  std::vector<bool> seen(kDenseLimit, false);
  std::vector<char32_t> astral;
  for (char32_t c : text) {
    if (c < kDenseLimit) seen[c] = true;
    else astral.push_back(c);
  }
  std::vector<char32_t> chars;
  for (char32_t c = 0; c < kDenseLimit; ++c)
    if (seen[c]) chars.push_back(c);
  std::sort(astral.begin(), astral.end());
  astral.erase(std::unique(astral.begin(), astral.end()), astral.end());
  chars.insert(chars.end(), astral.begin(), astral.end());  // all >= U+10000, so still sorted
  return Vocab(std::move(chars));
}

Vocab Vocab::from_utf8(std::string_view s) { return Vocab(decode_utf8(s, "vocabulary")); }

int32_t Vocab::lookup(char32_t c) const {
  if (c < dense_.size()) return dense_[c];
  const auto it = std::lower_bound(chars_.begin(), chars_.end(), c);
  return it != chars_.end() && *it == c ? int32_t(it - chars_.begin()) : -1;
}

int32_t Vocab::id(char32_t c) const {
  const int32_t i = lookup(c);
  if (i < 0) fail("vocab", "character ", describe_char(c), " is not in the vocabulary");
  return i;
}

std::vector<int32_t> Vocab::encode(std::span<const char32_t> text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    ids[i] = lookup(text[i]);
    if (ids[i] < 0)
      fail("vocab", "character ", describe_char(text[i]), " at position ", i, " is not in the vocabulary");
  }
  return ids;
}

std::vector<int32_t> Vocab::encode(std::string_view utf8) const { return encode(decode_utf8(utf8)); }

std::string Vocab::decode(std::span<const int32_t> ids) const {
  std::string out;
  out.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= size()) fail("vocab", "id ", id, " at position ", i, " is outside [0, ", size(), ")");
    append_utf8(out, chars_[id]);
  }
  return out;
}

// The Tokenizer over a Vocab.
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
