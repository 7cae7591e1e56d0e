#include "data/dataset.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <utility>

#include "base/error.h"
#include "data/conversations.h"
#include "data/token_dir.h"
#include "data/token_shard.h"  // token_checksum, checksum_hex
#include "data/vocab.h"

namespace folio {

Split split_tokens(std::span<const int32_t> tokens, double train_fraction) {
  // Written as !(inside) so that NaN is rejected too.
  if (!(train_fraction > 0.0 && train_fraction <= 1.0))
    fail("data", "train fraction must be in (0, 1], got ", train_fraction);
  const size_t n_train = size_t(std::floor(double(tokens.size()) * train_fraction));
  Split s;
  s.train.assign(tokens.begin(), tokens.begin() + n_train);
  s.val.assign(tokens.begin() + n_train, tokens.end());
  return s;
}

namespace {

// A file's text and where val starts: at character floor(characters * train_fraction),
// so that a char corpus splits exactly where its tokens would.
struct SplitText {
  std::string bytes;
  size_t val_at = 0;      // the byte where val starts
  int64_t val_chars = 0;  // characters from there on
  int64_t replaced = 0;   // bytes that were not UTF-8, now U+FFFD
};

SplitText read_and_split(const std::string& path, double train_fraction) {
  if (!(train_fraction > 0.0 && train_fraction <= 1.0))
    fail("data", "train fraction must be in (0, 1], got ", train_fraction);
  std::string bytes = read_file(path);
  const auto size = int64_t(bytes.size());
  // As folio tokenize does: a stray Latin-1 byte should not stop a run. Valid UTF-8 is
  // left untouched.
  const int64_t replaced = replace_invalid_utf8(bytes);
  // But a file that is mostly not UTF-8 (random bytes are ~43 % invalid) is not a text
  // to learn: a model trained on its U+FFFD would be a model of noise.
  if (double(replaced) > kMaxInvalidUtf8Fraction * double(size))
    fail("data", path, ": ", replaced, " of its ", size, " bytes (", std::round(1000.0 * double(replaced) / double(size)) / 10,
         " %) are not valid UTF-8, more than the ", 100 * kMaxInvalidUtf8Fraction, " % a text may have: give a UTF-8 text (iconv -f LATIN1 -t UTF-8 converts a Latin-1 one)");
  const size_t characters = count_utf8(bytes, path);
  const size_t train_chars = size_t(std::floor(double(characters) * train_fraction));
  size_t to_skip = train_chars, at = 0;
  for (; at < bytes.size(); ++at)  // the first byte of character number train_chars
    if ((static_cast<unsigned char>(bytes[at]) & 0xC0) != 0x80 && to_skip-- == 0) break;
  return {std::move(bytes), at, int64_t(characters - train_chars), replaced};
}

// The length first: token_checksum zero-pads a tail, so "abc" and "abc\0" would agree.
std::string text_fingerprint(std::string_view bytes) {
  const auto n = int64_t(bytes.size());
  return checksum_hex(token_checksum(bytes.data(), bytes.size(), token_checksum(&n, sizeof n)));
}

Corpus encode_corpus(const std::string& path, const SplitText& text, std::shared_ptr<const Tokenizer> tokenizer) {
  const std::string_view all = text.bytes;
  const size_t val_at = text.val_at;
  Corpus c;
  c.path = path;
  c.train_bytes = int64_t(val_at);
  c.val_bytes = int64_t(all.size() - val_at);
  c.val_chars = text.val_chars;
  c.invalid_utf8_bytes = text.replaced;
  c.fingerprint = text_fingerprint(all);
  try {
    c.split.train = tokenizer->encode(all.substr(0, val_at));
  } catch (const Error& e) {
    fail("data", path, ": ", e.what());
  }
  try {
    c.split.val = tokenizer->encode(all.substr(val_at));
  } catch (const Error& e) {  // its positions count from the start of val
    fail("data", path, ": in the val text, which starts at byte ", val_at, ": ", e.what());
  }
  c.tokenizer = std::move(tokenizer);
  return c;
}

}  // namespace

Corpus Corpus::load(const std::string& path, double train_fraction, const TokenizerSpec& spec) {
  const SplitText text = read_and_split(path, train_fraction);
  const std::string_view all = text.bytes;
  std::shared_ptr<const Tokenizer> tokenizer =
      make_tokenizer(spec, all.substr(0, text.val_at), all.substr(text.val_at));
  return encode_corpus(path, text, std::move(tokenizer));
}

Corpus Corpus::load(const std::string& path, double train_fraction, std::shared_ptr<const Tokenizer> tokenizer) {
  return encode_corpus(path, read_and_split(path, train_fraction), std::move(tokenizer));
}

std::string default_corpus_path() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const fs::path installed = exe.parent_path() / FOLIO_DATA_FROM_BIN / "tinyshakespeare.txt";
  if (fs::is_regular_file(installed, ec)) return installed.lexically_normal().string();
  // A binary of the build tree (folio, the tests) reads the source tree's copy.
  const fs::path build = fs::path(FOLIO_BUILD_DIR).lexically_normal();
  const auto [end, _] = std::mismatch(build.begin(), build.end(), exe.begin(), exe.end());
  return end == build.end() ? FOLIO_SOURCE_DIR "/data/tinyshakespeare.txt" : "";
}

namespace {

namespace fs = std::filesystem;

}  // namespace

// Everything a run reads of its data comes through here, from any source.
TrainingData TrainingData::from(std::shared_ptr<const TokenSource> source) {
  TrainingData d;
  d.tokenizer = source->tokenizer();
  d.train = source->train(), d.val = source->val();
  const TextSize size = source->text_size();
  d.train_bytes = size.train_bytes, d.val_bytes = size.val_bytes, d.val_chars = size.val_chars;
  d.invalid_utf8_bytes = size.invalid_utf8_bytes;
  d.path = source->path();
  d.kind = source->kind();
  d.fingerprint = source->fingerprint();
  if (const auto* chat = dynamic_cast<const ConversationTokens*>(source.get())) d.chat = chat->chat();
  d.source = std::move(source);
  return d;
}

namespace {

TrainingData from_source(std::shared_ptr<const TokenSource> source) { return TrainingData::from(std::move(source)); }

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
