#pragma once
// From a text file to training batches: read, split into train/val text by position,
// tokenize (data/tokenizer.h), and sample random (B, T) windows.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/rng.h"
#include "data/token_sequence.h"
#include "data/token_source.h"
#include "data/tokenizer.h"

namespace folio {

// The most read_file reads: text is held whole in memory (and tokenized to 4 bytes a
// character), so a larger file is refused instead of exhausting memory. The bundled
// corpus is 1.1 MB.
constexpr int64_t kMaxTextFileBytes = int64_t(1) << 30;  // 1 GiB

// The whole file as bytes. Only regular files are read: a device (/dev/zero) could
// be endless and opening a FIFO waits for a writer, so those are refused from their
// type, before opening. Errors: "[data] <path>: cannot open (<strerror>)",
// "[data] <path>: is a directory, not a regular file" (or a FIFO, a character
// device...), "[data] <path>: N bytes, more than the limit of M bytes", "[data] <path>:
// file is empty".
std::string read_file(const std::string& path, int64_t max_bytes = kMaxTextFileBytes);

struct Split {
  std::vector<int32_t> train, val;
};
// The first floor(n * train_fraction) tokens train, the rest validate (a split by
// position, not shuffled, so val text is unseen text). train_fraction must be in
// (0, 1]; with 1 val is empty.
Split split_tokens(std::span<const int32_t> tokens, double train_fraction);

// B windows of T tokens, row-major (B, T): targets are the inputs shifted by one.
struct Batch {
  int64_t B = 0, T = 0;
  std::vector<int32_t> inputs, targets;
};
// Row b starts at rng.below(n - T), drawn in order b = 0..B-1, so x[b, t] = tokens[s + t]
// and y[b, t] = tokens[s + t + 1] with s in [0, n - T - 1]. Only rows [row_begin,
// row_end) are read (a rank's share; -1: to B), though all B starts are drawn, so every
// rank walks the same stream. Reuses `batch`'s capacity (no allocation once sized).
// Throws "[data] <split_name> split has N tokens, needs at least block_size + 1 = M"
// when the tokens are too few.
void sample_batch(const TokenSequence& tokens, int64_t B, int64_t T, Rng& rng, Batch& batch,
                  std::string_view split_name = "train", int64_t row_begin = 0, int64_t row_end = -1);

// Sizes `batch` to (B, T) and copies into row b the window of T + 1 tokens at `start`.
void resize_batch(Batch& batch, int64_t B, int64_t T);
void copy_window(const TokenSequence& tokens, int64_t start, int64_t b, Batch& batch);

// A tokenized, split corpus, ready for the trainer.
struct Corpus {
  std::shared_ptr<const Tokenizer> tokenizer;
  Split split;
  int64_t train_bytes = 0, val_bytes = 0;  // UTF-8 bytes of each split's text (bits per byte)
  int64_t val_chars = 0;                   // characters of the val text (bits per character)
  int64_t invalid_utf8_bytes = 0;          // bytes of the file that were not UTF-8: read as U+FFFD
  std::string path;
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
  std::string fingerprint() const override { return ""; }

 private:
  Corpus corpus_;
  TokenSequence train_, val_;  // views of corpus_.split's ids
};

// The bundled corpus: installed, share/folio/tinyshakespeare.txt beside the running
// binary's bin/; for a binary of the build tree, the source tree's data/. "" if none.
std::string default_corpus_path();

}  // namespace folio
