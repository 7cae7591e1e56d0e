#pragma once
// The model checkpoint: weights, the model config and the tokenizer, in one file.
// A run directory holds
//   model.safetensors  weights under their parameter names; __metadata__ has the
//                      model config (JSON), the tokenizer (data/tokenizer.h: a char
//                      vocabulary as UTF-8 under "vocab", or "tokenizer": "spm" and its
//                      model in "tokenizer_model") and the step.
//                      A tied model (tie_weights) holds its one (V, C) matrix once, as
//                      token_embedding.weight, and no lm_head.weight (lm_head.bias
//                      stays); a rope model has no position_embedding.weight.
//   best.safetensors   the same, for the lowest validation loss so far
//   state.safetensors  what --resume needs (train/run_state.h writes and reads it)
// Everything read back is validated; errors name the file and the field.
#include <memory>
#include <string>

#include "base/error.h"
#include "data/tokenizer.h"
#include "nn/transformer.h"
#include "io/config_json.h"

namespace folio {

struct ModelCheckpoint {
  std::unique_ptr<nn::GPT> model;
  std::shared_ptr<const Tokenizer> tokenizer;  // its vocab_size() is the model's
  int64_t step = 0;
  std::string path;  // the .safetensors file it came from
};

// What a model checkpoint's header says: all of it but the weights.
struct CheckpointHeader {
  nn::GPTConfig config;
  std::shared_ptr<const Tokenizer> tokenizer;  // its vocab_size() is config.vocab_size
  int64_t step = 0;
  std::string path;  // the .safetensors file it came from
};

// A run directory means DIR/model.safetensors; a file path is taken as is.
std::string model_file(const std::string& path);

void save_model(const std::string& file, const nn::GPT& model, const Tokenizer& tokenizer, int64_t step);
ModelCheckpoint load_model(const std::string& path);
// A checkpoint's header alone, for what needs no weight (folio info, folio tokens, the
// options of --resume): ~0.5 GB of GPT-2 small's weights not read. The header is
// validated as load_model validates it, down to the tensors' total size against the
// config (a damaged or cut-short file throws the same Error); the tensors' names and
// shapes are checked, and their values (NaN) seen, only where the weights are read.
CheckpointHeader load_checkpoint_header(const std::string& path);
// Its step alone (a run's best.safetensors in folio info).
int64_t checkpoint_step(const std::string& path);

}  // namespace folio
