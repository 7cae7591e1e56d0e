#pragma once
// Conversations as training data: rendered by the chat template (data/chat_template.h)
// into ids and per-token loss weights, split train/val by conversation (never inside
// one), and laid out ONE CONVERSATION TO A ROW of a batch, padded after its end.
//
// Why one to a row: nothing attends across a conversation's boundary without a
// document mask in attention, and a row's padding sits after its last token, where the
// causal mask keeps every real token from seeing it. Its targets are masked, so the
// padding costs compute, not correctness; ChatData::padding() measures how much.
// A conversation longer than the context (block_size + 1 tokens) is refused, naming its
// line: cutting it would train on a reply without its end, or on a turn without its
// question. (During a --seq-warmup, whose windows are shorter, rows are cut.)
//
// A row's target at t is the id at t + 1 when its weight is 1, else kMaskedTarget: the
// loss (cross_entropy) leaves it out of its mean and gradient.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "data/batch_sampler.h"
#include "data/chat_template.h"
#include "data/token_source.h"

namespace folio {

inline constexpr int32_t kMaskedTarget = -1;  // autograd/ops.h's kNoTarget: a target the loss leaves out

struct ChatSplitRows {
  std::vector<RenderedChat> rows;  // one conversation each
  std::vector<int64_t> lines;      // (rows,) where each was in its file
  int64_t trained = 0, masked = 0; // targets (positions 1..L-1) the loss counts / leaves out
  std::vector<int32_t> flat;       // every row's ids one after another: the split's tokens
};

struct ChatData {
  ChatSplitRows train, val;
  std::string path;
  // The fraction of a batch's T positions a row leaves unused (padding), over the
  // train split, for windows of T = block_size.
  double padding(int64_t block_size) const;
  // Throws "[data] <path>:<line>: the conversation has N tokens, more than block_size + 1
  // = M" for the first row too long for the model's context.
  void check_fits(int64_t block_size) const;
};

// The rows of `conversations` (each with its line, for errors), in order.
ChatSplitRows render_rows(const Tokenizer& tokenizer, std::span<const std::vector<ChatMessage>> conversations,
                          std::span<const int64_t> lines, const std::string& path);
// Renders `conversations` (each with its line) with `tokenizer`, which must have chat
// tokens: the first floor(n * train_fraction) train, the rest validate; both must hold
// one at least. Errors name the path and the line.
ChatData render_conversations(const Tokenizer& tokenizer, std::span<const std::vector<ChatMessage>> conversations,
                              std::span<const int64_t> lines, double train_fraction, const std::string& path);

// The text a new run's tokenizer learns from: the conversations' messages with their
// role lines, as the template will write them (the control tokens aside).
std::string conversations_text(std::span<const std::vector<ChatMessage>> conversations);

// Sizes `batch` to (B, T) and fills every row b with conversation pick(): its first
// T + 1 tokens, then padding; targets of weight 0 and past its end are kMaskedTarget.
void fill_chat_batch(const ChatSplitRows& split, int64_t B, int64_t T, const std::function<int64_t(int64_t n)>& pick,
                     Batch& batch);

// The targets a batch's rows [row_begin, row_end) hold that the loss counts.
int64_t counted_targets(const Batch& batch, int64_t row_begin, int64_t row_end);

// Conversations as a TokenSource (data/token_source.h): the splits' tokens are the rows
// one after another (for counts); the trainer draws rows from chat().
class ConversationTokens final : public TokenSource {
 public:
  ConversationTokens(std::shared_ptr<const Tokenizer> tokenizer, std::shared_ptr<const ChatData> chat)
      : tokenizer_(std::move(tokenizer)), chat_(std::move(chat)), train_(chat_->train.flat), val_(chat_->val.flat) {}
  std::shared_ptr<const Tokenizer> tokenizer() const override { return tokenizer_; }
  const TokenSequence& train() const override { return train_; }
  const TokenSequence& val() const override { return val_; }
  TextSize text_size() const override { return {}; }
  const std::string& path() const override { return chat_->path; }
  std::string kind() const override { return "conversations"; }
  std::string fingerprint() const override { return ""; }
  const std::shared_ptr<const ChatData>& chat() const { return chat_; }

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::shared_ptr<const ChatData> chat_;
  TokenSequence train_, val_;
};

}  // namespace folio
