// GPT-2's tokenizer, exactly: byte-level BPE. Text is cut into pieces by GPT-2's
// pattern (contractions, letters, numbers, other symbols, whitespace that does not
// end at a word), and each piece's UTF-8 bytes are merged pairwise, the adjacent pair
// whose concatenation ranks lowest first, until no concatenation is a token. Every
// byte is a token, so any text encodes and decodes back to its bytes.
//
// Read from either of the files GPT-2's vocabulary comes in:
//   DIR, or DIR/vocab.json   HF's vocab.json (each token's bytes as printable
//                            characters, via the byte table below) and merges.txt
//                            beside it (one merge a line, in rank order)
//   FILE.tiktoken            one token a line: its bytes in base64, then its rank,
//                            which is also its id
// <|endoftext|> is the end-of-text id (50256 in GPT-2), which separates documents and
// never comes out of encode(): in a text it is only text. A checkpoint stores the
// tokens in id order, with their merge ranks, under "bytebpe_tokens".
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "data/base64.h"
#include "data/dataset.h"
#include "data/tokenizer_kind.h"
#include "data/vocab.h"

namespace folio {
namespace {

namespace fs = std::filesystem;

constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kEndOfText = "<|endoftext|>";
constexpr int64_t kMaxFileBytes = int64_t(64) << 20;  // GPT-2's vocab.json is 1 MB
constexpr int32_t kNoRank = std::numeric_limits<int32_t>::max();

// Maps from a token's bytes that are searched with a string_view, without a copy.
struct BytesHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using BytesMap = std::unordered_map<std::string, int32_t, BytesHash, std::equal_to<>>;

// A whole decimal number in [lo, hi], or nullopt.
std::optional<int64_t> parse_number(std::string_view s, int64_t lo, int64_t hi) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi) return std::nullopt;
  return v;
}

// GPT-2's table between bytes and the characters HF's files write them as: the
// printable bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') are their own code points, and the
// others take U+0100 onwards in byte order.
std::array<char32_t, 256> byte_to_char() {
  std::array<char32_t, 256> table{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    table[size_t(b)] = printable ? char32_t(b) : next++;
  }
  return table;
}

// The bytes an HF token stands for; nullopt when a character is not in the table.
std::optional<std::string> token_from_hf(std::string_view text) {
  static const std::unordered_map<char32_t, unsigned char> to_byte = [] {
    std::unordered_map<char32_t, unsigned char> m;
    const auto table = byte_to_char();
    for (int b = 0; b < 256; ++b) m[table[size_t(b)]] = static_cast<unsigned char>(b);
    return m;
  }();
  std::string bytes;
  for (const char32_t c : decode_utf8(text, "vocab.json")) {
    const auto it = to_byte.find(c);
    if (it == to_byte.end()) return std::nullopt;
    bytes += static_cast<char>(it->second);
  }
  return bytes;
}

// The compiled pattern, shared by every thread (each match gets its own match data).
class Pattern {
 public:
  Pattern() {
    int error = 0;
    PCRE2_SIZE at = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kGpt2Pattern), PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                          &error, &at, nullptr);
    if (!code_) fail("tokenizer", "GPT-2's pattern does not compile at ", at, ": PCRE2 error ", error);
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // falls back to the interpreter where JIT is missing
  }
  ~Pattern() { pcre2_code_free(code_); }
  Pattern(const Pattern&) = delete;
  Pattern& operator=(const Pattern&) = delete;

  // Calls on_piece(piece) for each piece of `text`, in order. Invalid UTF-8 throws.
  template <class OnPiece>
  void split(std::string_view text, OnPiece on_piece) const {
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
        pcre2_match_data_create_from_pattern(code_, nullptr), &pcre2_match_data_free);
    const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    uint32_t options = 0;  // the first match checks the UTF-8 of the whole text, once
    for (size_t at = 0; at < text.size(); options = PCRE2_NO_UTF_CHECK) {
      const int rc = pcre2_match(code_, subject, text.size(), at, options, match.get(), nullptr);
      if (rc <= 0) failed(text, rc, at, match.get());
      const PCRE2_SIZE* span = pcre2_get_ovector_pointer(match.get());
      // Every character is a letter, a number, whitespace or other: no text is skipped.
      if (span[0] != at) fail("tokenizer", "GPT-2's pattern skipped text at byte ", at);
      on_piece(text.substr(span[0], span[1] - span[0]));
      at = span[1];
    }
  }

 private:
  [[noreturn]] static void failed(std::string_view text, int rc, size_t at, pcre2_match_data* match) {
    if (rc <= PCRE2_ERROR_UTF8_ERR1 && rc >= PCRE2_ERROR_UTF8_ERR21)
      fail("tokenizer", "invalid UTF-8 at byte offset ", pcre2_get_startchar(match), " of ", text.size());
    fail("tokenizer", "GPT-2's pattern failed at byte ", at, " (PCRE2 error ", rc, ")");
  }
  pcre2_code* code_ = nullptr;
};

