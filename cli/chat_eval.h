#pragma once
// folio eval --data FILE.jsonl: the loss of a chat model over the assistant tokens of
// conversations (the targets a chat fine-tune trains on: data/conversations.h).
#include <functional>
#include <memory>

#include "cli/common.h"
#include "io/checkpoint.h"

namespace folio::cli {

// The run for `folio eval` when the data (--data, or the run's) is a conversation file at
// `path`, its last `val_fraction` of conversations the val split; `ck` must be a chat
// model (its tokenizer has the template's tokens: UsageError otherwise).
std::function<int()> prepare_chat_eval(const po::variables_map& vm, std::shared_ptr<ModelCheckpoint> ck,
                                       const std::string& path, double val_fraction);

}  // namespace folio::cli
