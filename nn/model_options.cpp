#include "nn/model_options.h"

#include <charconv>

#include "base/error.h"
#include "base/parse_name.h"

namespace folio::nn {
namespace {

// A Choice over an enum field: its names are its values' to_string, in the order given.
template <class E>
Choice choice(E GPTConfig::* at, std::vector<E> values) {
  std::vector<std::string> names;
  for (E v : values) names.emplace_back(to_string(v));
  return {std::move(names), [=](const GPTConfig& c) { return std::string(to_string(c.*at)); },
          [=](GPTConfig& c, std::string_view text) {
            const std::optional<E> v = parse_name<E>(text, values);
            if (v) c.*at = *v;
            return v.has_value();
          }};
}

// The export answers of the options that leave the model's outputs as they are.
constexpr const char* kTrainingOnly = "nothing to write: it acts in training only, and the model computes the same";
constexpr const char* kInitOnly = "nothing to write: it sets the weights a run starts from, which are written as they are";
constexpr const char* kSecondHead = "left out: the second output layer predicts during training only, and "
                                    "generation never runs it";

}  // namespace

bool gguf_llama_graph(const GPTConfig& c) { return c.norm == Norm::rms || c.activation == Activation::swiglu; }

std::string flag_as_set(const ModelOption& option, const GPTConfig& c) {
  if (const auto* t = std::get_if<Toggle>(&option.value)) return cat(c.*(t->at) ? "--" : "without --", option.flag);
  return cat("--", option.flag, " ", option_text(option, c));
}

std::string Export::refusal(const ModelOption& option, const GPTConfig& c) const {
  if (check_) {
    const char* why = check_(c);
    return why ? cat(flag_as_set(option, c), ": ", why) : "";
  }
  const GPTConfig defaults;
  if (!lacks_ || option_text(option, c) == option_text(option, defaults)) return "";
  const std::string fix = fix_ ? fix_ : std::holds_alternative<Toggle>(option.value)
                                            ? cat("without --", option.flag)
                                            : cat("with --", option.flag, " ", option_text(option, defaults));
  return cat(flag_as_set(option, c), ": ", lacks_, "; train ", fix);
}

std::vector<std::string> option_refusals(const GPTConfig& c, Export ModelOption::* format) {
  std::vector<std::string> lines;
  for (const ModelOption& o : model_options())
    if (std::string line = (o.*format).refusal(o, c); !line.empty()) lines.push_back(std::move(line));
  return lines;
}

// In the order folio info shows them.
const std::vector<ModelOption>& model_options() {
  static const std::vector<ModelOption> table = {
      {"pos", "pos",
       "positions: learned (a table added to the token embedding) or rope (q and k rotated by position; needs an "
       "even n_embd / n_head)",
       choice(&GPTConfig::pos, {Positions::learned, Positions::rope}),
       Export::carried_unless("the architecture: learned is gpt2 (position_embd.weight), rope gptneox, llama or qwen3 "
                              "(rope.dimension_count, rope.freq_base; llama's q and k rows reordered to its pairs)",
                              [](const GPTConfig& c) {
                                return c.pos == Positions::learned && gguf_llama_graph(c)
                                           ? "llama.cpp's llama graph (the one for --norm rms or --activation swiglu) "
                                             "has no position table; train with --pos rope"
                                           : nullptr;
                              }),
       Export::refused("GPT-2 has a learned position table")},
      {"norm", "norm",
       "normalisation in every block and before the output layer: layer (LayerNorm, weight and bias) or rms "
       "(llama's RMSNorm: weight only, eps 1e-5)",
       choice(&GPTConfig::norm, {Norm::layer, Norm::rms}),
       Export::carried_unless("the architecture: layer is gpt2 or gptneox (LayerNorm weight and bias), rms llama or qwen3 "
                              "(attention.layer_norm_rms_epsilon)",
                              [](const GPTConfig& c) {
                                if (c.norm == Norm::rms && c.activation != Activation::swiglu)
                                  return "llama.cpp's llama graph, the one with RMSNorm, uses SwiGLU; train with "
                                         "--activation swiglu (and --pos rope), or with --norm layer";
                                if (c.norm == Norm::layer && c.activation == Activation::swiglu)
                                  return "llama.cpp's llama graph, the one with SwiGLU, uses RMSNorm; train with --norm rms";
                                return (const char*)nullptr;
                              }),
       Export::refused("GPT-2 uses LayerNorm with a bias")},
      {"qk-norm", "qk_norm", "RMS-normalise each head's queries and keys (no weight) before the scores",
       Toggle{&GPTConfig::qk_norm},
       Export::carried_unless("the architecture qwen3: the llama graph with attn_q_norm and attn_k_norm weights of ones",
                              [](const GPTConfig& c) {
                                return c.qk_norm && !gguf_llama_graph(c)
                                           ? "llama.cpp's gpt2 and gptneox graphs do not normalise queries and keys; "
                                             "train without --qk-norm, or with --norm rms --activation swiglu --pos rope "
                                             "(qwen3)"
                                           : nullptr;
                              }),
       Export::refused("GPT-2 does not normalise queries and keys")},
      {"zero-init-proj", "zero_init_proj", "start the attention and feed-forward output projections at zero",
       Toggle{&GPTConfig::zero_init_proj}, Export::carried(kInitOnly), Export::carried(kInitOnly)},
      {"logit-softcap", "logit_softcap", "cap the logits smoothly: C * tanh(logits / C) (0: off)",
       Number{&GPTConfig::logit_softcap, 0.0f, "0: off"}, Export::refused("no llama.cpp graph caps the logits"),
       Export::refused("GPT-2's logits are not capped")},
      {"tie-weights", "tie_weights", "the output layer uses the token embedding matrix as its weight",
       Toggle{&GPTConfig::tie_weights},
       Export::carried("output.weight: the token embedding written again (gpt2, gptneox), or left out, which "
                       "llama and qwen3 read as tied"),
       Export::carried("config.json's tie_word_embeddings; untied, lm_head.weight")},
      {"bigram", "bigram",
       "add a learned vector for each pair (previous token, token) to the token embedding: an exact (V + 1) x V "
       "table, for vocabularies of up to 1024 tokens",
       Toggle{&GPTConfig::bigram}, Export::refused("llama.cpp has no bigram table"),
       Export::refused("GPT-2 has no bigram table")},
      {"x0-shortcut", "x0_shortcut",
       "add the embedding's output into every block's input, through a learned per-channel gate (one per block) "
       "that starts at zero",
       Toggle{&GPTConfig::x0_shortcut}, Export::refused("llama.cpp's blocks take only the previous block's output"),
       Export::refused("GPT-2's blocks take only the previous block's output")},
      {"value-embed", "value_embed",
       "add a learned vector for each token into every block's attention values: one (V, C) table per block",
       Toggle{&GPTConfig::value_embed}, Export::refused("llama.cpp's attention has no value embeddings"),
       Export::refused("GPT-2's attention has no value embeddings")},
      {"drop-path", "drop_path",
       "stochastic depth: in training, each sequence skips each block's attention and feed-forward branch with "
       "a probability rising linearly from P / n_layer at the first block to P at the last (0: off)",
       Number{&GPTConfig::drop_path, 0.0f, "0: off", 0.99f}, Export::carried(kTrainingOnly),
       Export::carried(kTrainingOnly)},
      {"dropout-at", "dropout_at",
       "where --dropout applies in training: all (the embedding, the attention weights and both branches' "
       "outputs), residual (only the branches' outputs, which the blocks add to the residual stream) or "
       "attention (only the attention weights)",
       choice(&GPTConfig::dropout_at, {DropoutAt::all, DropoutAt::residual, DropoutAt::attention}),
       Export::carried(kTrainingOnly),
       Export::carried("config.json's embd_pdrop, attn_pdrop and resid_pdrop: --dropout where it applies, 0 elsewhere")},
      {"unet-skips", "unet_skips",
       "U-net skips: the last n_layer / 2 blocks each add an earlier block's output into their input, the last "
       "block the first's, the one before it the second's, and so on, through a learned per-channel gate that "
       "starts at 1; needs n_layer >= 2",
       Toggle{&GPTConfig::unet_skips}, Export::refused("llama.cpp's blocks take only the previous block's output"),
       Export::refused("GPT-2's blocks take only the previous block's output")},
      {"mtp", "mtp",
       "multi-token prediction: a second output layer predicts the token two ahead, and W times its "
       "cross-entropy (W at most 10) is added to the per-step training loss, not to evaluations; 0: off",
       // At most 10: beyond it the second head's loss outweighs the next-token loss, the
       // one the model is for, more than tenfold (published weights are 0.1 to 1); 1e30
       // was taken.
       Number{&GPTConfig::mtp, 0.0f, "0: off", 10.0f}, Export::carried(kSecondHead), Export::carried(kSecondHead)},
      {"gpt2-biases", "gpt2_biases",
       "biases where GPT-2 has them: key, query and value get one too, and the output layer none (its weight is "
       "then usually the tied token embedding); needs the Linears' biases (not --no-bias)",
       Toggle{&GPTConfig::gpt2_biases},
       Export::refused("the GGUF export writes no Linear biases", "with --no-bias, or export GPT-2's layout with --format hf"),
       Export::carried_unless("c_attn.bias (q, k and v), and no bias on the output layer", [](const GPTConfig& c) {
         return !c.bias || c.gpt2_biases  // without any (--no-bias), the exporter's own line says what to do
                    ? nullptr
                    : "GPT-2's q, k and v have a bias and its output layer none; train with --gpt2-biases";
       })},
      {"ffn-hidden", "ffn_hidden",
       "the feed-forward's hidden width H for every activation (SwiGLU's gate and up, or the 4C of the others), "
       "e.g. a llama model's feed_forward_length; 0: the default (4C, or for swiglu int(8C / 3) rounded up to a "
       "multiple of 32)",
       Number{&GPTConfig::ffn_hidden, 0.0f, "0: the default width", float(GPTConfig::kMaxFfnHidden), true},
       Export::carried("ARCH.feed_forward_length, and the shapes of ffn_up (ffn_gate), ffn_down"),
       Export::carried("config.json's n_inner, and the shapes of mlp.c_fc and mlp.c_proj")},
  };
  return table;
}

std::string option_text(const ModelOption& option, const GPTConfig& c) {
  return std::visit(Overloaded{[&](const Toggle& t) { return std::string(c.*(t.at) ? "true" : "false"); },
                               [&](const Number& n) {
                                 char buf[32];
                                 const auto [end, ec] =
                                     std::to_chars(buf, buf + sizeof buf, c.*(n.at), std::chars_format::general);
                                 return std::string(buf, ec == std::errc() ? end : buf);
                               },
                               [&](const Choice& ch) { return ch.get(c); }},
                    option.value);
}

std::string options_as_flags(const GPTConfig& c) {
  std::string flags;
  for (const ModelOption& o : model_options()) {
    const bool is_switch = std::holds_alternative<Toggle>(o.value);
    if (is_switch && !(c.*(std::get<Toggle>(o.value).at))) continue;
    flags.append(flags.empty() ? "--" : " --").append(o.flag);
    if (!is_switch) flags.append(" ").append(option_text(o, c));
  }
  return flags;
}

std::string names_list(const Choice& choice, char quote) {
  std::string list;
  const std::string q = quote ? std::string(1, quote) : "";
  for (size_t i = 0; i < choice.names.size(); ++i)
    list += (i == 0 ? "" : i + 1 == choice.names.size() ? " or " : ", ") + q + choice.names[i] + q;
  return list;
}

}  // namespace folio::nn
