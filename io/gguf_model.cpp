#include "io/gguf_model.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "base/error.h"
#include "data/chat_template.h"
#include "data/vocab.h"
#include "nn/model_options.h"

namespace folio {
namespace {

using nn::GPTConfig;

constexpr float kRopeBase = 10000.0f;  // nn::RotaryTables' base
const std::string kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space
enum TokenType : int64_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// ---- the vocabulary ----

struct Vocabulary {
  std::vector<std::string> tokens;
  std::vector<double> scores;
  std::vector<int64_t> types;
  int64_t unk = -1, bos = -1, eos = -1, eot = -1;  // eot: a chat model's <|im_end|>
  std::vector<int64_t> suppress;  // ids the model does not have (zero rows): never to be sampled
};

std::string with_spm_spaces(const std::string& text) {
  std::string out;
  for (char c : text) out += c == ' ' ? kSpace : std::string(1, c);
  return out;
}

// A chat model's two control tokens (data/chat_template.h) after the base's ids, as
// llama.cpp reads them: control tokens whose text its chat template writes.
void add_chat_tokens(Vocabulary& v, const Tokenizer& t) {
  const std::optional<ChatTokens> ct = t.chat_tokens();
  if (!ct) return;
  if (int64_t(v.tokens.size()) != ct->start) fail("gguf", "the chat tokens do not follow the base vocabulary");
  for (const char* text : {kImStart, kImEnd}) v.tokens.emplace_back(text), v.types.push_back(kControl), v.scores.push_back(0.0);
  v.eot = ct->end;
}

Vocabulary char_vocabulary(const Tokenizer& chat) {
  Vocabulary v;
  const Tokenizer& t = chat_base(chat);
  const int V = t.vocab_size();
  const std::optional<int32_t> eot = t.end_of_text();
  for (int32_t id = 0; id < V; ++id) {
    if (eot && id == *eot) {
      v.tokens.push_back("</s>"), v.types.push_back(kControl), v.eos = id;
    } else {
      v.tokens.push_back(with_spm_spaces(t.token_bytes(id)));
      v.types.push_back(kNormal);
    }
    v.scores.push_back(0.0);
  }
  add_chat_tokens(v, chat);
  // llama.cpp gives unk, bos and eos the ids 0, 1 and 2 unless told: real characters.
  // They get ids of their own after the model's.
  auto extra = [&](const char* text, int64_t type) {
    v.suppress.push_back(int64_t(v.tokens.size()));
    v.tokens.emplace_back(text), v.types.push_back(type), v.scores.push_back(0.0);
    return int64_t(v.tokens.size()) - 1;
  };
  v.unk = extra("<unk>", kUnknown);
  v.bos = extra("<s>", kControl);
  if (v.eos < 0) v.eos = extra("</s>", kControl);
  return v;
}

Vocabulary spm_vocabulary(const Tokenizer& chat) {
  const Tokenizer& t = chat_base(chat);
  sentencepiece::SentencePieceProcessor sp;
  if (!sp.LoadFromSerializedProto(t.export_model().value_or("")).ok())
    fail("gguf", "the tokenizer (", t.describe(), ") has no readable SentencePiece model");
  Vocabulary v;
  for (int id = 0; id < sp.GetPieceSize(); ++id) {
    v.tokens.push_back(sp.IdToPiece(id));
    v.scores.push_back(sp.GetScore(id));
    v.types.push_back(sp.IsByte(id) ? kByte : sp.IsUnknown(id) ? kUnknown : sp.IsControl(id) ? kControl
                      : sp.IsUnused(id) ? kUnused : kNormal);
  }
  v.unk = sp.unk_id(), v.bos = sp.bos_id(), v.eos = sp.eos_id();
  add_chat_tokens(v, chat);
  return v;
}

// ---- tensors ----

using Params = std::map<std::string, Tensor>;

GgufTensor tensor(const std::string& name, std::vector<int64_t> shape, const float* values, GgufDtype dtype) {
  GgufTensor t{name, std::move(shape), GgufDtype::f32, {}};
  // Vectors (norms, biases) stay f32, as llama.cpp's converter keeps them; a matrix whose
  // rows are not whole q8_0 blocks falls back to f16.
  if (t.shape.size() == 2 && dtype != GgufDtype::f32)
    t.dtype = dtype == GgufDtype::q8_0 && t.shape.back() % 32 ? GgufDtype::f16 : dtype;
  t.data = gguf_encode(t.dtype, values, t.numel());
  return t;
}

const Tensor& param(const Params& p, const std::string& name) {
  const auto it = p.find(name);
  if (it == p.end()) fail("gguf", "the model has no parameter ", name);
  return it->second;
}


void add_copy(GgufFile& f, const Params& p, const std::string& gguf, const std::string& folio, GgufDtype dtype) {
  const Tensor& t = param(p, folio);
  std::vector<int64_t> shape(t.shape().dims.begin(), t.shape().dims.begin() + t.shape().ndim);
  f.tensors.push_back(tensor(gguf, shape, t.data(), dtype));
}

void add_zeros(GgufFile& f, const std::string& gguf, int64_t n) {
  const std::vector<float> z(size_t(n), 0.0f);  // (n)
  f.tensors.push_back(tensor(gguf, {n}, z.data(), GgufDtype::f32));
}

// gpt2 and gptneox: LayerNorms with biases, one fused q/k/v matrix, zero biases where
// folio has none.
void layer_norm_block(GgufFile& f, const Params& p, const GPTConfig& c, const std::string& b, const std::string& m,
                      GgufDtype dtype) {
  const int64_t C = c.n_embd, HS = C / c.n_head;
  add_copy(f, p, b + "attn_norm.weight", m + "ln1.weight", dtype);
  add_copy(f, p, b + "attn_norm.bias", m + "ln1.bias", dtype);
  // llama.cpp's fused projection: all heads' queries, then their keys, then values.
  std::vector<float> qkv;  // (3C, C)
  qkv.reserve(size_t(3 * C * C));
  for (const char* part : {"query", "key", "value"})
    for (int64_t h = 0; h < c.n_head; ++h) {
      const Tensor& w = param(p, cat(m, "attn.heads.", h, ".", part, ".weight"));  // (HS, C)
      qkv.insert(qkv.end(), w.data(), w.data() + HS * C);
    }
  f.tensors.push_back(tensor(b + "attn_qkv.weight", {3 * C, C}, qkv.data(), dtype));
  add_zeros(f, b + "attn_qkv.bias", 3 * C);
  add_copy(f, p, b + "attn_output.weight", m + "attn.proj.weight", dtype);
  add_zeros(f, b + "attn_output.bias", C);
  add_copy(f, p, b + "ffn_norm.weight", m + "ln2.weight", dtype);
  add_copy(f, p, b + "ffn_norm.bias", m + "ln2.bias", dtype);
  add_copy(f, p, b + "ffn_up.weight", m + "ffwd.fc.weight", dtype);
  add_zeros(f, b + "ffn_up.bias", c.ffn_width());
  add_copy(f, p, b + "ffn_down.weight", m + "ffwd.proj.weight", dtype);
  add_zeros(f, b + "ffn_down.bias", C);
}

// llama: RMSNorm weights, q, k and v apart (q and k rows in llama's rope order), and
// folio's fused [gate; up] feed-forward matrix cut in two. qwen3 (--qk-norm): the same
// but for its rope, which is folio's (rows as they are), and its per-head q and k
// RMSNorm weights, ones for folio's QK-norm without a weight.
void llama_block(GgufFile& f, const Params& p, const GPTConfig& c, const std::string& b, const std::string& m,
                 GgufDtype dtype) {
  const bool reorder = !c.qk_norm;  // llama's rope turns adjacent pairs, qwen3's folio's
  const int64_t C = c.n_embd, HS = C / c.n_head, H = c.ffn_width();
  add_copy(f, p, b + "attn_norm.weight", m + "ln1.weight", dtype);
  for (const auto& [gguf, part] : {std::pair{"attn_q", "query"}, {"attn_k", "key"}, {"attn_v", "value"}}) {
    std::vector<float> w(size_t(C * C));  // (C, C): head h's rows at h * HS
    for (int64_t h = 0; h < c.n_head; ++h) {
      const Tensor& head = param(p, cat(m, "attn.heads.", h, ".", part, ".weight"));  // (HS, C)
      float* out = w.data() + h * HS * C;
      if (std::string(part) == "value" || !reorder)
        std::copy(head.data(), head.data() + HS * C, out);
      else
        gguf_rope_rows(head.data(), out, HS, C, true);
    }
    f.tensors.push_back(tensor(b + gguf + ".weight", {C, C}, w.data(), dtype));
  }
  if (c.qk_norm) {
    const std::vector<float> ones(size_t(HS), 1.0f);  // (HS)
    for (const char* norm : {"attn_q_norm.weight", "attn_k_norm.weight"})
      f.tensors.push_back(tensor(b + norm, {HS}, ones.data(), dtype));
  }
  add_copy(f, p, b + "attn_output.weight", m + "attn.proj.weight", dtype);
  add_copy(f, p, b + "ffn_norm.weight", m + "ln2.weight", dtype);
  const float* fc = param(p, m + "ffwd.fc.weight").data();  // (2H, C): [gate; up]
  f.tensors.push_back(tensor(b + "ffn_gate.weight", {H, C}, fc, dtype));
  f.tensors.push_back(tensor(b + "ffn_up.weight", {H, C}, fc + H * C, dtype));
  add_copy(f, p, b + "ffn_down.weight", m + "ffwd.proj.weight", dtype);
}

}  // namespace

std::string gguf_architecture(const GPTConfig& c) {
  if (nn::gguf_llama_graph(c)) return c.qk_norm ? "qwen3" : "llama";
  return c.pos == nn::Positions::learned ? "gpt2" : "gptneox";
}

std::vector<std::string> gguf_refusals(const GPTConfig& c, const Tokenizer& tokenizer) {
  // The model options: what their rows' GGUF answers refuse (nn/model_options.cpp).
  std::vector<std::string> why = nn::option_refusals(c, &nn::ModelOption::gguf);
  auto refuse = [&](bool on, const std::string& line) {
    if (on) why.push_back(line);
  };
  // The rest of the model. SwiGLU chooses the llama graph, whose norm and positions
  // the --norm and --pos rows ask for; the other graphs use GELU, whose tanh form
  // llama.cpp computes (gelu-tanh exactly, gelu within 1e-3 of it).
  refuse(!nn::gguf_llama_graph(c) && c.activation != nn::Activation::gelu && c.activation != nn::Activation::gelu_tanh,
         cat("--activation ", to_string(c.activation), ": llama.cpp's gpt2 and gptneox graphs use GELU, its llama "
             "graph SwiGLU; train with --activation gelu-tanh or gelu, or with --activation swiglu --norm rms "
             "--pos rope (llama)"));
  refuse(c.output_bias(), "an output bias (lm_head.bias; folio puts a bias on every Linear unless --no-bias): no "
                          "graph adds one to the logits; train with --no-bias");
  const std::string kind = tokenizer.kind();
  refuse(kind != "char" && kind != "spm",
         cat("the tokenizer (", tokenizer.describe(), ") has no text to give llama.cpp; train with --tokenizer char, "
             "bpe or unigram"));
  if (kind == "char")
    for (int32_t id = 0; id < tokenizer.vocab_size(); ++id)
      refuse(tokenizer.token_bytes(id) == kSpace,
             "the character vocabulary holds U+2581, which llama.cpp's vocabulary reads as a space; train on text "
             "without it");
  return why;
}

void gguf_rope_rows(const float* in, float* out, int64_t HS, int64_t C, bool to_adjacent) {
  for (int64_t i = 0; i < HS / 2; ++i)
    for (const int64_t half : {int64_t(0), int64_t(1)}) {
      const int64_t adjacent = 2 * i + half, split = i + half * HS / 2;  // the same row in either order
      const float* from = in + (to_adjacent ? split : adjacent) * C;
      std::copy(from, from + C, out + (to_adjacent ? adjacent : split) * C);
    }
}

GgufFile model_to_gguf(const nn::GPT& model, const Tokenizer& tokenizer, GgufDtype dtype, const std::string& name) {
  const GPTConfig& c = model.config();
  if (const auto why = gguf_refusals(c, tokenizer); !why.empty()) {
    std::string lines;
    for (const auto& w : why) lines += "\n  " + w;
    fail("gguf", "this model maps to no llama.cpp architecture:", lines);
  }
  const Vocabulary v = std::string(tokenizer.kind()) == "char" ? char_vocabulary(tokenizer) : spm_vocabulary(tokenizer);
  const std::string arch = gguf_architecture(c);
  const bool llama = arch == "llama" || arch == "qwen3";  // the llama family: qwen3 adds QK-norm
  const int64_t C = c.n_embd, HS = C / c.n_head, V = c.vocab_size, Vg = int64_t(v.tokens.size());
  const int64_t H = c.ffn_width();
  const int64_t file_type = dtype == GgufDtype::f32 ? 0 : dtype == GgufDtype::f16 ? 1 : 7;  // llama_ftype

  GgufFile f;
  auto key = [&](const std::string& k, GgufValue value) { f.kv.emplace_back(k, std::move(value)); };
  key("general.architecture", GgufValue::text(arch));
  key("general.name", GgufValue::text(name));
  key("general.file_type", GgufValue::u32(uint32_t(file_type)));
  key(arch + ".context_length", GgufValue::u32(uint32_t(c.block_size)));
  key(arch + ".embedding_length", GgufValue::u32(uint32_t(C)));
  key(arch + ".block_count", GgufValue::u32(uint32_t(c.n_layer)));
  key(arch + ".feed_forward_length", GgufValue::u32(uint32_t(H)));
  key(arch + ".attention.head_count", GgufValue::u32(uint32_t(c.n_head)));
  if (llama) {
    key(arch + ".attention.head_count_kv", GgufValue::u32(uint32_t(c.n_head)));  // every head its own k and v
    // qwen3 normalises q and k with this epsilon too, folio's QK-norm with kRmsNormEps
    // (1e-6): their scales differ by a factor 1 - 4.5e-6 / mean(q^2), far below what the
    // scores resolve.
    key(arch + ".attention.layer_norm_rms_epsilon", GgufValue::f32(nn::kModelRmsNormEps));
  } else {
    key(arch + ".attention.layer_norm_epsilon", GgufValue::f32(kLayerNormEps));
  }
  if (c.pos == nn::Positions::rope) {
    key(arch + ".rope.dimension_count", GgufValue::u32(uint32_t(HS)));
    key(arch + ".rope.freq_base", GgufValue::f32(kRopeBase));
  }
  if (arch == "gptneox") key(arch + ".use_parallel_residual", GgufValue::flag(false));  // folio's blocks are sequential
  // llama.cpp's GELU is the tanh form; which of the two this model computes, for import.
  if (!llama) key("folio.activation", GgufValue::text(to_string(c.activation)));
  key("tokenizer.ggml.model", GgufValue::text("llama"));
  key("tokenizer.ggml.tokens", GgufValue::texts(v.tokens));
  key("tokenizer.ggml.scores", GgufValue::f32s(v.scores));
  key("tokenizer.ggml.token_type", GgufValue::i32s(v.types));
  if (v.unk >= 0) key("tokenizer.ggml.unknown_token_id", GgufValue::u32(uint32_t(v.unk)));
  if (v.bos >= 0) key("tokenizer.ggml.bos_token_id", GgufValue::u32(uint32_t(v.bos)));
  if (v.eos >= 0) key("tokenizer.ggml.eos_token_id", GgufValue::u32(uint32_t(v.eos)));
  if (v.eot >= 0) {  // a chat model: its template, and the token that ends a reply
    key("tokenizer.ggml.eot_token_id", GgufValue::u32(uint32_t(v.eot)));
    key("tokenizer.chat_template", GgufValue::text(kChatMlJinja));
  }
  key("tokenizer.ggml.add_bos_token", GgufValue::flag(false));
  key("tokenizer.ggml.add_eos_token", GgufValue::flag(false));
  key("tokenizer.ggml.add_space_prefix", GgufValue::flag(false));
  if (!v.suppress.empty()) key("tokenizer.ggml.suppress_tokens", GgufValue::i32s(v.suppress));
  for (const auto& [k, value] : tokenizer.metadata()) key("folio.tokenizer." + k, GgufValue::text(value));

  Params p;
  for (const auto& [n, t] : model.named_parameters()) p.emplace(n, t);
  auto copy = [&](const std::string& gguf, const std::string& folio) { add_copy(f, p, gguf, folio, dtype); };
  // (V, C) matrices with zero rows for the special tokens the model lacks: (Vg, C).
  auto vocab_rows = [&](const std::string& gguf, const Tensor& w) {
    std::vector<float> rows(size_t(Vg * C), 0.0f);  // (Vg, C)
    std::copy(w.data(), w.data() + V * C, rows.begin());
    f.tensors.push_back(tensor(gguf, {Vg, C}, rows.data(), dtype));
  };
  vocab_rows("token_embd.weight", param(p, "token_embedding.weight"));
  if (arch == "gpt2") copy("position_embd.weight", "position_embedding.weight");
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string b = cat("blk.", l, "."), m = cat("blocks.", l, ".");
    if (llama)
      llama_block(f, p, c, b, m, dtype);
    else
      layer_norm_block(f, p, c, b, m, dtype);
  }
  copy("output_norm.weight", "ln_f.weight");
  if (!llama) copy("output_norm.bias", "ln_f.bias");
  // gptneox requires an output matrix, so a tied model writes its embedding again; llama
  // reads a missing one as tied.
  if (!(llama && c.tie_weights))
    vocab_rows("output.weight", c.tie_weights ? param(p, "token_embedding.weight") : param(p, "lm_head.weight"));
  return f;
}

}  // namespace folio