class ByteBpeTokenizer final : public Tokenizer {
 public:
  // tokens[id]: the token's bytes ("" for the end-of-text id); merge_rank[id]: its
  // priority when merging (kNoRank: never made by a merge, e.g. a single byte).
  ByteBpeTokenizer(std::vector<std::string> tokens, std::vector<int32_t> merge_rank, int32_t end_of_text,
                   const std::string& where)
      : tokens_(std::move(tokens)), merge_rank_(std::move(merge_rank)), eot_(end_of_text) {
    if (eot_ < 0 || size_t(eot_) >= tokens_.size() || !tokens_[size_t(eot_)].empty())
      fail("tokenizer", where, ": the end-of-text id ", eot_, " is not an empty token of the ", tokens_.size());
    for (size_t id = 0; id < tokens_.size(); ++id) {
      if (int32_t(id) == eot_) continue;
      if (tokens_[id].empty()) fail("tokenizer", where, ": token ", id, " has no bytes");
      if (!id_.emplace(tokens_[id], int32_t(id)).second)
        fail("tokenizer", where, ": token ", id, " repeats the bytes of token ", id_[tokens_[id]]);
    }
    for (int b = 0; b < 256; ++b)
      if (!id_.contains(std::string(1, static_cast<char>(b))))
        fail("tokenizer", where, ": byte ", b, " has no token (a byte-level BPE needs all 256)");
  }

  const char* kind() const override { return "bytebpe"; }
  int vocab_size() const override { return int(tokens_.size()); }
  std::optional<int32_t> end_of_text() const override { return eot_; }

  std::vector<int32_t> encode(std::string_view utf8) const override {
    static const Pattern pattern;
    std::vector<int32_t> ids;
    pattern.split(utf8, [&](std::string_view piece) { merge(piece, ids); });
    return ids;
  }
  std::string decode(std::span<const int32_t> ids) const override {
    std::string text;
    for (const int32_t id : ids) text += token_bytes(id);
    return text;
  }
  std::string token_bytes(int32_t id) const override {
    if (id < 0 || id >= vocab_size()) fail("tokenizer", "id ", id, " is outside the vocabulary [0, ", vocab_size(), ")");
    return tokens_[size_t(id)];
  }
  std::string describe() const override { return cat("bytebpe (GPT-2's pattern), ", vocab_size(), " tokens"); }
  TokenizerMetadata metadata() const override {
    std::string lines;  // a token a line, in id order: base64 bytes, merge rank (-1: none)
    for (size_t id = 0; id < tokens_.size(); ++id)
      lines += cat(base64_encode(tokens_[id]), " ", merge_rank_[id] == kNoRank ? -1 : merge_rank_[id], "\n");
    return {{"tokenizer", "bytebpe"}, {"bytebpe_pattern", "gpt2"}, {"bytebpe_tokens", lines},
            {"bytebpe_end_of_text", std::to_string(eot_)}};
  }
  std::optional<TokenizerSpec> as_flags() const override { return std::nullopt; }  // only its files give it

