// The chat template (data/chat_template.h): the tokenizer with ChatML's two control
// tokens, and the one function that renders a conversation into ids.
#include "data/chat_template.h"

#include "base/error.h"
#include "data/tokenizer_kind.h"

namespace folio {

const char* const kChatMlJinja =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

namespace {

// Any tokenizer and two control ids after its own. Everything but those two ids is the
// base's, so a model --init-from a base checkpoint keeps reading its text as before.
class ChatTokenizer final : public Tokenizer {
 public:
  explicit ChatTokenizer(std::unique_ptr<Tokenizer> base) : base_(std::move(base)), n_(base_->vocab_size()) {}
  const char* kind() const override { return base_->kind(); }
  int vocab_size() const override { return n_ + 2; }
  std::vector<int32_t> encode(std::string_view utf8) const override { return base_->encode(utf8); }
  std::string decode(std::span<const int32_t> ids) const override {
    std::string text;
    for (const int32_t id : ids) text += token_bytes(id);
    return text;
  }
  std::string token_bytes(int32_t id) const override {
    if (id == n_ || id == n_ + 1) return "";  // a control token adds no text
    return base_->token_bytes(id);
  }
  std::optional<int32_t> end_of_text() const override { return base_->end_of_text(); }
  std::optional<int32_t> prompt_start() const override { return base_->prompt_start(); }
  std::optional<ChatTokens> chat_tokens() const override { return ChatTokens{n_, n_ + 1}; }
  std::string describe() const override { return cat(base_->describe(), ", chat tokens ", kImStart, " ", kImEnd); }
  TokenizerMetadata metadata() const override {
    TokenizerMetadata m = base_->metadata();
    m.emplace_back("chat_template", kChatMlJinja);
    return m;
  }
  // The base's SentencePiece model with the two control tokens at their ids, as
  // USER_DEFINED pieces: spm_encode of a conversation rendered as text (the Jinja
  // template) gives render_chat's ids. Unlike encode(), it reads a marker typed in the
  // text as the token, as llama.cpp and HF's tokenizers read a rendered template.
  std::optional<std::string> export_model() const override {
    if (!has_spm_base()) return std::nullopt;
    return spm_model_with_user_pieces(*base_->export_model(), kPieces);
  }
  bool has_model_file() const override {
    return has_spm_base() && !spm_user_pieces_refusal(*base_->export_model(), kPieces);
  }
  std::optional<TokenizerSpec> as_flags() const override { return std::nullopt; }
  const Tokenizer& base() const { return *base_; }

