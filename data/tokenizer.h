#pragma once
// Between text and the model: a Tokenizer turns UTF-8 text into token ids and back.
// Everything above data/ sees only ids and a vocabulary size; which tokenizer a run
// holds is known here and in the checkpoint's metadata, nowhere else.
//
// What it holds:
//   Tokenizer        the interface: encode, decode, one token's bytes, size, a
//                    description, a fingerprint, and the metadata that stores it
//   TokenizerSpec    how `folio train --tokenizer` asks for one (a method or a file)
//   make_tokenizer   trains one (or reads a file) from a spec and a training text
//   load_tokenizer   reads one back from a checkpoint's metadata
//   TokenStream      decodes ids one at a time into whole UTF-8 characters
//
// The kinds: char (data/char_tokenizer.cpp, the text's characters), spm
// (data/spm_tokenizer.cpp, SentencePiece BPE or unigram pieces), bytebpe
// (data/bytebpe_tokenizer.cpp, GPT-2's byte-level BPE from its files) and ids
// (data/id_tokenizer.cpp, a vocabulary size for token files made elsewhere). A new kind is one
// file with its TokenizerKind, its test, and one line in tokenizer.cpp's table.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace folio {

using TokenizerMetadata = std::vector<std::pair<std::string, std::string>>;  // checkpoint __metadata__ entries

// The control ids of a chat model's template (data/chat_template.h): a turn starts at
// `start` (<|im_start|>) and ends at `end` (<|im_end|>).
struct ChatTokens {
  int32_t start = -1, end = -1;
};

// What `folio train --tokenizer NAME --vocab-size N` asks for: NAME is a method
// ("char", "bpe", "unigram") or a tokenizer's file: a SentencePiece .model, GPT-2's
// vocab.json (with merges.txt beside it) or the directory holding them, or a .tiktoken.
struct TokenizerSpec {
  std::string name = "char";
  int64_t vocab_size = 0;  // pieces for bpe/unigram (0: kDefaultPieces); must be 0 for char and a file
  bool end_of_text = false;  // char: add an end-of-text id after the characters (folio tokenize)
  // While a bpe or unigram tokenizer trains (SentencePiece says nothing until it is
  // done: a minute on 64 MB), hears on the caller's thread the seconds so far and the
  // bytes of text it learns from: at the start (0), about every second, and once at
  // the end (`done`). Unset: nothing to hear.
  std::function<void(double seconds, int64_t bytes, bool done)> on_training = {};
  static constexpr int64_t kDefaultPieces = 1024;
  // The largest vocabulary a run accepts: the model's embedding rows and what the
  // checkpoint reader allows (io/config_json.cpp).
  static constexpr int64_t kMaxVocab = int64_t(1) << 21;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual const char* kind() const = 0;  // "char", "spm"
  virtual int vocab_size() const = 0;
  // Text that cannot be encoded throws "[tokenizer] ..." naming the first bad
  // character, its position and how many there are (a char vocabulary; SentencePiece
  // with byte fallback encodes anything). The text must be valid UTF-8.
  virtual std::vector<int32_t> encode(std::string_view utf8) const = 0;
  // The text of the ids; an id outside [0, vocab_size) throws.
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  // The bytes token `id` adds to a stream of text: possibly part of a UTF-8 character
  // (a byte-fallback piece), or nothing (a control token). decode() of a sequence is
  // these bytes one after another.
  virtual std::string token_bytes(int32_t id) const = 0;
  // The id that separates documents in a token directory (data/ shards), if the
  // tokenizer has one: SentencePiece's </s>, or the id a char vocabulary made by
  // folio tokenize adds after its characters. It decodes to nothing.
  virtual std::optional<int32_t> end_of_text() const { return std::nullopt; }
  // The id to put before every prompt, as the model was trained to see one first: a
  // llama-family GGUF made elsewhere says so (tokenizer.ggml.add_bos_token) and its
  // BOS id rides along with the imported tokenizer. folio generate, serve and eval put
  // it first; encode() never adds it, so training text and token files are as before.
  // nullopt for every tokenizer folio makes.
  virtual std::optional<int32_t> prompt_start() const { return std::nullopt; }
  // A chat model's control ids (data/chat_template.h: with_chat_tokens); nullopt for a
  // base model, which the plain template serves.
  virtual std::optional<ChatTokens> chat_tokens() const { return std::nullopt; }
  // One line for people: "char, 65 characters", "spm bpe, 1024 pieces, byte fallback".
  virtual std::string describe() const = 0;
  // What a checkpoint stores; load_tokenizer(metadata()) gives the same tokenizer.
  virtual TokenizerMetadata metadata() const = 0;
  // The tokenizer as a file in its library's own format (a SentencePiece .model, which
  // spm_encode and python3-sentencepiece load), or nullopt when it has none.
  virtual std::optional<std::string> export_model() const { return std::nullopt; }
  // Whether export_model() gives a file (and does not refuse), answered without
  // building it: a chat model's file is its base's with two pieces added, which takes
  // loading the model twice. What folio info's tokenizer line asks.
  virtual bool has_model_file() const { return false; }
  // 16 hex digits (FNV-1a 64 over the metadata): equal for the same tokenizer, on
  // every machine; what --resume and folio info compare and show.
  std::string fingerprint() const;
  // The --tokenizer and --vocab-size that make a tokenizer of this kind and size:
  // {char, 0}; {bpe or unigram, its pieces}; for ids, {char, V} (--vocab-size alone, as
  // token files made elsewhere take it); nullopt when no flags make one (a SentencePiece
  // model of another type, which only its file gives).
  virtual std::optional<TokenizerSpec> as_flags() const = 0;
};

