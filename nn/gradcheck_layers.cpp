// The gradient checks of the layers: each module of nn/ (the suite checks that none is
// missing) on a small input, its parameters and its input all checked. Weights start
// at N(0, 0.02), where attention is nearly uniform and a check would prove little, so
// several cases scale them up first. tests/test_gradcheck.cpp runs every one; `folio
// gradcheck --layer` too.
#include "nn/gradcheck_layers.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "nn/transformer.h"

namespace folio::nn {
namespace {

using V = std::vector<Tensor>;

// A check of `module` (kept alive by f) on its parameters, then `data`.
template <class M>
GradcheckSetup of_module(std::shared_ptr<M> module, std::function<Tensor(const M&, const V&)> forward, V data,
                         std::string other_inputs = "") {
  V inputs = module->parameters();
  const size_t n_weights = inputs.size();
  inputs.insert(inputs.end(), data.begin(), data.end());
  return {[module, forward](const V& v) { return forward(*module, v); }, inputs, n_weights, std::move(other_inputs)};
}

void scale_weights(const Module& m, float factor) {
  for (const Tensor& p : m.parameters())
    for (int64_t i = 0; i < p.numel(); ++i) p.data()[i] *= factor;
}

GradcheckSetup feed_forward(Activation act) {
  Rng init(1);
  auto ff = std::make_shared<FeedForward>(4, 0.0f, true, act, init);
  scale_weights(*ff, 5.0f);
  // Central differences are wrong across ReLU's kink: pick an input whose
  // pre-activations all stay clear of 0 (well outside eps * |x| ~ 3e-3). SwiGLU is
  // smooth: any input will do.
  Tensor x = act == Activation::swiglu ? randn_leaf({2, 3, 4}, 2) : Tensor{};
  for (uint64_t seed = 2; seed < 200 && !x.defined(); ++seed) {
    Tensor candidate = randn_leaf({2, 3, 4}, seed);
    NoGradGuard no_grad;
    const std::vector<float> h = ff->fc->forward(candidate).to_vector();
    if (std::all_of(h.begin(), h.end(), [](float v) { return std::abs(v) > 0.005f; })) x = candidate;
  }
  if (!x.defined()) fail("gradcheck", "no input keeps FeedForward's pre-activations clear of 0");
  return of_module<FeedForward>(ff, [](const FeedForward& m, const V& v) { return m.forward(v.back()); }, {x});
}

GPTConfig tiny_gpt() {
  GPTConfig c;
  c.vocab_size = 7, c.block_size = 6, c.n_layer = 2, c.n_head = 2, c.n_embd = 8;
  c.activation = Activation::gelu;  // smooth: finite differences across ReLU's kink disagree with its gradient
  return c;
}

const std::vector<int32_t> kIds{1, 3, 5, 0, 6, 2, 2, 4}, kTargets{3, 5, 0, 6, 2, 2, 4, 1};  // (2, 4) each

GradcheckSetup gpt(bool loss, GPTConfig config = tiny_gpt(), float weight_scale = 4.0f) {
  auto model = std::make_shared<GPT>(config);
  scale_weights(*model, weight_scale);
  return of_module<GPT>(
      model,
      [loss](const GPT& m, const V&) {
        m.dropout_rng().reseed(9);  // stochastic depth drops the same sequences on every evaluation
        return loss ? m.forward(kIds, 2, 4, kTargets).loss : m.forward(kIds, 2, 4).logits;
      },
      {}, loss ? "ids (2, 4) targets (2, 4)" : "ids (2, 4)");
}

}  // namespace

const std::vector<GradcheckCase>& layer_gradcheck_cases() {
  auto last = [](auto& m, const V& v) { return m.forward(v.back()); };
  static const std::vector<GradcheckCase> cases{
      {"Embedding", "",
       [] {
         Rng init(1);
         static const std::vector<int32_t> ids{4, 0, 4, 2};
         return of_module<Embedding>(std::make_shared<Embedding>(5, 3, init),
                                     [](const Embedding& m, const V&) { return m.forward(ids, {2, 2}); }, {},
                                     "ids (2, 2)");
       }},
      {"Linear", "",
       [last] {
         Rng init(1);
         return of_module<Linear>(std::make_shared<Linear>(4, 3, true, init), last, {randn_leaf({2, 5, 4}, 2)});
       }},
      {"LayerNorm", "",
       [last] {
         auto ln = std::make_shared<LayerNorm>(6);
         Rng r(3);  // away from weight 1, bias 0
         for (const Tensor& p : ln->parameters())
           for (int64_t i = 0; i < p.numel(); ++i) p.data()[i] += 0.3f * r.normal();
         return of_module<LayerNorm>(ln, last, {randn_leaf({3, 6}, 2)});
       }},
      {"LayerNorm", "rms",
       [last] {
         auto ln = std::make_shared<LayerNorm>(6, true);
         Rng r(3);  // away from weight 1
         for (int64_t i = 0; i < 6; ++i) ln->weight.data()[i] += 0.3f * r.normal();
         return of_module<LayerNorm>(ln, last, {randn_leaf({3, 6}, 2)});
       }},
      {"Gates", "",
       [] {
         auto gates = std::make_shared<Gates>(2, 4);
         Rng r(4);  // away from their zero start
         for (const Tensor& p : gates->parameters())
           for (int64_t i = 0; i < p.numel(); ++i) p.data()[i] = 0.7f * r.normal();
         return of_module<Gates>(
             gates, [](const Gates& m, const V& v) { return m.forward(v[v.size() - 2], v.back(), 1); },
             {randn_leaf({2, 3, 4}, 2), randn_leaf({2, 3, 4}, 3)});
       }},
      {"Dropout", "train, fixed mask",
       [] {
         // A Dropout seeded afresh on every call: the same mask each time.
         return GradcheckSetup{[](const V& v) { return Dropout(0.3f, std::make_shared<Rng>(42)).forward(v[0]); },
                               {randn_leaf({4, 8}, 1)}, 0, ""};
       }},
      {"Dropout", "eval", [last] {
         auto d = std::make_shared<Dropout>(0.3f);
         d->eval();
         return of_module<Dropout>(d, last, {randn_leaf({4, 8}, 1)});
       }},
      {"DropPath", "train, fixed mask",
       [] {
         // Seeded afresh on every call: 2 of the 5 sequences dropped each time.
         return GradcheckSetup{[](const V& v) { return DropPath(0.4f, std::make_shared<Rng>(7)).forward(v[0]); },
                               {randn_leaf({5, 3, 4}, 1)}, 0, ""};
       }},
      {"Head", "",
       [last] {
         Rng init(1);
         auto head = std::make_shared<Head>(6, 4, 8, 0.0f, init);
         scale_weights(*head, 25.0f);  // non-uniform attention
         return of_module<Head>(head, last, {randn_leaf({2, 5, 6}, 2)});
       }},
      {"MultiHead", "",
       [last] {
         Rng init(1);
         auto mh = std::make_shared<MultiHead>(6, 3, 2, 8, 0.0f, true, init);
         scale_weights(*mh, 25.0f);
         return of_module<MultiHead>(mh, last, {randn_leaf({2, 4, 6}, 2)});
       }},
      {"FeedForward", "gelu", [] { return feed_forward(Activation::gelu); }},
      {"FeedForward", "relu", [] { return feed_forward(Activation::relu); }},
      {"FeedForward", "relu2", [] { return feed_forward(Activation::relu2); }},
      {"FeedForward", "swiglu", [] { return feed_forward(Activation::swiglu); }},
      {"FeedForward", "gelu-tanh", [] { return feed_forward(Activation::gelu_tanh); }},
      {"Block", "",
       [last] {
         Rng init(1);
         auto block = std::make_shared<Block>(8, 2, 8, 0.0f, true, Activation::gelu, init);
         scale_weights(*block, 4.0f);  // non-uniform attention, small enough for central differences
         return of_module<Block>(block, last, {randn_leaf({2, 4, 8}, 2)});
       }},
      {"GPT", "loss", [] { return gpt(true); }},
      {"GPT", "logits", [] { return gpt(false); }},
      {"GPT", "loss, every model option",
       [] {
         GPTConfig c = tiny_gpt();
         c.pos = Positions::rope, c.qk_norm = true, c.activation = Activation::relu2;
         c.logit_softcap = 3.0f, c.tie_weights = true, c.bigram = true, c.x0_shortcut = true;
         c.value_embed = true, c.drop_path = 0.5f, c.dropout = 0.2f, c.dropout_at = DropoutAt::attention;
         c.unet_skips = true, c.mtp = 0.6f;
         return gpt(true, c, 2.0f);  // ReLU²'s curvature: central differences need smaller activations
       }},
      {"GPT", "loss, llama's norm and feed-forward",
       [] {
         GPTConfig c = tiny_gpt();
         c.pos = Positions::rope, c.norm = Norm::rms, c.activation = Activation::swiglu, c.bias = false;
         return gpt(true, c);
       }},
      // --ffn-hidden: a width that is neither SwiGLU's default (32 at C 8) nor 4C.
      {"GPT", "loss, swiglu with ffn_hidden 12",
       [] {
         GPTConfig c = tiny_gpt();
         c.pos = Positions::rope, c.norm = Norm::rms, c.activation = Activation::swiglu, c.bias = false;
         c.ffn_hidden = 12.0f;
         return gpt(true, c);
       }},
      {"GPT", "loss, gelu with ffn_hidden 12",
       [] {
         GPTConfig c = tiny_gpt();
         c.ffn_hidden = 12.0f;
         return gpt(true, c);
       }},
      // d loss / d (embedded input), through the blocks, the final LayerNorm and the head.
      {"GPT", "loss by embedded input",
       [] {
         auto model = std::make_shared<GPT>(tiny_gpt());
         return GradcheckSetup{[model](const V& v) {
                                 Tensor x = v[0];
                                 for (const auto& b : model->blocks) x = b->forward(x);
                                 return cross_entropy(model->lm_head->forward(model->ln_f->forward(x)), kTargets);
                               },
                               {randn_leaf({2, 4, 8}, 5)}, 0, "targets (2, 4)"};
       }},
  };
  return cases;
}

}  // namespace folio::nn
