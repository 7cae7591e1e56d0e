#pragma once
// Checkpoints. A run directory holds
//   model.safetensors  weights under their parameter names; __metadata__ has the
//                      model config (JSON), the tokenizer (data/tokenizer.h: a char
//                      vocabulary as UTF-8 under "vocab", or "tokenizer": "spm" and its
//                      model in "tokenizer_model") and the step.
//                      A tied model (tie_weights) holds its one (V, C) matrix once, as
//                      token_embedding.weight, and no lm_head.weight (lm_head.bias
//                      stays); a rope model has no position_embedding.weight.
//   best.safetensors   the same, for the lowest validation loss so far
//   state.safetensors  what --resume needs: AdamW moments (and Muon's momentum), step,
//                      RNG states, the best validation loss, the training time and
//                      the training options
// Everything read back is validated; errors name the file and the field.
#include <memory>
#include <string>

#include "base/error.h"
#include "data/tokenizer.h"
#include "nn/transformer.h"
#include "io/config_json.h"
#include "train/optimizer.h"
#include "train/config.h"

namespace folio {

struct ModelCheckpoint {
  std::unique_ptr<nn::GPT> model;
  std::shared_ptr<const Tokenizer> tokenizer;  // its vocab_size() is the model's
  int64_t step = 0;
  std::string path;  // the .safetensors file it came from
};

// A run directory means DIR/model.safetensors; a file path is taken as is.
std::string model_file(const std::string& path);

void save_model(const std::string& file, const nn::GPT& model, const Tokenizer& tokenizer, int64_t step);
ModelCheckpoint load_model(const std::string& path);

struct TrainState {
  int64_t step = 0;
  float best_val_loss = 0;
  Rng::State data_rng{}, dropout_rng{};
  TrainConfig config;
  int64_t adamw_steps = 0;
  std::vector<float> adamw_m, adamw_v;  // flat, in the order of AdamW's parameters
  std::vector<float> muon_momentum;     // config.optimizer muon: flat, in Muon's matrix order
  double train_seconds = 0;             // the steps' time so far (train/config.h: max_time)
  // Where --sampling epoch is in its pass (data/batch_sampler.h), and the token
  // directory's fingerprint ("" for a text file): absent from older runs.
  int64_t data_epoch = 0, data_position = 0;
  std::string data_fingerprint;
  std::vector<float> ema_weights;  // config.ema > 0: (P,) the average of the weights, flat
};

void save_state(const std::string& file, const TrainState& state);
TrainState load_state(const std::string& file);

// Puts the saved moments (and momentum) into `optimizer`, checking they fit its parameters.
void restore_optimizer(const TrainState& state, Optimizer& optimizer, const std::string& file);

}  // namespace folio
