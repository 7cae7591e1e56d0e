// tokenizer_from_gguf (io/gguf_model.h): the tokenizer of a GGUF file made elsewhere,
// from its tokenizer.ggml.* keys. llama.cpp's SentencePiece-style vocabulary ("llama")
// becomes a SentencePiece model, folio's spm kind, so generate, eval, serve and train
// use it as they use any. Other vocabularies are refused naming the key and its value.
//
// Why a SentencePiece BPE model computes llama.cpp's tokenization: llama.cpp's "llama"
// tokenizer starts from the text's characters (a space as U+2581, one added in front
// with add_space_prefix) and repeatedly merges the adjacent pair whose merged piece is
// in the vocabulary with the highest score; a character without a piece becomes its
// UTF-8 bytes' <0xNN> tokens. SentencePiece's BPE model does the same with
// byte_fallback, add_dummy_prefix and no normalisation beyond escaping spaces.
#include <cstring>

#include "base/error.h"
#include "data/base64.h"
#include "io/gguf_model.h"

namespace folio {
namespace {

// Protocol buffer encoding, the few wire types a SentencePiece ModelProto needs
// (Debian ships no sentencepiece_model.pb.h to build one with).
void varint(std::string& out, uint64_t v) {
  for (; v >= 0x80; v >>= 7) out += char(uint8_t(v) | 0x80);
  out += char(uint8_t(v));
}
void field_varint(std::string& out, int field, int64_t v) {  // int32, bool and enum: a negative int32 takes 10 bytes
  varint(out, uint64_t(field) << 3);
  varint(out, uint64_t(v));
}
void field_bytes(std::string& out, int field, std::string_view bytes) {
  varint(out, uint64_t(field) << 3 | 2);
  varint(out, bytes.size());
  out += bytes;
}
void field_float(std::string& out, int field, float v) {
  varint(out, uint64_t(field) << 3 | 5);
  char b[4];
  std::memcpy(b, &v, 4);  // little-endian, as protobuf's fixed32
  out.append(b, 4);
}

// SentencePiece's piece types (ModelProto.SentencePiece.Type), which are GGUF's
// token_type numbers too: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte.
enum PieceType : int64_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

struct Keys {
  const GgufFile& f;
  const std::string& where;

