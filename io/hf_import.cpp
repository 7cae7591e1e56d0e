// model_from_hf (io/hf_gpt2.h): an HF GPT-2 directory into folio's model. The config
// and every tensor's shape are checked before the model is built, so a stranger's
// file cannot make folio allocate more than it holds.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "base/error.h"
#include "base/read_file.h"
#include "io/hf_gpt2.h"
#include "io/json.h"
#include "io/safetensors.h"

namespace folio {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMaxBlock = 1 << 16, kMaxLayers = 256, kMaxEmbd = 1 << 14;
constexpr int64_t kMaxConfigBytes = 1 << 20;

// config.json's keys that say nothing about the forward pass (training dropouts,
// the sequence-classification head's settings, bookkeeping): read past.
const std::set<std::string> kIgnoredKeys = {
    "_name_or_path", "architectures", "attn_pdrop", "embd_pdrop", "resid_pdrop", "summary_activation",
    "summary_first_dropout", "summary_proj_to_labels", "summary_type", "summary_use_proj", "task_specific_params",
    "initializer_range", "transformers_version", "torch_dtype", "use_cache", "bos_token_id", "eos_token_id",
    "pad_token_id", "n_ctx", "n_inner", "scale_attn_weights", "scale_attn_by_inverse_layer_idx",
    "reorder_and_upcast_attn", "add_cross_attention", "tie_word_embeddings", "model_type", "n_layer", "n_head",
    "n_embd", "n_positions", "vocab_size", "layer_norm_epsilon", "activation_function"};

struct Config {
  const Json& j;
  const std::string& where;

  const Json* get(const char* key) const { return j.find(key); }
  int64_t integer(const char* key, int64_t max) const {
    const Json* v = get(key);
    if (!v) fail("hf", where, ": key ", key, " is missing");
    if (!v->is_int() || v->as_int() < 1 || v->as_int() > max)
      fail("hf", where, ": ", key, " must be an integer in [1, ", max, "], got ", v->dump());
    return v->as_int();
  }
  // A key folio has one answer to: absent, null or that answer.
  void must_be(const char* key, const Json& value, const std::string& why) const {
    const Json* v = get(key);
    if (v && !v->is_null() && !(*v == value) && !(v->is_number() && value.is_number() && v->as_double() == value.as_double()))
      fail("hf", where, ": ", key, " ", v->dump(), " is not supported: ", why);
  }
};

nn::GPTConfig read_config(const std::string& path) {
  Json j;
  try {
    j = Json::parse(read_file(path, kMaxConfigBytes));
  } catch (const std::exception& e) {
    fail("hf", path, ": ", e.what());
  }
  if (!j.is_object()) fail("hf", path, ": expected a JSON object");
  const Config c{j, path};
  const Json* type = c.get("model_type");
  if (!type || !type->is_string() || type->as_string() != "gpt2")
    fail("hf", path, ": model_type ", type ? type->dump() : "(missing)", " is not \"gpt2\": folio imports GPT-2 only");
  for (const auto& [key, value] : j.as_object())
    if (!kIgnoredKeys.contains(key)) fail("hf", path, ": key ", key, " is not one folio knows for gpt2");
  nn::GPTConfig g;
  g.n_layer = c.integer("n_layer", kMaxLayers);
  g.n_head = c.integer("n_head", kMaxEmbd);
  g.n_embd = c.integer("n_embd", kMaxEmbd);
  g.block_size = c.integer("n_positions", kMaxBlock);
  g.vocab_size = c.integer("vocab_size", TokenizerSpec::kMaxVocab);
  if (g.n_embd % g.n_head) fail("hf", path, ": n_embd ", g.n_embd, " is not divisible by n_head ", g.n_head);
  if (const Json* n_ctx = c.get("n_ctx"); n_ctx && !n_ctx->is_null() && !(*n_ctx == Json(g.block_size)))
    fail("hf", path, ": n_ctx ", n_ctx->dump(), " differs from n_positions ", g.block_size);
  const Json* act = c.get("activation_function");
  const std::string act_name = act && act->is_string() ? act->as_string() : "";
  if (act_name == "gelu_new") g.activation = nn::Activation::gelu_tanh;
  else if (act_name == "gelu") g.activation = nn::Activation::gelu;
  else fail("hf", path, ": activation_function ", act ? act->dump() : "(missing)", " is not gelu_new or gelu");
  const Json* eps = c.get("layer_norm_epsilon");
  if (eps && !(eps->is_number() && float(eps->as_double()) == kLayerNormEps))
    fail("hf", path, ": layer_norm_epsilon ", eps->dump(), " is not supported: folio's LayerNorm uses ", kLayerNormEps);
  if (const Json* inner = c.get("n_inner"); inner && !inner->is_null()) {  // null: 4C, as g's default
    const int64_t H = c.integer("n_inner", nn::GPTConfig::kMaxFfnHidden);
    g.ffn_hidden = H == 4 * g.n_embd ? 0.0f : float(H);
  }
  c.must_be("scale_attn_weights", Json(true), "folio scales the scores by head_size^-0.5");
  c.must_be("scale_attn_by_inverse_layer_idx", Json(false), "folio does not scale the scores by layer");
  c.must_be("add_cross_attention", Json(false), "folio's blocks have no cross-attention");
  g.pos = nn::Positions::learned;
  g.norm = nn::Norm::layer;
  g.bias = true, g.gpt2_biases = true;
  const Json* tie = c.get("tie_word_embeddings");  // HF's default: tied
  if (tie && !tie->is_bool()) fail("hf", path, ": tie_word_embeddings must be true or false, got ", tie->dump());
  g.tie_weights = !tie || tie->as_bool();
  g.dropout = 0.0f;
  return g;
}

// The tensors by name without the "transformer." prefix; each taken once.
struct Tensors {
  const SafetensorsFile& f;
  std::map<std::string, const Tensor*> by_name;
  std::set<std::string> taken;

