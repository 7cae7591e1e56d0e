#pragma once
// Conversations as training data: rendered by the chat template (data/chat_template.h)
// into ids and per-token loss weights, split train/val by conversation (never inside
// one), and laid out ONE CONVERSATION TO A ROW of a batch, padded after its end.
//
// Why one to a row: nothing attends across a conversation's boundary without a
// document mask in attention, and a row's padding sits after its last token, where the
// causal mask keeps every real token from seeing it. Its targets are masked, so the
// padding costs compute, not correctness. A conversation longer than the context
// (block_size + 1 tokens) is refused, naming its line: cutting it would train on a
// reply without its end, or on a turn without its question. (During a --seq-warmup,
// whose windows are shorter, rows are cut.)
//
// Why padding stays cheap: a batch is padded to its longest row, not to the context
// (nanochat's SFT pads so), rounded up to a multiple of a stage (an eighth of the
// context, train/size_warmups.h) so that a run makes at most eight or nine shapes for the
// buffer pool and oneDNN to keep; and with random sampling, a batch's rows are drawn
// from one group of similar lengths (LengthGroups), so the rows of a batch need about
// the same window. Every row is still drawn uniformly: only which rows share a batch
// changes.
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

// The window row `ids` needs in a batch of context T: its ids less one (the last has no
// target), rounded up to a multiple of `stage`, at most T.
int64_t chat_window(size_t ids, int64_t T, int64_t stage);

// A split's rows grouped by chat_window(): group g holds the rows whose window is
// (g + 1) * stage (or T). A batch drawn from one group is padded to that window and
// wastes less than a stage a row.
class LengthGroups {
 public:
  LengthGroups(const ChatSplitRows& split, int64_t T, int64_t stage);
  int64_t stage() const { return stage_; }
  int64_t group_of(int64_t row) const { return group_of_[size_t(row)]; }
  std::span<const int64_t> members(int64_t group) const;  // the rows of `group`, in file order

 private:
  int64_t stage_;
  std::vector<int64_t> group_of_;  // (rows,)
  std::vector<int64_t> sorted_;    // (rows,) the rows, group after group
  std::vector<int64_t> begin_;     // (groups + 1,) where each group starts in sorted_
};

struct ChatData {
  ChatSplitRows train, val;
  std::string path;
  // The fraction of a training batch's positions that are padding, expected over the
  // train split, for batches of B rows of context T padded to their longest row
  // (rounded up to `stage`): drawn uniformly and independently (`grouped` false), or
  // from one LengthGroups group (true).
  double padding(int64_t T, int64_t stage, int64_t B, bool grouped) const;
  // Throws "[data] <path>:<line>: the conversation has N tokens, more than block_size + 1
  // = M" for the first row too long for the model's context.
  void check_fits(int64_t block_size) const;
  // What --resume compares with the run's (train/trainer.cpp), as a token directory's
  // manifest fingerprint: 16 hex digits over both splits' rows, their ids and weights
  // in order. The rows, not the file's bytes: they are what batches are made of, so an
  // edited reply, a moved split (--train-fraction) or another tokenizer changes it,
  // and a blank line or reordered JSON keys, which change no batch, do not.
  std::string fingerprint() const;
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
// role lines, as the template will write them (the control tokens aside), after the
// three roles' lines once, so that the model can render a role its data lacks (a
// system message given to folio chat, serve or model.chat).
std::string conversations_text(std::span<const std::vector<ChatMessage>> conversations);

// Fills a batch of B rows, row b with conversation pick() (called B times, in order
// b = 0..B-1): its first T' + 1 tokens, then padding; targets of weight 0 and past its
// end are kMaskedTarget. T' is the longest row's chat_window(): the batch is sized
// (B, T'), T' <= T. Returns the positions that are padding.
int64_t fill_chat_batch(const ChatSplitRows& split, int64_t B, int64_t T, const std::function<int64_t(int64_t n)>& pick,
                        Batch& batch, int64_t stage = 1);
// The same with rows of similar length together: row 0 is pick(n), the others are
// pick(m)'s of the m rows in its group. With pick uniform (random sampling), every row is
// drawn uniformly, as fill_chat_batch draws it; the batch's window is its group's.
int64_t fill_grouped_chat_batch(const ChatSplitRows& split, const LengthGroups& groups, int64_t B, int64_t T,
                                const std::function<int64_t(int64_t n)>& pick, Batch& batch);

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
  std::string fingerprint() const override { return chat_->fingerprint(); }
  const std::shared_ptr<const ChatData>& chat() const { return chat_; }

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::shared_ptr<const ChatData> chat_;
  TokenSequence train_, val_;
};

}  // namespace folio
