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

// relu2: relu(x)^2 (ReLU squared). swiglu: llama's gated unit, SiLU(x W_gate) * (x W_up),
// whose hidden size is feed_forward_hidden()'s. gelu_tanh: GELU's tanh approximation (GPT-2's).
enum class Activation { gelu, relu, relu2, swiglu, gelu_tanh };
const char* to_string(Activation a);  // "gelu", "relu", "relu2", "swiglu", "gelu-tanh"
std::optional<Activation> parse_activation(std::string_view name);  // nullopt: none of them

// The feed-forward's hidden size: 4C, or with swiglu llama's 2/3 of it (three matrices
// instead of two, about the same parameters), int(8C / 3) rounded up to a multiple of 32
// (llama rounds to 256, which would more than double a tiny model's). `hidden` > 0 (the
// model option ffn_hidden) replaces that default for every activation.
int64_t feed_forward_hidden(int64_t n_embd, Activation act, int64_t hidden = 0);

// How the model normalises (every block's two norms and the final one): LayerNorm, or
// llama's RMSNorm (a weight, no bias, no mean taken; nn::LayerNorm's rms).
enum class Norm { layer, rms };
const char* to_string(Norm n);                          // "layer", "rms"

// How the model knows where a token is: a learned table added to the token embedding
// (GPT-2), or q and k rotated by position in every head (RoPE, nn/attention.h).
enum class Positions { learned, rope };
const char* to_string(Positions p);                               // "learned", "rope"
std::optional<Positions> parse_positions(std::string_view name);  // nullopt: neither

// Where GPTConfig::dropout applies in training: all of nanoGPT's places (the
// embedding's output, the attention weights, and both branches' outputs), only the
// branches' outputs (what each block adds to the residual stream), or only the
// attention weights.
enum class DropoutAt { all, residual, attention };
const char* to_string(DropoutAt d);                                 // "all", "residual", "attention"
std::optional<DropoutAt> parse_dropout_at(std::string_view name);  // nullopt: none of them

// x (B, T, C) -> Linear C->H -> activation -> Linear H->C -> dropout -> (B, T, C), H =
// feed_forward_hidden(n_embd, act, hidden) (4C by default).
// zero_init_proj: the second Linear's weight starts at zero. With swiglu, fc is C->2H, its outputs [gate (H); up (H)] (one product for
// both), then SiLU(gate) * up (B, T, H) -> proj H->C.
class FeedForward : public Module {
 public:
  FeedForward(int64_t n_embd, float dropout, bool bias, Activation act, Arena arena,
              std::shared_ptr<Rng> dropout_rng = std::make_shared<Rng>(0), bool zero_init_proj = false,
              int64_t hidden = 0);
  FeedForward(int64_t n_embd, float dropout, bool bias, Activation act, Rng& init,
              std::shared_ptr<Rng> dropout_rng = std::make_shared<Rng>(0), bool zero_init_proj = false,
              int64_t hidden = 0);
  static int64_t parameter_count(int64_t n_embd, bool bias, Activation act, int64_t hidden = 0) {
    const int64_t H = feed_forward_hidden(n_embd, act, hidden);
    return Linear::parameter_count(n_embd, fc_outputs(n_embd, act, hidden), bias) +
           Linear::parameter_count(H, n_embd, bias);
  }
  static int64_t fc_outputs(int64_t n_embd, Activation act, int64_t hidden = 0) {  // H, or 2H with swiglu
    return (act == Activation::swiglu ? 2 : 1) * feed_forward_hidden(n_embd, act, hidden);
  }
  Tensor forward(const Tensor& x) const;
  std::shared_ptr<Linear> fc, proj;

 private:
  Activation act_;
  std::shared_ptr<Dropout> dropout_;
};

// Pre-LayerNorm residual block: x + attn(ln1(x)), then x + ffwd(ln2(x)); options.rms_norm
// makes ln1 and ln2 RMSNorms.
// options.zero_init_proj applies to both output projections (attn.proj, ffwd.proj);
// options.drop_path to both branches, each drawing its own sequences to drop.
class Block : public Module {
 public:
  Block(int64_t n_embd, int64_t n_head, int64_t block_size, float dropout, bool bias, Activation act,
        Arena arena, std::shared_ptr<Rng> dropout_rng = std::make_shared<Rng>(0), BlockOptions options = {});
  Block(int64_t n_embd, int64_t n_head, int64_t block_size, float dropout, bool bias, Activation act,
        Rng& init, std::shared_ptr<Rng> dropout_rng = std::make_shared<Rng>(0), BlockOptions options = {});
  static int64_t parameter_count(int64_t n_embd, int64_t n_head, bool bias, Activation act = Activation::relu,
                                 bool rms = false, bool qkv_bias = false, int64_t ffn_hidden = 0) {  // n_head >= 1
    return 2 * LayerNorm::parameter_count(n_embd, rms) +
           MultiHead::parameter_count(n_embd, n_head, n_embd / n_head, bias, qkv_bias) +
           FeedForward::parameter_count(n_embd, bias, act, ffn_hidden);
  }
  // attention and values (B, T, C): see MultiHead.
  Tensor forward(const Tensor& x, Tensor* attention = nullptr, const Tensor& values = {}) const;
  std::shared_ptr<LayerNorm> ln1, ln2;
  std::shared_ptr<MultiHead> attn;
  std::shared_ptr<FeedForward> ffwd;
  std::shared_ptr<DropPath> drop_path;  // p 0 (no draws) without stochastic depth
  // Names the modules its ops run in after `name` ("blocks.1": "blocks.1.attn", ...), for
  // --detect-anomaly's messages (autograd/anomaly.h); the GPT names each by its place.
  void name_scopes(const std::string& name);