// Whether the flags `spec` ask for a tokenizer like `t`: its method and size (a
// vocab_size of 0 meaning the default pieces), or the .model file of a SentencePiece
// model with t's fingerprint. A run that took its tokenizer from a token directory or
// an --init-from checkpoint was given no such flags; repeating these is still fine.
bool spec_describes(const TokenizerSpec& spec, const Tokenizer& t);

// Trains the tokenizer `spec` asks for on `train_text`, or reads the file it names.
// `held_out` is the validation text: a char vocabulary takes its characters too (so
// val can be encoded at all); nothing else reads it. Errors: "[tokenizer] ...".
std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerSpec& spec, std::string_view train_text,
                                          std::string_view held_out = {});
// From a checkpoint's metadata (all of its entries; the tokenizer picks its own).
// Metadata without a "tokenizer" entry holds a char vocabulary under "vocab", as every
// checkpoint did before there were other kinds. `where` names the file in errors.
std::unique_ptr<Tokenizer> load_tokenizer(const TokenizerMetadata& metadata, const std::string& where);
// The tokenizer of a token directory made with `t` (folio tokenize --tokenizer-from):
// `t` itself when it has an end-of-text id to put between documents; for a char
// vocabulary without one, the same characters and an end-of-text id after them. An ids
// tokenizer, which encodes no text, throws.
std::unique_ptr<Tokenizer> with_end_of_text(const Tokenizer& t);
// True when `grown` is `t` with one id added after t's ids, end-of-text, and nothing
// else changed: a char vocabulary of a token directory made from text t encodes.
bool adds_only_end_of_text(const Tokenizer& t, const Tokenizer& grown);
// A tokenizer that only knows the vocabulary size, for token files made elsewhere
// (data/id_tokenizer.cpp): it decodes id 7 as "<|7|>" and encodes nothing.
std::unique_ptr<Tokenizer> make_id_tokenizer(int64_t vocab_size);
// True when `name` is a training method (char, bpe, unigram), not a file.
bool is_tokenizer_method(std::string_view name);

// The text of a token for a person: whitespace made visible ("␣" for a space, "\n",
// "\t", "\r"), and a byte that is not a whole UTF-8 character as <0xNN>.
std::string visible_token(std::string_view bytes);

// Replaces, in place, every byte of `text` that is not part of a valid UTF-8 character
// (and a character cut off at the end) by U+FFFD; returns how many bytes it replaced.
int64_t replace_invalid_utf8(std::string& text);
// The warning every command gives for it: "PATH: not valid UTF-8; N bytes replaced by U+FFFD".
std::string invalid_utf8_warning(std::string_view path, int64_t replaced);

// Decodes a stream of ids into text that is always whole UTF-8 characters: a
// character split across byte-fallback tokens is held until its last byte arrives.
class TokenStream {
 public:
  explicit TokenStream(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  // The complete characters that `id` finishes (maybe none).
  std::string push(int32_t id);
  // What is still held at the end: bytes that never became a character come out as
  // U+FFFD, one per byte, so the output stays valid UTF-8.
  std::string finish();

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;  // the bytes of an incomplete character
};

}  // namespace folio
