#include "data/token_manifest.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "data/token_shard.h"

namespace folio {
namespace {

using nlohmann::json;

json split_json(const SplitEntry& s) {
  json shards = json::array();
  for (const ShardEntry& e : s.shards)
    shards.push_back({{"file", e.file}, {"tokens", e.tokens}, {"checksum", checksum_hex(e.checksum)}});
  return {{"documents", s.documents}, {"bytes", s.bytes}, {"chars", s.chars}, {"tokens", s.tokens}, {"shards", shards}};
}

// One field of `j`, of type T, or an error naming it.
template <class T>
T get(const json& j, const char* key, const std::string& where, const char* expected) {
  const auto it = j.find(key);
  if (it == j.end()) fail("data", where, ": ", key, " is missing");
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    fail("data", where, ": ", key, " must be ", expected, ", got ", it->dump().substr(0, 60));
  }
}

int64_t count(const json& j, const char* key, const std::string& where) {
  const auto v = get<int64_t>(j, key, where, "a whole number >= 0");
  if (v < 0) fail("data", where, ": ", key, " must be >= 0, got ", v);
  return v;
}

SplitEntry parse_split(const json& j, const std::string& where) {
  if (!j.is_object()) fail("data", where, ": expected an object");
  SplitEntry s;
  s.documents = count(j, "documents", where);
  s.bytes = count(j, "bytes", where);
  s.chars = count(j, "chars", where);
  s.tokens = count(j, "tokens", where);
  const auto shards = get<json>(j, "shards", where, "a list");
  if (!shards.is_array()) fail("data", where, ": shards must be a list");
  int64_t total = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string at = cat(where, ".shards[", i, "]");
    ShardEntry e;
    e.file = get<std::string>(shards[i], "file", at, "a file name");
    if (e.file.empty() || e.file.find('/') != std::string::npos || e.file.starts_with("."))
      fail("data", at, ": file '", e.file, "' must be a plain name inside the directory");
    e.tokens = count(shards[i], "tokens", at);
    const auto hex = get<std::string>(shards[i], "checksum", at, "16 hex digits");
    size_t used = 0;
    try {
      e.checksum = std::stoull(hex, &used, 16);
    } catch (const std::exception&) {
      used = 0;
    }
    if (hex.size() != 16 || used != 16) fail("data", at, ": checksum '", hex, "' is not 16 hex digits");
    total += e.tokens;
    s.shards.push_back(std::move(e));
  }
  if (total != s.tokens) fail("data", where, ": tokens is ", s.tokens, " but its shards hold ", total);
  return s;
}

TokenManifest manifest_from_json(const json& j, const std::string& where);

}  // namespace

std::string TokenManifest::to_json() const {
  json tok = json::object();
  for (const auto& [k, v] : tokenizer) tok[k] = v;
  const json j = {{"format", "folio-tokens"},
                  {"version", 1},
                  {"tokenizer", tok},
                  {"tokenizer_description", tokenizer_description},
                  {"vocab_size", vocab_size},
                  {"end_of_text", end_of_text},
                  {"token_bytes", token_bytes},
                  {"val_fraction", val_fraction},
                  {"val_rule", val_rule},
                  {"splits", {{"train", split_json(train)}, {"val", split_json(val)}}},
                  {"inputs", inputs},
                  {"skipped_files", skipped_files},
                  {"files_with_invalid_utf8", files_with_invalid_utf8},
                  {"command", command}};
  return j.dump(1) + "\n";
}

TokenManifest TokenManifest::parse(const std::string& text, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail("data", where, ": not JSON (", e.what(), ")");
  }
  if (!j.is_object()) fail("data", where, ": expected a JSON object");
  try {
    return manifest_from_json(j, where);
  } catch (const json::exception& e) {  // a field of the wrong type
    fail("data", where, ": ", e.what());
  }
}

namespace {

TokenManifest manifest_from_json(const json& j, const std::string& where) {
  if (j.value("format", "") != "folio-tokens") fail("data", where, ": format is not \"folio-tokens\"");
  if (const auto version = get<int64_t>(j, "version", where, "a number"); version != 1)
    fail("data", where, ": version ", version, ", this folio reads version 1");
  TokenManifest m;
  const auto tok = get<json>(j, "tokenizer", where, "an object");
  if (!tok.is_object()) fail("data", where, ": tokenizer must be an object");
  for (const auto& [k, v] : tok.items()) {
    if (!v.is_string()) fail("data", where, ": tokenizer.", k, " must be a string");
    m.tokenizer.emplace_back(k, v.get<std::string>());
  }
  m.tokenizer_description = j.value("tokenizer_description", "");
  m.vocab_size = count(j, "vocab_size", where);
  if (m.vocab_size < 1 || m.vocab_size > TokenizerSpec::kMaxVocab)
    fail("data", where, ": vocab_size ", m.vocab_size, " is outside [1, ", TokenizerSpec::kMaxVocab, "]");
  m.end_of_text = get<int64_t>(j, "end_of_text", where, "a token id or -1");
  if (m.end_of_text < -1 || m.end_of_text >= m.vocab_size)
    fail("data", where, ": end_of_text ", m.end_of_text, " is not -1 or an id below vocab_size ", m.vocab_size);
  m.token_bytes = int(count(j, "token_bytes", where));
  if (m.token_bytes != token_width(m.vocab_size))
    fail("data", where, ": token_bytes ", m.token_bytes, " does not fit vocab_size ", m.vocab_size, " (expected ",
         token_width(m.vocab_size), ")");
  m.val_fraction = get<double>(j, "val_fraction", where, "a number");
  m.val_rule = j.value("val_rule", "");
  const auto splits = get<json>(j, "splits", where, "an object");
  if (!splits.is_object() || !splits.contains("train") || !splits.contains("val"))
    fail("data", where, ": splits must hold train and val");
  m.train = parse_split(splits["train"], where + ": splits.train");
  m.val = parse_split(splits["val"], where + ": splits.val");
  if (const auto it = j.find("inputs"); it != j.end() && it->is_array())
    for (const auto& v : *it)
      if (v.is_string()) m.inputs.push_back(v.get<std::string>());
  m.skipped_files = j.value("skipped_files", int64_t(0));
  m.files_with_invalid_utf8 = j.value("files_with_invalid_utf8", int64_t(0));
  m.command = j.value("command", "");
  return m;
}

}  // namespace

std::string TokenManifest::fingerprint() const {
  uint64_t h = kChecksumStart;
  auto add = [&](const std::string& s) { h = token_checksum(s.data(), s.size(), h); };
  TokenizerMetadata sorted = tokenizer;  // as the JSON object holds it: by key
  std::sort(sorted.begin(), sorted.end());
  for (const auto& [k, v] : sorted) add(k), add(v);
  for (const SplitEntry* s : {&train, &val})
    for (const ShardEntry& e : s->shards) add(cat(e.file, ":", e.tokens, ":", checksum_hex(e.checksum)));
  return checksum_hex(h);
}

}  // namespace folio
