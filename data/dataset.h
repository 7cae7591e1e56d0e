#pragma once
// From a text file to training batches: read, tokenize with a character Vocab,
// split into train/val by position, and sample random (B, T) windows.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "autograd/rng.h"
#include "data/vocab.h"

namespace folio {

// The most read_file reads: text is held whole in memory (and tokenized to 4 bytes a
// character), so a larger file is refused instead of exhausting memory. The bundled
// corpus is 1.1 MB.
constexpr int64_t kMaxTextFileBytes = int64_t(1) << 30;  // 1 GiB

// The whole file as bytes. Only regular files are read: a device (/dev/zero) could
// be endless and opening a FIFO waits for a writer, so those are refused from their
// type, before opening. Errors: "[data] <path>: cannot open (<strerror>)",
// "[data] <path>: is a directory, not a regular file" (or a FIFO, a character
// device...), "[data] <path>: N bytes, more than the limit of kMaxTextFileBytes (1 GiB)
// for a text file", "[data] <path>: file is empty".
std::string read_file(const std::string& path);

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
// and y[b, t] = tokens[s + t + 1] with s in [0, n - T - 1]. Reuses `batch`'s capacity (no
// allocation once sized). Throws "[data] <split_name> split has N tokens, needs at least
// block_size + 1 = M" when the tokens are too few.
void sample_batch(std::span<const int32_t> tokens, int64_t B, int64_t T, Rng& rng, Batch& batch,
                  std::string_view split_name = "train");

// A tokenized, split corpus, ready for the trainer.
struct Corpus {
  Vocab vocab;
  Split split;
  std::string path;
  // Reads `path` (an empty file is an error), decodes UTF-8 (errors name the path and
  // byte offset), builds the vocab from the WHOLE text (so val has no unknown
  // characters), encodes and splits.
  static Corpus load(const std::string& path, double train_fraction);
};

// The bundled corpus: installed, share/folio/tinyshakespeare.txt beside the running
// binary's bin/; for a binary of the build tree, the source tree's data/. "" if none.
std::string default_corpus_path();

}  // namespace folio
