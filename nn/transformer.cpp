#include "nn/transformer.h"

#include <cmath>
#include <numeric>

#include "base/error.h"
#include "base/parse_name.h"
#include "autograd/anomaly.h"

namespace folio::nn {

const char* to_string(Activation a) {
  switch (a) {
    case Activation::gelu: return "gelu";
    case Activation::relu: return "relu";
    case Activation::relu2: return "relu2";
    case Activation::swiglu: return "swiglu";
    case Activation::gelu_tanh: return "gelu-tanh";
  }
  return "?";
}

std::optional<Activation> parse_activation(std::string_view name) {
  return parse_name(name, {Activation::gelu, Activation::relu, Activation::relu2, Activation::swiglu,
                           Activation::gelu_tanh});
}

int64_t feed_forward_hidden(int64_t n_embd, Activation act, int64_t hidden) {
  if (hidden > 0) return hidden;
  if (act != Activation::swiglu) return 4 * n_embd;
  constexpr int64_t kMultiple = 32;
  return (8 * n_embd / 3 + kMultiple - 1) / kMultiple * kMultiple;
}

const char* to_string(Norm n) { return n == Norm::rms ? "rms" : "layer"; }

const char* to_string(Positions p) { return p == Positions::rope ? "rope" : "learned"; }

std::optional<Positions> parse_positions(std::string_view name) {
  return parse_name(name, {Positions::learned, Positions::rope});
}

const char* to_string(DropoutAt d) {
  return d == DropoutAt::residual ? "residual" : d == DropoutAt::attention ? "attention" : "all";
}

std::optional<DropoutAt> parse_dropout_at(std::string_view name) {
  return parse_name(name, {DropoutAt::all, DropoutAt::residual, DropoutAt::attention});
}

FeedForward::FeedForward(int64_t n_embd, float dropout, bool bias, Activation act, Arena arena,
                         std::shared_ptr<Rng> dropout_rng, bool zero_init_proj, int64_t hidden)
    : act_(act) {
  fc = register_module("fc", std::make_shared<Linear>(n_embd, fc_outputs(n_embd, act, hidden), bias, arena));
  proj = register_module("proj", std::make_shared<Linear>(feed_forward_hidden(n_embd, act, hidden), n_embd, bias, arena,
                                                          zero_init_proj ? 0.0f : kInitStd));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(dropout, std::move(dropout_rng)));
}
FeedForward::FeedForward(int64_t n_embd, float dropout, bool bias, Activation act, Rng& init,
                         std::shared_ptr<Rng> dropout_rng, bool zero_init_proj, int64_t hidden)
    : FeedForward(n_embd, dropout, bias, act, Arena(parameter_count(n_embd, bias, act, hidden), init),
                  std::move(dropout_rng), zero_init_proj, hidden) {}

Tensor FeedForward::forward(const Tensor& x) const {
  Tensor a;  // (B, T, H)
  if (act_ == Activation::swiglu) {
    a = swiglu(fc->forward(x));  // (B, T, 2H) = [gate; up] -> (B, T, H)
  } else {
    a = act_ == Activation::relu        ? fc->forward_relu(x)
        : act_ == Activation::relu2     ? relu_squared(fc->forward(x))
        : act_ == Activation::gelu_tanh ? gelu_tanh(fc->forward(x))
                                        : gelu(fc->forward(x));
  }
  return dropout_->forward(proj->forward(a));
}

Block::Block(int64_t n_embd, int64_t n_head, int64_t block_size, float dropout, bool bias, Activation act,
             Arena arena, std::shared_ptr<Rng> dropout_rng, BlockOptions options) {
  ln1 = register_module("ln1", std::make_shared<LayerNorm>(n_embd, arena, options.rms_norm));
  attn = register_module("attn", std::make_shared<MultiHead>(n_embd, n_head, n_embd / n_head, block_size,
                                                             dropout, bias, arena, dropout_rng, options));
  ln2 = register_module("ln2", std::make_shared<LayerNorm>(n_embd, arena, options.rms_norm));
  ffwd = register_module("ffwd", std::make_shared<FeedForward>(n_embd, dropout, bias, act, arena, dropout_rng,
                                                               options.zero_init_proj, options.ffn_hidden));
  drop_path = register_module("drop_path", std::make_shared<DropPath>(options.drop_path, dropout_rng));
}
Block::Block(int64_t n_embd, int64_t n_head, int64_t block_size, float dropout, bool bias, Activation act,
             Rng& init, std::shared_ptr<Rng> dropout_rng, BlockOptions options)
    : Block(n_embd, n_head, block_size, dropout, bias, act,
            Arena(parameter_count(n_embd, n_head, bias, act, options.rms_norm, options.qkv_bias, options.ffn_hidden),
                  init),
            std::move(dropout_rng), std::move(options)) {}

