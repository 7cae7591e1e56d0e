// hf_refusals and write_hf (io/hf_gpt2.h): folio's model as HF's GPT-2 directory, the
// inverse of hf_import.cpp's mapping.
#include <algorithm>
#include <array>
#include <filesystem>
#include <map>
#include <sstream>

#include "base/atomic_file.h"
#include "base/error.h"
#include "data/base64.h"
#include "io/hf_gpt2.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "nn/model_options.h"

namespace folio {
namespace {

namespace fs = std::filesystem;

// w (out, in) -> (in, out): a Linear's weight as HF's Conv1D stores it.
Tensor conv1d(const Tensor& w) {
  const int64_t out = w.size(0), in = w.size(1);
  Tensor t = Tensor::empty({in, out});
  const float* p = w.data();
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) t.data()[i * out + o] = p[o * in + i];
  return t;
}

Tensor copy(const Tensor& t) { return Tensor::from(t.shape(), std::span<const float>(t.data(), size_t(t.numel()))); }

// GPT-2's table from bytes to the characters HF's files write them as (the one
// data/bytebpe_tokenizer.cpp reads them back with): printable bytes are their own
// code points, the others take U+0100 onwards in byte order. Returns UTF-8.
std::string hf_text(std::string_view bytes) {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t c = printable ? char32_t(b) : next++;
      t[size_t(b)] = c < 0x80 ? std::string(1, char(c))
                              : std::string{char(0xC0 | (c >> 6)), char(0x80 | (c & 0x3F))};  // c < 0x800
    }
    return t;
  }();
  std::string s;
  for (const unsigned char b : bytes) s += table[b];
  return s;
}

// vocab.json and merges.txt of a bytebpe tokenizer, from its metadata (a token a line
// in id order: base64 bytes, merge rank or -1). Each merged token's line in merges.txt
// is the two parts byte-pair encoding of its bytes leaves when only the merges ranked
// before it apply; lines go in rank order, so reading them back gives the same ranks.
std::pair<std::string, std::string> bytebpe_files(const Tokenizer& tokenizer) {
  std::string lines, end_of_text;
  for (const auto& [k, v] : tokenizer.metadata()) {
    if (k == "bytebpe_tokens") lines = v;
    if (k == "bytebpe_end_of_text") end_of_text = v;
  }
  std::vector<std::string> tokens;
  std::vector<int64_t> ranks;  // (V,) -1: none
  std::istringstream in(lines);
  for (std::string line; std::getline(in, line);) {
    const size_t space = line.find(' ');
    tokens.push_back(base64_decode(line.substr(0, space)).value_or(""));
    ranks.push_back(std::stoll(line.substr(space + 1)));
  }
  const int64_t eot = std::stoll(end_of_text);
  std::map<std::string, int64_t> rank_of;  // a merged token's bytes -> its rank
  std::vector<std::pair<int64_t, size_t>> merged;  // (rank, id)
  for (size_t id = 0; id < tokens.size(); ++id)
    if (ranks[id] >= 0 && tokens[id].size() > 1) rank_of[tokens[id]] = ranks[id], merged.emplace_back(ranks[id], id);
  std::sort(merged.begin(), merged.end());

  Json::Object vocab;
  for (size_t id = 0; id < tokens.size(); ++id)
    vocab.emplace_back(int64_t(id) == eot ? "<|endoftext|>" : hf_text(tokens[id]), Json(int64_t(id)));
  std::string merges = "#version: 0.2\n";
  for (const auto& [rank, id] : merged) {
    const std::string& t = tokens[id];
    std::vector<std::string> parts;
    for (const char b : t) parts.emplace_back(1, b);
    while (parts.size() > 2) {  // the lowest-ranked pair first, the leftmost on a tie
      int64_t best = rank;
      size_t at = parts.size();
      for (size_t i = 0; i + 1 < parts.size(); ++i)
        if (const auto it = rank_of.find(parts[i] + parts[i + 1]); it != rank_of.end() && it->second < best)
          best = it->second, at = i;
      if (at == parts.size()) break;
      parts[at] += parts[at + 1];
      parts.erase(parts.begin() + std::ptrdiff_t(at + 1));
    }
    if (parts.size() != 2)
      fail("hf", "token ", id, " (", base64_encode(t), ") is not one merge of two earlier tokens: no merges.txt line makes it");
    merges += hf_text(parts[0]) + " " + hf_text(parts[1]) + "\n";
  }
  return {Json(vocab).dump(), merges};
}

}  // namespace

std::vector<std::string> hf_refusals(const nn::GPTConfig& c) {
  // The model options: what their rows' HF answers refuse (nn/model_options.cpp).
  std::vector<std::string> why = nn::option_refusals(c, &nn::ModelOption::hf);
  // The rest of the model: GPT-2's GELU, and its biases (the --gpt2-biases row asks
  // for their layout).
  if (c.activation != nn::Activation::gelu_tanh && c.activation != nn::Activation::gelu)
    why.push_back(cat("--activation ", nn::to_string(c.activation), ": GPT-2's feed-forward is a GELU; train with "
                      "--activation gelu-tanh (its gelu_new) or gelu"));
  if (!c.bias) why.push_back("--no-bias: GPT-2 has a bias on every Linear; train with --gpt2-biases");
  return why;
}

