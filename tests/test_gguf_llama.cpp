// GGUF's llama architecture (io/gguf_model.h): RMSNorm + SwiGLU + rope models export as
// `llama`, with each head's query and key rows reordered for llama's adjacent-pair rope
// (as `qwen3` with --qk-norm), and import back bit for bit; what folio's blocks cannot compute is refused naming its
// key. That llama.cpp computes folio's model from these files is
// tests/test_gguf_llamacpp.cpp.
#include <cmath>
#include <cstring>

#include "data/tokenizer.h"
#include "io/checkpoint.h"
#include "io/gguf.h"
#include "io/gguf_model.h"
#include "gguf_weights.h"
#include "support.h"

namespace folio {
namespace {

using namespace testing;

std::unique_ptr<Tokenizer> chars() { return make_tokenizer({}, "hello world, a small text\n"); }

nn::GPTConfig llama_config(const Tokenizer& tok, bool tied) {
  nn::GPTConfig c;
  c.vocab_size = tok.vocab_size();
  c.n_layer = 2, c.n_head = 2, c.n_embd = 32, c.block_size = 16, c.seed = 11;
  c.pos = nn::Positions::rope, c.norm = nn::Norm::rms, c.activation = nn::Activation::swiglu;
  c.bias = false, c.tie_weights = tied;
  return c;
}

// llama's rope, written here from its definition: the adjacent pair (2i, 2i + 1) turns by
// p * 10000^(-2i/hs).   x (hs) at position p
std::vector<double> adjacent_pair_rope(const std::vector<float>& x, int64_t p) {
  const int64_t hs = int64_t(x.size());
  std::vector<double> y(x.size());
  for (int64_t i = 0; i < hs / 2; ++i) {
    const double angle = double(p) * std::pow(10000.0, -2.0 * double(i) / double(hs));
    const double a = x[size_t(2 * i)], b = x[size_t(2 * i + 1)];
    y[size_t(2 * i)] = a * std::cos(angle) - b * std::sin(angle);
    y[size_t(2 * i + 1)] = a * std::sin(angle) + b * std::cos(angle);
  }
  return y;
}

// Reordered, llama's rope of a vector is folio's rope (rotate-half) of it, reordered.
TEST(GgufLlama, AdjacentPairRopeOfReorderedRowsIsFolioRopeReordered) {
  const int64_t P = 12, hs = 8, T = P;
  const nn::RotaryTables tables(P, hs);
  Rng r(5);
  const Tensor x = Tensor::randn({1, T, hs}, r);             // (1, T, hs)
  const Tensor folio = rope(x, tables.cos, tables.sin, 0);  // (1, T, hs)
  for (int64_t t = 0; t < T; ++t) {
    std::vector<float> reordered(static_cast<size_t>(hs)), folio_reordered(static_cast<size_t>(hs));  // (hs) each: rows of width C = 1
    gguf_rope_rows(x.data() + t * hs, reordered.data(), hs, 1, true);
    gguf_rope_rows(folio.data() + t * hs, folio_reordered.data(), hs, 1, true);
    const std::vector<double> llama = adjacent_pair_rope(reordered, t);
    for (int64_t i = 0; i < hs; ++i) EXPECT_NEAR(llama[size_t(i)], folio_reordered[size_t(i)], 1e-5) << t << " " << i;
    std::vector<float> back(static_cast<size_t>(hs));
    gguf_rope_rows(reordered.data(), back.data(), hs, 1, false);
    EXPECT_EQ(std::memcmp(back.data(), x.data() + t * hs, size_t(hs) * 4), 0);
  }
}

int64_t integer(const GgufFile& f, const std::string& key) { return std::get<int64_t>(f.find(key)->value); }

TEST(GgufLlama, ExportWritesLlamaKeysAndTensorsAndImportsBitForBit) {
  const auto tok = chars();
  for (const bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    const nn::GPTConfig c = llama_config(*tok, tied);
    EXPECT_TRUE(gguf_refusals(c, *tok).empty());
    const nn::GPT model(c);
    const GgufFile f = parse_gguf(gguf_bytes(model_to_gguf(model, *tok, GgufDtype::f32, "t")), "t.gguf");
    EXPECT_EQ(std::get<std::string>(f.find("general.architecture")->value), "llama");
    EXPECT_EQ(integer(f, "llama.feed_forward_length"), 96);  // int(8 * 32 / 3) = 85, rounded up to 96
    EXPECT_EQ(integer(f, "llama.attention.head_count_kv"), 2);
    EXPECT_EQ(integer(f, "llama.rope.dimension_count"), 16);
    EXPECT_FLOAT_EQ(float(std::get<double>(f.find("llama.attention.layer_norm_rms_epsilon")->value)), 1e-5f);
    EXPECT_FLOAT_EQ(float(std::get<double>(f.find("llama.rope.freq_base")->value)), 10000.0f);
    EXPECT_EQ(f.tensor("output.weight") != nullptr, !tied);
    EXPECT_EQ(f.tensor("blk.1.ffn_gate.weight")->shape, (std::vector<int64_t>{96, 32}));
    EXPECT_EQ(f.tensor("blk.1.ffn_down.weight")->shape, (std::vector<int64_t>{32, 96}));
    EXPECT_EQ(f.tensor("blk.0.attn_norm.bias"), nullptr);
    EXPECT_EQ(f.tensor("blk.0.attn_qkv.weight"), nullptr);
    // Head 1's first two query rows are folio's rows 0 and HS/2 of that head.
    const std::vector<float> q = gguf_floats(*f.tensor("blk.0.attn_q.weight"));  // (C, C)
    const Tensor& head1 = model.blocks[0]->attn->heads[1]->query->weight;        // (HS, C)
    EXPECT_EQ(std::memcmp(q.data() + 16 * 32, head1.data(), 32 * 4), 0);
    EXPECT_EQ(std::memcmp(q.data() + 17 * 32, head1.data() + 8 * 32, 32 * 4), 0);

    const ImportedModel back = model_from_gguf(f, "t.gguf");
    const nn::GPTConfig& b = back.model->config();
    EXPECT_EQ(b.norm, nn::Norm::rms);
    EXPECT_EQ(b.activation, nn::Activation::swiglu);
    EXPECT_EQ(b.pos, nn::Positions::rope);
    EXPECT_EQ(b.tie_weights, tied);
    EXPECT_EQ(back.tokenizer->fingerprint(), tok->fingerprint());
    expect_same_weights(model, *back.model);
  }
}

TEST(GgufLlama, HalfAndQ8ImportWithinTheirRounding) {
  const auto tok = chars();
  const nn::GPT model(llama_config(*tok, false));
  for (const GgufDtype dtype : {GgufDtype::f16, GgufDtype::q8_0}) {
    const GgufFile f = parse_gguf(gguf_bytes(model_to_gguf(model, *tok, dtype, "t")), "t.gguf");
    EXPECT_EQ(f.tensor("blk.0.attn_k.weight")->dtype, dtype);
    EXPECT_EQ(f.tensor("blk.0.ffn_down.weight")->dtype, dtype);  // rows of 96: three q8_0 blocks
    const ImportedModel back = model_from_gguf(f, "t.gguf");
    expect_within_gguf_rounding(model, *back.model, dtype);
  }
}

// --norm rms or --activation swiglu choose llama, which needs the other two as well.
TEST(GgufLlama, EachMissingPartOfTheLlamaGraphIsRefusedNamingItsFlag) {
  const auto tok = chars();
  struct Row {
    void (*set)(nn::GPTConfig&);
    std::vector<std::string> flags;
  };
  const Row rows[] = {
      {[](nn::GPTConfig& c) { c.activation = nn::Activation::gelu; }, {"--activation swiglu"}},
      {[](nn::GPTConfig& c) { c.norm = nn::Norm::layer; }, {"--norm rms"}},
      {[](nn::GPTConfig& c) { c.pos = nn::Positions::learned; }, {"--pos rope"}},
      // In the table's order (nn/model_options.cpp): --pos, then --norm.
      {[](nn::GPTConfig& c) { c.norm = nn::Norm::layer, c.pos = nn::Positions::learned; }, {"--pos rope", "--norm rms"}},
      {[](nn::GPTConfig& c) { c.bias = true; }, {"--no-bias"}},
  };
  for (const Row& row : rows) {
    nn::GPTConfig c = llama_config(*tok, false);
    row.set(c);
    const auto why = gguf_refusals(c, *tok);
    ASSERT_EQ(why.size(), row.flags.size()) << row.flags[0];
    for (size_t i = 0; i < why.size(); ++i) EXPECT_NE(why[i].find(row.flags[i]), std::string::npos) << why[i];
  }
}

// --qk-norm makes it qwen3: llama's graph with a per-head q and k RMSNorm (weights of
// ones) and folio's own rope order, so the rows are written as they are.
TEST(GgufLlama, QkNormExportsAsQwen3AndImportsBitForBit) {
  const auto tok = chars();
  nn::GPTConfig c = llama_config(*tok, false);
  c.qk_norm = true;
  EXPECT_TRUE(gguf_refusals(c, *tok).empty());
  const nn::GPT model(c);
  const GgufFile f = parse_gguf(gguf_bytes(model_to_gguf(model, *tok, GgufDtype::f32, "t")), "t.gguf");
  EXPECT_EQ(std::get<std::string>(f.find("general.architecture")->value), "qwen3");
  EXPECT_EQ(integer(f, "qwen3.feed_forward_length"), 96);
  EXPECT_EQ(gguf_floats(*f.tensor("blk.1.attn_k_norm.weight")), std::vector<float>(16, 1.0f));
  const std::vector<float> q = gguf_floats(*f.tensor("blk.0.attn_q.weight"));  // (C, C)
  const Tensor& head1 = model.blocks[0]->attn->heads[1]->query->weight;        // (HS, C)
  EXPECT_EQ(std::memcmp(q.data() + 16 * 32, head1.data(), 16 * 32 * 4), 0);
  const ImportedModel back = model_from_gguf(f, "t.gguf");
  EXPECT_TRUE(back.model->config().qk_norm);
  expect_same_weights(model, *back.model);
  // A norm weight other than ones is a model folio's QK-norm cannot compute.
  GgufFile weighted = f;
  for (auto& t : weighted.tensors)
    if (t.name == "blk.0.attn_q_norm.weight") {
      const std::vector<float> twos(16, 2.0f);
      t.data = gguf_encode(GgufDtype::f32, twos.data(), 16);
    }
  expect_error([&] { model_from_gguf(weighted, "w.gguf"); }, {"w.gguf", "blk.0.attn_q_norm.weight", "not all ones"});
}

// What a llama file may say that folio's blocks cannot compute: refused through
// `folio import`, exit 2, naming the key.
TEST(GgufLlama, ImportRefusesWhatFolioCannotComputeNamingTheKey) {
  const auto tok = chars();
  const GgufFile good = model_to_gguf(nn::GPT(llama_config(*tok, false)), *tok, GgufDtype::f32, "t");
  TempDir dir("gguf_llama_refusals");
  struct Row {
    std::string key;
    GgufValue value;
  };
  const Row rows[] = {
      {"llama.attention.head_count_kv", GgufValue::u32(1)},
      {"llama.rope.freq_base", GgufValue::f32(500000.0f)},
      {"llama.rope.scaling.type", GgufValue::text("linear")},
      {"llama.rope.scaling.factor", GgufValue::f32(4.0f)},
      {"llama.attention.layer_norm_rms_epsilon", GgufValue::f32(1e-6f)},
      {"llama.expert_count", GgufValue::u32(8)},
      {"llama.rope.dimension_count", GgufValue::u32(8)},
  };
  int n = 0;
  for (const Row& row : rows) {
    GgufFile f = good;
    std::erase_if(f.kv, [&](const auto& kv) { return kv.first == row.key; });
    f.kv.emplace_back(row.key, row.value);
    const std::string file = dir / cat("bad", n, ".gguf");
    write_gguf(file, f);
    const Result r = run_folio({"import", dir / cat("run", n++), "--from", file}, dir.path);
    EXPECT_EQ(r.code, 2) << row.key << ": " << r.err;
    expect_contains(r.err, {file, row.key});
  }
  // A llama file with LayerNorm biases or a fused q/k/v is not folio's llama: tensors
  // missing or extra are named too.
  GgufFile fused = good;
  for (auto& t : fused.tensors)
    if (t.name == "blk.0.attn_q.weight") t.name = "blk.0.attn_qkv.weight";
  expect_error([&] { model_from_gguf(fused, "f.gguf"); }, {"f.gguf", "blk.0.attn_q.weight is missing"});
  GgufFile extra = good;
  const float zero[32] = {};
  extra.tensors.push_back({"blk.0.attn_output.bias", {32}, GgufDtype::f32, gguf_encode(GgufDtype::f32, zero, 32)});
  expect_error([&] { model_from_gguf(extra, "e.gguf"); }, {"e.gguf", "tensors, not the"});
}

// gpt2 and gptneox files carry which GELU the model was trained with: an import gives
// it back, and a file without the key gets llama.cpp's (the tanh form).
TEST(GgufLlama, GeluFormSurvivesTheRoundTrip) {
  const auto tok = chars();
  for (const auto act : {nn::Activation::gelu, nn::Activation::gelu_tanh}) {
    nn::GPTConfig c = llama_config(*tok, false);
    c.norm = nn::Norm::layer, c.activation = act;
    GgufFile f = model_to_gguf(nn::GPT(c), *tok, GgufDtype::f32, "t");
    EXPECT_EQ(std::get<std::string>(f.find("general.architecture")->value), "gptneox");
    EXPECT_EQ(model_from_gguf(f, "t.gguf").model->config().activation, act);
    std::erase_if(f.kv, [](const auto& kv) { return kv.first == "folio.activation"; });
    EXPECT_EQ(model_from_gguf(f, "t.gguf").model->config().activation, nn::Activation::gelu_tanh);
  }
}

using GgufLlamaCli = CliCorpusTest;

TEST_F(GgufLlamaCli, ExportImportRoundTripGeneratesTheSameText) {
  ASSERT_EQ(folio("train --data " + text() + run("run", 20) + " --no-bias --pos rope --norm rms --activation swiglu").code,
            0);
  const std::string gen = " --prompt 'First' --greedy --max-new-tokens 40 --threads 1";
  const Result ga = folio("generate --checkpoint " + (dir_ / "run") + gen);
  ASSERT_EQ(ga.code, 0) << ga.err;
  for (const char* dtype : {"f32", "q8_0"}) {
    SCOPED_TRACE(dtype);
    const std::string file = dir_ / cat("m-", dtype, ".gguf"), back = dir_ / cat("back-", dtype);
    const Result e = folio(cat("export --dtype ", dtype, " ", dir_ / "run", " ", file));
    ASSERT_EQ(e.code, 0) << e.err;
    const Result i = folio("import " + back + " --from " + file);
    ASSERT_EQ(i.code, 0) << i.err;
    expect_contains(i.err, {"--norm rms", "--pos rope"});
    const auto a = load_model(dir_ / "run"), b = load_model(back);
    EXPECT_EQ(b.model->config().activation, nn::Activation::swiglu);
    const Result gb = folio("generate --checkpoint " + back + gen);
    ASSERT_EQ(gb.code, 0) << gb.err;
    // q8_0 moves each weight within its rounding (GgufLlama.HalfAndQ8ImportWithinTheirRounding),
    // which may turn a near tie of greedy decoding: only f32 must give the very text.
    if (std::string(dtype) != "f32") continue;
    expect_same_weights(*a.model, *b.model);
    EXPECT_EQ(ga.out, gb.out);
  }
}

}  // namespace
}  // namespace folio
