#include "data/token_dir.h"

#include <algorithm>
#include <filesystem>

#include "base/error.h"
#include "data/dataset.h"
#include "data/token_manifest.h"

namespace folio {
namespace {

namespace fs = std::filesystem;

// Maps `file`, checks its ids against the vocabulary, and appends it to `split`.
// Returns its scan (the checksum of its tokens).
ShardFile::Scan add_shard(TokenDir& d, TokenSequence& split, const std::string& file, bool has_header,
                          int64_t vocab_size) {
  auto shard = std::make_unique<ShardFile>(ShardFile::open(file, has_header));
  const ShardFile::Scan scan = shard->scan();
  if (scan.max_id >= vocab_size)
    fail("data", file, ": holds token id ", scan.max_id, ", outside the vocabulary of ", vocab_size,
         " ids (--vocab-size, or the manifest's vocab_size)");
  const ShardFile* s = shard.get();
  split.append_file(s->fd(), s->header_bytes(), s->width(), s->tokens(), &s->path());
  d.shards.push_back(std::move(shard));
  return scan;
}

void open_manifest(TokenDir& d, int64_t vocab_size) {
  const std::string where = (fs::path(d.path) / kManifestFile).string();
  const TokenManifest m = TokenManifest::parse(read_file(where, int64_t(256) << 20), where);
  d.layout = "folio";
  d.tokenizer = load_tokenizer(m.tokenizer, where);
  if (d.tokenizer->vocab_size() != m.vocab_size)
    fail("data", where, ": the tokenizer has ", d.tokenizer->vocab_size(), " ids but vocab_size is ", m.vocab_size);
  if (vocab_size != 0 && vocab_size != m.vocab_size)
    fail("data", "--vocab-size ", vocab_size, " disagrees with ", where, " (vocab_size ", m.vocab_size,
         "): a token directory of folio's knows its vocabulary, leave --vocab-size out");
  for (auto [entry, split] : {std::pair{&m.train, &d.train}, std::pair{&m.val, &d.val}})
    for (const ShardEntry& e : entry->shards) {
      const std::string file = (fs::path(d.path) / e.file).string();
      if (!fs::exists(file)) fail("data", where, " names the shard ", e.file, ", which is missing from ", d.path);
      const ShardFile::Scan scan = add_shard(d, *split, file, true, m.vocab_size);
      const ShardFile& s = *d.shards.back();
      if (s.tokens() != e.tokens || s.width() != m.token_bytes)
        fail("data", file, ": ", s.tokens(), " tokens of ", s.width(), " bytes, but ", where, " says ", e.tokens,
             " of ", m.token_bytes);
      if (scan.checksum != e.checksum)
        fail("data", file, ": its tokens changed since folio tokenize wrote them (checksum ", checksum_hex(scan.checksum),
             ", the manifest says ", checksum_hex(e.checksum), "): run folio tokenize again");
    }
  d.train_bytes = m.train.bytes;
  d.val_bytes = m.val.bytes;
  d.val_chars = m.val.chars;
  d.fingerprint = m.fingerprint();
}

// llm.c's shards (NAME_train_NNNNNN.bin, NAME_val_NNNNNN.bin) or nanoGPT's train.bin
// and val.bin, with no manifest: ids only.
void open_foreign(TokenDir& d, int64_t vocab_size) {
  std::vector<std::string> train, val;
  bool raw = false;
  if (fs::exists(fs::path(d.path) / "train.bin")) {
    raw = true, d.layout = "nanoGPT";
    train = {(fs::path(d.path) / "train.bin").string()};
    if (fs::exists(fs::path(d.path) / "val.bin")) val = {(fs::path(d.path) / "val.bin").string()};
  } else {
    d.layout = "llm.c";
    for (const auto& entry : fs::directory_iterator(d.path)) {
      const std::string name = entry.path().filename().string();
      if (!name.ends_with(".bin")) continue;
      if (name.find("_train_") != std::string::npos && !name.starts_with("train_")) train.push_back(entry.path().string());
      if (name.find("_val_") != std::string::npos && !name.starts_with("val_")) val.push_back(entry.path().string());
    }
    std::sort(train.begin(), train.end());
    std::sort(val.begin(), val.end());
  }
  if (train.empty()) {
    std::error_code ec;
    const bool holds_files = !fs::is_empty(d.path, ec);
    fail("data", d.path, ": not a token directory: no ", kManifestFile, " (folio tokenize writes it last), no train.bin "
         "(nanoGPT) and no NAME_train_NNNNNN.bin shards (llm.c)",
         holds_files ? cat(". To train on the text files in it, make them a token directory first: folio tokenize ",
                           d.path, " --out DATA_DIR (--include '*.txt' to take some), then folio train --data DATA_DIR")
                     : "");
  }
  if (val.empty())
    fail("data", d.path, ": has training tokens (", d.layout, ") but no validation ones: expected ",
         raw ? "val.bin" : "NAME_val_NNNNNN.bin shards");
  if (vocab_size == 0)
    fail("data", d.path, ": ", d.layout, " token files do not say their vocabulary: give --vocab-size N (",
         raw ? "vocab_size in its meta.pkl; " : "", "50257 for GPT-2's tokens)");
  d.tokenizer = make_id_tokenizer(vocab_size);
  uint64_t h = kChecksumStart;
  for (auto [files, split] : {std::pair{&train, &d.train}, std::pair{&val, &d.val}})
    for (const std::string& file : *files) {
      const uint64_t c = add_shard(d, *split, file, !raw, vocab_size).checksum;
      h = token_checksum(&c, sizeof c, h);
    }
  d.fingerprint = checksum_hex(h);
}

}  // namespace

bool TokenDir::is_directory(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

TokenDir TokenDir::open(const std::string& path, int64_t vocab_size) {
  TokenDir d;
  d.path = path;
  if (!is_directory(path)) fail("data", path, ": not a directory");
  if (fs::exists(fs::path(path) / ".tokenize-incomplete"))
    fail("data", path, ": folio tokenize did not finish writing it (interrupted, or it failed): run it again");
  if (fs::exists(fs::path(path) / kManifestFile)) open_manifest(d, vocab_size);
  else open_foreign(d, vocab_size);
  return d;
}

}  // namespace folio
