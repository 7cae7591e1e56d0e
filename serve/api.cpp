#include "serve/api.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "serve/json_fields.h"

namespace folio::serve {
namespace fields {

json parse_object(const std::string& body) {
  json j;
  try {
    j = json::parse(body);  // rejects invalid UTF-8 and lone surrogates in strings
  } catch (const json::parse_error& e) {
    const std::string what = e.what();
    if (what.find("UTF-8") != std::string::npos || what.find("surrogate") != std::string::npos)
      throw ApiError(400, "the body is not valid UTF-8 JSON: " + what);
    throw ApiError(400, "the body is not valid JSON: " + what);
  }
  if (!j.is_object()) throw ApiError(400, cat("the body must be a JSON object, got ", j.type_name()));
  return j;
}

const json* field(const json& j, const char* name) {
  const auto it = j.find(name);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

void bad(const char* name, const std::string& what) { throw ApiError(400, cat(name, " ", what), name); }

const json* Body::get(const char* name) {
  taken_.push_back(name);
  return field(j_, name);
}

void Body::unsupported(const char* name, const std::string& why) const {
  if (field(j_, name)) bad(name, why);
}

void Body::finish() const {
  // OpenAI's own fields that change nothing for one local model: accepted, and ignored.
  static constexpr std::string_view kIgnored[] = {"user", "metadata", "store", "service_tier", "stream_options"};
  for (const auto& [key, value] : j_.items()) {
    if (value.is_null() || std::find(taken_.begin(), taken_.end(), key) != taken_.end() ||
        std::find(std::begin(kIgnored), std::end(kIgnored), key) != std::end(kIgnored))
      continue;
    // A penalty of 0 and an empty logit_bias are what folio does anyway.
    if ((key == "frequency_penalty" || key == "presence_penalty") && value.is_number() && value.get<double>() == 0.0)
      continue;
    if (key == "logit_bias" && value.is_object() && value.empty()) continue;
    std::string names;
    for (const std::string_view k : taken_) names += cat(names.empty() ? "" : ", ", k);
    for (const std::string_view k : kIgnored) names += cat(", ", k);
    throw ApiError(400, cat("Unrecognized request argument supplied: ", key, " (this endpoint takes ", names, ")"), key);
  }
}

double number(const json& j, const char* name, double lo, double hi) {
  if (!j.is_number()) bad(name, cat("must be a number, got ", j.type_name()));
  const double v = j.get<double>();
  if (!(v >= lo && v <= hi)) bad(name, cat("must be in [", lo, ", ", hi, "], got ", j.dump()));
  return v;
}

int64_t integer(const json& j, const char* name, int64_t lo, int64_t hi) {
  if (!j.is_number_integer()) bad(name, cat("must be an integer, got ", j.dump().substr(0, 40)));
  if (j.is_number_unsigned() && j.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    bad(name, cat("must be in [", lo, ", ", hi, "], got ", j.dump()));
  const int64_t v = j.get<int64_t>();
  if (v < lo || v > hi) bad(name, cat("must be in [", lo, ", ", hi, "], got ", v));
  return v;
}

std::string text(const json& j, const char* name) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_array() && j.size() == 1 && j[0].is_string()) return j[0].get<std::string>();  // ["text"], as clients may send
  bad(name, cat("must be a string, got ", j.type_name()));
}

bool boolean(const json& j, const char* name) {
  if (!j.is_boolean()) bad(name, cat("must be true or false, got ", j.type_name()));
  return j.get<bool>();
}

std::vector<int32_t> encode_prompt(const Tokenizer& tokenizer, const std::string& s, const char* name,
                                   int64_t max_tokens, bool with_start) {
  // A char tokenizer makes at most one token per byte; refusing early keeps a huge
  // prompt from costing an encode.
  if (std::string_view(tokenizer.kind()) == "char" && int64_t(s.size()) > 4 * max_tokens)
    bad(name, cat("has ", s.size(), " bytes, more than this server's limit of ", max_tokens, " tokens allows"));
  std::vector<int32_t> ids;
  try {
    ids = tokenizer.encode(s);
  } catch (const Error& e) {
    bad(name, cat("cannot be encoded by this model's tokenizer: ", e.what()));
  }
  if (ids.empty()) bad(name, "is empty");
  // A model imported from a llama-family GGUF expects its BOS first (Tokenizer::prompt_start).
  if (const std::optional<int32_t> bos = tokenizer.prompt_start(); bos && with_start) ids.insert(ids.begin(), *bos);
  if (int64_t(ids.size()) > max_tokens)
    bad(name, cat("has ", ids.size(), " tokens, more than this server's limit of ", max_tokens));
  return ids;
}

}  // namespace fields

using namespace fields;

CompletionRequest parse_completion(const std::string& body, const Tokenizer& tokenizer, const ApiLimits& limits) {
  Body j(body);
  CompletionRequest r;
  const json* p = j.get("prompt");
  if (!p) bad("prompt", "is required");
  r.prompt = encode_prompt(tokenizer, text(*p, "prompt"), "prompt", limits.max_prompt_tokens);
  r.sample.max_new_tokens = std::min<int64_t>(16, limits.max_tokens);  // OpenAI's default, within the server's limit
  if (const json* v = j.get("max_tokens")) r.sample.max_new_tokens = integer(*v, "max_tokens", 1, limits.max_tokens);
  parse_sampling(j, r, tokenizer);
  if (const json* v = j.get("best_of"); v && !(v->is_number_integer() && v->get<int64_t>() == 1))
    bad("best_of", "must be 1");
  j.unsupported("logprobs", "is not supported");
  if (const json* v = j.get("echo"); v && !(v->is_boolean() && !v->get<bool>())) bad("echo", "is not supported");
  j.finish();
  r.sample.validate();  // the same rules as folio generate (already met here)
  return r;
}

namespace fields {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void parse_sampling(Body& j, CompletionRequest& r, const Tokenizer& tokenizer) {
  r.sample.temperature = 1.0f;
  if (const json* v = j.get("temperature")) {
    const double t = number(*v, "temperature", 0.0, 2.0);  // OpenAI's range
    r.sample.greedy = t == 0.0;  // 0: the most likely token every time
    r.sample.temperature = t == 0.0 ? 1.0f : float(t);
  }
  if (const json* v = j.get("top_p")) {
    r.sample.top_p = float(number(*v, "top_p", 0.0, 1.0));
    if (!(r.sample.top_p > 0.0f)) bad("top_p", "must be in (0, 1], got 0");
  }
  if (const json* v = j.get("top_k")) r.sample.top_k = integer(*v, "top_k", 0, tokenizer.vocab_size());
  if (const json* v = j.get("seed")) {
    if (v->is_number_unsigned()) r.seed = v->get<uint64_t>();
    else r.seed = uint64_t(integer(*v, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
    r.has_seed = true;
  }
  if (const json* v = j.get("stop")) {
    if (v->is_string()) r.stop.push_back(v->get<std::string>());
    else if (v->is_array() && v->size() <= 4)
      for (const json& s : *v) {
        if (!s.is_string()) bad("stop", cat("must hold strings, got ", s.type_name()));
        r.stop.push_back(s.get<std::string>());
      }
    else bad("stop", "must be a string or an array of up to 4 strings");
    for (const std::string& s : r.stop)
      if (s.empty()) bad("stop", "must not hold an empty string");
  }
  if (const json* v = j.get("stream")) r.stream = boolean(*v, "stream");
  if (const json* v = j.get("model")) {
    if (!v->is_string()) bad("model", cat("must be a string, got ", v->type_name()));
    r.model = v->get<std::string>();
  }
  if (const json* v = j.get("n"); v && !(v->is_number_integer() && v->get<int64_t>() == 1))
    bad("n", "must be 1: one choice per request");
}

}  // namespace fields

TokenizeRequest parse_tokenize(const std::string& body, const Tokenizer& tokenizer, const ApiLimits& limits) {
  Body j(body);
  const json* c = j.get("content");
  const json* add_special = j.get("add_special");
  const json* with_pieces = j.get("with_pieces");
  j.finish();
  if (!c) bad("content", "is required");
  if (!c->is_string()) bad("content", cat("must be a string, got ", c->type_name()));
  TokenizeRequest r;
  if (with_pieces) r.with_pieces = boolean(*with_pieces, "with_pieces");
  const bool with_start = add_special ? boolean(*add_special, "add_special") : true;
  if (c->get_ref<const std::string&>().empty()) return r;
  r.ids = encode_prompt(tokenizer, c->get<std::string>(), "content", limits.max_prompt_tokens, with_start);
  return r;
}

std::string tokenize_json(const TokenizeRequest& r, const Tokenizer& tokenizer) {
  json tokens = json::array(), pieces = json::array();
  for (int32_t id : r.ids) {
    const std::string bytes = tokenizer.token_bytes(id);
    if (!r.with_pieces) {
      tokens.push_back(id);
      pieces.push_back(visible_token(bytes));
      continue;
    }
    std::string checked = bytes;
    json piece = bytes;
    if (replace_invalid_utf8(checked) > 0) {
      piece = json::array();
      for (unsigned char b : bytes) piece.push_back(int(b));
    }
    tokens.push_back({{"id", id}, {"piece", piece}});
  }
  return dump(r.with_pieces ? json{{"tokens", tokens}} : json{{"tokens", tokens}, {"pieces", pieces}});
}

std::vector<int32_t> parse_detokenize(const std::string& body, const Tokenizer& tokenizer) {
  Body j(body);
  const json* t = j.get("tokens");
  j.finish();
  if (!t) bad("tokens", "is required");
  if (!t->is_array()) bad("tokens", cat("must be an array of token ids, got ", t->type_name()));
  std::vector<int32_t> ids;
  for (const json& id : *t) ids.push_back(int32_t(integer(id, "tokens", 0, tokenizer.vocab_size() - 1)));
  return ids;
}

std::vector<int32_t> parse_attention(const std::string& body, const Tokenizer& tokenizer, int64_t block_size) {
  Body j(body);
  const json* t = j.get("tokens");
  const json* p = j.get("prompt");
  j.finish();
  if (t && p) bad("tokens", "and prompt both say what to read: give one of them");
  if (t) {
    if (!t->is_array()) bad("tokens", cat("must be an array of token ids, got ", t->type_name()));
    if (t->empty() || int64_t(t->size()) > block_size)
      bad("tokens", cat("has ", t->size(), " ids; this model reads 1 to block_size = ", block_size));
    std::vector<int32_t> ids;
    for (const json& id : *t) ids.push_back(int32_t(integer(id, "tokens", 0, tokenizer.vocab_size() - 1)));
    return ids;
  }
  if (!p) bad("prompt", "is required (or tokens)");
  return encode_prompt(tokenizer, text(*p, "prompt"), "prompt", block_size);
}

std::string completion_json(const std::string& id, int64_t created, const std::string& model,
                            const std::string& text, const std::string& finish_reason, const Usage& usage) {
  const json j = {{"id", id},
                  {"object", "text_completion"},
                  {"created", created},
                  {"model", model},
                  {"choices", {{{"text", text}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish_reason}}}},
                  {"usage",
                   {{"prompt_tokens", usage.prompt_tokens},
                    {"completion_tokens", usage.completion_tokens},
                    {"total_tokens", usage.prompt_tokens + usage.completion_tokens}}}};
  return dump(j);
}

std::string completion_chunk(const std::string& id, int64_t created, const std::string& model,
                             const std::string& text, const std::string& finish_reason, const Usage* usage) {
  json j = {{"id", id},
            {"object", "text_completion"},
            {"created", created},
            {"model", model},
            {"choices",
             {{{"text", text},
               {"index", 0},
               {"logprobs", nullptr},
               {"finish_reason", finish_reason.empty() ? json(nullptr) : json(finish_reason)}}}}};
  if (usage)
    j["usage"] = {{"prompt_tokens", usage->prompt_tokens},
                  {"completion_tokens", usage->completion_tokens},
                  {"total_tokens", usage->prompt_tokens + usage->completion_tokens}};
  return dump(j);
}

std::string error_json(const ApiError& e) {
  std::string type = e.type;
  if (type.empty()) {
    switch (e.status) {
      case 401: type = "authentication_error"; break;
      case 404: type = "not_found_error"; break;
      case 503: type = "server_overloaded"; break;
      case 500: type = "server_error"; break;
      default: type = "invalid_request_error";
    }
  }
  const json j = {{"error",
                   {{"message", e.what()},
                    {"type", type},
                    {"param", e.param.empty() ? json(nullptr) : json(e.param)},
                    {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
  return dump(j);
}

}  // namespace folio::serve
