#include "data/tokenize.h"

#include <malloc.h>
#include <omp.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <string_view>

#include "base/atomic_file.h"
#include "base/error.h"
#include "data/documents.h"
#include "data/hash.h"
#include "data/tokenize_files.h"
#include "data/vocab.h"

namespace folio {
namespace {

namespace fs = std::filesystem;

enum Split { kTrain = 0, kVal = 1 };

// Bytes [begin, end) of a document, going to one split after an end-of-text id.
struct Part {
  size_t doc;
  int64_t begin, end;
  Split split;
};

// A piece of a part, read and then encoded by one thread.
struct Chunk {
  size_t part = 0;
  bool first = false;  // the part's first chunk: an end-of-text id goes before it
  std::string text;
  std::vector<int32_t> ids;
  int64_t chars = 0, replaced = 0;
  std::string error;
};

// The byte where character number `chars` of the file starts (its end if fewer).
int64_t byte_of_char(const std::string& path, int64_t size, int64_t chars) {
  PartReader reader(path, 0, size);
  int64_t at = 0;
  while (!reader.done()) {
    const std::string text = reader.next();
    for (size_t i = 0; i < text.size(); ++i)
      if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80 && chars-- == 0) return at + int64_t(i);
    at += int64_t(text.size());
  }
  return size;
}

int64_t count_chars(std::string_view text) {
  int64_t n = 0;
  for (const unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

// The ids of `text`, encoded in blocks of about kBlockBytes that end at a line end.
// SentencePiece is made for sentences: on a whole 8 MB chunk its working memory runs
// to hundreds of MB a thread. A piece that could span a block's edge is cut there (the
// ids still decode to the exact text); spm_encode itself encodes line by line.
constexpr size_t kBlockBytes = size_t(64) << 10;
std::vector<int32_t> encode_in_blocks(const Tokenizer& tokenizer, std::string_view text) {
  std::vector<int32_t> ids;
  while (!text.empty()) {
    size_t end = text.size();
    if (end > kBlockBytes) {
      const size_t newline = text.rfind('\n', kBlockBytes);
      end = newline != std::string_view::npos && newline > kBlockBytes / 2 ? newline + 1 : kBlockBytes;
      while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;  // whole characters
    }
    const std::vector<int32_t> block = tokenizer.encode(text.substr(0, end));
    ids.insert(ids.end(), block.begin(), block.end());
    text.remove_prefix(end);
  }
  return ids;
}

// folio's thread count (--threads): the OpenMP setting that autograd/parallel.h's
// num_threads() also reads, asked here directly, since data/ includes only base/.
int threads() { return omp_get_max_threads(); }

// Runs `work(i)` for i < n on folio's threads; the first error (by i) is rethrown
// here as it was thrown (a TokenizeInputError stays one).
template <class F>
void parallel_for(size_t n, F work) {
  std::vector<std::exception_ptr> errors(n);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads())
  for (size_t i = 0; i < n; ++i) {
    try {
      work(i);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

// Reads the parts' text in rounds of about `round_bytes`, and hands each round's
// chunks, in order, to `round(chunks)`.
template <class Round>
void for_each_round(const std::vector<Document>& docs, const std::vector<Part>& parts, int64_t round_bytes, Round round) {
  std::vector<Chunk> chunks;
  int64_t bytes = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    PartReader reader(docs[parts[p].doc].path, parts[p].begin, parts[p].end);
    for (bool first = true; !reader.done() || first; first = false) {
      Chunk c;
      c.part = p, c.first = first;
      c.text = reader.done() ? std::string() : reader.next();
      bytes += int64_t(c.text.size());
      chunks.push_back(std::move(c));
      if (bytes >= round_bytes) round(chunks), chunks.clear(), bytes = 0;
    }
  }
  if (!chunks.empty()) round(chunks);
}

// Which code points the documents hold (U+FFFD for stray bytes), in one pass on all
// threads: indexed by code point.
std::vector<bool> corpus_characters(const std::vector<Document>& docs, const std::vector<Part>& parts,
                                    const auto& progress) {
  std::vector<std::vector<bool>> seen(size_t(threads()), std::vector<bool>(0x110000));
  int64_t done = 0, total = 0;
  for (const Part& p : parts) total += p.end - p.begin;
  for_each_round(docs, parts, int64_t(threads()) * kChunkBytes, [&](std::vector<Chunk>& chunks) {
    parallel_for(chunks.size(), [&](size_t i) {
      replace_invalid_utf8(chunks[i].text);
      std::vector<bool>& mine = seen[size_t(omp_get_thread_num())];
      for (std::string_view text = chunks[i].text; !text.empty();) {  // a block at a time: bounded memory
        size_t end = std::min(text.size(), kBlockBytes);
        while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
        for (const char32_t c : decode_utf8(text.substr(0, end))) mine[c] = true;
        text.remove_prefix(end);
      }
    });
    for (const Chunk& c : chunks) done += int64_t(c.text.size());
    progress({"characters", done, total});
  });
  std::vector<bool> all(0x110000);
  for (const auto& mine : seen)
    for (char32_t c = 0; c < 0x110000; ++c)
      if (mine[c]) all[c] = true;
  return all;
}

// A checkpoint's char vocabulary (--tokenizer-from) cannot encode a character it lacks:
// found in a pass before anything is written, so that an earlier token directory
// --overwrite would replace stays whole, and named at its place in its file (the
// encoder sees only one block of one chunk, whose positions are not the file's).
void check_vocabulary_covers(const Tokenizer& tokenizer, const std::vector<Document>& docs,
                             const std::vector<Part>& parts, const auto& progress) {
  if (std::string_view(tokenizer.kind()) != "char") return;  // the others encode any byte
  const std::vector<bool> seen = corpus_characters(docs, parts, progress);
  std::vector<bool> lacking(0x110000);
  int64_t distinct = 0;
  for (char32_t c = 0; c < 0x110000; ++c) {
    if (!seen[c]) continue;
    std::string one;
    append_utf8(one, c);
    try {
      tokenizer.encode(one);
    } catch (const Error&) {
      lacking[c] = true, ++distinct;
    }
  }
  if (distinct == 0) return;
  for (const Document& d : docs) {
    int64_t at = 0, line = 1;
    for (PartReader reader(d.path, 0, d.bytes); !reader.done();) {
      std::string text = reader.next();
      replace_invalid_utf8(text);
      for (const char32_t c : decode_utf8(text)) {
        if (lacking[c])
          throw TokenizeInputError(cat("[tokenize] ", d.path, ": character ", describe_char(c), " at position ", at,
                                       " (line ", line, ") is not in the model's vocabulary of ",
                                       tokenizer.vocab_size() - (tokenizer.end_of_text() ? 1 : 0),
                                       " characters (the inputs hold ", distinct, distinct == 1 ? " character" : " characters",
                                       " it lacks; folio info --checkpoint RUN lists the vocabulary)"));
        line += c == U'\n', ++at;
      }
    }
  }
}

std::unique_ptr<Tokenizer> make_corpus_tokenizer(const TokenizeOptions& o, const std::vector<Document>& docs,
                                                 const std::vector<Part>& parts, const auto& progress) {
  if (o.tokenizer_from) return with_end_of_text(*o.tokenizer_from);
  TokenizerSpec spec = o.tokenizer;
  spec.end_of_text = true;
  if (spec.name == "char") {
    // Every character of every document: the vocabulary must encode them all.
    const std::vector<bool> seen = corpus_characters(docs, parts, progress);
    std::string chars;
    for (char32_t c = 0; c < 0x110000; ++c)
      if (seen[c]) append_utf8(chars, c);
    return make_tokenizer(spec, chars);
  }
  if (!is_tokenizer_method(spec.name)) return make_tokenizer(spec, "");  // a .model file
  // A sample of whole training documents, in an order fixed by their names.
  std::vector<const Part*> order;
  for (const Part& p : parts)
    if (p.split == kTrain) order.push_back(&p);
  // FNV-1a from another offset: an order unrelated to the split's hash.
  auto key = [&](const Part* p) { return fnv1a64(docs[p->doc].name, 0x9e3779b97f4a7c15ull); };
  std::sort(order.begin(), order.end(), [&](const Part* a, const Part* b) { return key(a) < key(b); });
  int64_t train_bytes = 0;
  for (const Part* p : order) train_bytes += p->end - p->begin;
  const int64_t sample_total = std::min(train_bytes, o.sample_bytes);
  std::string sample;
  for (const Part* p : order) {
    if (int64_t(sample.size()) >= o.sample_bytes) break;
    PartReader reader(docs[p->doc].path, p->begin, p->end);
    while (!reader.done() && int64_t(sample.size()) < o.sample_bytes) sample += reader.next();
    progress({"sample", std::min(int64_t(sample.size()), sample_total), sample_total});
  }
  if (int64_t(sample.size()) > o.sample_bytes) {  // end at the last newline within the budget
    const size_t cut = sample.rfind('\n', size_t(o.sample_bytes));
    sample.resize(cut == std::string::npos ? size_t(o.sample_bytes) : cut + 1);
  }
  replace_invalid_utf8(sample);
  progress({"training", 0, int64_t(sample.size())});
  return make_tokenizer(spec, sample);
}

// tokenize_corpus's work; `stdin_copy` and `started` say what it wrote, for the cleanup.
TokenManifest tokenize_checked(const TokenizeOptions& o, const std::function<void(const TokenizeProgress&)>& progress,
                               const std::function<void(const std::string&)>& warn, std::string& stdin_copy,
                               bool& started) {
  if (!(o.val_fraction > 0.0 && o.val_fraction < 1.0))
    fail("tokenize", "--val-fraction must be in (0, 1), got ", o.val_fraction);
  if (o.shard_tokens < 1 || o.shard_tokens > INT32_MAX)
    fail("tokenize", "--shard-tokens must be in [1, ", INT32_MAX, "] (a shard's header counts in int32), got ", o.shard_tokens);
  if (o.inputs.empty()) fail("tokenize", "no input: give files, directories, or - for standard input");
  check_token_out_dir(o.out_dir, o.overwrite);
  const bool from_stdin = std::find(o.inputs.begin(), o.inputs.end(), "-") != o.inputs.end();
  if (from_stdin && o.inputs.size() > 1) fail("tokenize", "- (standard input) is the only input when given");

  DocumentList list;
  if (from_stdin) {
    stdin_copy = spool_stdin(o.out_dir);
    list = find_documents({stdin_copy}, {}, warn);
    // Empty or binary input is skipped as a file would be: no document to rename.
    if (!list.documents.empty()) list.documents[0].name = "-";
  } else {
    list = find_documents(o.inputs, o.include, warn, o.out_dir);
  }
  const std::vector<Document>& docs = list.documents;
  if (docs.empty())
    fail("tokenize", from_stdin ? "standard input has no text: it is empty, or binary (a NUL byte in its first 8 KB)" : "no document to tokenize: every input is empty, binary or unreadable");
  // Each document's split: by its name, or, for a single one or too few for a split by
  // name (17 documents at 0.1 can all hash into train), each by position: its last
  // val_fraction of characters.
  std::vector<Part> parts;
  for (size_t d = 0; d < docs.size() && docs.size() > 1; ++d)
    parts.push_back({d, 0, docs[d].bytes, stable_val(docs[d].name, o.val_fraction) ? kVal : kTrain});
  const auto val_docs = std::count_if(parts.begin(), parts.end(), [](const Part& p) { return p.split == kVal; });
  const bool by_position = val_docs == 0 || val_docs == int64_t(parts.size());
  if (by_position) {
    parts.clear();
    int64_t all_chars = 0;
    for (size_t d = 0; d < docs.size(); ++d) {
      int64_t chars = 0;
      for (PartReader r(docs[d].path, 0, docs[d].bytes); !r.done();) chars += count_chars(r.next());
      all_chars += chars;
      const int64_t val_at =
          byte_of_char(docs[d].path, docs[d].bytes, int64_t(std::floor(double(chars) * (1.0 - o.val_fraction))));
      parts.push_back({d, 0, val_at, kTrain});
      if (val_at < docs[d].bytes) parts.push_back({d, val_at, docs[d].bytes, kVal});
    }
    const auto empty = [](const Part& p) { return p.begin == p.end; };
    parts.erase(std::remove_if(parts.begin(), parts.end(), empty), parts.end());
    const auto val_parts = std::count_if(parts.begin(), parts.end(), [](const Part& p) { return p.split == kVal; });
    if (val_parts == 0 || val_parts == int64_t(parts.size()))
      fail("tokenize", docs.size() == 1 ? docs[0].path : cat(docs.size(), " documents"), ": ", all_chars,
           " characters are too few to split at --val-fraction ", o.val_fraction);
    if (docs.size() > 1)
      warn(cat("of the ", docs.size(), " documents, ", val_docs == 0 ? "none" : "all", " fell into val by name at "
               "--val-fraction ", o.val_fraction, ": each document's last ", o.val_fraction,
               " of characters validates instead"));
  }
  const std::unique_ptr<Tokenizer> tokenizer = make_corpus_tokenizer(o, docs, parts, progress);
  if (o.tokenizer_from) check_vocabulary_covers(*tokenizer, docs, parts, progress);
  // SentencePiece's trainer peaks at ~25 times its sample and frees it all; glibc would
  // keep those pages for the rest of the run.
  ::malloc_trim(0);
  // The input is good: from here on the directory is written, an earlier one's files go.
  started = true;
  start_token_out_dir(o.out_dir);
  const std::optional<int32_t> eot = tokenizer->end_of_text();
  if (!eot) warn(cat("the tokenizer (", tokenizer->describe(), ") has no end-of-text token: documents follow each other unseparated"));

  TokenManifest m;
  m.tokenizer = tokenizer->metadata();
  m.tokenizer_description = tokenizer->describe();
  m.vocab_size = tokenizer->vocab_size();
  m.end_of_text = eot ? *eot : -1;
  m.token_bytes = token_width(m.vocab_size);
  m.val_fraction = o.val_fraction;
  m.val_rule = docs.size() == 1 ? "one document: its last val_fraction of characters"
               : by_position      ? "each document's last val_fraction of characters (too few documents to split by name)"
                           : "a document validates when the top 20 bits of splitmix64's finaliser of FNV-1a 64 of "
                                  "its name (the path below its input directory) are below val_fraction * 2^20";
  // Paths are bytes, JSON is UTF-8: a name that is not (a Latin-1 folder) is kept with
  // U+FFFD, as its text is.
  m.inputs = o.inputs;
  for (std::string& input : m.inputs) replace_invalid_utf8(input);
  m.skipped_files = list.unreadable + list.binary + list.empty;
  m.command = o.command;
  replace_invalid_utf8(m.command);
  SplitWriter writers[2] = {{o.out_dir, "train", m.token_bytes, o.shard_tokens, m.train},
                            {o.out_dir, "val", m.token_bytes, o.shard_tokens, m.val}};
  SplitEntry* entries[2] = {&m.train, &m.val};
  std::vector<bool> doc_replaced(docs.size());
  int64_t done = 0;
  const int64_t total = list.bytes;
  for_each_round(docs, parts, int64_t(threads()) * kChunkBytes, [&](std::vector<Chunk>& chunks) {
    parallel_for(chunks.size(), [&](size_t i) {
      Chunk& c = chunks[i];
      c.replaced = replace_invalid_utf8(c.text);
      c.chars = count_chars(c.text);
      try {
        c.ids = encode_in_blocks(*tokenizer, c.text);
      } catch (const Error& e) {  // a checkpoint's char vocabulary may lack a character
        throw TokenizeInputError(cat("[tokenize] ", docs[parts[c.part].doc].path, ": ", e.what()));
      }
    });
    for (Chunk& c : chunks) {
      const Part& p = parts[c.part];
      SplitEntry& e = *entries[p.split];
      if (c.first) {
        ++e.documents;
        if (eot) writers[p.split].append(std::span(&*eot, 1));
      }
      writers[p.split].append(c.ids);
      e.bytes += int64_t(c.text.size());  // the text the tokens decode to
      e.chars += c.chars;
      if (c.replaced && !doc_replaced[p.doc]) {
        doc_replaced[p.doc] = true, ++m.files_with_invalid_utf8;
        warn(invalid_utf8_warning(docs[p.doc].path, c.replaced));
      }
      done += int64_t(c.text.size()) - 2 * c.replaced;  // as read: U+FFFD is 3 bytes for the 1 it replaced
    }
    progress({"encoding", done, total});
  });
  writers[0].close();
  writers[1].close();
  write_file_atomic((fs::path(o.out_dir) / kManifestFile).string(), m.to_json());
  finish_token_out_dir(o.out_dir);
  return m;
}

}  // namespace

TokenManifest tokenize_corpus(const TokenizeOptions& o, const std::function<void(const TokenizeProgress&)>& progress,
                              const std::function<void(const std::string&)>& warn) {
  // Nothing is written until the input is known good (below: start_token_out_dir), but
  // standard input's copy; an error leaves out_dir as it was (abandon_token_out_dir).
  std::error_code ec;
  const bool existed = fs::exists(o.out_dir, ec);
  std::string stdin_copy;
  bool started = false;
  try {
    return tokenize_checked(o, progress, [&](const std::string& w) { warn(name_stdin(w, stdin_copy)); }, stdin_copy,
                            started);
  } catch (const TokenizeInputError& e) {
    abandon_token_out_dir(o.out_dir, existed, started);
    throw TokenizeInputError(name_stdin(e.what(), stdin_copy));
  } catch (const Error& e) {
    abandon_token_out_dir(o.out_dir, existed, started);
    // Before writing, an error is about the input (a file, or a --vocab-size its text
    // cannot give); after, a failure of the run (a full disk).
    if (!started) throw TokenizeInputError(name_stdin(e.what(), stdin_copy));
    throw Error(name_stdin(e.what(), stdin_copy));
  } catch (...) {
    abandon_token_out_dir(o.out_dir, existed, started);
    throw;
  }
}

}  // namespace folio
