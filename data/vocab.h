#pragma once
// Character-level vocabulary over Unicode code points (data/char_tokenizer.cpp, with
// the char tokenizer over it). Text comes in as UTF-8
// bytes; a token is the index of its code point in the sorted set of characters,
// so the same text always gives the same ids (like sorted(set(text)) in Python).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace folio {

// Decodes UTF-8 into code points. Invalid UTF-8 (bad lead byte, truncated sequence,
// bad continuation, overlong encoding, surrogate, above U+10FFFF) throws
// "[utf8] <source>: invalid UTF-8 at byte offset N (<reason>)", N being the offset of
// the first byte of the bad sequence.
std::vector<char32_t> decode_utf8(std::string_view bytes, std::string_view source = "text");
// The number of code points, checking the UTF-8 as decode_utf8 does, without holding
// them (a gigabyte of text would take four as code points).
size_t count_utf8(std::string_view bytes, std::string_view source = "text");
// Encodes code points as UTF-8; a surrogate or a value above U+10FFFF throws "[utf8] ...".
// Appends the UTF-8 bytes of code point c (valid: not a surrogate, <= U+10FFFF).
void append_utf8(std::string& out, char32_t c);
std::string encode_utf8(std::span<const char32_t> cps);
// A character for messages: 'é' (U+00E9); control characters are escaped ('\n').
std::string describe_char(char32_t c);

class Vocab {
 public:
  Vocab() = default;  // empty; lets holders (checkpoints, the trainer) fill it in later
  // `chars` must be strictly increasing valid code points; otherwise "[vocab] ...".
  explicit Vocab(std::vector<char32_t> chars);
  static Vocab from_text(std::span<const char32_t> text);  // the sorted set of its code points

  int size() const { return int(chars_.size()); }
  const std::vector<char32_t>& chars() const { return chars_; }
  bool contains(char32_t c) const { return lookup(c) >= 0; }
  // "[vocab] character 'X' (U+0058) is not in the vocabulary" when missing.
  int32_t id(char32_t c) const;

  // Unknown characters throw, naming the character and its position (code point index).
  std::vector<int32_t> encode(std::span<const char32_t> text) const;
  std::vector<int32_t> encode(std::string_view utf8) const;
  // UTF-8 text of the ids; an id outside [0, size) throws.
  std::string decode(std::span<const int32_t> ids) const;

  // The characters as one UTF-8 string, for checkpoint metadata; from_utf8 is the
  // inverse and validates (UTF-8, sorted, unique) with the same messages as above.
  std::string to_utf8() const { return encode_utf8(chars_); }
  static Vocab from_utf8(std::string_view s);

 private:
  int32_t lookup(char32_t c) const;  // the id, or -1

  std::vector<char32_t> chars_;
  // id of every code point below dense_.size() (-1 if absent): one load per
  // character on the hot path. Sized to the largest char below U+10000, so
  // ASCII corpora keep it tiny; rarer characters fall back to binary search.
  std::vector<int32_t> dense_;
};

}  // namespace folio
