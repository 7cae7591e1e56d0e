#pragma once
// UTF-8 as folio reads it, in one place: a text's valid characters and the bytes that
// are none (a stray or cut-off byte, an overlong form, a surrogate, a value past
// U+10FFFF). The tokenizers' U+FFFD replacement, the token labels and the SVGs' text
// all split text by scan_utf8.
#include <cstddef>
#include <string_view>

namespace folio {
namespace utf8_detail {

// The length of the UTF-8 sequence that `lead` starts, or 0 if it starts none.
inline int sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xC2) return 0;  // a continuation byte, or an overlong two-byte lead
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF5) return 4;
  return 0;
}

inline bool is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// Whether s[0, len) (len = sequence_length(s[0]) bytes, all present) is one valid
// character: continuation bytes, and no overlong form, surrogate or value past U+10FFFF.
inline bool valid_sequence(std::string_view s, int len) {
  const auto b = [&](int i) { return static_cast<unsigned char>(s[size_t(i)]); };
  for (int i = 1; i < len; ++i)
    if (!is_continuation(b(i))) return false;
  if (len == 3) return !(b(0) == 0xE0 && b(1) < 0xA0) && !(b(0) == 0xED && b(1) >= 0xA0);
  if (len == 4) return !(b(0) == 0xF0 && b(1) < 0x90) && !(b(0) == 0xF4 && b(1) >= 0x90);
  return true;
}

}  // namespace utf8_detail

// Splits `bytes` into whole characters and stray bytes, in order: on_char(view) for a
// valid character, on_byte(b) for a byte that is none. A character cut off at the end
// is left: the return value is where it starts (bytes.size() when there is none).
template <class OnChar, class OnByte>
size_t scan_utf8(std::string_view bytes, OnChar on_char, OnByte on_byte) {
  size_t i = 0;
  while (i < bytes.size()) {
    const int len = utf8_detail::sequence_length(static_cast<unsigned char>(bytes[i]));
    if (len > 0 && i + size_t(len) > bytes.size()) {  // cut off, unless a byte already rules it out
      bool prefix = true;
      for (size_t k = i + 1; k < bytes.size(); ++k) prefix = prefix && utf8_detail::is_continuation(static_cast<unsigned char>(bytes[k]));
      if (prefix) return i;
    }
    if (len > 0 && i + size_t(len) <= bytes.size() && utf8_detail::valid_sequence(bytes.substr(i), len)) {
      on_char(bytes.substr(i, size_t(len)));
      i += size_t(len);
    } else {
      on_byte(static_cast<unsigned char>(bytes[i]));
      ++i;
    }
  }
  return i;
}

}  // namespace folio