std::vector<std::string> write_hf(const nn::GPT& model, const Tokenizer& tokenizer, const std::string& dir) {
  const nn::GPTConfig& c = model.config();
  if (const auto why = hf_refusals(c); !why.empty()) {
    std::string lines;
    for (const auto& w : why) lines += "\n  " + w;
    fail("hf", "the model does not map to HF's GPT-2:", lines);
  }
  const int64_t C = c.n_embd, HS = C / c.n_head;
  std::vector<NamedTensor> out;
  auto add = [&](const std::string& name, Tensor t) { out.push_back({"transformer." + name, std::move(t)}); };
  add("wte.weight", copy(model.token_embedding->weight));
  add("wpe.weight", copy(model.position_embedding->weight));
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const nn::Block& b = *model.blocks[size_t(l)];
    const std::string h = cat("h.", l, ".");
    add(h + "ln_1.weight", copy(b.ln1->weight));
    add(h + "ln_1.bias", copy(b.ln1->bias));
    // c_attn (C, 3C): columns [q | k | v], head h at h * HS in each; folio's qkv weight
    // (n_head * 3 * HS, C) and bias are per head [k; q; v].
    const float* qkv = b.attn->qkv_weight().data();
    const float* qkv_b = b.attn->qkv_bias().data();
    Tensor w = Tensor::empty({C, 3 * C}), bias = Tensor::empty({3 * C});
    const int part_of[3] = {1, 0, 2};  // HF's column block for folio's k, q, v
    for (int64_t head = 0; head < c.n_head; ++head)
      for (int j = 0; j < 3; ++j)
        for (int64_t i = 0; i < HS; ++i) {
          const int64_t row = (head * 3 + j) * HS + i, col = part_of[j] * C + head * HS + i;
          for (int64_t k = 0; k < C; ++k) w.data()[k * 3 * C + col] = qkv[row * C + k];
          bias.data()[col] = qkv_b[row];
        }
    add(h + "attn.c_attn.weight", w);
    add(h + "attn.c_attn.bias", bias);
    add(h + "attn.c_proj.weight", conv1d(b.attn->proj->weight));
    add(h + "attn.c_proj.bias", copy(b.attn->proj->bias));
    add(h + "ln_2.weight", copy(b.ln2->weight));
    add(h + "ln_2.bias", copy(b.ln2->bias));
    add(h + "mlp.c_fc.weight", conv1d(b.ffwd->fc->weight));
    add(h + "mlp.c_fc.bias", copy(b.ffwd->fc->bias));
    add(h + "mlp.c_proj.weight", conv1d(b.ffwd->proj->weight));
    add(h + "mlp.c_proj.bias", copy(b.ffwd->proj->bias));
  }
  add("ln_f.weight", copy(model.ln_f->weight));
  add("ln_f.bias", copy(model.ln_f->bias));
  if (!c.tie_weights) out.push_back({"lm_head.weight", copy(model.lm_head->weight)});

  // --dropout where --dropout-at applies it: GPT-2's embedding, attention weights and
  // residual branches.
  const bool all = c.dropout_at == nn::DropoutAt::all;
  const double attn_pdrop = all || c.dropout_at == nn::DropoutAt::attention ? c.dropout : 0.0;
  const double resid_pdrop = all || c.dropout_at == nn::DropoutAt::residual ? c.dropout : 0.0;
  Json::Object config{{"activation_function", c.activation == nn::Activation::gelu_tanh ? "gelu_new" : "gelu"},
                      {"architectures", Json(Json::Array{Json("GPT2LMHeadModel")})},
                      {"attn_pdrop", attn_pdrop},
                      {"embd_pdrop", all ? double(c.dropout) : 0.0},
                      {"resid_pdrop", resid_pdrop},
                      {"initializer_range", 0.02},
                      {"layer_norm_epsilon", double(kLayerNormEps)},
                      {"model_type", "gpt2"},
                      {"n_ctx", c.block_size},
                      {"n_embd", c.n_embd},
                      {"n_head", c.n_head},
                      {"n_inner", c.ffn_hidden > 0.0f ? Json(c.ffn_width()) : Json()},  // null: 4C
                      {"n_layer", c.n_layer},
                      {"n_positions", c.block_size},
                      {"tie_word_embeddings", c.tie_weights},
                      {"vocab_size", c.vocab_size}};
  if (const auto eot = tokenizer.end_of_text()) {
    config.emplace_back("bos_token_id", int64_t(*eot));
    config.emplace_back("eos_token_id", int64_t(*eot));
  }
  if (tokenizer.chat_tokens())  // vocab.json would lack the two rows the model has
    fail("hf", "a chat model's <|im_start|> and <|im_end|> and its template are not written into HF's layout; "
               "the GGUF export carries them, for a model llama.cpp's architectures can run");
  const bool hf_tokenizer = std::string(tokenizer.kind()) == "bytebpe";
  std::pair<std::string, std::string> files;
  if (hf_tokenizer) files = bytebpe_files(tokenizer);  // before anything is written: it may refuse

  fs::create_directories(dir);
  const fs::path d(dir);
  std::vector<std::string> written{(d / "config.json").string(), (d / "model.safetensors").string()};
  write_file_atomic(written[0], Json(config).dump() + "\n");
  save_safetensors(written[1], out, {{"format", "pt"}});
  if (hf_tokenizer) {
    written.push_back((d / "vocab.json").string());
    written.push_back((d / "merges.txt").string());
    write_file_atomic(written[2], files.first);
    write_file_atomic(written[3], files.second);
  }
  return written;
}

}  // namespace folio
