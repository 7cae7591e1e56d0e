#pragma once
// Standard base64 (RFC 4648, with '=' padding): binary data inside JSON strings, such
// as a SentencePiece model in a checkpoint's metadata.
#include <optional>
#include <string>
#include <string_view>

namespace folio {

std::string base64_encode(std::string_view bytes);
// nullopt for anything that is not canonical padded base64 (a bad character, a wrong
// length, bits after the last byte).
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace folio
