#include "data/tokenizer.h"

#include <cstdio>

#include "base/error.h"
#include "base/utf8.h"
#include "data/chat_template.h"
#include "data/hash.h"
#include "data/tokenizer_kind.h"

namespace folio {
namespace {

// Every kind of tokenizer folio knows. The first is what a checkpoint without a
// "tokenizer" entry holds. A file is offered to the kinds in this order, and
// SentencePiece, which takes any file, comes after those that recognise theirs.
constexpr const TokenizerKind* kKinds[] = {&kCharTokenizer, &kByteBpeTokenizer, &kSpmTokenizer, &kIdTokenizer};

const TokenizerKind* kind_training(std::string_view method) {
  for (const TokenizerKind* k : kKinds)
    for (const char* m : k->methods)
      if (m && method == m) return k;
  return nullptr;
}

std::string method_names() {
  std::string names;
  for (const TokenizerKind* k : kKinds)
    for (const char* m : k->methods)
      if (m) names += cat(names.empty() ? "" : ", ", m);
  return names;
}

constexpr const char* kReplacement = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace

const std::string* find_entry(const TokenizerMetadata& metadata, std::string_view key) {
  for (const auto& [k, v] : metadata)
    if (k == key) return &v;
  return nullptr;
}

std::string Tokenizer::fingerprint() const {
  uint64_t h = kFnvOffset;
  for (const auto& [key, value] : metadata()) {
    h = fnv1a64(key, h);
    h = fnv1a64(std::string_view("\0", 1), h);  // so that ("ab", "c") and ("a", "bc") differ
    h = fnv1a64(value, h);
    h = fnv1a64(std::string_view("\0", 1), h);
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)h);
  return buf;
}

bool is_tokenizer_method(std::string_view name) { return kind_training(name) != nullptr; }

std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerSpec& spec, std::string_view train_text,
                                          std::string_view held_out) {
  if (spec.vocab_size < 0 || spec.vocab_size > TokenizerSpec::kMaxVocab)
    fail("tokenizer", "--vocab-size ", spec.vocab_size, " outside [1, ", TokenizerSpec::kMaxVocab, "]");
  if (const TokenizerKind* k = kind_training(spec.name)) return k->train(spec, train_text, held_out);
  // Not a method: a tokenizer file, read by the first kind that takes it.
  if (spec.vocab_size != 0)
    fail("tokenizer", "--vocab-size goes with a method (", method_names(), "), not with the tokenizer file ",
         spec.name, ", whose size is its own");
  for (const TokenizerKind* k : kKinds)
    if (k->from_file)
      if (std::unique_ptr<Tokenizer> t = k->from_file(spec.name)) return t;
  fail("tokenizer", "'", spec.name, "' is neither a method (", method_names(), ") nor a tokenizer file");
}

std::unique_ptr<Tokenizer> load_tokenizer(const TokenizerMetadata& metadata, const std::string& where) {
  const std::string* name = find_entry(metadata, "tokenizer");
  if (!name) return wrap_chat_tokens(kKinds[0]->load(metadata, where), metadata, where);
  for (const TokenizerKind* k : kKinds)
    if (*name == k->name) return wrap_chat_tokens(k->load(metadata, where), metadata, where);
  std::string known;
  for (const TokenizerKind* k : kKinds) known += cat(known.empty() ? "" : ", ", k->name);
  fail("checkpoint", where, ": __metadata__.tokenizer: unknown kind \"", name->substr(0, 40), "\" (this folio reads ",
       known, ")");
}

bool spec_describes(const TokenizerSpec& spec, const Tokenizer& t) {
  if (!is_tokenizer_method(spec.name)) {  // a file: the same model, whatever its name
    try {
      return make_tokenizer(spec, "")->fingerprint() == t.fingerprint();
    } catch (const Error&) {
      return false;
    }
  }
  const std::optional<TokenizerSpec> flags = t.as_flags();
  if (!flags) return false;
  auto pieces = [](const TokenizerSpec& s) {
    return s.vocab_size == 0 && s.name != "char" ? TokenizerSpec::kDefaultPieces : s.vocab_size;
  };
  return flags->name == spec.name && pieces(*flags) == pieces(spec);
}

std::unique_ptr<Tokenizer> with_end_of_text(const Tokenizer& t) {
  if (t.end_of_text()) return load_tokenizer(t.metadata(), "the tokenizer");
  if (t.kind() != std::string_view("char"))
    fail("tokenizer", "a token directory needs a tokenizer of text; ", t.describe(), " encodes none");
  std::string chars;  // the vocabulary's characters: a char tokenizer trained on them is the same one
  for (int32_t id = 0; id < t.vocab_size(); ++id) chars += t.token_bytes(id);
  return make_tokenizer({"char", 0, true}, chars);
}

bool adds_only_end_of_text(const Tokenizer& t, const Tokenizer& grown) {
  return t.kind() == std::string_view("char") && !t.end_of_text() && grown.end_of_text() &&
         grown.vocab_size() == t.vocab_size() + 1 &&
         with_end_of_text(t)->fingerprint() == grown.fingerprint();
}

std::string visible_token(std::string_view bytes) {
  std::string out;
  auto byte = [&](unsigned char b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", unsigned(b));
    out += buf;
  };
  const size_t cut = scan_utf8(
      bytes,
      [&](std::string_view c) {
        if (c == " ") out += "\xE2\x90\xA3";  // U+2423 OPEN BOX
        else if (c == "\n") out += "\\n";
        else if (c == "\t") out += "\\t";
        else if (c == "\r") out += "\\r";
        else if (c.size() == 1 && (static_cast<unsigned char>(c[0]) < 0x20 || c[0] == 0x7F)) byte(static_cast<unsigned char>(c[0]));
        else out += c;
      },
      byte);
  for (size_t i = cut; i < bytes.size(); ++i) byte(static_cast<unsigned char>(bytes[i]));
  return out;
}

std::string invalid_utf8_warning(std::string_view path, int64_t replaced) {
  return cat(path, ": not valid UTF-8; ", replaced, replaced == 1 ? " byte" : " bytes", " replaced by U+FFFD");
}

int64_t replace_invalid_utf8(std::string& text) {
  int64_t bad = 0;
  size_t cut = scan_utf8(text, [](std::string_view) {}, [&](unsigned char) { ++bad; });
  bad += int64_t(text.size() - cut);
  if (bad == 0) return 0;
  std::string out;
  out.reserve(text.size() + size_t(bad) * 2);
  cut = scan_utf8(text, [&](std::string_view c) { out += c; }, [&](unsigned char) { out += kReplacement; });
  for (size_t i = cut; i < text.size(); ++i) out += kReplacement;
  text = std::move(out);
  return bad;
}

std::string TokenStream::push(int32_t id) {
  pending_ += tokenizer_.token_bytes(id);
  std::string out;
  const size_t cut = scan_utf8(
      pending_, [&](std::string_view c) { out += c; }, [&](unsigned char) { out += kReplacement; });
  pending_.erase(0, cut);
  return out;
}

std::string TokenStream::finish() {
  std::string out;
  for (size_t i = 0; i < pending_.size(); ++i) out += kReplacement;
  pending_.clear();
  return out;
}

}  // namespace folio
