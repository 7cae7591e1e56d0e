#pragma once
// What one kind of tokenizer gives tokenizer.cpp's table: how to train it, how to read
// it back from a checkpoint, and (optionally) how to read it from a file of its own.
// Only the tokenizer files include this; everything else uses data/tokenizer.h.
#include <array>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "data/tokenizer.h"

namespace folio {

struct TokenizerKind {
  const char* name;                     // "tokenizer" in a checkpoint's metadata
  std::array<const char*, 2> methods;   // --tokenizer names that train it (nullptr: unused)
  std::unique_ptr<Tokenizer> (*train)(const TokenizerSpec& spec, std::string_view train_text,
                                      std::string_view held_out);
  std::unique_ptr<Tokenizer> (*load)(const TokenizerMetadata& metadata, const std::string& where);
  // Reads a file of this kind's own format; returns null when the file is not one
  // (recognised by its name). The field is nullptr for a kind without files.
  std::unique_ptr<Tokenizer> (*from_file)(const std::string& path);
};

extern const TokenizerKind kCharTokenizer, kByteBpeTokenizer, kSpmTokenizer, kIdTokenizer;

// The serialized SentencePiece model `model` with `pieces` after its own ids as
// USER_DEFINED pieces, which spm_encode reads as one id wherever their text appears: a
// chat tokenizer's file (data/chat_template.cpp). Throws "[tokenizer] ..." for a model
// where spm_encode could then cut text otherwise than folio, which encodes the text
// between two such ids alone: only a BPE model that adds no space before the text,
// squeezes no whitespace and rewrites no character qualifies (every one folio trains).
std::string spm_model_with_user_pieces(const std::string& model, std::span<const std::string_view> pieces);
// Why spm_model_with_user_pieces would refuse `model`, or nullopt: read from the
// model's fields, without loading it twice as building the file does (what a chat
// tokenizer's has_model_file() asks).
std::optional<std::string> spm_user_pieces_refusal(const std::string& model, std::span<const std::string_view> pieces);

// The value of `key`, or nullptr.
const std::string* find_entry(const TokenizerMetadata& metadata, std::string_view key);

}  // namespace folio
