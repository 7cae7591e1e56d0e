// model_from_gguf (io/gguf_model.h): a GGUF of an architecture folio exports (gpt2,
// gptneox, llama, qwen3), back into folio's model. Every key and tensor shape is checked
// against the config it implies before the model is built, so a file cannot make folio
// allocate more than it holds.
#include <cmath>
#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "io/gguf_model.h"
#include "nn/transformer.h"

namespace folio {
namespace {

// The sizes a checkpoint's config may have (io/config_json.cpp): block_size sizes the
// rope tables, which no tensor of the file bounds.
constexpr int64_t kMaxBlock = 1 << 16, kMaxLayers = 256, kMaxEmbd = 1 << 14;

std::string shown(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += cat(i ? ", " : "", shape[i]);
  return s + ")";
}

struct Source {
  const GgufFile& f;
  const std::string& where;

  int64_t integer(const std::string& key, int64_t max) const {
    const GgufValue* v = f.find(key);
    if (!v) fail("gguf", where, ": key ", key, " is missing");
    if (v->is_array || !std::holds_alternative<int64_t>(v->value) || v->type == GgufType::boolean)
      fail("gguf", where, ": key ", key, " is not an integer");
    const int64_t n = std::get<int64_t>(v->value);
    if (n < 1 || n > max) fail("gguf", where, ": key ", key, " is ", n, ", outside [1, ", max, "]");
    return n;
  }
  double real(const std::string& key, double otherwise) const {
    const GgufValue* v = f.find(key);
    if (!v) return otherwise;
    if (v->is_array || !std::holds_alternative<double>(v->value)) fail("gguf", where, ": key ", key, " is not a number");
    return std::get<double>(v->value);
  }
  std::string text(const std::string& key) const {
    const GgufValue* v = f.find(key);
    if (!v || v->is_array || !std::holds_alternative<std::string>(v->value))
      fail("gguf", where, ": key ", key, " is missing or not a string");
    return std::get<std::string>(v->value);
  }
  // The tensor `name`, which must have `shape` (numpy order).
  const GgufTensor& tensor(const std::string& name, std::vector<int64_t> shape) const {
    const GgufTensor* t = f.tensor(name);
    if (!t) fail("gguf", where, ": tensor ", name, " is missing");
    if (t->shape != shape) fail("gguf", where, ": tensor ", name, ": shape ", shown(t->shape), ", expected ", shown(shape));
    return *t;
  }
};

bool all_zero(const std::vector<float>& v) {
  for (const float x : v)
    if (x != 0.0f) return false;
  return true;
}

using Weights = std::vector<std::pair<std::string, std::vector<float>>>;  // folio name -> values

// `key` (when the file has it) must hold `want`, which is all folio's model can compute.
void expect_real(const Source& s, const std::string& key, double want, const char* why) {
  const double got = s.real(key, want);
  if (float(got) != float(want)) fail("gguf", s.where, ": key ", key, " is ", got, ", expected ", want, ": ", why);
}

// The feed-forward's hidden width, ARCH.feed_forward_length: any width, which becomes
// the config's ffn_hidden where it is not folio's default for the activation (already set).
int64_t feed_forward_width(const Source& s, nn::GPTConfig& c) {
  const std::string key = s.text("general.architecture") + ".feed_forward_length";
  const int64_t H = s.integer(key, nn::GPTConfig::kMaxFfnHidden);
  c.ffn_hidden = H == nn::feed_forward_hidden(c.n_embd, c.activation) ? 0.0f : float(H);
  return H;
}

// gpt2 and gptneox blocks: LayerNorm, fused q/k/v, GELU, zero biases.
void layer_norm_blocks(const Source& s, nn::GPTConfig& c, Weights& w) {
  const std::string arch = s.text("general.architecture");
  const int64_t C = c.n_embd, HS = C / c.n_head;
  // llama.cpp's GELU is the tanh form; folio's files say which form they were trained with.
  c.activation = nn::Activation::gelu_tanh;
  if (const GgufValue* act = s.f.find("folio.activation")) {
    const auto a = !act->is_array && std::holds_alternative<std::string>(act->value)
                       ? nn::parse_activation(std::get<std::string>(act->value))
                       : std::nullopt;
    if (!a || (*a != nn::Activation::gelu && *a != nn::Activation::gelu_tanh))
      fail("gguf", s.where, ": key folio.activation must be gelu or gelu-tanh, the GELU of the ", arch, " graph");
    c.activation = *a;
  }
  const int64_t H = feed_forward_width(s, c);
  if (float(s.real(arch + ".attention.layer_norm_epsilon", -1.0)) != kLayerNormEps)
    fail("gguf", s.where, ": layer_norm_epsilon must be ", kLayerNormEps, ", folio's");
  if (arch == "gptneox") {
    const GgufValue* par = s.f.find(arch + ".use_parallel_residual");
    if (!par || par->is_array || !std::holds_alternative<bool>(par->value) || std::get<bool>(par->value))
      fail("gguf", s.where, ": use_parallel_residual must be false: folio's blocks are sequential");
  }
  auto take = [&](const std::string& name, std::vector<int64_t> shape) { return gguf_floats(s.tensor(name, shape)); };
  auto zero_bias = [&](const std::string& name, int64_t n) {
    if (!all_zero(take(name, {n})))
      fail("gguf", s.where, ": tensor ", name, " is not zero: folio's model has no bias there");
  };
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string b = cat("blk.", l, "."), m = cat("blocks.", l, ".");
    w.emplace_back(m + "ln1.weight", take(b + "attn_norm.weight", {C}));
    w.emplace_back(m + "ln1.bias", take(b + "attn_norm.bias", {C}));
    const std::vector<float> qkv = take(b + "attn_qkv.weight", {3 * C, C});  // (3C, C): all q, all k, all v
    zero_bias(b + "attn_qkv.bias", 3 * C);
    const char* parts[] = {"query", "key", "value"};
    for (int part = 0; part < 3; ++part)
      for (int64_t h = 0; h < c.n_head; ++h) {
        const auto at = qkv.begin() + (part * C + h * HS) * C;
        w.emplace_back(cat(m, "attn.heads.", h, ".", parts[part], ".weight"), std::vector<float>(at, at + HS * C));
      }
    w.emplace_back(m + "attn.proj.weight", take(b + "attn_output.weight", {C, C}));
    zero_bias(b + "attn_output.bias", C);
    w.emplace_back(m + "ln2.weight", take(b + "ffn_norm.weight", {C}));
    w.emplace_back(m + "ln2.bias", take(b + "ffn_norm.bias", {C}));
    w.emplace_back(m + "ffwd.fc.weight", take(b + "ffn_up.weight", {H, C}));
    zero_bias(b + "ffn_up.bias", H);
    w.emplace_back(m + "ffwd.proj.weight", take(b + "ffn_down.weight", {C, H}));
    zero_bias(b + "ffn_down.bias", C);
  }
  w.emplace_back("ln_f.weight", take("output_norm.weight", {C}));
  w.emplace_back("ln_f.bias", take("output_norm.bias", {C}));
}

// llama blocks: RMSNorm, q/k/v apart with q and k rows in llama's rope order, SwiGLU;
// qwen3's are the same with folio's rope order and a per-head q and k RMSNorm, whose
// weights must be ones (folio's QK-norm has none). What folio's blocks cannot compute
// is refused naming its key.
void llama_blocks(const Source& s, nn::GPTConfig& c, Weights& w) {
  const std::string arch = s.text("general.architecture");
  c.activation = nn::Activation::swiglu;
  c.norm = nn::Norm::rms;
  c.qk_norm = arch == "qwen3";
  const int64_t C = c.n_embd, HS = C / c.n_head, H = feed_forward_width(s, c);
  const std::string kv_key = arch + ".attention.head_count_kv";
  if (const int64_t kv = s.f.find(kv_key) ? s.integer(kv_key, kMaxEmbd) : c.n_head; kv != c.n_head)
    fail("gguf", s.where, ": key ", kv_key, " is ", kv, ", head_count ", c.n_head,
         ": grouped-query attention, which folio's attention does not have (every head its own k and v)");
  for (const std::string& length : {arch + ".attention.key_length", arch + ".attention.value_length"})
    if (s.f.find(length) && s.integer(length, kMaxEmbd) != HS)
      fail("gguf", s.where, ": key ", length, " must be the head size ", HS, " (embedding_length / head_count)");
  if (s.f.find(arch + ".expert_count") && s.integer(arch + ".expert_count", 1 << 20) > 0)
    fail("gguf", s.where, ": key ", arch, ".expert_count: a mixture of experts, which folio's blocks do not have");
  if (const GgufValue* scaling = s.f.find(arch + ".rope.scaling.type");
      scaling && !(std::holds_alternative<std::string>(scaling->value) && std::get<std::string>(scaling->value) == "none"))
    fail("gguf", s.where, ": key ", arch, ".rope.scaling.type: folio's rope has no scaling");
  expect_real(s, arch + ".rope.scaling.factor", 1.0, "folio's rope has no scaling");
  const std::string eps = arch + ".attention.layer_norm_rms_epsilon";
  if (!s.f.find(eps)) fail("gguf", s.where, ": key ", eps, " is missing");
  expect_real(s, eps, nn::kModelRmsNormEps, "folio's RMSNorm epsilon");
  auto take = [&](const std::string& name, std::vector<int64_t> shape) { return gguf_floats(s.tensor(name, shape)); };
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string b = cat("blk.", l, "."), m = cat("blocks.", l, ".");
    w.emplace_back(m + "ln1.weight", take(b + "attn_norm.weight", {C}));
    const std::vector<float> q = take(b + "attn_q.weight", {C, C});  // (C, C): head h's rows at h * HS
    const std::vector<float> k = take(b + "attn_k.weight", {C, C});  // (C, C)
    const std::vector<float> v = take(b + "attn_v.weight", {C, C});  // (C, C)
    for (int64_t h = 0; h < c.n_head; ++h) {
      std::vector<float> qh(size_t(HS * C)), kh(size_t(HS * C));  // (HS, C) each, back in folio's rope order
      if (c.qk_norm) {  // qwen3's rope is folio's
        std::copy_n(q.data() + h * HS * C, HS * C, qh.data());
        std::copy_n(k.data() + h * HS * C, HS * C, kh.data());
      } else {
        gguf_rope_rows(q.data() + h * HS * C, qh.data(), HS, C, false);
        gguf_rope_rows(k.data() + h * HS * C, kh.data(), HS, C, false);
      }
      w.emplace_back(cat(m, "attn.heads.", h, ".query.weight"), std::move(qh));
      w.emplace_back(cat(m, "attn.heads.", h, ".key.weight"), std::move(kh));
      w.emplace_back(cat(m, "attn.heads.", h, ".value.weight"),
                     std::vector<float>(v.begin() + h * HS * C, v.begin() + (h + 1) * HS * C));
    }
    if (c.qk_norm)
      for (const std::string& norm : {b + "attn_q_norm.weight", b + "attn_k_norm.weight"})
        for (const float x : take(norm, {HS}))
          if (x != 1.0f) fail("gguf", s.where, ": tensor ", norm, " is not all ones: folio's QK-norm has no weight");
    w.emplace_back(m + "attn.proj.weight", take(b + "attn_output.weight", {C, C}));
    w.emplace_back(m + "ln2.weight", take(b + "ffn_norm.weight", {C}));
    std::vector<float> fc = take(b + "ffn_gate.weight", {H, C});  // (2H, C) once up follows: [gate; up]
    const std::vector<float> up = take(b + "ffn_up.weight", {H, C});
    fc.insert(fc.end(), up.begin(), up.end());
    w.emplace_back(m + "ffwd.fc.weight", std::move(fc));
    w.emplace_back(m + "ffwd.proj.weight", take(b + "ffn_down.weight", {C, H}));
  }
  w.emplace_back("ln_f.weight", take("output_norm.weight", {C}));
}

}  // namespace

