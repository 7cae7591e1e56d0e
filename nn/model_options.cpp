#include "nn/model_options.h"

#include <charconv>

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

}  // namespace

// In the order folio info shows them.
const std::vector<ModelOption>& model_options() {
  static const std::vector<ModelOption> table = {
      {"pos", "pos",
       "positions: learned (a table added to the token embedding) or rope (q and k rotated by position; needs an "
       "even n_embd / n_head)",
       choice(&GPTConfig::pos, {Positions::learned, Positions::rope})},
      {"norm", "norm",
       "normalisation in every block and before the output layer: layer (LayerNorm, weight and bias) or rms "
       "(llama's RMSNorm: weight only, eps 1e-5)",
       choice(&GPTConfig::norm, {Norm::layer, Norm::rms})},
      {"qk-norm", "qk_norm", "RMS-normalise each head's queries and keys (no weight) before the scores",
       Toggle{&GPTConfig::qk_norm}},
      {"zero-init-proj", "zero_init_proj", "start the attention and feed-forward output projections at zero",
       Toggle{&GPTConfig::zero_init_proj}},
      {"logit-softcap", "logit_softcap", "cap the logits smoothly: C * tanh(logits / C) (0: off)",
       Number{&GPTConfig::logit_softcap, 0.0f, "0: off"}},
      {"tie-weights", "tie_weights", "the output layer uses the token embedding matrix as its weight",
       Toggle{&GPTConfig::tie_weights}},
      {"bigram", "bigram",
       "add a learned vector for each pair (previous token, token) to the token embedding: an exact (V + 1) x V "
       "table, for vocabularies of up to 1024 tokens",
       Toggle{&GPTConfig::bigram}},
      {"x0-shortcut", "x0_shortcut",
       "add the embedding's output into every block's input, through a learned per-channel gate (one per block) "
       "that starts at zero",
       Toggle{&GPTConfig::x0_shortcut}},
      {"value-embed", "value_embed",
       "add a learned vector for each token into every block's attention values: one (V, C) table per block",
       Toggle{&GPTConfig::value_embed}},
      {"drop-path", "drop_path",
       "stochastic depth: in training, each sequence skips each block's attention and feed-forward branch with "
       "a probability rising linearly from P / n_layer at the first block to P at the last (0: off)",
       Number{&GPTConfig::drop_path, 0.0f, "0: off", 0.99f}},
      {"dropout-at", "dropout_at",
       "where --dropout applies in training: all (the embedding, the attention weights and both branches' "
       "outputs), residual (only the branches' outputs, which the blocks add to the residual stream) or "
       "attention (only the attention weights)",
       choice(&GPTConfig::dropout_at, {DropoutAt::all, DropoutAt::residual, DropoutAt::attention})},
      {"unet-skips", "unet_skips",
       "U-net skips: the last n_layer / 2 blocks each add an earlier block's output into their input, the last "
       "block the first's, the one before it the second's, and so on, through a learned per-channel gate that "
       "starts at 1; needs n_layer >= 2",
       Toggle{&GPTConfig::unet_skips}},
      {"mtp", "mtp",
       "multi-token prediction: a second output layer predicts the token two ahead, and W times its "
       "cross-entropy is added to the per-step training loss, not to evaluations; 0: off",
       Number{&GPTConfig::mtp, 0.0f, "0: off"}},
      {"gpt2-biases", "gpt2_biases",
       "biases where GPT-2 has them: key, query and value get one too, and the output layer none (its weight is "
       "then usually the tied token embedding); needs the Linears' biases (not --no-bias)",
       Toggle{&GPTConfig::gpt2_biases}},
      {"ffn-hidden", "ffn_hidden",
       "the feed-forward's hidden width H for every activation (SwiGLU's gate and up, or the 4C of the others), "
       "e.g. a llama model's feed_forward_length; 0: the default (4C, or for swiglu int(8C / 3) rounded up to a "
       "multiple of 32)",
       Number{&GPTConfig::ffn_hidden, 0.0f, "0: the default width", float(GPTConfig::kMaxFfnHidden)}},
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