 private:
  struct Scopes {
    const char *block = "block", *ln1 = "ln1", *attn = "attn", *ln2 = "ln2", *ffwd = "ffwd";
  } scopes_;
};

struct GPTConfig {
  int64_t vocab_size = 65;
  int64_t block_size = 64;
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;
  float dropout = 0.0f;
  bool bias = true;  // on every Linear but key/query/value (LayerNorms always have one); see gpt2_biases
  // ReLU by default: on tiny Shakespeare (config S, 2000 steps) it reached val loss
  // 1.771 / 1.779 (seeds 1337 / 42) against GELU's 1.854 / 1.850.
  Activation activation = Activation::relu;
  uint64_t seed = 1337;  // initialisation
  // The model options: each has a row in nn/model_options.cpp's table, which saves
  // it with the model, makes it a flag and shows it. A checkpoint written before one
  // existed has no key for it, which means its default here.
  Positions pos = Positions::learned;  // rope: no position table; needs an even head size
  Norm norm = Norm::layer;             // rms: every LayerNorm an RMSNorm (weight only)
  bool qk_norm = false;                // q and k RMS-normalised per head (no weight) before the scores
  bool zero_init_proj = false;         // attn.proj and ffwd.proj weights start at zero
  float logit_softcap = 0.0f;          // > 0: logits = c * tanh(logits / c); 0: off
  bool tie_weights = false;            // lm_head's weight is token_embedding's (V, C) matrix
  // An exact bigram table added to the token embedding: ((V + 1) V, C), row
  // previous * V + token; the first token of a sequence has no previous one and takes
  // row V * V + token. Only for vocabularies of up to kMaxBigramVocab tokens.
  bool bigram = false;
  // Every block's input gains gate_l * x0, x0 being the embedding's output (after its
  // dropout) and gate_l a learned (C) vector per block that starts at zero: the later
  // blocks see the tokens directly, not only through the residual stream the earlier
  // ones wrote. At zero the model computes what it would without the option.
  bool x0_shortcut = false;
  // Value embeddings: every block's attention values gain a learned vector of the
  // token at their position, from a (V, C) table of that block's own (head h's values
  // take columns h * head_size ...). Attention then mixes the tokens' identities
  // directly, besides what the residual stream carries.
  bool value_embed = false;
  // Stochastic depth: in training, each sequence skips each block's attention and
  // feed-forward branch with a probability rising linearly with depth, from
  // drop_path / n_layer at the first block to drop_path at the last (nn::DropPath).
  // Evaluation and generation use every block, so it leaves the model's parameters
  // and its outputs outside training as they are. 0: off.
  float drop_path = 0.0f;
  DropoutAt dropout_at = DropoutAt::all;  // where `dropout` applies
  // U-net skips: the first n_layer / 2 blocks (the encoder half) keep their outputs,
  // and the last n_layer / 2 take them back in reverse, the last block the first
  // block's: block n_layer - 1 - i's input gains skip_gate * (block i's output), each
  // gate a learned (C) vector that starts at 1. With an odd n_layer the middle block
  // takes none. Needs n_layer >= 2.
  bool unet_skips = false;
  // Multi-token prediction: a second output layer (mtp_head, a Linear from the final
  // LayerNorm's output onto V) predicts the token two ahead of each position, and the
  // loss of a training forward pass adds mtp times its mean cross-entropy over the
  // positions that have one (all but the last). Outside training the loss is the
  // next-token loss alone, and generation never runs the head. 0: off.
  float mtp = 0.0f;
  // Biases where GPT-2 has them: key, query and value gain one (every Linear in the
  // blocks has one), and the output layers (lm_head, mtp_head) have none, GPT-2's
  // being its tied token embedding alone. Needs bias. One switch rather than two,
  // because neither half alone is a model anyone has asked for, and the other
  // half's default ("the output layer has a bias") is not "off".
  bool gpt2_biases = false;
  // The feed-forward's hidden width H (SwiGLU's, or the 4C of the others); 0: the
  // default, feed_forward_hidden()'s. A float because the model options' numbers are
  // (nn/model_options.h); validate() asks for a whole number. What models made
  // elsewhere (a GGUF's feed_forward_length) need.
  float ffn_hidden = 0.0f;
  int64_t ffn_width() const { return feed_forward_hidden(n_embd, activation, int64_t(ffn_hidden)); }
  // Whether lm_head (and mtp_head) has a bias.
  bool output_bias() const { return bias && !gpt2_biases; }
  static constexpr int64_t kMaxBigramVocab = 1024;
  static constexpr int64_t kMaxFfnHidden = int64_t(1) << 18;
  int64_t bigram_rows() const { return bigram ? (vocab_size + 1) * vocab_size : 0; }
  int64_t skip_pairs() const { return unet_skips ? n_layer / 2 : 0; }  // encoder blocks that keep their output
  // The encoder block whose output block `layer`'s input takes, and through which gate
  // (skip_gates[gate]); nullopt for a block that takes none.
  struct Skip {
    int64_t from, gate;
  };
  std::optional<Skip> skip_into(int64_t layer) const;
  void validate() const;  // throws naming the bad field
  // The number of parameters a GPT of this config has, computed without building it
  // (so a checkpoint's claim can be checked before anything is allocated).
  int64_t parameter_count() const;
};

