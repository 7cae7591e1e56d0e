#pragma once
// Checkpoints. A run directory holds
//   model.safetensors  weights under their parameter names; __metadata__ has the
//                      model config (JSON), the vocabulary (UTF-8) and the step
//   best.safetensors   the same, for the lowest validation loss so far
//   state.safetensors  what --resume needs: AdamW moments, step, RNG states, the
//                      best validation loss and the training options
// Everything read back is validated; errors name the file and the field.
#include <memory>
#include <string>

#include "data/vocab.h"
#include "nn/transformer.h"
#include "train/adamw.h"
#include "train/json.h"

namespace folio {

// The options of a training run other than the model's shape.
struct TrainConfig {
  std::string data;             // corpus path
  double train_fraction = 0.9;
  int64_t batch_size = 12;
  int64_t max_iters = 2000;
  int64_t warmup_iters = 100;
  int64_t lr_decay_iters = 0;   // the cosine reaches min_lr here; 0: at max_iters
  int64_t eval_interval = 250;
  int64_t eval_iters = 50;
  int64_t log_interval = 50;
  float lr = 1e-3f, min_lr = 1e-4f;
  float weight_decay = 0.1f, beta2 = 0.99f, grad_clip = 1.0f;
  uint64_t seed = 1337;
  // Precision of the matrix products (autograd/ops.h); weights, moments and
  // checkpoints stay fp32 either way. Absent from runs saved before it existed: fp32.
  Precision dtype = Precision::fp32;
  void validate() const;  // throws "[config] <field> ..." for out-of-range values
};

Json to_json(const nn::GPTConfig& c);
Json to_json(const TrainConfig& c);
// `where` names the file for error messages.
nn::GPTConfig model_config_from_json(const Json& j, const std::string& where);
TrainConfig train_config_from_json(const Json& j, const std::string& where);

struct ModelCheckpoint {
  std::unique_ptr<nn::GPT> model;
  Vocab vocab;
  int64_t step = 0;
  std::string path;  // the .safetensors file it came from
};

// A run directory means DIR/model.safetensors; a file path is taken as is.
std::string model_file(const std::string& path);

void save_model(const std::string& file, const nn::GPT& model, const Vocab& vocab, int64_t step);
ModelCheckpoint load_model(const std::string& path);

struct TrainState {
  int64_t step = 0;
  float best_val_loss = 0;
  Rng::State data_rng{}, dropout_rng{};
  TrainConfig config;
  int64_t adamw_steps = 0;
  std::vector<float> adamw_m, adamw_v;  // flat, in parameter order
};

void save_state(const std::string& file, const TrainState& state);
TrainState load_state(const std::string& file);
// Puts the saved moments into `optimizer`, checking they fit its parameters.
void restore_optimizer(const TrainState& state, AdamW& optimizer, const std::string& file);

}  // namespace folio
