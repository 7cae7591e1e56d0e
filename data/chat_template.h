#pragma once
// The chat template, in one place: how a conversation becomes the token ids a model
// reads, for training (with a weight per token: which ones the loss counts), for
// folio chat, folio serve's /v1/chat/completions, the Python module's model.chat, and
// (as its Jinja text) the GGUF export.
//
// Two templates:
//   ChatML  for a model whose tokenizer carries the control tokens <|im_start|> and
//           <|im_end|> (with_chat_tokens): each message is
//               <|im_start|>{role}\n{content}<|im_end|>\n
//           and a reply starts after "<|im_start|>assistant\n" and ends at <|im_end|>.
//           This is the template Qwen and SmolLM use and llama.cpp knows.
//   plain   for a base model without them: the text "User:\n...\n\nAssistant:\n", which
//           a model trained on scripts may continue; its reply ends at a blank line.
//
// A marker typed inside a message ("<|im_end|>" as text) is encoded as ordinary text:
// only the template puts the control tokens, so content cannot forge a turn.
//
// What it holds:
//   ChatMessage, ChatTokens       a message; the two control ids
//   with_chat_tokens              any tokenizer, plus the two control tokens (and the template)
//   render_chat                   messages -> ids (+ per-token loss weights)
//   plain_chat_prompt             the plain template's text
//   chat_prompt_for               either template, for a model's next reply
//   chat_context_overflow         whether that prompt fits the model's context, or why not
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer.h"

namespace folio {

inline constexpr const char* kImStart = "<|im_start|>";
inline constexpr const char* kImEnd = "<|im_end|>";
// The template as HF's tokenizer_config.json and GGUF's tokenizer.chat_template carry it
// (a Jinja string); stored in the checkpoint's tokenizer metadata under "chat_template".
extern const char* const kChatMlJinja;

struct ChatMessage {
  std::string role;     // "system", "user" or "assistant"
  std::string content;
  bool trained = true;  // an assistant message's "weight": 0 leaves it out of the loss
};

// `base` with two control ids after its own: <|im_start|> = base.vocab_size() and
// <|im_end|> = base.vocab_size() + 1. encode() is the base's (text stays text); the
// control ids decode to nothing. Its metadata is the base's plus the template, so a
// checkpoint's load_tokenizer gives it back. A tokenizer that has them already is copied.
std::unique_ptr<Tokenizer> with_chat_tokens(const Tokenizer& base);
// The tokenizer a chat tokenizer adds its two tokens to; `t` itself for any other.
const Tokenizer& chat_base(const Tokenizer& t);
// load_tokenizer's wrapping of a kind's tokenizer whose metadata holds a chat template.
std::unique_ptr<Tokenizer> wrap_chat_tokens(std::unique_ptr<Tokenizer> base, const TokenizerMetadata& metadata,
                                            const std::string& where);

struct RenderedChat {
  std::vector<int32_t> ids;     // (L,)
  std::vector<uint8_t> weights; // (L,) 1: a token the loss counts as a target (assistant content and its <|im_end|>)
};
// The ChatML tokens of `messages` (the tokenizer must have chat tokens), then, with
// `generation_prompt`, "<|im_start|>assistant\n". The text between two control tokens
// is encoded as one piece, as llama.cpp tokenizes a rendered template. An assistant
// token is weighted when it holds a byte of the content (a piece that merges the
// "assistant\n" header with the content's first bytes counts). Roles other than
// system, user and assistant throw "[chat] ...".
RenderedChat render_chat(const Tokenizer& tokenizer, std::span<const ChatMessage> messages, bool generation_prompt);

// The plain template for a base model: "System:"/"User:"/"Assistant:" turns, each a
// label line, the text and a blank line, then "Assistant:\n" (roles system, developer,
// user, assistant; another throws "[chat] ...").
std::string plain_chat_prompt(std::span<const ChatMessage> messages);
inline constexpr const char* kPlainTurnEnd = "\n\n";  // where a plain reply ends: the next speaker

// What a front end (folio chat, the Python module) feeds a model for its next reply:
// the ChatML prompt of a chat model, whose reply ends at `end_token`, or a base model's
// plain prompt, whose reply ends at the first of `stops`.
struct ChatPrompt {
  std::vector<int32_t> ids;  // (L,)
  std::optional<int32_t> end_token;
  std::vector<std::string> stops;
  bool plain = false;  // the base model's plain template
};
ChatPrompt chat_prompt_for(const Tokenizer& tokenizer, std::span<const ChatMessage> messages);

// The one rule folio chat, /v1/chat/completions and model.chat apply before a model reads
// a conversation: its prompt (the template included) and the reply's first token must fit
// in the model's context of block_size tokens, as llama-server requires (its prompt must
// be shorter than the context). The generator keeps a prompt's last block_size tokens, so
// a conversation that does not fit would lose its system message and the template's start
// without a word: it is refused instead. A longer reply is not counted against the context
// (OpenAI counts max_tokens): folio's generation slides its window past block_size, as a
// plain completion's does, and a client's default max_tokens would refuse every chat.
// nullopt when it fits; otherwise why not, in OpenAI's words for context_length_exceeded
// (which clients recognize).
std::optional<std::string> chat_context_overflow(int64_t prompt_tokens, int64_t block_size);

}  // namespace folio