// Token (+ bigram) (+ learned position) embeddings -> n_layer Blocks -> LayerNorm ->
// Linear onto V (-> soft cap). With tie_weights, the Linear's weight is the token
// embedding's: the parameter is named once, token_embedding.weight, and lm_head has
// only its bias. The bigram table's parameter, then the value embeddings', come after
// every other drawn one, so that every other weight is drawn as it would be without
// them; the x0 gates, then the U-net skips' gates (constants, nothing drawn), then the
// multi-token head (drawn) come last.
class GPT : public Module {
 public:
  // Fresh weights, drawn from config.seed.
  explicit GPT(const GPTConfig& config);
  // Parameters from `arena`, which holds config.parameter_count() of them: a replica
  // passes Arena::sharing(model.flat_parameters()).
  GPT(const GPTConfig& config, Arena arena);

  struct Output {
    Tensor logits;  // (B, T, V)
    // () mean cross-entropy, when targets were given; in training with mtp, plus mtp
    // times the two-ahead head's
    Tensor loss;
    // () the next-token cross-entropy alone (loss without the mtp term; the same tensor
    // without it): what evaluations measure, so what the progress line shows
    Tensor next_token_loss;
  };
  // ids and targets: (B, T) row-major, T <= block_size. With `attention`, also hands
  // out every layer's attention weights, (B, n_head, T, T) each: what the model attends
  // to in this very forward pass (folio attention shows them).
  Output forward(std::span<const int32_t> ids, int64_t B, int64_t T, std::span<const int32_t> targets = {},
                 std::vector<Tensor>* attention = nullptr) const;

  const GPTConfig& config() const { return config_; }
  // The arena: all parameters in one buffer (and their gradients in another), in
  // named_parameters() order, so a sweep over them is one loop.
  const Tensor& flat_parameters() const { return flat_; }
  // The generator all dropout masks come from; its state is part of a checkpoint.
  Rng& dropout_rng() const { return *dropout_rng_; }

  std::shared_ptr<Embedding> token_embedding, position_embedding;  // position_embedding: null with rope
  std::vector<std::shared_ptr<Block>> blocks;
  std::shared_ptr<LayerNorm> ln_f;
  std::shared_ptr<Linear> lm_head;
  std::shared_ptr<Embedding> bigram_embedding;  // null without config.bigram
  std::vector<std::shared_ptr<Embedding>> value_embeddings;  // (V, C) a block; none without config.value_embed
  std::shared_ptr<Gates> x0_gates;                           // (C) a block; null without config.x0_shortcut
  std::shared_ptr<Gates> skip_gates;                         // (C) a decoder-half block; null without unet_skips
  std::shared_ptr<Linear> mtp_head;                          // C -> V, two tokens ahead; null without mtp

 private:
  void build(Arena arena);
  // ids (B, T) -> token (+ bigram) + position embeddings (B, T, C), dropout applied.
  Tensor embed(std::span<const int32_t> ids, int64_t B, int64_t T) const;
  // (B, T, C) -> logits (B, T, V): ln_f, lm_head, soft cap. With `two_ahead`, also the
  // multi-token head's logits (B, T, V) on the same normalised input, under the same cap.
  Tensor head(const Tensor& x, Tensor* two_ahead = nullptr) const;
  Tensor softcap(const Tensor& logits) const;
  // Block `layer`'s input: x (B, T, C) + x0_gates[layer] * x0 with the x0 shortcut, then
  // + skip_gates[gate] * kept[from] (B, T, C) where the U-net skips pair it with an
  // encoder block; kept holds the encoder blocks' outputs so far.
  Tensor block_input(const Tensor& x, const Tensor& x0, const std::vector<Tensor>& kept, size_t layer) const;
  // ids (B, T) -> block `layer`'s value embeddings (B, T, C); undefined without them.
  Tensor values(std::span<const int32_t> ids, int64_t B, int64_t T, size_t layer) const;
  GPTConfig config_;
  std::shared_ptr<Rng> dropout_rng_;
  std::shared_ptr<Dropout> drop_;
  Tensor flat_;
};

}  // namespace folio::nn
