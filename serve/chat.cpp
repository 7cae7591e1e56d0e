#include "serve/chat.h"

#include <optional>

#include "base/error.h"
#include "serve/json_fields.h"

namespace folio::serve {

using namespace fields;

namespace {

// 400 naming the message at fault by its index, as OpenAI's "messages[1].content" does:
// in a long conversation "a user message needs content" alone leaves the client to find it.
[[noreturn]] void bad_message(size_t i, const std::string& what) {
  throw ApiError(400, cat("messages[", i, "] ", what), "messages");
}

// A message's content: a string, or an array of {"type": "text", "text": ...} parts
// joined (as newer clients send). An assistant's may be null (absent).
std::string content_of(const json& m, const std::string& role, size_t i) {
  const json* c = field(m, "content");
  if (!c) {
    if (role == "assistant") return "";
    bad_message(i, cat("(", role, ") needs content"));
  }
  if (c->is_string()) return c->get<std::string>();
  if (!c->is_array()) bad_message(i, cat("content must be a string or an array of text parts, got ", c->type_name()));
  std::string joined;
  for (const json& part : *c) {
    const json* type = part.is_object() ? field(part, "type") : nullptr;
    const json* text = part.is_object() ? field(part, "text") : nullptr;
    if (!type || *type != "text" || !text || !text->is_string())
      bad_message(i, "content parts must be {\"type\": \"text\", \"text\": \"...\"}: this model reads text only");
    joined += text->get<std::string>();
  }
  return joined;
}

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

}  // namespace

namespace {

// The request's messages for the template (data/chat_template.h), each role checked here
// so that a wrong one is named by its index.
std::vector<ChatMessage> chat_messages(const std::vector<std::pair<std::string, std::string>>& messages) {
  std::vector<ChatMessage> out;
  for (const auto& [role, content] : messages) {
    if (role != "system" && role != "developer" && role != "user" && role != "assistant")
      bad_message(out.size(), cat("role must be system, developer, user or assistant, got \"", role, "\""));
    out.push_back({role, content});  // the template renders "developer" as a system message
  }
  return out;
}

}  // namespace

std::string chat_prompt(const std::vector<std::pair<std::string, std::string>>& messages) {
  return plain_chat_prompt(chat_messages(messages));
}

CompletionRequest parse_chat_completion(const std::string& body, const Tokenizer& tokenizer, const ApiLimits& limits,
                                        int64_t context) {
  Body j(body);
  const json* m = j.get("messages");
  if (!m) bad("messages", "is required");
  if (!m->is_array() || m->empty()) bad("messages", "must be a non-empty array of {role, content}");
  std::vector<std::pair<std::string, std::string>> messages;
  for (const json& message : *m) {
    const size_t i = messages.size();
    if (!message.is_object()) bad_message(i, cat("must be an object, got ", message.type_name()));
    const json* role = field(message, "role");
    if (!role || !role->is_string()) bad_message(i, "needs a role (a string)");
    const std::string r = role->get<std::string>();
    messages.emplace_back(r, content_of(message, r, i));
  }
  // A character the model lacks is named where the user typed it, in its message,
  // not at its place in the template around the messages.
  for (size_t i = 0; i < messages.size(); ++i) {
    try {
      tokenizer.encode(messages[i].second);
    } catch (const Error& e) {
      bad_message(i, cat("(", messages[i].first, ") cannot be encoded by this model's tokenizer: ", e.what()));
    }
  }
  CompletionRequest r;
  if (const std::optional<ChatTokens> ct = tokenizer.chat_tokens()) {  // a chat model: its own template
    r.prompt = render_chat(tokenizer, chat_messages(messages), true).ids;
    if (int64_t(r.prompt.size()) > limits.max_prompt_tokens)
      bad("messages", cat("make ", r.prompt.size(), " tokens, more than this server's limit of ",
                          limits.max_prompt_tokens));
    r.end_token = ct->end;
  } else {
    r.prompt = encode_prompt(tokenizer, chat_prompt(messages), "messages", limits.max_prompt_tokens);
  }
  // max_tokens is max_completion_tokens' older name: both given and different, which one
  // the client meant is not for the server to guess.
  std::optional<int64_t> asked;
  for (const char* name : {"max_completion_tokens", "max_tokens"}) {
    const json* v = j.get(name);
    if (!v) continue;
    const int64_t n = integer(*v, name, 1, limits.max_tokens);
    if (asked && *asked != n)
      bad(name, cat("is ", n, " but max_completion_tokens is ", *asked,
                    ": give one of them (max_tokens is its older name)"));
    asked = n;
  }
  r.sample.max_new_tokens = asked.value_or(limits.max_tokens);  // OpenAI's default: as long as allowed
  parse_sampling(j, r, tokenizer);
  if (!r.end_token) r.stop.push_back(kChatTurnEnd);  // the plain template's turn ends at a blank line
  for (const char* unsupported : {"tools", "functions", "response_format"})
    j.unsupported(unsupported, "is not supported: this model reads and writes plain text");
  if (const json* v = j.get("logprobs"); v && !(v->is_boolean() && !v->get<bool>())) bad("logprobs", "is not supported");
  j.finish();
  r.sample.validate();
  // Checked last, so a field at fault is named first, as it would be for a prompt that fits.
  if (const std::optional<std::string> why = chat_context_overflow(int64_t(r.prompt.size()), context))
    throw ApiError(400, *why, "messages", "invalid_request_error", "context_length_exceeded");
  return r;
}

std::string chat_completion_json(const std::string& id, int64_t created, const std::string& model,
                                 const std::string& content, const std::string& finish_reason, const Usage& usage) {
  return dump({{"id", id},
               {"object", "chat.completion"},
               {"created", created},
               {"model", model},
               {"choices",
                {{{"index", 0},
                  {"message", {{"role", "assistant"}, {"content", content}}},
                  {"logprobs", nullptr},
                  {"finish_reason", finish_reason}}}},
               {"usage", usage_json(usage)}});
}

std::string chat_chunk(const std::string& id, int64_t created, const std::string& model, const std::string& text,
                       bool first, const std::string& finish_reason, const Usage* usage) {
  json delta = json::object();
  if (first) delta["role"] = "assistant";
  if (first || !text.empty()) delta["content"] = text;
  json j = {{"id", id},
            {"object", "chat.completion.chunk"},
            {"created", created},
            {"model", model},
            {"choices",
             {{{"index", 0},
               {"delta", delta},
               {"logprobs", nullptr},
               {"finish_reason", finish_reason.empty() ? json(nullptr) : json(finish_reason)}}}}};
  if (usage) j["usage"] = usage_json(*usage);
  return dump(j);
}

}  // namespace folio::serve