 private:
  int32_t rank_of(std::string_view bytes) const {
    const auto it = id_.find(bytes);
    return it == id_.end() ? kNoRank : merge_rank_[size_t(it->second)];
  }
  // Appends the ids of one piece: starting from its bytes, merges the adjacent pair
  // whose concatenation has the lowest rank (the leftmost on a tie) until none is a token.
  void merge(std::string_view piece, std::vector<int32_t>& ids) const {
    if (const auto whole = id_.find(piece); whole != id_.end()) return ids.push_back(whole->second);
    std::vector<size_t> starts(piece.size() + 1);  // (parts + 1,) part i is piece[starts[i], starts[i + 1])
    for (size_t i = 0; i <= piece.size(); ++i) starts[i] = i;
    while (starts.size() > 2) {
      int32_t best = kNoRank;
      size_t at = 0;
      for (size_t i = 0; i + 2 < starts.size(); ++i)
        if (const int32_t r = rank_of(piece.substr(starts[i], starts[i + 2] - starts[i])); r < best) best = r, at = i;
      if (best == kNoRank) break;
      starts.erase(starts.begin() + std::ptrdiff_t(at + 1));
    }
    for (size_t i = 0; i + 1 < starts.size(); ++i)
      ids.push_back(id_.find(piece.substr(starts[i], starts[i + 1] - starts[i]))->second);  // a byte at worst
  }

  std::vector<std::string> tokens_;  // (V,) bytes by id
  std::vector<int32_t> merge_rank_;  // (V,)
  int32_t eot_;
  BytesMap id_;  // bytes -> id
};

std::string read_whole(const std::string& path) {
  try {
    return read_file(path, kMaxFileBytes);
  } catch (const Error& e) {
    fail("tokenizer", "--tokenizer: ", e.what());
  }
}

// FILE.tiktoken: "base64 rank" lines; the rank is the id, and the end-of-text id follows them.
std::unique_ptr<Tokenizer> from_tiktoken(const std::string& path) {
  std::istringstream in(read_whole(path));
  std::vector<std::string> tokens;
  std::vector<int32_t> ranks;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    const std::optional<std::string> bytes = space == std::string::npos ? std::nullopt : base64_decode(line.substr(0, space));
    const std::string rank = space == std::string::npos ? "" : line.substr(space + 1);
    if (!bytes || rank != std::to_string(tokens.size()))
      fail("tokenizer", path, " line ", n, ": expected \"<base64 bytes> ", tokens.size(),
           "\" (ranks in order from 0), got \"", line.substr(0, 60), "\"");
    tokens.push_back(*bytes), ranks.push_back(int32_t(ranks.size()));
  }
  tokens.emplace_back(), ranks.push_back(kNoRank);  // <|endoftext|>
  return std::make_unique<ByteBpeTokenizer>(std::move(tokens), std::move(ranks), int32_t(ranks.size() - 1), path);
}