void Block::name_scopes(const std::string& name) {
  scopes_ = {anomaly::intern(name), anomaly::intern(name + ".ln1"), anomaly::intern(name + ".attn"),
             anomaly::intern(name + ".ln2"), anomaly::intern(name + ".ffwd")};
}

Tensor Block::forward(const Tensor& x, Tensor* attention, const Tensor& values) const {
  using anomaly::ModuleScope;
  const ModuleScope block(scopes_.block);  // the residual adds and the branches' drop_path
  Tensor a;                                // (B, T, C) each
  {
    const ModuleScope scope(scopes_.ln1);
    a = ln1->forward(x);
  }
  {
    const ModuleScope scope(scopes_.attn);
    a = attn->forward(a, attention, values);
  }
  const Tensor h = add(x, drop_path->forward(a));
  {
    const ModuleScope scope(scopes_.ln2);
    a = ln2->forward(h);
  }
  {
    const ModuleScope scope(scopes_.ffwd);
    a = ffwd->forward(a);
  }
  return add(h, drop_path->forward(a));
}

void GPTConfig::validate() const {
  require_positive("config", {{"vocab_size", vocab_size}, {"block_size", block_size}, {"n_layer", n_layer},
                              {"n_head", n_head}, {"n_embd", n_embd}});
  if (n_embd % n_head) fail("config", "n_embd ", n_embd, " is not divisible by n_head ", n_head);
  if (!(dropout >= 0.0f && dropout < 1.0f)) fail("config", "dropout ", dropout, " outside [0, 1)");
  if (!(drop_path >= 0.0f && drop_path < 1.0f)) fail("config", "drop_path ", drop_path, " outside [0, 1)");
  if (pos == Positions::rope && (n_embd / n_head) % 2)
    fail("config", "pos rope rotates pairs of a head's dimensions: head size n_embd / n_head = ", n_embd / n_head,
         " must be even");
  // A cap is applied as cap * tanh(logits * (1 / cap)): 1 / cap must be finite too.
  if (!(logit_softcap >= 0.0f && std::isfinite(logit_softcap)) ||
      (logit_softcap > 0.0f && !std::isfinite(1.0f / logit_softcap)))
    fail("config", "logit_softcap must be >= 0 (0: off) and, if positive, its inverse finite; got ", logit_softcap);
  if (!(mtp >= 0.0f && std::isfinite(mtp))) fail("config", "mtp must be a finite weight >= 0 (0: off); got ", mtp);
  if (unet_skips && n_layer < 2)
    fail("config", "unet_skips pairs the first n_layer / 2 blocks with the last: n_layer ", n_layer,
         " must be at least 2");
  if (gpt2_biases && !bias)
    fail("config", "gpt2_biases puts a bias on key, query and value besides every other Linear in the blocks: it "
                   "needs bias (drop --no-bias)");
  if (!(ffn_hidden >= 0.0f && ffn_hidden <= float(kMaxFfnHidden) && ffn_hidden == std::floor(ffn_hidden)))
    fail("config", "ffn_hidden must be a whole number in [0, ", kMaxFfnHidden, "] (0: the default width); got ",
         ffn_hidden);
  if (bigram && vocab_size > kMaxBigramVocab)
    fail("config", "bigram keeps a row per pair of tokens, (vocab_size + 1) * vocab_size of them: vocab_size ",
         vocab_size, " exceeds ", kMaxBigramVocab, " (it is meant for characters, not subwords)");
}

int64_t GPTConfig::parameter_count() const {
  const int64_t C = n_embd;
  const int64_t positions = pos == Positions::learned ? Embedding::parameter_count(block_size, C) : 0;
  const int64_t head = tie_weights ? (output_bias() ? vocab_size : 0) : Linear::parameter_count(C, vocab_size, output_bias());
  return Embedding::parameter_count(vocab_size, C) + positions +
         n_layer * Block::parameter_count(C, n_head, bias, activation, norm == Norm::rms, gpt2_biases,
                                          int64_t(ffn_hidden)) +
         LayerNorm::parameter_count(C, norm == Norm::rms) + head + Embedding::parameter_count(bigram_rows(), C) +
         (value_embed ? n_layer * Embedding::parameter_count(vocab_size, C) : 0) +
         (x0_shortcut ? Gates::parameter_count(n_layer, C) : 0) +
         (unet_skips ? Gates::parameter_count(skip_pairs(), C) : 0) +
         (mtp > 0.0f ? Linear::parameter_count(C, vocab_size, output_bias()) : 0);
}