ImportedModel model_from_gguf(const GgufFile& f, const std::string& where) {
  const Source s{f, where};
  const std::string arch = s.text("general.architecture");
  const bool llama = arch == "llama" || arch == "qwen3";  // the llama family: qwen3 adds QK-norm
  if (arch != "gpt2" && arch != "gptneox" && !llama)
    fail("gguf", where, ": architecture ", arch, " is not one folio imports (gpt2, gptneox, llama, qwen3)");
  TokenizerMetadata meta;
  for (const auto& [k, v] : f.kv)
    if (k.rfind("folio.tokenizer.", 0) == 0 && !v.is_array && std::holds_alternative<std::string>(v.value))
      meta.emplace_back(k.substr(16), std::get<std::string>(v.value));
  // folio's own file gives back the tokenizer it was exported with; one made elsewhere
  // its tokenizer.ggml.* vocabulary (io/gguf_vocab_import.cpp).
  ImportedModel out;
  out.tokenizer = meta.empty() ? tokenizer_from_gguf(f, where) : load_tokenizer(meta, where + ": folio.tokenizer");

  nn::GPTConfig c;
  c.vocab_size = out.tokenizer->vocab_size();
  c.n_embd = s.integer(arch + ".embedding_length", kMaxEmbd);
  c.n_layer = s.integer(arch + ".block_count", kMaxLayers);
  c.n_head = s.integer(arch + ".attention.head_count", kMaxEmbd);
  c.block_size = s.integer(arch + ".context_length", kMaxBlock);
  c.pos = arch == "gpt2" ? nn::Positions::learned : nn::Positions::rope;
  c.bias = false;
  const int64_t C = c.n_embd;
  if (C % c.n_head) fail("gguf", where, ": embedding_length ", C, " is not divisible by head_count ", c.n_head);
  const int64_t HS = C / c.n_head;
  if (c.pos == nn::Positions::rope) {
    if (HS % 2) fail("gguf", where, ": the head size ", HS, " is odd: rope rotates pairs");
    const std::string dims = arch + ".rope.dimension_count";
    if ((arch == "gptneox" || f.find(dims)) && s.integer(dims, kMaxEmbd) != HS)
      fail("gguf", where, ": key ", dims, " must be the head size ", HS, ": folio rotates whole heads");
    expect_real(s, arch + ".rope.freq_base", 10000.0, "folio's rope base");
  }
  const GgufValue* tokens = f.find("tokenizer.ggml.tokens");
  // An array of strings: any other kind of value is refused here, not read as one.
  const auto* names = tokens ? std::get_if<std::vector<std::string>>(&tokens->value) : nullptr;
  if (!names) fail("gguf", where, ": key tokenizer.ggml.tokens must be an array of strings");
  const int64_t Vg = int64_t(names->size());
  if (Vg < c.vocab_size || Vg > c.vocab_size + 3)
    fail("gguf", where, ": tokenizer.ggml.tokens has ", Vg, " tokens for a tokenizer of ", c.vocab_size);

  // Every tensor's shape first; then the weights.
  Weights w;
  auto take = [&](const std::string& name, std::vector<int64_t> shape) { return gguf_floats(s.tensor(name, shape)); };
  const std::vector<float> embd = take("token_embd.weight", {Vg, C});
  w.emplace_back("token_embedding.weight", std::vector<float>(embd.begin(), embd.begin() + c.vocab_size * C));
  if (arch == "gpt2") w.emplace_back("position_embedding.weight", take("position_embd.weight", {c.block_size, C}));
  if (llama)
    llama_blocks(s, c, w);
  else
    layer_norm_blocks(s, c, w);
  // No output matrix, or the embedding's very values: a tied model.
  const GgufTensor* output = f.tensor("output.weight");
  const std::vector<float> head = output ? take("output.weight", {Vg, C}) : embd;
  c.tie_weights = head == embd;
  if (!c.tie_weights) w.emplace_back("lm_head.weight", std::vector<float>(head.begin(), head.begin() + c.vocab_size * C));
  // Tensors outside the blocks (embeddings, final norm, output) and in each block.
  const size_t outside = arch == "gpt2" ? 5 : arch == "gptneox" ? 4 : 3;
  const size_t per_block = arch == "llama" ? 9 : arch == "qwen3" ? 11 : 12;
  const size_t expected = outside + size_t(c.n_layer) * per_block - (output ? 0 : 1);
  if (f.tensors.size() != expected)
    fail("gguf", where, ": ", f.tensors.size(), " tensors, not the ", expected, " a ", arch, " model of ", c.n_layer,
         " blocks has");

  c.validate();
  out.model = std::make_unique<nn::GPT>(c, nn::Arena::to_be_loaded(c.parameter_count()));  // each written below
  for (const auto& named : out.model->named_parameters()) {
    const std::string& name = named.first;
    const Tensor& p = named.second;
    const auto it = std::find_if(w.begin(), w.end(), [&](const auto& e) { return e.first == name; });
    if (it == w.end() || int64_t(it->second.size()) != p.numel())
      fail("gguf", where, ": no weights for the model's ", name);
    for (const float x : it->second)
      if (!std::isfinite(x)) fail("gguf", where, ": the weights for ", name, " are not all finite");
    std::memcpy(p.data(), it->second.data(), it->second.size() * sizeof(float));
    p.mark_modified();
  }
  return out;
}

}  // namespace folio
