#pragma once
// The model a run started --init-from a checkpoint begins with: the checkpoint's
// weights and model options, this run's seed (for dropout's draws) and, when given,
// its dropout.
//
// The run's data may add ids to the checkpoint's vocabulary: end-of-text, which a
// token directory puts between documents (a char checkpoint has none; folio tokenize
// --tokenizer-from gives the directory its characters and that id), or the chat
// template's two control tokens, which conversations add (data/chat_template.h). Every
// table indexed by token then grows by the new ids' rows: the token embedding, the output
// layer (weight and bias), the value embeddings, the multi-token head and the bigram
// table. The new rows start as the mean of the table's old rows (as Hugging Face's
// resize_token_embeddings does), so the new token starts as an average one rather than
// a random one; everything else is the checkpoint's, unchanged.
#include <memory>
#include <string>

#include "io/checkpoint.h"
#include "nn/transformer.h"

namespace folio {

struct InitModel {
  std::unique_ptr<nn::GPT> model;
  std::string note;  // "" or, when the vocabulary grew, a line that says so
};

// `vocab_size`: the run's, the checkpoint's or one or two more. Errors: "[train] ...".
InitModel model_from(const ModelCheckpoint& ck, const nn::GPTConfig& given, bool dropout_given, int64_t vocab_size);

}  // namespace folio
