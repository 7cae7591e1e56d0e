#pragma once
// The field checks serve's endpoints share (serve/api.cpp defines them): each throws
// ApiError 400 naming the field at fault.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "serve/api.h"

namespace folio::serve::fields {

using json = nlohmann::json;

// The body as a JSON object; 400 for malformed JSON, invalid UTF-8 or another type.
json parse_object(const std::string& body);
// The field, or nullptr when it is absent or null (OpenAI treats null as absent).
const json* field(const json& j, const char* name);
[[noreturn]] void bad(const char* name, const std::string& what);

// A request's body that remembers the fields its endpoint reads, so that the fields an
// endpoint takes are the ones its parser reads: no list kept beside the parsing, which
// could refuse a field the parser reads or take one it ignores.
class Body {
 public:
  explicit Body(const std::string& body) : j_(parse_object(body)) {}
  // The field, or nullptr when it is absent or null (OpenAI treats null as absent);
  // either way one the endpoint takes.
  const json* get(const char* name);
  // 400 naming `name` when the request sets it: one of OpenAI's fields this endpoint
  // cannot honour (tools, logprobs), which it does not take.
  void unsupported(const char* name, const std::string& why) const;
  // 400 for a field the parser never read, as OpenAI answers "Unrecognized request
  // argument supplied" (a field folio ignored would be a setting the user believes took
  // effect), apart from OpenAI's that change nothing here: "user", "metadata", "store",
  // "service_tier", "stream_options", a penalty of 0, an empty logit_bias. Called after
  // every read.
  void finish() const;

 private:
  json j_;
  std::vector<std::string_view> taken_;  // in the order read: the error lists them
};

double number(const json& j, const char* name, double lo, double hi);
int64_t integer(const json& j, const char* name, int64_t lo, int64_t hi);
// A string, or an array of one string (as some clients send a prompt).
std::string text(const json& j, const char* name);
// Text -> 1 to max_tokens token ids of this tokenizer, after the model's prompt start
// (Tokenizer::prompt_start) unless `with_start` is false.
std::vector<int32_t> encode_prompt(const Tokenizer& tokenizer, const std::string& s, const char* name,
                                   int64_t max_tokens, bool with_start = true);
// A field that must be true or false.
bool boolean(const json& j, const char* name);
// temperature, top_p, top_k, seed, stop, stream, model, n: into r (max_tokens is the
// caller's, as chat also accepts max_completion_tokens).
void parse_sampling(Body& body, CompletionRequest& r, const Tokenizer& tokenizer);

// A response's JSON text: invalid UTF-8 (a token's part of a character, a message
// quoting a bad byte) becomes U+FFFD instead of throwing.
std::string dump(const json& j);

}  // namespace folio::serve::fields
