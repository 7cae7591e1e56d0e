#include "data/training_data.h"

#include "base/error.h"
#include "data/dataset.h"
#include "data/token_dir.h"

namespace folio {
namespace {

TrainingData from_corpus(Corpus&& corpus) {
  auto owned = std::make_shared<Corpus>(std::move(corpus));
  TrainingData d;
  d.tokenizer = owned->tokenizer;
  d.train = TokenSequence(owned->split.train);
  d.val = TokenSequence(owned->split.val);
  d.train_bytes = owned->train_bytes, d.val_bytes = owned->val_bytes, d.val_chars = owned->val_chars;
  d.invalid_utf8_bytes = owned->invalid_utf8_bytes;
  d.path = owned->path;
  d.kind = "text";
  d.owner = std::move(owned);
  return d;
}

TrainingData from_dir(TokenDir&& dir) {
  auto owned = std::make_shared<TokenDir>(std::move(dir));
  TrainingData d;
  d.tokenizer = owned->tokenizer;
  d.train = owned->train, d.val = owned->val;
  d.train_bytes = owned->train_bytes, d.val_bytes = owned->val_bytes, d.val_chars = owned->val_chars;
  d.path = owned->path;
  d.kind = owned->layout;
  d.fingerprint = owned->fingerprint;
  d.owner = std::move(owned);
  return d;
}

}  // namespace

TrainingData TrainingData::open(const std::string& path, double train_fraction, const TokenizerSpec& spec) {
  if (!TokenDir::is_directory(path)) return from_corpus(Corpus::load(path, train_fraction, spec));
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
  if (!TokenDir::is_directory(path)) return from_corpus(Corpus::load(path, train_fraction, std::move(tokenizer)));
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
