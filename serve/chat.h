#pragma once
// POST /v1/chat/completions in OpenAI's shapes.
//
// A chat model (one fine-tuned on conversations, whose tokenizer carries the ChatML
// tokens) gets its own template (data/chat_template.h: render_chat), and its reply ends
// at <|im_end|>. A base model's conversation becomes a prompt by a plain template that
// reads like the play scripts it learns from: each message is a speaker's turn, a label
// line and the text, then a blank line:
//
//     System:\n<text>\n\n   User:\n<text>\n\n   Assistant:\n<text>\n\n   ...   Assistant:\n
//
// (roles "system" and "developer" are labelled System). The model continues after the
// last "Assistant:\n", and its reply ends at the first blank line ("\n\n": the next
// speaker's turn), at one of the request's stop strings, or at max_tokens.
//
// What it holds:
//   chat_prompt             messages -> the template's text
//   parse_chat_completion   body -> CompletionRequest (prompt, the blank-line stop), or 400
//                           (context_length_exceeded when it does not fit the model's context)
//   chat_completion_json    the whole response: choices[0].message
//   chat_chunk              one streamed chunk: choices[0].delta
#include <string>
#include <utility>
#include <vector>

#include "data/chat_template.h"
#include "serve/api.h"

namespace folio::serve {

// The stop that ends the assistant's turn: a blank line, where the next speaker begins.
inline constexpr const char* kChatTurnEnd = kPlainTurnEnd;

// (role, content) pairs -> the prompt text above. Roles must be system, developer,
// user or assistant (ApiError 400 otherwise).
std::string chat_prompt(const std::vector<std::pair<std::string, std::string>>& messages);

// messages (required: 1 or more {role, content}, content a string or text parts),
// max_tokens or max_completion_tokens, and the sampling fields completions take.
// `context` is the model's block_size: a conversation whose prompt leaves no room in it
// for the reply (chat_context_overflow) is refused with 400 context_length_exceeded, as
// OpenAI refuses it, rather than cut from the front.
CompletionRequest parse_chat_completion(const std::string& body, const Tokenizer& tokenizer, const ApiLimits& limits,
                                        int64_t context);

std::string chat_completion_json(const std::string& id, int64_t created, const std::string& model,
                                 const std::string& content, const std::string& finish_reason, const Usage& usage);
// first: the delta is {"role": "assistant", "content": text}; else {"content": text},
// or {} when text is empty. finish_reason "" -> null (more to come); the last chunk
// carries usage.
std::string chat_chunk(const std::string& id, int64_t created, const std::string& model, const std::string& text,
                       bool first, const std::string& finish_reason, const Usage* usage);

}  // namespace folio::serve
