#pragma once
// What a run trains on, whatever --data names: a text file (tokenized in memory,
// data/dataset.h) or a token directory (shard files, data/token_dir.h), read through
// their one interface (data/token_source.h). The trainer and folio eval see only
// this: a tokenizer, the two splits as token sequences, and the byte counts that turn
// loss into bits per byte.
#include <memory>
#include <string>

#include "data/token_sequence.h"
#include "data/token_source.h"
#include "data/tokenizer.h"

namespace folio {

struct TrainingData {
  std::shared_ptr<const Tokenizer> tokenizer;
  TokenSequence train, val;
  int64_t train_bytes = 0, val_bytes = 0, val_chars = 0;  // 0: not known (token files made elsewhere)
  int64_t invalid_utf8_bytes = 0;  // a text's bytes that were not UTF-8, read as U+FFFD (tokenize counts its own)
  std::string path;
  std::string kind;         // "text", or the token directory's layout ("folio", "llm.c", "nanoGPT")
  std::string fingerprint;  // a token directory's (data/token_manifest.h); "" for a text
  std::shared_ptr<const TokenSource> source;  // what the sequences read: the text's ids, or the open shards

  bool is_token_dir() const { return kind != "text"; }
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
};

}  // namespace folio
