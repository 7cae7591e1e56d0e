#pragma once
// FeedForward, Block and the character-level GPT.
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nn/attention.h"

namespace folio::nn {

enum class Activation { gelu, relu };
const char* to_string(Activation a);                                // "gelu", "relu"
std::optional<Activation> parse_activation(std::string_view name);  // nullopt: neither

// x (B, T, C) -> Linear C->4C -> activation -> Linear 4C->C -> dropout -> (B, T, C)
class FeedForward : public Module {
 public:
  FeedForward(int64_t n_embd, float dropout, bool bias, Activation act, Arena arena,
              std::shared_ptr<Rng> dropout_rng = std::make_shared<Rng>(0));
  FeedForward(int64_t n_embd, float dropout, bool bias, Activation act, Rng& init,
              std::shared_ptr<Rng> dropout_rng = std::make_shared<Rng>(0));
  static int64_t parameter_count(int64_t n_embd, bool bias) {
    return Linear::parameter_count(n_embd, 4 * n_embd, bias) + Linear::parameter_count(4 * n_embd, n_embd, bias);
  }
  Tensor forward(const Tensor& x) const;
  std::shared_ptr<Linear> fc, proj;

 private:
  Activation act_;
  std::shared_ptr<Dropout> dropout_;
};

// Pre-LayerNorm residual block: x + attn(ln1(x)), then x + ffwd(ln2(x)).
class Block : public Module {
 public:
  Block(int64_t n_embd, int64_t n_head, int64_t block_size, float dropout, bool bias, Activation act,
        Arena arena, std::shared_ptr<Rng> dropout_rng = std::make_shared<Rng>(0));
  Block(int64_t n_embd, int64_t n_head, int64_t block_size, float dropout, bool bias, Activation act,
        Rng& init, std::shared_ptr<Rng> dropout_rng = std::make_shared<Rng>(0));
  static int64_t parameter_count(int64_t n_embd, int64_t n_head, bool bias) {  // n_head >= 1
    return 2 * LayerNorm::parameter_count(n_embd) + MultiHead::parameter_count(n_embd, n_head, n_embd / n_head, bias) +
           FeedForward::parameter_count(n_embd, bias);
  }
  Tensor forward(const Tensor& x, Tensor* attention = nullptr) const;  // attention: see MultiHead
  Tensor forward_cached(const Tensor& x, KVCache& cache) const;
  std::shared_ptr<LayerNorm> ln1, ln2;
  std::shared_ptr<MultiHead> attn;
  std::shared_ptr<FeedForward> ffwd;
};

struct GPTConfig {
  int64_t vocab_size = 65;
  int64_t block_size = 64;
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;
  float dropout = 0.0f;
  bool bias = true;  // on every Linear but key/query/value (LayerNorms always have one)
  // ReLU by default: on tiny Shakespeare (config S, 2000 steps) it reached val loss
  // 1.771 / 1.779 (seeds 1337 / 42) against GELU's 1.854 / 1.850.
  Activation activation = Activation::relu;
  uint64_t seed = 1337;  // initialisation
  void validate() const;  // throws naming the bad field
  // The number of parameters a GPT of this config has, computed without building it
  // (so a checkpoint's claim can be checked before anything is allocated).
  int64_t parameter_count() const;
};

// Token + learned position embeddings -> n_layer Blocks -> LayerNorm -> Linear onto V.
class GPT : public Module {
 public:
  // Fresh weights, drawn from config.seed.
  explicit GPT(const GPTConfig& config);
  // Parameters from `arena`, which holds config.parameter_count() of them: a replica
  // passes Arena::sharing(model.flat_parameters()).
  GPT(const GPTConfig& config, Arena arena);

  struct Output {
    Tensor logits;  // (B, T, V)
    Tensor loss;    // () mean cross-entropy, when targets were given
  };
  // ids and targets: (B, T) row-major, T <= block_size. With `attention`, also hands
  // out every layer's attention weights, (B, n_head, T, T) each: what the model attends
  // to in this very forward pass (folio attention shows them).
  Output forward(std::span<const int32_t> ids, int64_t B, int64_t T, std::span<const int32_t> targets = {},
                 std::vector<Tensor>* attention = nullptr) const;
  // Inference with a KV cache: positions start at caches[0].length().
  Tensor forward_cached(std::span<const int32_t> ids, int64_t B, int64_t T, std::vector<KVCache>& caches) const;

  const GPTConfig& config() const { return config_; }
  // The arena: all parameters in one buffer (and their gradients in another), in
  // named_parameters() order, so a sweep over them is one loop.
  const Tensor& flat_parameters() const { return flat_; }
  // The generator all dropout masks come from; its state is part of a checkpoint.
  Rng& dropout_rng() const { return *dropout_rng_; }

  std::shared_ptr<Embedding> token_embedding, position_embedding;
  std::vector<std::shared_ptr<Block>> blocks;
  std::shared_ptr<LayerNorm> ln_f;
  std::shared_ptr<Linear> lm_head;

 private:
  void build(Arena arena);
  Tensor embed(std::span<const int32_t> ids, int64_t B, int64_t T, int64_t start) const;
  GPTConfig config_;
  std::shared_ptr<Rng> dropout_rng_;
  std::shared_ptr<Dropout> drop_;
  Tensor flat_;
};

}  // namespace folio::nn
