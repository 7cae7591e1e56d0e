// Reading conversation files (io/conversation_file.h): every way a line can be wrong is
// named with its line number, so a file of thousands can be fixed.
#include "io/conversation_file.h"

#include <algorithm>
#include <cctype>

#include "base/error.h"
#include "io/json.h"
#include "io/json_lines.h"

namespace folio {
namespace {

ChatMessage parse_message(const Json& m, size_t index, const JsonLine& at) {
  if (!m.is_object()) at.fail("message ", index, " must be an object {role, content}, got ", m.type_name());
  const Json* role = m.find("role");
  if (!role || !role->is_string()) at.fail("message ", index, " needs a role (a string)");
  ChatMessage out;
  out.role = role->as_string();
  if (out.role != "system" && out.role != "user" && out.role != "assistant")
    at.fail("message ", index, ": unknown role \"", out.role.substr(0, 40), "\" (system, user or assistant)");
  const Json* content = m.find("content");
  if (!content) at.fail("message ", index, " (", out.role, ") has no content");
  if (!content->is_string())
    at.fail("message ", index, " (", out.role, "): content must be a string, got ", content->type_name());
  out.content = content->as_string();
  if (out.content.empty()) at.fail("message ", index, " (", out.role, "): content is empty");
  if (const Json* w = m.find("weight")) {
    if (out.role != "assistant") at.fail("message ", index, " (", out.role, "): only an assistant message has a weight");
    // A number equal to 0 or 1: JSON does not tell 1.0 from 1, and writers (Python's
    // json with a float) give either.
    if (!w->is_number() || (w->as_double() != 0.0 && w->as_double() != 1.0))
      at.fail("message ", index, ": weight must be 0 or 1, got ", w->dump());
    out.trained = w->as_double() == 1.0;
  }
  return out;
}

}  // namespace

bool is_conversation_file(std::string_view path) {
  // Any case: a data.JSONL trained on as plain text would teach the model JSON.
  constexpr std::string_view kExtension = ".jsonl";
  if (path.size() < kExtension.size()) return false;
  const std::string_view tail = path.substr(path.size() - kExtension.size());
  return std::equal(tail.begin(), tail.end(), kExtension.begin(),
                    [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; });
}

Conversation parse_conversation(std::string_view text, const std::string& path, int64_t line) {
  const JsonLine at{path, line};
  const Json j = parse_object_line(text, at, "a conversation ({\"messages\": [...]})");
  const Json* messages = j.find("messages");
  if (!messages || !messages->is_array() || messages->as_array().empty())
    at.fail("a conversation needs \"messages\", a non-empty array of {role, content}");
  Conversation c;
  c.line = line;
  for (size_t i = 0; i < messages->as_array().size(); ++i)
    c.messages.push_back(parse_message(messages->as_array()[i], i, at));
  bool assistant = false, trained = false;
  for (const ChatMessage& m : c.messages)
    if (m.role == "assistant") assistant = true, trained = trained || m.trained;
  if (!assistant) at.fail("the conversation has no assistant message: nothing to learn from it");
  if (!trained) at.fail("every assistant message has weight 0: nothing to learn from the conversation");
  return c;
}

std::vector<Conversation> read_conversations(const std::string& path) {
  std::vector<Conversation> out;
  for_each_line(path, [&](std::string_view one, const JsonLine& at) {
    out.push_back(parse_conversation(one, path, at.line));
    return true;
  });
  if (out.empty())
    throw Error(cat(path, ": no conversations (one JSON object a line: {\"messages\": [{\"role\", \"content\"}, ...]})"));
  return out;
}

}  // namespace folio
