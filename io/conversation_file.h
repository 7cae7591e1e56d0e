#pragma once
// A file of conversations for chat fine-tuning, in OpenAI's fine-tuning format (JSONL):
// one conversation a line,
//   {"messages": [{"role": "system"|"user"|"assistant", "content": "...", "weight": 0|1}, ...]}
// where "weight" (assistant messages only; 1 when absent) says whether the loss counts
// the message. Blank lines are skipped; other fields of a line or a message are ignored.
// Anything wrong is refused, folio::Error "<path>:<line>: what": a line that is not one
// JSON object or not UTF-8, no "messages" array, an unknown role, content that is empty
// or not a string, a weight other than 0 or 1, no assistant message, or no assistant
// message with weight 1.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/chat_template.h"

namespace folio {

struct Conversation {
  std::vector<ChatMessage> messages;
  int64_t line = 0;  // where it is in its file, from 1
};

// The conversations of the file at `path`, in order. An empty file is an error.
std::vector<Conversation> read_conversations(const std::string& path);
// One line (its number, for errors).
Conversation parse_conversation(std::string_view text, const std::string& path, int64_t line);
// Whether `path` names a conversation file: it ends in ".jsonl", in any case.
bool is_conversation_file(std::string_view path);

}  // namespace folio