std::optional<GPTConfig::Skip> GPTConfig::skip_into(int64_t layer) const {
  const int64_t first = n_layer - skip_pairs();  // the first block that takes one
  if (!unet_skips || layer < first) return std::nullopt;
  return Skip{.from = n_layer - 1 - layer, .gate = layer - first};
}

GPT::GPT(const GPTConfig& config) : config_(config), dropout_rng_(std::make_shared<Rng>(config.seed ^ 0xd5)) {
  config.validate();
  Rng init(config.seed);
  build(Arena(config.parameter_count(), init));
}

GPT::GPT(const GPTConfig& config, Arena arena)
    : config_(config), dropout_rng_(std::make_shared<Rng>(config.seed ^ 0xd5)) {
  config.validate();
  build(std::move(arena));
}

void GPT::build(Arena arena) {
  const GPTConfig& config = config_;
  if (arena.taken() != 0 || arena.flat().numel() != config.parameter_count())
    fail("gpt", "an arena of ", arena.flat().numel(), " parameters (", arena.taken(), " taken) for a config of ",
         config.parameter_count());
  const int64_t C = config.n_embd;
  token_embedding = register_module("token_embedding", std::make_shared<Embedding>(config.vocab_size, C, arena));
  BlockOptions options{.qk_norm = config.qk_norm, .rotary = nullptr, .zero_init_proj = config.zero_init_proj};
  options.rms_norm = config.norm == Norm::rms;
  options.qkv_bias = config.gpt2_biases;
  options.ffn_hidden = int64_t(config.ffn_hidden);
  if (config.pos == Positions::learned)
    position_embedding = register_module("position_embedding", std::make_shared<Embedding>(config.block_size, C, arena));
  else  // one table for every layer and head
    options.rotary = std::make_shared<const RotaryTables>(config.block_size, C / config.n_head);
  // A place without dropout gets p 0, which draws nothing from the generator.
  const bool everywhere = config.dropout_at == DropoutAt::all;
  const float branches = everywhere || config.dropout_at == DropoutAt::residual ? config.dropout : 0.0f;
  options.weights_dropout = everywhere || config.dropout_at == DropoutAt::attention ? config.dropout : 0.0f;
  drop_ = register_module("dropout", std::make_shared<Dropout>(everywhere ? config.dropout : 0.0f, dropout_rng_));
  for (int64_t l = 0; l < config.n_layer; ++l) {
    options.drop_path = config.drop_path * float(l + 1) / float(config.n_layer);  // the deepest skipped most
    blocks.push_back(register_module(
        "blocks." + std::to_string(l), std::make_shared<Block>(C, config.n_head, config.block_size, branches,
                                                               config.bias, config.activation, arena, dropout_rng_,
                                                               options)));
    blocks.back()->name_scopes("blocks." + std::to_string(l));
  }
  ln_f = register_module("ln_f", std::make_shared<LayerNorm>(C, arena, options.rms_norm));
  lm_head = register_module("lm_head", config.tie_weights
                                           ? std::make_shared<Linear>(token_embedding->weight, config.output_bias(), arena)
                                           : std::make_shared<Linear>(C, config.vocab_size, config.output_bias(), arena));
  if (config.bigram)
    bigram_embedding = register_module("bigram_embedding", std::make_shared<Embedding>(config.bigram_rows(), C, arena));
  if (config.value_embed)
    for (int64_t l = 0; l < config.n_layer; ++l)
      value_embeddings.push_back(register_module("value_embeddings." + std::to_string(l),
                                                 std::make_shared<Embedding>(config.vocab_size, C, arena)));
  if (config.x0_shortcut) x0_gates = register_module("x0_gates", std::make_shared<Gates>(config.n_layer, C, arena));
  if (config.unet_skips)  // at 1, each paired block starts by reading its encoder twin's output whole
    skip_gates = register_module("skip_gates", std::make_shared<Gates>(config.skip_pairs(), C, arena, 1.0f));
  if (config.mtp > 0.0f)
    mtp_head = register_module("mtp_head", std::make_shared<Linear>(C, config.vocab_size, config.output_bias(), arena));
  if (arena.taken() != arena.flat().numel())
    fail("gpt", "the modules took ", arena.taken(), " of the ", arena.flat().numel(), " parameters counted");
  flat_ = arena.flat();
}

