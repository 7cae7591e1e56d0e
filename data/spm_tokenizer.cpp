// The spm tokenizer: SentencePiece subwords (BPE or unigram), trained by folio on the
// training text or read from a .model file (Debian's spm_train writes one). Checkpoints
// store the model's serialized bytes, base64 in "tokenizer_model", beside
// "tokenizer": "spm", so a checkpoint stays one self-contained file.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cctype>
#include <charconv>
#include <chrono>
#include <future>
#include <optional>
#include <thread>
#include <unordered_map>

#include "base/error.h"
#include "data/base64.h"
#include "data/dataset.h"
#include "data/tokenizer_kind.h"
#include "data/vocab.h"

namespace folio {
namespace {

namespace spm = sentencepiece;

// A .model file larger than this is not one folio would make (a 256k-piece model is
// ~5 MB); it is refused before it is read whole.
constexpr int64_t kMaxModelBytes = int64_t(64) << 20;

// Reads a protobuf varint at `at`; false past the end.
bool read_varint(std::string_view s, size_t& at, uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64 && at < s.size(); shift += 7) {
    const auto b = static_cast<unsigned char>(s[at++]);
    v |= uint64_t(b & 0x7F) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

// Calls visit(field number, varint, bytes) for the fields of the serialized message
// `s` in order: a varint field's value (bytes null), or a length-delimited field's
// bytes; stops early when visit returns false, or at a field it cannot read.
template <class Visit>
void visit_fields(std::string_view s, Visit visit) {
  for (size_t at = 0; at < s.size();) {
    uint64_t key = 0, v = 0;
    std::string_view bytes;
    if (!read_varint(s, at, key)) return;
    switch (key & 7) {
      case 0:
        if (!read_varint(s, at, v)) return;
        break;
      case 1: at += 8; continue;
      case 5: at += 4; continue;
      case 2:
        if (!read_varint(s, at, v) || v > s.size() - std::min(at, s.size())) return;
        bytes = s.substr(at, size_t(v));
        at += size_t(v);
        break;
      default: return;  // groups: not in a SentencePiece model
    }
    if (!visit(key >> 3, v, (key & 7) == 2 ? &bytes : nullptr)) return;
  }
}

// The field `field` of the serialized message `s`, as protobuf reads it: a
// length-delimited field's bytes (all its occurrences one after another, which is how a
// message field given twice merges), or into `varint` its last value; nullopt when absent.
std::optional<std::string> proto_field(std::string_view s, uint64_t field, uint64_t* varint = nullptr) {
  std::optional<std::string> found;
  visit_fields(s, [&](uint64_t f, uint64_t v, const std::string_view* bytes) {
    if (f == field && varint && !bytes) *varint = v, found.emplace();
    else if (f == field && !varint && bytes) found = found.value_or("") + std::string(*bytes);
    return true;
  });
  return found;
}

// Appends protobuf's varint encoding of `v`.
void put_varint(std::string& out, uint64_t v) {
  for (; v >= 0x80; v >>= 7) out += char((v & 0x7F) | 0x80);
  out += char(v);
}

// The model type SentencePiece's trainer recorded (ModelProto.trainer_spec, field 2;
// its model_type, field 3: 1 unigram, the default, 2 bpe, 3 word, 4 char), read from
// the serialized model by hand: Debian ships no sentencepiece_model.pb.h.
std::string model_type(std::string_view model) {
  const std::optional<std::string> spec = proto_field(model, 2);
  uint64_t type = 1;
  if (spec) proto_field(*spec, 3, &type);
  static constexpr const char* kTypes[] = {"", "unigram", "bpe", "word", "char"};
  return type < 5 ? kTypes[type] : "";
}

class SpmTokenizer final : public Tokenizer {
 public:
  // `where` names the source in errors ("[tokenizer] <where>: not a SentencePiece model").
  SpmTokenizer(std::string model, const std::string& where, const char* tag,
               std::optional<int32_t> prompt_start = std::nullopt)
      : model_(std::move(model)), prompt_start_(prompt_start) {
    const auto status = processor_.LoadFromSerializedProto(model_);
    if (!status.ok()) fail(tag, where, ": not a SentencePiece model (", status.ToString(), ")");
    if (processor_.GetPieceSize() < 1 || processor_.GetPieceSize() > TokenizerSpec::kMaxVocab)
      fail(tag, where, ": ", processor_.GetPieceSize(), " pieces, outside [1, ", TokenizerSpec::kMaxVocab, "]");
    for (int id = 0; id < processor_.GetPieceSize() && !byte_fallback_; ++id) byte_fallback_ = processor_.IsByte(id);
    if (prompt_start_ && (*prompt_start_ < 0 || *prompt_start_ >= vocab_size() || !processor_.IsControl(*prompt_start_)))
      fail(tag, where, ": the prompt's first id ", *prompt_start_, " is not one of the model's control pieces");
  }

  const char* kind() const override { return "spm"; }
  int vocab_size() const override { return processor_.GetPieceSize(); }
  std::optional<int32_t> end_of_text() const override {
    return processor_.eos_id() >= 0 ? std::optional<int32_t>(processor_.eos_id()) : std::nullopt;
  }
  std::optional<int32_t> prompt_start() const override { return prompt_start_; }

  std::vector<int32_t> encode(std::string_view utf8) const override {
    count_utf8(utf8);  // invalid UTF-8 is an error here as for every tokenizer, with its offset
    std::vector<int> ids;
    const auto status = processor_.Encode(utf8, &ids);
    if (!status.ok()) fail("tokenizer", "SentencePiece could not encode the text: ", status.ToString());
    return {ids.begin(), ids.end()};
  }

  std::string decode(std::span<const int32_t> ids) const override {
    std::vector<int> in(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) in[i] = checked(ids[i], i);
    std::string text;
    const auto status = processor_.Decode(in, &text);
    if (!status.ok()) fail("tokenizer", "SentencePiece could not decode: ", status.ToString());
    return text;
  }

  // The piece's own bytes: "▁" (U+2581) stands for a space, "<0xNN>" for one byte;
  // control tokens (<s>, </s>) add nothing and <unk> adds what SentencePiece shows.
  std::string token_bytes(int32_t id) const override {
    checked(id, 0);
    if (processor_.IsByte(id)) return std::string(1, char(std::stoi(processor_.IdToPiece(id).substr(3, 2), nullptr, 16)));
    if (processor_.IsControl(id)) return "";
    if (processor_.IsUnknown(id)) return " \xE2\x81\x87 ";
    std::string piece = processor_.IdToPiece(id), out;
    for (size_t i = 0; i < piece.size(); ++i)
      if (piece.compare(i, 3, "\xE2\x96\x81") == 0) out += ' ', i += 2;
      else out += piece[i];
    return out;
  }

  std::string describe() const override {
    return cat("spm (SentencePiece), ", vocab_size(), " pieces", byte_fallback_ ? ", byte fallback" : "",
               prompt_start_ ? cat(", prompts start with ", *prompt_start_) : "");
  }
  // tokenizer_prompt_start only when set: the metadata, and so the fingerprint, of
  // every tokenizer folio trains stays as it was.
  TokenizerMetadata metadata() const override {
    TokenizerMetadata m = {{"tokenizer", "spm"}, {"tokenizer_model", base64_encode(model_)}};
    if (prompt_start_) m.emplace_back("tokenizer_prompt_start", std::to_string(*prompt_start_));
    return m;
  }
  std::optional<std::string> export_model() const override { return model_; }
  bool has_model_file() const override { return true; }
  std::optional<TokenizerSpec> as_flags() const override {
    const std::string type = model_type(model_);
    if (type != "bpe" && type != "unigram") return std::nullopt;
    return TokenizerSpec{type, vocab_size()};
  }

 private:
  int checked(int32_t id, size_t at) const {
    if (id < 0 || id >= vocab_size()) fail("tokenizer", "id ", id, " at position ", at, " is outside [0, ", vocab_size(), ")");
    return id;
  }

  std::string model_;  // the serialized ModelProto, as a .model file holds it
  std::optional<int32_t> prompt_start_;
  spm::SentencePieceProcessor processor_;
  bool byte_fallback_ = false;
};

// The training text as SentencePiece's "sentences": chunks of whole lines (newlines
// kept, so the model learns them) of at most kChunk bytes; a longer line is cut at a
// character boundary. SentencePiece drops, with only a warning, any sentence over its
// max_sentence_length (4192 bytes by default), so no chunk comes near it.
class Chunks final : public spm::SentenceIterator {
 public:
  static constexpr size_t kChunk = 2048;
  explicit Chunks(std::string_view text) : text_(text) { Next(); }
  bool done() const override { return done_; }
  const std::string& value() const override { return chunk_; }
  spm::util::Status status() const override { return spm::util::Status(); }
  void Next() override {
    if (at_ >= text_.size()) {
      done_ = true;
      return;
    }
    size_t end = std::min(text_.size(), at_ + kChunk);
    if (end < text_.size()) {
      const size_t newline = text_.rfind('\n', end - 1);
      if (newline != std::string_view::npos && newline >= at_) end = newline + 1;
      else
        while (end > at_ + 1 && (static_cast<unsigned char>(text_[end]) & 0xC0) == 0x80) --end;  // whole characters
    }
    chunk_.assign(text_.substr(at_, end - at_));
    at_ = end;
  }

 private:
  std::string_view text_;
  size_t at_ = 0;
  std::string chunk_;
  bool done_ = false;
};

// SentencePiece's own messages for the two sizes a text cannot give, as folio's.
[[noreturn]] void training_failed(const TokenizerSpec& spec, int64_t pieces, const std::string& why) {
  auto number_after = [&](const char* marker) -> std::string {
    const size_t at = why.find(marker);
    if (at == std::string::npos) return "";
    size_t b = at + std::string_view(marker).size(), e = b;
    while (e < why.size() && std::isdigit(static_cast<unsigned char>(why[e]))) ++e;
    return why.substr(b, e - b);
  };
  if (const std::string least = number_after(" vs "); why.find("smaller than required_chars") != std::string::npos)
    fail("tokenizer", "--vocab-size ", pieces, " is too small for this text: ", spec.name, " needs at least ", least,
         " pieces (256 byte pieces, 3 control tokens and the text's characters)");
  if (const std::string most = number_after("value <= "); !most.empty())
    fail("tokenizer", "--vocab-size ", pieces, " is more than ", spec.name, " can make of this text: at most ", most);
  fail("tokenizer", "SentencePiece could not train a ", spec.name, " model of ", pieces, " pieces: ", why);
}

std::unique_ptr<Tokenizer> train(const TokenizerSpec& spec, std::string_view train_text, std::string_view) {
  if (train_text.empty()) fail("tokenizer", "no training text to learn ", spec.name, " pieces from");
  count_utf8(train_text, "the training text");  // SentencePiece would take invalid UTF-8 without a word
  const int64_t pieces = spec.vocab_size ? spec.vocab_size : TokenizerSpec::kDefaultPieces;
  const std::unordered_map<std::string, std::string> settings = {
      {"model_type", spec.name},
      {"vocab_size", std::to_string(pieces)},
      // Lossless: the text comes back byte for byte, whitespace and code included. The
      // default normalisation (nmt_nfkc) rewrites characters and whitespace; a dummy
      // prefix adds a space before every sentence; extra whitespace would be squeezed.
      {"normalization_rule_name", "identity"},
      {"add_dummy_prefix", "false"},
      {"remove_extra_whitespaces", "false"},
      // Characters too rare to get a piece are spelled as their UTF-8 bytes (256 byte
      // pieces), so any text encodes; coverage below 1 leaves the rarest to the bytes.
      {"byte_fallback", "true"},
      {"character_coverage", "0.9995"},
      // Numbers are digits, one piece each, rather than arbitrary merged runs.
      {"split_digits", "true"},
      // Runs of spaces (code's indentation) may be pieces of their own.
      {"allow_whitespace_only_pieces", "true"},
      // A bounded, fixed-seed reservoir sample of the chunks: at most ~200 MB of text
      // in the trainer's memory however large the corpus.
      {"input_sentence_size", "100000"},
      {"shuffle_input_sentence", "true"},
      {"max_sentence_length", "4192"},
      {"num_threads", std::to_string(std::max(1u, std::thread::hardware_concurrency()))},
      {"minloglevel", "2"},  // SentencePiece's progress lines would drown folio's
  };
  Chunks chunks(train_text);
  std::string model;
  auto learn = [&] { return spm::SentencePieceTrainer::Train(settings, &chunks, &model); };
  spm::util::Status status;
  if (!spec.on_training) {
    status = learn();
  } else {
    // SentencePiece trains on a thread of its own while this one tells the caller how
    // long it has taken so far; it has no progress of its own to report.
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
    const int64_t bytes = int64_t(train_text.size());
    spec.on_training(0.0, bytes, false);
    std::future<spm::util::Status> trained = std::async(std::launch::async, learn);
    while (trained.wait_for(std::chrono::seconds(1)) != std::future_status::ready) spec.on_training(seconds(), bytes, false);
    status = trained.get();
    spec.on_training(seconds(), bytes, true);
  }
  if (!status.ok()) training_failed(spec, pieces, status.ToString());
  return std::make_unique<SpmTokenizer>(std::move(model), "the trained model", "tokenizer");
}

std::unique_ptr<Tokenizer> load(const TokenizerMetadata& metadata, const std::string& where) {
  const std::string* text = find_entry(metadata, "tokenizer_model");
  if (!text) fail("checkpoint", where, ": __metadata__.tokenizer_model is missing (the spm tokenizer's model)");
  const std::optional<std::string> model = base64_decode(*text);
  if (!model) fail("checkpoint", where, ": __metadata__.tokenizer_model: not base64");
  std::optional<int32_t> start;
  if (const std::string* s = find_entry(metadata, "tokenizer_prompt_start")) {
    int32_t id = -1;
    const auto [end, ec] = std::from_chars(s->data(), s->data() + s->size(), id);
    if (ec != std::errc() || end != s->data() + s->size())
      fail("checkpoint", where, ": __metadata__.tokenizer_prompt_start is not a token id: ", *s);
    start = id;
  }
  return std::make_unique<SpmTokenizer>(*model, where + ": __metadata__.tokenizer_model", "checkpoint", start);
}

std::unique_ptr<Tokenizer> from_file(const std::string& path) {
  std::string model;
  try {
    model = read_file(path, kMaxModelBytes);
  } catch (const Error& e) {
    fail("tokenizer", "--tokenizer ", path, ": not bpe, unigram or char, and not a readable tokenizer file (a "
         "SentencePiece .model, GPT-2's vocab.json and merges.txt or their directory, a .tiktoken): ", e.what());
  }
  return std::make_unique<SpmTokenizer>(std::move(model), path, "tokenizer");
}

}  // namespace

const TokenizerKind kSpmTokenizer = {"spm", {"bpe", "unigram"}, train, load, from_file};

std::optional<std::string> spm_user_pieces_refusal(const std::string& model, std::span<const std::string_view> pieces) {
  // SentencePiece's BPE never merges a USER_DEFINED piece with its neighbours, so the
  // text either side of one is cut as folio cuts it alone. A unigram model's Viterbi
  // search scores the whole line: a piece may reach across the added piece's text, and
  // the float sums carried past it may settle a near tie the other way.
  if (const std::string type = model_type(model); type != "bpe")
    return cat("it is a ", type.empty() ? "model of an unknown type" : type + " model",
               "; only a BPE model cuts the text beside a chat token as folio does");
  // The normalizer sees the whole line: a space put before the text, or whitespace
  // squeezed at its ends, happens once per line for spm_encode but once per text
  // between chat tokens for folio; a character map may rewrite across a token's text.
  const std::string normalizer = proto_field(model, 3).value_or("");  // ModelProto.normalizer_spec
  uint64_t dummy_prefix = 1, squeeze = 1;  // both default to true
  proto_field(normalizer, 3, &dummy_prefix);
  proto_field(normalizer, 4, &squeeze);
  if (dummy_prefix) return "it puts a space before the text (add_dummy_prefix)";
  if (squeeze) return "it squeezes whitespace (remove_extra_whitespaces)";
  if (!proto_field(normalizer, 2).value_or("").empty()) return "its normalizer rewrites characters";
  // spm_encode matches USER_DEFINED pieces longest first as it reads: one of the
  // model's own that holds the first byte of an added piece could start before or at
  // the added piece's text and take it. One that is an added piece would keep its id.
  std::optional<std::string> user_defined, own;
  int id = 0;  // a piece's id is its place among ModelProto.pieces
  visit_fields(model, [&](uint64_t field, uint64_t, const std::string_view* entry) {
    if (field != 1 || !entry) return true;  // ModelProto.pieces
    uint64_t type = 1;
    proto_field(*entry, 3, &type);
    const std::string piece = proto_field(*entry, 1).value_or("");
    for (const std::string_view p : pieces) {
      if (type == 4 && piece.find(p.front()) != std::string::npos)
        user_defined = cat("its own user-defined piece \"", piece, "\" could take the text of ", p);
      if (piece == p && !own) own = cat("it has a piece ", p, " of its own (id ", id, ")");
    }
    ++id;
    return !user_defined;
  });
  return user_defined ? user_defined : own;
}

std::string spm_model_with_user_pieces(const std::string& model, std::span<const std::string_view> pieces) {
  auto refuse = [](const std::string& why) {
    fail("tokenizer", "spm_encode would not give folio's ids with the chat tokens added to this SentencePiece model: ",
         why);
  };
  if (const std::optional<std::string> why = spm_user_pieces_refusal(model, pieces)) refuse(*why);
  spm::SentencePieceProcessor base;
  if (!base.LoadFromSerializedProto(model).ok()) refuse("it is not a SentencePiece model");

  // A repeated field given again appends to it: the pieces take the next ids.
  std::string out = model;
  for (const std::string_view p : pieces) {
    std::string entry;  // ModelProto.SentencePiece: piece (field 1), type (3) USER_DEFINED (4); score 0
    entry += char(1 << 3 | 2), put_varint(entry, p.size()), entry += p;
    entry += char(3 << 3 | 0), put_varint(entry, 4);
    out += char(1 << 3 | 2), put_varint(out, entry.size()), out += entry;
  }
  // The file as spm_encode will read it: each added piece's text is its one id.
  spm::SentencePieceProcessor check;
  const bool loads = check.LoadFromSerializedProto(out).ok();
  for (size_t i = 0; i < pieces.size(); ++i) {
    std::vector<int> ids;
    if (!loads || !check.Encode(pieces[i], &ids).ok() || ids != std::vector<int>{base.GetPieceSize() + int(i)})
      fail("tokenizer", "the SentencePiece model with the chat tokens added does not read ", pieces[i], " as id ",
           base.GetPieceSize() + int(i));
  }
  return out;
}

}  // namespace folio
