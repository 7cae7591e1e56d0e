#pragma once
// What a run reads when --data names a conversation file (.jsonl, io/conversation_file.h)
// instead of a text or token directory, and the few places where the trainer treats
// conversations apart: a batch is one conversation a row padded to its longest
// (data/conversations.h, ChatBatches below), and a share of it weighs by the targets
// the loss counts, not by rows.
//
// The tokenizer: a run --init-from a base checkpoint takes its tokenizer and adds the
// chat template's two control tokens (data/chat_template.h; the model's rows grow,
// train/init_from.h); a new run trains its tokenizer (--tokenizer) on the
// conversations' text and adds them; a resumed run has them already.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "data/batch_sampler.h"
#include "data/conversations.h"
#include "data/dataset.h"

namespace folio {

// Any --data: conversations, else TrainingData::open's text or token directory.
TrainingData open_training_data(const std::string& path, double train_fraction, const TokenizerSpec& spec);
TrainingData open_training_data(const std::string& path, double train_fraction,
                                std::shared_ptr<const Tokenizer> tokenizer, const std::string& checkpoint,
                                bool may_grow = false);

// Every split holds a window of block_size + 1 tokens (text), or every conversation fits
// in one (conversations). Throws "[data] ...".
void check_windows(const TrainingData& data, int64_t block_size);

// Whether two --data paths name the same file or directory.
bool same_data_path(const std::string& a, const std::string& b);

// What a --data path holds, by its name and what is there now: conversations (FILE.jsonl),
// a token directory, a text, or nothing any more (moved away since the run recorded it).
enum class DataPathKind { conversations, token_directory, text, missing };
DataPathKind data_path_kind(const std::string& path);

// --resume's check that `data` is what the run trained on: its fingerprint is the one
// the run's state recorded (`recorded`, when its --data was `recorded_path`). Throws
// "[data] <data.path>: ..." otherwise, offering a new run --init-from `model_file`.
// A text other than the run's is not compared: --data naming other data is the
// caller's warning. Returns the warning for what could not be checked (a state an
// older folio saved records no fingerprint of a text or of conversations), else "".
std::string check_resumed_data(const TrainingData& data, const std::string& recorded, const std::string& recorded_path,
                               const std::string& model_file);

// The part of the mean loss over a batch's rows that rows [b0, b1) carry: their rows'
// share, or, for conversations, their share of the targets the loss counts (0 when
// the batch counts none), so that ranks and shards sum to the whole batch's mean.
float batch_share(const TrainingData& data, const Batch& batch, int64_t b0, int64_t b1);

// How a run lays its conversations out in batches (data/conversations.h): each batch
// padded to its longest row, rounded up to a multiple of seq_warmup_stage(block_size)
// (train/size_warmups.h: the shapes a run makes stay few); with random sampling, a
// training batch's rows drawn from one LengthGroups group. Epoch sampling keeps its
// shuffled pass over every conversation, so its batches mix lengths. Every rank draws
// the same rows, so their windows agree; a resumed run draws what the straight one does.
class ChatBatches {
 public:
  ChatBatches(std::shared_ptr<const ChatData> chat, int64_t block_size, Sampling sampling);
  // The next training batch: B rows drawn with `sampler`, windows of at most T (a
  // --seq-warmup's). Counts its targets, positions and padding.
  void next(BatchSampler& sampler, int64_t B, int64_t T, Batch& batch);
  // A batch of B rows of `split` drawn uniformly with `rng`, for an evaluation.
  void evaluation(const ChatSplitRows& split, int64_t B, Rng& rng, Batch& batch) const;
  // The start's line: how many conversations, the targets counted and masked, and the
  // padding a batch of B rows is expected to hold.
  std::string describe(int64_t B) const;
  // The end's line: the targets this process's steps counted, and the positions masked
  // and padded.
  std::string summary() const;

 private:
  std::shared_ptr<const ChatData> chat_;
  int64_t block_size_, stage_;
  std::optional<LengthGroups> groups_;  // random sampling only
  int64_t counted_ = 0, positions_ = 0, padding_ = 0;
};

}  // namespace folio
