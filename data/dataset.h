#pragma once
// What a run trains on (TrainingData), from whatever --data names: a text file, read
// here, split into train/val text by position and tokenized (data/tokenizer.h), or a
// directory of token shards (data/token_dir.h). The windows are drawn from it by
// data/batch_sampler.h.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/read_file.h"  // read_file, which reads every text file folio takes
#include "data/token_sequence.h"
#include "data/token_source.h"
#include "data/tokenizer.h"

namespace folio {

struct ChatData;  // data/conversations.h

// A text whose bytes are more than this fraction invalid UTF-8 is refused as not text
// (a stray Latin-1 byte is read as U+FFFD with a warning; random bytes are ~43 % invalid).
constexpr double kMaxInvalidUtf8Fraction = 0.10;

struct Split {
  std::vector<int32_t> train, val;
};
// The first floor(n * train_fraction) tokens train, the rest validate (a split by
// position, not shuffled, so val text is unseen text). train_fraction must be in
// (0, 1]; with 1 val is empty.
Split split_tokens(std::span<const int32_t> tokens, double train_fraction);

// A tokenized, split corpus, ready for the trainer.
struct Corpus {
  std::shared_ptr<const Tokenizer> tokenizer;
  Split split;
  int64_t train_bytes = 0, val_bytes = 0;  // UTF-8 bytes of each split's text (bits per byte)
  int64_t val_chars = 0;                   // characters of the val text (bits per character)
  int64_t invalid_utf8_bytes = 0;          // bytes of the file that were not UTF-8: read as U+FFFD
  std::string path;
  // 16 hex digits over the text as read (its U+FFFD included) and its length: what
  // --resume compares, so that a text edited under a run is refused.
  std::string fingerprint;
  // Reads `path` (an empty file is an error), replaces every byte that is not part of
  // valid UTF-8 by U+FFFD (as folio tokenize does; counted), splits the text at character floor(characters * train_fraction)
  // and encodes each part with a tokenizer made from `spec` (trained on the training
  // part only; a char vocabulary also takes val's characters, data/tokenizer.h).
  static Corpus load(const std::string& path, double train_fraction, const TokenizerSpec& spec);
  // The same, encoded with `tokenizer` (a checkpoint's): errors name the path.
  static Corpus load(const std::string& path, double train_fraction, std::shared_ptr<const Tokenizer> tokenizer);
  // Val tokens per byte (per character) of val text: loss per token * this / ln 2 is
  // bits per byte (per character).
  double val_tokens_per_byte() const { return double(split.val.size()) / double(std::max<int64_t>(val_bytes, 1)); }
  double val_tokens_per_char() const { return double(split.val.size()) / double(std::max<int64_t>(val_chars, 1)); }
};

// A text's tokens in memory, as a TokenSource (data/token_source.h).
class TextTokens final : public TokenSource {
 public:
  explicit TextTokens(Corpus corpus)
      : corpus_(std::move(corpus)), train_(corpus_.split.train), val_(corpus_.split.val) {}
  TextTokens(const TextTokens&) = delete;  // the sequences point into corpus_
  TextTokens& operator=(const TextTokens&) = delete;

  std::shared_ptr<const Tokenizer> tokenizer() const override { return corpus_.tokenizer; }
  const TokenSequence& train() const override { return train_; }
  const TokenSequence& val() const override { return val_; }
  TextSize text_size() const override {
    return {corpus_.train_bytes, corpus_.val_bytes, corpus_.val_chars, corpus_.invalid_utf8_bytes};
  }
  const std::string& path() const override { return corpus_.path; }
  std::string kind() const override { return "text"; }
  std::string fingerprint() const override { return corpus_.fingerprint; }

 private:
  Corpus corpus_;
  TokenSequence train_, val_;  // views of corpus_.split's ids
};

// What a run trains on, whatever --data names: a text file (tokenized in memory,
// data/dataset.h) or a token directory (shard files, data/token_dir.h), read through
// their one interface (data/token_source.h). The trainer and folio eval see only
// this: a tokenizer, the two splits as token sequences, and the byte counts that turn
// loss into bits per byte.
struct TrainingData {
  std::shared_ptr<const Tokenizer> tokenizer;
  TokenSequence train, val;
  int64_t train_bytes = 0, val_bytes = 0, val_chars = 0;  // 0: not known (token files made elsewhere)
  int64_t invalid_utf8_bytes = 0;  // a text's bytes that were not UTF-8, read as U+FFFD (tokenize counts its own)
  std::string path;
  std::string kind;         // "text", or the token directory's layout ("folio", "llm.c", "nanoGPT")
  std::string fingerprint;  // the source's (data/token_source.h), which --resume compares
  std::shared_ptr<const TokenSource> source;  // what the sequences read: the text's ids, or the open shards
  std::shared_ptr<const ChatData> chat;  // conversations (data/conversations.h), drawn a row each; else null

  bool is_token_dir() const { return kind != "text" && !chat; }
  // Val tokens per byte (per character) of the val text, 0 when unknown: loss per
  // token * this / ln 2 is bits per byte (per character).
  double val_tokens_per_byte() const { return val_bytes ? double(val.size()) / double(val_bytes) : 0.0; }
  double val_tokens_per_char() const { return val_chars ? double(val.size()) / double(val_chars) : 0.0; }

  // A new run's data: a text file split at train_fraction and tokenized as `spec`
  // asks, or a token directory (its own tokenizer; spec must then ask for none, and
  // spec.vocab_size is the vocabulary of files without a manifest).
  static TrainingData open(const std::string& path, double train_fraction, const TokenizerSpec& spec);
  // The data of a run that already has its tokenizer (the checkpoint's that
  // `checkpoint` names in errors): a text is encoded with it; a token directory must
  // have been made with it, or, with `may_add_end_of_text` (a run --init-from a char
  // checkpoint), with its characters and an end-of-text id (folio tokenize
  // --tokenizer-from): the data's tokenizer is then the directory's, one id larger.
  static TrainingData open(const std::string& path, double train_fraction, std::shared_ptr<const Tokenizer> tokenizer,
                           const std::string& checkpoint = "the checkpoint", bool may_add_end_of_text = false);
  // The data a source gives (conversations come this way: train/ reads their file).
  static TrainingData from(std::shared_ptr<const TokenSource> source);
};

// The bundled corpus: installed, share/folio/tinyshakespeare.txt beside the running
// binary's bin/; for a binary of the build tree, the source tree's data/. "" if none.
std::string default_corpus_path();

}  // namespace folio