  const GgufValue* find(const std::string& key) const { return f.find(key); }
  template <class T>
  const std::vector<T>& array(const std::string& key) const {
    const GgufValue* v = f.find(key);
    if (!v) fail("gguf", where, ": key ", key, " is missing");
    if (!v->is_array || !std::holds_alternative<std::vector<T>>(v->value))
      fail("gguf", where, ": key ", key, " is not an array of the expected type");
    return std::get<std::vector<T>>(v->value);
  }
  std::string text(const std::string& key, const std::string& otherwise) const {
    const GgufValue* v = f.find(key);
    if (!v) return otherwise;
    if (v->is_array || !std::holds_alternative<std::string>(v->value)) fail("gguf", where, ": key ", key, " is not a string");
    return std::get<std::string>(v->value);
  }
  bool flag(const std::string& key, bool otherwise) const {
    const GgufValue* v = f.find(key);
    if (!v) return otherwise;
    if (v->is_array || !std::holds_alternative<bool>(v->value)) fail("gguf", where, ": key ", key, " is not a bool");
    return std::get<bool>(v->value);
  }
  // A token id key: -1 when absent; an id outside [0, n) is an error naming the key.
  int64_t id(const std::string& key, int64_t n) const {
    const GgufValue* v = f.find(key);
    if (!v) return -1;
    if (v->is_array || !std::holds_alternative<int64_t>(v->value) || v->type == GgufType::boolean)
      fail("gguf", where, ": key ", key, " is not an integer");
    const int64_t id = std::get<int64_t>(v->value);
    if (id < 0 || id >= n) fail("gguf", where, ": key ", key, " is ", id, ", outside the ", n, " tokens");
    return id;
  }
};

}  // namespace

std::unique_ptr<Tokenizer> tokenizer_from_gguf(const GgufFile& f, const std::string& where) {
  const Keys k{f, where};
  const std::string model = k.text("tokenizer.ggml.model", "");
  if (model != "llama")
    fail("gguf", where, ": tokenizer.ggml.model is \"", model, "\": folio imports llama.cpp's SentencePiece-style "
         "vocabulary (\"llama\") from files made elsewhere, not this kind");
  const std::vector<std::string>& tokens = k.array<std::string>("tokenizer.ggml.tokens");
  const int64_t n = int64_t(tokens.size());
  if (n < 1 || n > TokenizerSpec::kMaxVocab)
    fail("gguf", where, ": tokenizer.ggml.tokens has ", n, " tokens, outside [1, ", TokenizerSpec::kMaxVocab, "]");
  const std::vector<double>& scores = k.array<double>("tokenizer.ggml.scores");
  const std::vector<int64_t>& types = k.array<int64_t>("tokenizer.ggml.token_type");
  if (int64_t(scores.size()) != n || int64_t(types.size()) != n)
    fail("gguf", where, ": tokenizer.ggml.scores has ", scores.size(), " and tokenizer.ggml.token_type ", types.size(),
         " entries for ", n, " tokens");
  // What llama.cpp does besides tokenizing, which SentencePiece's model has no place for.
  if (k.flag("tokenizer.ggml.add_eos_token", false))
    fail("gguf", where, ": tokenizer.ggml.add_eos_token is true: folio puts nothing after a prompt");
  if (k.find("tokenizer.ggml.merges"))
    fail("gguf", where, ": tokenizer.ggml.merges: a \"llama\" vocabulary merges by score, not by a merge list");
  for (const char* key : {"tokenizer.ggml.remove_extra_whitespaces", "tokenizer.ggml.precompiled_charsmap"})
    if (k.find(key)) fail("gguf", where, ": key ", key, ": folio's import normalises nothing but spaces");

  const int64_t unk = k.id("tokenizer.ggml.unknown_token_id", n), bos = k.id("tokenizer.ggml.bos_token_id", n),
                eos = k.id("tokenizer.ggml.eos_token_id", n);
  bool bytes = false;
  int64_t unknowns = 0;
  std::string proto;  // the ModelProto's bytes
  for (int64_t i = 0; i < n; ++i) {
    const int64_t type = types[size_t(i)];
    if (type < kNormal || type > kByte)
      fail("gguf", where, ": tokenizer.ggml.token_type[", i, "] is ", type, ", not a SentencePiece piece type (1-6)");
    const std::string& piece = tokens[size_t(i)];
    if (piece.empty()) fail("gguf", where, ": tokenizer.ggml.tokens[", i, "] is empty");
    bytes |= type == kByte;
    unknowns += type == kUnknown;
    std::string p;
    field_bytes(p, 1, piece);
    field_float(p, 2, float(scores[size_t(i)]));
    field_varint(p, 3, type);
    field_bytes(proto, 1, p);  // pieces = 1
  }
  if (unknowns != 1 || unk < 0 || types[size_t(unk)] != kUnknown)
    fail("gguf", where, ": tokenizer.ggml.unknown_token_id must name the one token of type 2 (unknown); the file has ",
         unknowns, " and unknown_token_id ", unk);
  for (const auto& [key, id] : {std::pair{"bos", bos}, {"eos", eos}})
    if (id >= 0 && types[size_t(id)] != kControl)
      fail("gguf", where, ": tokenizer.ggml.", key, "_token_id ", id, " is not a control token (type 3)");
  const bool add_bos = k.flag("tokenizer.ggml.add_bos_token", true);  // llama.cpp's default for "llama"
  if (add_bos && bos < 0) fail("gguf", where, ": tokenizer.ggml.add_bos_token is true but there is no bos_token_id");

  std::string trainer;  // TrainerSpec
  field_varint(trainer, 3, 2);  // model_type BPE
  field_varint(trainer, 4, n);  // vocab_size
  if (bytes) field_varint(trainer, 35, 1);  // byte_fallback
  field_varint(trainer, 40, unk), field_varint(trainer, 41, bos), field_varint(trainer, 42, eos);
  field_varint(trainer, 43, -1);  // pad_id: none
  field_bytes(trainer, 45, tokens[size_t(unk)]);  // unk_piece
  if (bos >= 0) field_bytes(trainer, 46, tokens[size_t(bos)]);
  if (eos >= 0) field_bytes(trainer, 47, tokens[size_t(eos)]);
  field_bytes(proto, 2, trainer);
  std::string normalizer;  // NormalizerSpec: identity, but for spaces written as U+2581
  field_bytes(normalizer, 1, "identity");
  field_varint(normalizer, 3, k.flag("tokenizer.ggml.add_space_prefix", true));  // add_dummy_prefix
  field_varint(normalizer, 4, 0);  // remove_extra_whitespaces
  field_varint(normalizer, 5, 1);  // escape_whitespaces
  field_bytes(proto, 3, normalizer);

  TokenizerMetadata meta = {{"tokenizer", "spm"}, {"tokenizer_model", base64_encode(proto)}};
  if (add_bos) meta.emplace_back("tokenizer_prompt_start", std::to_string(bos));
  return load_tokenizer(meta, where + ": tokenizer.ggml");
}

}  // namespace folio
