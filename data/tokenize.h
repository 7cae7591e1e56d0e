#pragma once
// folio tokenize: a corpus of any size, prepared once into a token directory that
// `folio train --data DIR` reads (data/token_dir.h).
//
// The steps, in bounded memory whatever the corpus size:
//   1. find the documents (data/documents.h) and decide each one's split: by a stable
//      hash of its name; a single document (one file, or standard input) is split as
//      `folio train --data FILE` splits it, its last val_fraction of characters;
//   2. make the tokenizer: char takes every character of the corpus (one pass over
//      it) plus an end-of-text id; bpe and unigram train on a bounded sample of the
//      training documents (whole documents in a stable pseudo-random order, up to
//      sample_bytes); a .model file is read; a checkpoint's is taken as it is;
//   3. encode every document on all threads, in rounds of a few MB per thread, and
//      append the ids in document order, each document after an end-of-text id, to
//      the split's shards (data/token_shard.h), starting a new shard every
//      shard_tokens tokens (a document may span two);
//   4. write manifest.json last, atomically (data/token_manifest.h).
// Bytes that are not UTF-8 are replaced by U+FFFD (counted in the manifest). Until the
// manifest is written a marker file says the directory is incomplete, so an
// interrupted run leaves nothing that folio train accepts; a failed one cleans up.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "data/token_manifest.h"
#include "data/tokenizer.h"
#include "data/tokenize_out_dir.h"

namespace folio {

struct TokenizeOptions {
  std::vector<std::string> inputs;   // files, directories, or "-" (standard input, one document)
  std::vector<std::string> include;  // data/documents.h: glob patterns; empty: every file
  std::string out_dir;
  TokenizerSpec tokenizer;
  // A checkpoint's tokenizer to use instead of making one (--tokenizer-from), so that a
  // run --init-from that checkpoint can train on the directory: used as it is, but a
  // char vocabulary gains an end-of-text id (data/tokenizer.h: with_end_of_text).
  std::shared_ptr<const Tokenizer> tokenizer_from;
  double val_fraction = 0.1;
  int64_t shard_tokens = 100'000'000;  // as llm.c's shards
  int64_t sample_bytes = int64_t(64) << 20;  // text a bpe or unigram tokenizer trains on
  bool overwrite = false;                    // replace the token directory out_dir holds
  std::string command;                       // recorded in the manifest
};

struct TokenizeProgress {
  const char* phase;  // "characters", "sample", "training", "encoding"
  int64_t bytes_done = 0, bytes_total = 0;
};

// The user's input at fault, found while tokenizing: an input without text or too short
// to split, a --vocab-size the text cannot give (SentencePiece says so only when it
// trains), a character a --tokenizer-from vocabulary lacks. folio tokenize exits 2.
struct TokenizeInputError : Error {
  using Error::Error;
};

// Errors throw "[tokenize] ..." (or "[tokenizer] ..."): a TokenizeInputError for the
// input, an Error for a failure of the run (a full disk). Either way out_dir is left as
// it was, but for an earlier token directory --overwrite replaces, gone once the input
// was found good, and a killed run leaves the marker (folio train refuses the
// directory; the next run redoes it). Standard input is named so, never its copy.
// `progress` hears each round; `warn` each skipped or replaced file.
TokenManifest tokenize_corpus(const TokenizeOptions& options, const std::function<void(const TokenizeProgress&)>& progress,
                              const std::function<void(const std::string&)>& warn);

}  // namespace folio