// HF's vocab.json and merges.txt: ids from the one, merge ranks from the other's order.
std::unique_ptr<Tokenizer> from_hf(const std::string& vocab_path, const std::string& merges_path) {
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(read_whole(vocab_path));
  } catch (const nlohmann::json::exception& e) {
    fail("tokenizer", vocab_path, ": not JSON (", e.what(), ")");
  }
  if (!vocab.is_object() || vocab.empty() || vocab.size() > size_t(TokenizerSpec::kMaxVocab))
    fail("tokenizer", vocab_path, ": expected an object of up to ", TokenizerSpec::kMaxVocab, " {token: id} entries");
  std::vector<std::string> tokens(vocab.size());
  std::vector<bool> seen(vocab.size());
  int32_t eot = -1;
  for (const auto& [text, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= int64_t(tokens.size()) ||
        seen[id.get<size_t>()])
      fail("tokenizer", vocab_path, ": \"", text.substr(0, 40), "\" has id ", id.dump(),
           "; the ids must be 0 to ", tokens.size() - 1, ", each once");
    seen[id.get<size_t>()] = true;
    if (text == kEndOfText) {
      eot = id.get<int32_t>();
      continue;
    }
    const std::optional<std::string> bytes = token_from_hf(text);
    if (!bytes) fail("tokenizer", vocab_path, ": \"", text.substr(0, 40), "\" is not written in GPT-2's byte characters");
    tokens[id.get<size_t>()] = *bytes;
  }
  if (eot < 0) fail("tokenizer", vocab_path, ": no ", kEndOfText, " token");
  std::unordered_map<std::string, int32_t> id_of;
  for (size_t id = 0; id < tokens.size(); ++id) id_of.emplace(tokens[id], int32_t(id));
  std::vector<int32_t> ranks(tokens.size(), kNoRank);
  std::istringstream in(read_whole(merges_path));
  std::string line;
  int32_t rank = 0;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.empty() || (n == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t space = line.find(' ');
    const std::optional<std::string> a = space == std::string::npos ? std::nullopt : token_from_hf(line.substr(0, space));
    const std::optional<std::string> b = space == std::string::npos ? std::nullopt : token_from_hf(line.substr(space + 1));
    if (!a || !b) fail("tokenizer", merges_path, " line ", n, ": expected two tokens, got \"", line.substr(0, 60), "\"");
    for (const std::string* t : std::initializer_list<const std::string*>{&*a, &*b, nullptr}) {
      const std::string merged = t ? *t : *a + *b;
      if (!id_of.count(merged))
        fail("tokenizer", merges_path, " line ", n, ": \"", line.substr(0, 60), "\": ", t ? "a part" : "the merge",
             " is not in ", vocab_path, " (do the two files belong together?)");
    }
    int32_t& r = ranks[size_t(id_of.at(*a + *b))];
    r = std::min(r, rank++);
  }
  return std::make_unique<ByteBpeTokenizer>(std::move(tokens), std::move(ranks), eot, vocab_path);
}

std::unique_ptr<Tokenizer> from_file(const std::string& path) {
  std::error_code ec;
  const fs::path p(path);
  if (fs::is_directory(p, ec) && fs::exists(p / "vocab.json", ec))
    return from_hf((p / "vocab.json").string(), (p / "merges.txt").string());
  if (p.filename() == "vocab.json") return from_hf(path, (p.parent_path() / "merges.txt").string());
  if (p.extension() == ".tiktoken") return from_tiktoken(path);
  return nullptr;  // not this kind's file
}

std::unique_ptr<Tokenizer> load(const TokenizerMetadata& metadata, const std::string& where) {
  const std::string* pattern = find_entry(metadata, "bytebpe_pattern");
  const std::string* lines = find_entry(metadata, "bytebpe_tokens");
  const std::string* eot = find_entry(metadata, "bytebpe_end_of_text");
  if (!pattern || *pattern != "gpt2" || !lines || !eot)
    fail("checkpoint", where, ": __metadata__: a bytebpe tokenizer needs bytebpe_pattern \"gpt2\", bytebpe_tokens "
         "and bytebpe_end_of_text");
  std::vector<std::string> tokens;
  std::vector<int32_t> ranks;
  std::istringstream in(*lines);
  std::string line;
  while (std::getline(in, line)) {
    const size_t space = line.find(' ');
    const std::optional<std::string> bytes = space == std::string::npos ? std::nullopt : base64_decode(line.substr(0, space));
    const std::optional<int64_t> rank =
        space == std::string::npos ? std::nullopt : parse_number(std::string_view(line).substr(space + 1), -1, kNoRank - 1);
    if (!bytes || !rank)
      fail("checkpoint", where, ": __metadata__.bytebpe_tokens line ", tokens.size() + 1, ": expected \"<base64> <rank>\"");
    tokens.push_back(*bytes), ranks.push_back(*rank < 0 ? kNoRank : int32_t(*rank));
  }
  const std::optional<int64_t> eot_id = parse_number(*eot, 0, int64_t(tokens.size()) - 1);
  if (!eot_id)
    fail("checkpoint", where, ": __metadata__.bytebpe_end_of_text: ", eot->substr(0, 20), " is not an id of the vocabulary");
  return std::make_unique<ByteBpeTokenizer>(std::move(tokens), std::move(ranks), int32_t(*eot_id), where);
}

}  // namespace

const TokenizerKind kByteBpeTokenizer = {"bytebpe", {nullptr, nullptr}, nullptr, load, from_file};

}  // namespace folio