Tensor GPT::embed(std::span<const int32_t> ids, int64_t B, int64_t T) const {
  if (B < 1 || T < 1 || int64_t(ids.size()) != B * T)
    fail("gpt", ids.size(), " token ids for a batch of B ", B, " x T ", T);
  if (T > config_.block_size) fail("gpt", "sequence of ", T, " positions exceeds block_size ", config_.block_size);
  Tensor x = token_embedding->forward(ids, {B, T});  // (B, T, C); checks every id is below V
  if (bigram_embedding) {
    const int32_t V = int32_t(config_.vocab_size);
    std::vector<int32_t> pairs(ids.size());  // (B, T) rows of the bigram table
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        const int32_t previous = t > 0 ? ids[size_t(b * T + t - 1)] : V;  // V: the start of the sequence
        pairs[size_t(b * T + t)] = previous * V + ids[size_t(b * T + t)];
      }
    x = add(x, bigram_embedding->forward(pairs, {B, T}));
  }
  if (!position_embedding) return drop_->forward(x);  // rope: the blocks rotate q and k instead
  std::vector<int32_t> positions(T);
  std::iota(positions.begin(), positions.end(), 0);
  const Tensor pos = position_embedding->forward(positions, {T});  // (T, C)
  return drop_->forward(add(x, pos));
}

Tensor GPT::softcap(const Tensor& logits) const {
  const float cap = config_.logit_softcap;
  return cap > 0.0f ? scale(tanh(scale(logits, 1.0f / cap)), cap) : logits;  // smooth, into (-cap, cap)
}

Tensor GPT::head(const Tensor& x, Tensor* two_ahead) const {
  using anomaly::ModuleScope;
  Tensor h;  // (B, T, C)
  {
    const ModuleScope scope("ln_f");
    h = ln_f->forward(x);
  }
  if (two_ahead) {
    const ModuleScope scope("mtp_head");
    *two_ahead = softcap(mtp_head->forward(h));
  }
  const ModuleScope scope("lm_head");
  return softcap(lm_head->forward(h));  // (B, T, V)
}

Tensor GPT::block_input(const Tensor& x, const Tensor& x0, const std::vector<Tensor>& kept, size_t layer) const {
  Tensor in = x0_gates ? x0_gates->forward(x, x0, layer) : x;  // (B, T, C)
  if (const auto skip = config_.skip_into(int64_t(layer)))
    in = skip_gates->forward(in, kept.at(size_t(skip->from)), size_t(skip->gate));
  return in;
}

Tensor GPT::values(std::span<const int32_t> ids, int64_t B, int64_t T, size_t layer) const {
  return value_embeddings.empty() ? Tensor{} : value_embeddings[layer]->forward(ids, {B, T});  // (B, T, C)
}

GPT::Output GPT::forward(std::span<const int32_t> ids, int64_t B, int64_t T, std::span<const int32_t> targets,
                         std::vector<Tensor>* attention) const {
  using anomaly::ModuleScope;
  Tensor x0;  // (B, T, C)
  {
    const ModuleScope scope("embeddings");  // token, bigram and position tables, their dropout
    x0 = embed(ids, B, T);
  }
  Tensor x = x0;
  std::vector<Tensor> kept;  // (B, T, C) each: the encoder blocks' outputs, with U-net skips
  if (attention) attention->assign(blocks.size(), Tensor{});
  for (size_t l = 0; l < blocks.size(); ++l) {
    Tensor in, v;  // (B, T, C) each
    {
      const ModuleScope scope("gates");  // the x0 shortcut's and the U-net skips'
      in = block_input(x, x0, kept, l);
    }
    {
      const ModuleScope scope("value_embeddings");
      v = values(ids, B, T, l);
    }
    x = blocks[l]->forward(in, attention ? &(*attention)[l] : nullptr, v);
    if (int64_t(l) < config_.skip_pairs()) kept.push_back(x);
  }
  Output out;
  const bool multi_token = mtp_head && training() && !targets.empty();
  Tensor two_ahead;  // (B, T, V) with multi-token prediction
  out.logits = head(x, multi_token ? &two_ahead : nullptr);  // (B, T, V)
  if (targets.empty()) return out;
  const ModuleScope scope("loss");
  out.loss = out.next_token_loss = cross_entropy(out.logits, targets);
  if (multi_token) {
    // The token two ahead of position t is the target of position t + 1; the last
    // position's lies outside the window.
    std::vector<int32_t> two_ahead_targets(targets.size());  // (B, T)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t)
        two_ahead_targets[size_t(b * T + t)] = t + 1 < T ? targets[size_t(b * T + t + 1)] : kNoTarget;
    out.loss = add(out.loss, scale(cross_entropy(two_ahead, two_ahead_targets), config_.mtp));
  }
  return out;
}

}  // namespace folio::nn
