#pragma once
// What a run reads when --data names a conversation file (.jsonl, io/conversation_file.h)
// instead of a text or token directory, and the few places where the trainer treats
// conversations apart: a batch is one conversation a row (data/conversations.h), and a
// share of it weighs by the targets the loss counts, not by rows.
//
// The tokenizer: a run --init-from a base checkpoint takes its tokenizer and adds the
// chat template's two control tokens (data/chat_template.h; the model's rows grow,
// train/init_from.h); a new run trains its tokenizer (--tokenizer) on the
// conversations' text and adds them; a resumed run has them already.
#include <cstdint>
#include <memory>
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

// The part of the mean loss over a batch's rows that rows [b0, b1) carry: their rows'
// share, or, for conversations, their share of the targets the loss counts (0 when
// the batch counts none), so that ranks and shards sum to the whole batch's mean.
float batch_share(const TrainingData& data, const Batch& batch, int64_t b0, int64_t b1);

// One line for the start of a run on conversations (how many, the targets counted and
// masked, the padding), "" for other data.
std::string describe_conversations(const TrainingData& data, int64_t block_size);

}  // namespace folio