 private:
  static constexpr std::string_view kPieces[] = {kImStart, kImEnd};
  // A SentencePiece model, whose export_model() is the model as it is (a copy).
  bool has_spm_base() const { return base_->has_model_file() && std::string_view(base_->kind()) == "spm"; }
  std::unique_ptr<Tokenizer> base_;
  int32_t n_;  // the base's vocabulary: <|im_start|>'s id
};

// The role a message is rendered as. "developer" is OpenAI's newer name for the system
// message (its API's clients send it): both templates render it as one, in every front end.
std::string template_role(const std::string& role) {
  if (role == "system" || role == "developer") return "system";
  if (role == "user" || role == "assistant") return role;
  fail("chat", "role must be system, developer, user or assistant, got \"", role.substr(0, 40), "\"");
}

// Text the tokenizer cannot encode is named where it was typed: its message, and the
// character's place in that content, not in the template's text around it (the "user\n"
// before it would shift every position). Called once the rendered text has failed:
// throws for the first of `messages` (the first numbered `first`) whose content alone
// cannot be encoded, and returns if each can (the template's own text is at fault: a
// role's name, with a character the vocabulary of a model --init-from lacks).
void name_unencodable_message(const Tokenizer& tokenizer, std::span<const ChatMessage> messages, size_t first) {
  for (size_t i = 0; i < messages.size(); ++i) {
    try {
      tokenizer.encode(messages[i].content);
    } catch (const Error& e) {
      fail("chat", "message ", first + i, " (", messages[i].role.substr(0, 40), "): ", e.what());
    }
  }
}

}  // namespace

std::unique_ptr<Tokenizer> with_chat_tokens(const Tokenizer& base) {
  std::unique_ptr<Tokenizer> copy = load_tokenizer(base.metadata(), "the tokenizer");
  if (copy->chat_tokens()) return copy;
  if (base.vocab_size() + 2 > TokenizerSpec::kMaxVocab)
    fail("chat", "the tokenizer has ", base.vocab_size(), " ids: no room for two chat tokens");
  return std::make_unique<ChatTokenizer>(std::move(copy));
}

const Tokenizer& chat_base(const Tokenizer& t) {
  const auto* chat = dynamic_cast<const ChatTokenizer*>(&t);
  return chat ? chat->base() : t;
}

std::unique_ptr<Tokenizer> wrap_chat_tokens(std::unique_ptr<Tokenizer> base, const TokenizerMetadata& metadata,
                                            const std::string& where) {
  const std::string* chat = find_entry(metadata, "chat_template");
  if (!chat) return base;
  if (*chat != kChatMlJinja)
    fail("checkpoint", where, ": __metadata__.chat_template is not ChatML's template, the one this folio applies");
  return std::make_unique<ChatTokenizer>(std::move(base));
}

RenderedChat render_chat(const Tokenizer& tokenizer, std::span<const ChatMessage> messages, bool generation_prompt) {
  const std::optional<ChatTokens> ct = tokenizer.chat_tokens();
  if (!ct) fail("chat", "the tokenizer (", tokenizer.describe(), ") has no chat tokens: a base model's template is plain");
  RenderedChat out;
  auto put = [&](int32_t id, uint8_t w) {
    out.ids.push_back(id);
    out.weights.push_back(w);
  };
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const std::string role = template_role(m.role);
    const bool weighted = role == "assistant" && m.trained;
    put(ct->start, 0);
    const std::string header = role + "\n";
    std::vector<int32_t> ids;
    try {
      ids = tokenizer.encode(header + m.content);
    } catch (const Error& e) {
      name_unencodable_message(tokenizer, std::span(&m, 1), i);
      fail("chat", "message ", i, ": the template's line \"", role, "\" cannot be encoded: ", e.what());
    }
    size_t bytes = 0;  // where each token ends in header + content
    for (const int32_t id : ids) {
      bytes += tokenizer.token_bytes(id).size();
      put(id, weighted && bytes > header.size() ? 1 : 0);
    }
    put(ct->end, weighted ? 1 : 0);
    for (const int32_t id : tokenizer.encode("\n")) put(id, 0);
  }
  if (generation_prompt) {
    put(ct->start, 0);
    for (const int32_t id : tokenizer.encode("assistant\n")) put(id, 0);
  }
  return out;
}

std::string plain_chat_prompt(std::span<const ChatMessage> messages) {
  std::string prompt;
  for (const ChatMessage& m : messages) {
    const std::string role = template_role(m.role);
    const char* label = role == "user" ? "User" : role == "assistant" ? "Assistant" : "System";
    prompt += cat(label, ":\n", m.content, kPlainTurnEnd);
  }
  return prompt + "Assistant:\n";
}

ChatPrompt chat_prompt_for(const Tokenizer& tokenizer, std::span<const ChatMessage> messages) {
  ChatPrompt p;
  if (const std::optional<ChatTokens> ct = tokenizer.chat_tokens()) {
    p.ids = render_chat(tokenizer, messages, true).ids;
    p.end_token = ct->end;
    return p;
  }
  const std::string text = plain_chat_prompt(messages);
  try {
    p.ids = tokenizer.encode(text);
  } catch (const Error&) {
    name_unencodable_message(tokenizer, messages, 0);
    throw;
  }
  if (const std::optional<int32_t> bos = tokenizer.prompt_start()) p.ids.insert(p.ids.begin(), *bos);
  p.stops = {kPlainTurnEnd};
  p.plain = true;
  return p;
}

std::optional<std::string> chat_context_overflow(int64_t prompt_tokens, int64_t block_size) {
  if (prompt_tokens < block_size) return std::nullopt;
  return cat("This model's maximum context length is ", block_size, " tokens. However, your messages resulted in ",
             prompt_tokens, " tokens (the chat template included), and the reply needs at least 1 more. Please "
             "reduce the length of the messages.");
}

}  // namespace folio