  const Tensor* find(const std::string& name) const {
    const auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : it->second;
  }
  // The tensor `name` (HF's, unprefixed), which must have `shape`.
  const Tensor& take(const std::string& name, const Shape& shape) {
    const Tensor* t = find(name);
    if (!t) fail("hf", f.path, ": tensor ", name, " is missing");
    if (t->shape() != shape) fail("hf", f.path, ": tensor ", name, ": shape ", t->shape(), ", expected ", shape);
    taken.insert(name);
    return *t;
  }
};

}  // namespace

ImportedModel model_from_hf(const std::string& dir) {
  const fs::path d(dir);
  std::error_code ec;
  if (!fs::is_directory(d, ec)) fail("hf", dir, ": not a directory (expected HF's gpt2 directory)");
  for (const char* name : {"config.json", "vocab.json", "merges.txt"})
    if (!fs::exists(d / name, ec)) fail("hf", (d / name).string(), ": missing (an HF GPT-2 directory has it)");
  const fs::path weights = d / "model.safetensors";
  if (!fs::exists(weights, ec)) {
    if (fs::exists(d / "pytorch_model.bin", ec))
      fail("hf", weights.string(), ": missing; folio reads safetensors, not pytorch_model.bin (a pickle, which "
           "folio does not run): convert it to model.safetensors first (the safetensors Python package does)");
    fail("hf", weights.string(), ": missing (an HF GPT-2 directory has it)");
  }
  nn::GPTConfig c = read_config((d / "config.json").string());
  ImportedModel out;
  try {
    out.tokenizer = make_tokenizer(TokenizerSpec{.name = dir}, "");
  } catch (const std::exception& e) {
    fail("hf", dir, ": vocab.json and merges.txt: ", e.what());
  }
  if (out.tokenizer->vocab_size() != c.vocab_size)
    fail("hf", (d / "vocab.json").string(), ": ", out.tokenizer->vocab_size(), " tokens, but config.json's vocab_size is ",
         c.vocab_size);

  const SafetensorsFile f = load_safetensors(weights.string());
  Tensors s{f, {}, {}};
  for (const NamedTensor& t : f.tensors) {
    const std::string name = t.name.starts_with("transformer.") ? t.name.substr(12) : t.name;
    if (!s.by_name.emplace(name, &t.tensor).second) fail("hf", f.path, ": tensor ", name, " appears twice");
  }
  const int64_t C = c.n_embd, V = c.vocab_size, HS = C / c.n_head, H = c.ffn_width();  // H: n_inner, 4C unless given
  const Tensor& wte = s.take("wte.weight", {V, C});
  // Tied (HF's default), HF's model reads wte for its output whatever lm_head.weight
  // holds: one that differs is refused rather than silently dropped. Untied, it is needed.
  if (s.find("lm_head.weight")) {
    const Tensor& head = s.take("lm_head.weight", {V, C});
    if (c.tie_weights && !std::equal(head.data(), head.data() + head.numel(), wte.data()))
      fail("hf", f.path, ": lm_head.weight differs from wte, but config.json ties them (tie_word_embeddings is "
           "true or absent), so HF's model would not use it");
  } else if (!c.tie_weights) {
    fail("hf", f.path, ": tensor lm_head.weight is missing, and config.json's tie_word_embeddings is false");
  }
  c.validate();
  out.model = std::make_unique<nn::GPT>(c, nn::Arena::to_be_loaded(c.parameter_count()));
  // Each of folio's parameters is written once, straight from the file's tensors: no
  // third copy of the weights at GPT-2's size.
  std::map<std::string, Tensor> params;
  for (const auto& [name, p] : out.model->named_parameters()) params.emplace(name, p);
  std::set<std::string> written;
  auto param = [&](const std::string& name) -> float* {  // folio's parameter `name`, to be written
    const auto it = params.find(name);
    if (it == params.end()) fail("hf", "folio's model has no parameter ", name);
    written.insert(name);
    return it->second.data();
  };
  auto copy = [&](const std::string& name, const Tensor& t) { std::copy_n(t.data(), t.numel(), param(name)); };
  auto transpose = [&](const std::string& name, const Tensor& w) {  // (in, out) -> (out, in)
    const int64_t in = w.size(0), o = w.size(1);
    float* to = param(name);
    for (int64_t i = 0; i < in; ++i)
      for (int64_t j = 0; j < o; ++j) to[j * in + i] = w.data()[i * o + j];
  };
  copy("token_embedding.weight", wte);
  copy("position_embedding.weight", s.take("wpe.weight", {c.block_size, C}));
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string h = cat("h.", l, "."), m = cat("blocks.", l, ".");
    copy(m + "ln1.weight", s.take(h + "ln_1.weight", {C}));
    copy(m + "ln1.bias", s.take(h + "ln_1.bias", {C}));
    const Tensor& qkv = s.take(h + "attn.c_attn.weight", {C, 3 * C});  // (C, 3C): columns q, k, v
    const float* qkv_b = s.take(h + "attn.c_attn.bias", {3 * C}).data();  // (3C): q, k, v
    const int part_of[3] = {1, 0, 2};  // folio's per-head order k, q, v in HF's q, k, v
    const char* names[3] = {"key", "query", "value"};
    float* bias = param(m + "attn.qkv_bias");  // (n_head * 3 * HS): per head [k; q; v]
    for (int64_t head = 0; head < c.n_head; ++head)
      for (int j = 0; j < 3; ++j) {
        const int64_t col = part_of[j] * C + head * HS;  // the head's first column in c_attn
        float* to = param(cat(m, "attn.heads.", head, ".", names[j], ".weight"));  // (HS, C)
        for (int64_t i = 0; i < HS; ++i)
          for (int64_t k = 0; k < C; ++k) to[i * C + k] = qkv.data()[k * 3 * C + col + i];
        std::copy_n(qkv_b + col, HS, bias + (head * 3 + j) * HS);
      }
    transpose(m + "attn.proj.weight", s.take(h + "attn.c_proj.weight", {C, C}));
    copy(m + "attn.proj.bias", s.take(h + "attn.c_proj.bias", {C}));
    copy(m + "ln2.weight", s.take(h + "ln_2.weight", {C}));
    copy(m + "ln2.bias", s.take(h + "ln_2.bias", {C}));
    transpose(m + "ffwd.fc.weight", s.take(h + "mlp.c_fc.weight", {C, H}));
    copy(m + "ffwd.fc.bias", s.take(h + "mlp.c_fc.bias", {H}));
    transpose(m + "ffwd.proj.weight", s.take(h + "mlp.c_proj.weight", {H, C}));
    copy(m + "ffwd.proj.bias", s.take(h + "mlp.c_proj.bias", {C}));
    for (const char* buffer : {"attn.bias", "attn.masked_bias"}) s.taken.insert(h + buffer);  // the mask, not weights
  }
  copy("ln_f.weight", s.take("ln_f.weight", {C}));
  copy("ln_f.bias", s.take("ln_f.bias", {C}));
  if (!c.tie_weights) copy("lm_head.weight", *s.find("lm_head.weight"));
  for (const auto& [name, t] : s.by_name)
    if (!s.taken.contains(name)) fail("hf", f.path, ": tensor ", name, " is not one of GPT-2's (", c.n_layer, " blocks)");
  for (const auto& [name, p] : params) {
    if (!written.contains(name)) fail("hf", f.path, ": no weights for folio's ", name);
    for (int64_t i = 0; i < p.numel(); ++i)
      if (!std::isfinite(p.data()[i])) fail("hf", f.path, ": the weights for folio's ", name, " are not all finite");
    p.mark_modified();
  }
  return out;
}

}  // namespace folio
