#include "data/training_data.h"

#include <filesystem>
#include <utility>

#include "base/error.h"
#include "data/dataset.h"
#include "data/token_dir.h"

namespace folio {
namespace {

namespace fs = std::filesystem;

// Everything a run reads of its data comes through here, from either source.
TrainingData from_source(std::shared_ptr<const TokenSource> source) {
  TrainingData d;
  d.tokenizer = source->tokenizer();
  d.train = source->train(), d.val = source->val();
  const TextSize size = source->text_size();
  d.train_bytes = size.train_bytes, d.val_bytes = size.val_bytes, d.val_chars = size.val_chars;
  d.invalid_utf8_bytes = size.invalid_utf8_bytes;
  d.path = source->path();
  d.kind = source->kind();
  d.fingerprint = source->fingerprint();
  d.source = std::move(source);
  return d;
}

TrainingData from_corpus(Corpus&& corpus) { return from_source(std::make_shared<const TextTokens>(std::move(corpus))); }
TrainingData from_dir(TokenDir&& dir) { return from_source(std::make_shared<const ShardTokens>(std::move(dir))); }

// A directory is read as token files (TokenDir::open says whether it holds any);
// anything else as text, which Corpus::load refuses unless it is a regular file.
bool is_directory(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

}  // namespace

TrainingData TrainingData::open(const std::string& path, double train_fraction, const TokenizerSpec& spec) {
  if (!is_directory(path)) return from_corpus(Corpus::load(path, train_fraction, spec));
  if (spec.name == "char") return from_dir(TokenDir::open(path, spec.vocab_size));
  // The directory's own tokenizer; flags that describe it may be repeated.
  TrainingData d = from_dir(TokenDir::open(path));
  if (!spec_describes(spec, *d.tokenizer))
    fail("data", "--tokenizer ", spec.name, spec.vocab_size ? cat(" --vocab-size ", spec.vocab_size) : "",
         " goes with a text file: the token directory ", path, " was tokenized already, with ", d.tokenizer->describe(),
         " (leave --tokenizer out)");
  return d;
}

TrainingData TrainingData::open(const std::string& path, double train_fraction, std::shared_ptr<const Tokenizer> tokenizer,
                                const std::string& checkpoint, bool may_add_end_of_text) {
  if (!is_directory(path)) return from_corpus(Corpus::load(path, train_fraction, std::move(tokenizer)));
  TrainingData d = from_dir(TokenDir::open(path, tokenizer->kind() == std::string("ids") ? tokenizer->vocab_size() : 0));
  if (d.tokenizer->fingerprint() == tokenizer->fingerprint()) return d;
  if (may_add_end_of_text && adds_only_end_of_text(*tokenizer, *d.tokenizer)) return d;
  const bool spm = tokenizer->kind() == std::string_view("spm");
  fail("data", path, " was tokenized with ", d.tokenizer->describe(), " (fingerprint ", d.tokenizer->fingerprint(),
       "), not the tokenizer of ", checkpoint, ", ", tokenizer->describe(), " (", tokenizer->fingerprint(),
       "): make the token directory with it, folio tokenize INPUT... --out DIR --tokenizer-from ", checkpoint,
       spm ? cat(" (or as a file: folio info --checkpoint ", checkpoint, " --export-tokenizer FILE.model, then folio "
                 "tokenize INPUT... --out DIR --tokenizer FILE.model)")
           : "");
}

}  // namespace folio
