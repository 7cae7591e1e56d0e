// GGUF (io/gguf.h, io/gguf_model.h): the file layout byte by byte, f16 and q8_0, the
// reader against truncated, corrupt and lying files, every refusal of the exporter, and
// export -> import giving back the same model. That llama.cpp reads the files and
// computes folio's model from them is tests/test_gguf_llamacpp.cpp.
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

GgufFile small_file() {
  GgufFile f;
  f.kv = {{"general.architecture", GgufValue::text("test")},
          {"a.u32", GgufValue::u32(7)},
          {"a.f32", GgufValue::f32(0.5f)},
          {"a.flag", GgufValue::flag(true)},
          {"a.texts", GgufValue::texts({"x", "", "\xE2\x96\x81y"})},
          {"a.f32s", GgufValue::f32s({1.0, -2.5})},
          {"a.i32s", GgufValue::i32s({-1, 3})}};
  const float w[6] = {1, 2, 3, 4, 5, 6};  // (2, 3)
  f.tensors.push_back({"w", {2, 3}, GgufDtype::f32, gguf_encode(GgufDtype::f32, w, 6)});
  std::vector<float> q(64);
  for (int i = 0; i < 64; ++i) q[size_t(i)] = 0.01f * float(i - 20);
  f.tensors.push_back({"q", {2, 32}, GgufDtype::q8_0, gguf_encode(GgufDtype::q8_0, q.data(), 64)});
  f.tensors.push_back({"h", {3}, GgufDtype::f16, gguf_encode(GgufDtype::f16, w, 3)});
  return f;
}

template <class T>
T at(const std::string& bytes, size_t offset) {
  T v;
  std::memcpy(&v, bytes.data() + offset, sizeof(T));
  return v;
}

TEST(Gguf, HeaderAndTensorInfosAreLaidOutAsVersion3) {
  const std::string b = gguf_bytes(small_file());
  EXPECT_EQ(b.substr(0, 4), "GGUF");
  EXPECT_EQ(at<uint32_t>(b, 4), 3u);
  EXPECT_EQ(at<uint64_t>(b, 8), 3u);   // tensors
  EXPECT_EQ(at<uint64_t>(b, 16), 7u);  // key-values
  EXPECT_EQ(at<uint64_t>(b, 24), std::string("general.architecture").size());
  // The first tensor info: name "w", 2 dims, extents innermost first (3, then 2), F32, offset 0.
  const size_t info = b.find(std::string("\x01\0\0\0\0\0\0\0w", 9));
  ASSERT_NE(info, std::string::npos);
  EXPECT_EQ(at<uint32_t>(b, info + 9), 2u);
  EXPECT_EQ(at<uint64_t>(b, info + 13), 3u);
  EXPECT_EQ(at<uint64_t>(b, info + 21), 2u);
  EXPECT_EQ(at<uint32_t>(b, info + 29), 0u);
  EXPECT_EQ(at<uint64_t>(b, info + 33), 0u);
  EXPECT_EQ(b.size() % 32, 0u);  // the data and each tensor start on 32 bytes
}

TEST(Gguf, ReadsBackWhatItWrites) {
  const GgufFile f = small_file();
  const GgufFile g = parse_gguf(gguf_bytes(f), "mem");
  ASSERT_EQ(g.kv.size(), f.kv.size());
  for (size_t i = 0; i < f.kv.size(); ++i) {
    EXPECT_EQ(g.kv[i].first, f.kv[i].first);
    EXPECT_EQ(g.kv[i].second.value, f.kv[i].second.value) << f.kv[i].first;
    EXPECT_EQ(g.kv[i].second.type, f.kv[i].second.type) << f.kv[i].first;
  }
  ASSERT_EQ(g.tensors.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(g.tensors[i].name, f.tensors[i].name);
    EXPECT_EQ(g.tensors[i].shape, f.tensors[i].shape);
    EXPECT_EQ(g.tensors[i].dtype, f.tensors[i].dtype);
    EXPECT_EQ(g.tensors[i].data, f.tensors[i].data);
  }
  EXPECT_EQ(gguf_floats(g.tensors[0]), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(gguf_floats(g.tensors[2]), (std::vector<float>{1, 2, 3}));
}

TEST(Gguf, HalfAndQ8RoundAsGgmlDoes) {
  auto half = [](float x) { return gguf_encode(GgufDtype::f16, &x, 1); };
  EXPECT_EQ(at<uint16_t>(half(1.0f), 0), 0x3C00);
  EXPECT_EQ(at<uint16_t>(half(-2.0f), 0), 0xC000);
  EXPECT_EQ(at<uint16_t>(half(65504.0f), 0), 0x7BFF);
  EXPECT_EQ(at<uint16_t>(half(1e6f), 0), 0x7C00);                // past the largest: infinity
  EXPECT_EQ(at<uint16_t>(half(std::ldexp(1.0f, -24)), 0), 0x0001);  // the smallest subnormal
  EXPECT_EQ(at<uint16_t>(half(1.0f + std::ldexp(1.0f, -11)), 0), 0x3C00);  // a tie rounds to even
  EXPECT_EQ(at<uint16_t>(half(1.0f + 3 * std::ldexp(1.0f, -11)), 0), 0x3C02);
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[size_t(i)] = std::sin(float(i)) * 3.0f;
  const GgufTensor q{"q", {32}, GgufDtype::q8_0, gguf_encode(GgufDtype::q8_0, x.data(), 32)};
  ASSERT_EQ(q.data.size(), 34u);
  const std::vector<float> back = gguf_floats(q);
  float amax = 0.0f;
  for (const float v : x) amax = std::max(amax, std::fabs(v));
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(back[size_t(i)], x[size_t(i)], amax / 127.0f * 0.51f);
}

TEST(Gguf, EveryTruncationIsAnErrorNamingTheFile) {
  const std::string b = gguf_bytes(small_file());
  // Every cut short of the last tensor's data (3 f16 values, then padding to 32 bytes).
  for (size_t n = 0; n < b.size() - 26; n += (n < 400 ? 1 : 7)) {
    const std::string msg = error_of([&] { parse_gguf(b.substr(0, n), "cut.gguf"); });
    EXPECT_NE(msg.find("cut.gguf"), std::string::npos) << n << ": " << msg;
  }
}

TEST(Gguf, BadMagicVersionAndTypesAreRefusedByName) {
  std::string b = gguf_bytes(small_file());
  expect_error([&] { parse_gguf("GGML" + b.substr(4), "m.gguf"); }, {"m.gguf", "not a GGUF file"});
  std::string v = b;
  v[4] = 2;
  expect_error([&] { parse_gguf(v, "v.gguf"); }, {"version 2, expected 3"});
  // Tensor "w"'s type field (after name, dim count and two extents) set to 2 (Q4_0).
  const size_t info = b.find(std::string("\x01\0\0\0\0\0\0\0w", 9));
  std::string t = b;
  t[info + 29] = 2;
  expect_error([&] { parse_gguf(t, "t.gguf"); }, {"tensor w", "type 2 is not one folio reads"});
  // The first key's value type set to 99.
  std::string k = b;
  k[24 + 8 + 20] = 99;
  expect_error([&] { parse_gguf(k, "k.gguf"); }, {"general.architecture", "unknown value type 99"});
}

TEST(Gguf, HugeClaimedCountsAreRefusedBeforeAnyAllocation) {
  const std::string b = gguf_bytes(small_file());
  auto with = [&](size_t offset, uint64_t v) {
    std::string c = b;
    std::memcpy(c.data() + offset, &v, 8);
    return c;
  };
  expect_error([&] { parse_gguf(with(8, uint64_t(1) << 60), "n.gguf"); }, {"tensor count is 1152921504606846976"});
  expect_error([&] { parse_gguf(with(16, uint64_t(1) << 62), "n.gguf"); }, {"key-value count is"});
  expect_error([&] { parse_gguf(with(24, ~uint64_t(0)), "n.gguf"); }, {"a key", "claims 18446744073709551615 bytes"});
  // The array a.texts: its element count.
  const size_t texts = b.find("a.texts") + 7 + 8;  // after the key, the u32 type and the u32 element type
  expect_error([&] { parse_gguf(with(texts, uint64_t(1) << 40), "n.gguf"); }, {"a.texts", "element count"});
  // Tensor "w"'s first extent.
  const size_t info = b.find(std::string("\x01\0\0\0\0\0\0\0w", 9));
  expect_error([&] { parse_gguf(with(info + 13, uint64_t(1) << 40), "n.gguf"); }, {"tensor w", "extent"});
  expect_error([&] { parse_gguf(with(info + 33, uint64_t(1) << 40), "n.gguf"); }, {"tensor w", "data section"});
}

// ---- the model mapping ----

nn::GPTConfig exportable(nn::Positions pos) {
  nn::GPTConfig c;
  c.vocab_size = 0;  // set from the tokenizer
  c.n_layer = 2, c.n_head = 2, c.n_embd = 32, c.block_size = 16;
  c.activation = nn::Activation::gelu, c.bias = false, c.pos = pos;
  return c;
}

std::unique_ptr<Tokenizer> chars() { return make_tokenizer({}, "hello world, a small text\n"); }

// What is not a model option (those are tests/test_option_walk.cpp's): the activation,
// the Linears' biases and the tokenizer.
TEST(GgufModel, EachSettingNoGraphComputesIsRefusedNamingItsFlag) {
  const auto tok = chars();
  nn::GPTConfig base = exportable(nn::Positions::learned);
  base.vocab_size = tok->vocab_size();
  EXPECT_TRUE(gguf_refusals(base, *tok).empty());
  nn::GPTConfig tanh_form = base;
  tanh_form.activation = nn::Activation::gelu_tanh;
  EXPECT_TRUE(gguf_refusals(tanh_form, *tok).empty());
  struct Row {
    void (*set)(nn::GPTConfig&);
    const char* flag;
  };
  const Row rows[] = {
      {[](nn::GPTConfig& c) { c.activation = nn::Activation::relu; }, "--activation gelu"},
      {[](nn::GPTConfig& c) { c.activation = nn::Activation::relu2; }, "--activation relu2"},
      {[](nn::GPTConfig& c) { c.bias = true; }, "--no-bias"},
      {[](nn::GPTConfig& c) { c.activation = nn::Activation::swiglu; }, "--norm layer"},  // llama's graph asks for rms
  };
  for (const Row& row : rows) {
    nn::GPTConfig c = base;
    row.set(c);
    std::string why;
    for (const std::string& line : gguf_refusals(c, *tok)) why += line + "\n";
    EXPECT_NE(why.find(row.flag), std::string::npos) << row.flag << ": " << why;
  }
  // A vocabulary of ids alone has no text for llama.cpp.
  const auto ids = make_id_tokenizer(base.vocab_size);
  EXPECT_EQ(gguf_refusals(base, *ids).size(), 1u);
}

TEST(GgufModel, ExportThenImportGivesTheSameWeightsBitForBit) {
  const auto tok = chars();
  for (const auto pos : {nn::Positions::learned, nn::Positions::rope})
    for (const bool tied : {false, true}) {
      nn::GPTConfig c = exportable(pos);
      c.vocab_size = tok->vocab_size(), c.tie_weights = tied, c.seed = 7;
      const nn::GPT model(c);
      const GgufFile f = parse_gguf(gguf_bytes(model_to_gguf(model, *tok, GgufDtype::f32, "t")), "t.gguf");
      const ImportedModel back = model_from_gguf(f, "t.gguf");
      EXPECT_EQ(back.model->config().pos, pos);
      EXPECT_EQ(back.model->config().tie_weights, tied);
      EXPECT_EQ(back.tokenizer->fingerprint(), tok->fingerprint());
      expect_same_weights(model, *back.model);
    }
}

TEST(GgufModel, HalfAndQ8ExportsImportWithinTheirRounding) {
  const auto tok = chars();
  nn::GPTConfig c = exportable(nn::Positions::rope);
  c.vocab_size = tok->vocab_size();
  const nn::GPT model(c);
  for (const GgufDtype dtype : {GgufDtype::f16, GgufDtype::q8_0}) {
    const GgufFile f = parse_gguf(gguf_bytes(model_to_gguf(model, *tok, dtype, "t")), "t.gguf");
    EXPECT_EQ(f.tensor("blk.0.attn_qkv.weight")->dtype, dtype);
    EXPECT_EQ(f.tensor("blk.0.attn_norm.weight")->dtype, GgufDtype::f32);
    const ImportedModel back = model_from_gguf(f, "t.gguf");
    expect_within_gguf_rounding(model, *back.model, dtype);
  }
}

TEST(GgufModel, ImportRefusesWhatFolioCannotHold) {
  const auto tok = chars();
  nn::GPTConfig c = exportable(nn::Positions::learned);
  c.vocab_size = tok->vocab_size();
  const nn::GPT model(c);
  const GgufFile good = model_to_gguf(model, *tok, GgufDtype::f32, "t");
  auto refused = [&](auto change, std::initializer_list<std::string> fragments) {
    GgufFile f = good;
    change(f);
    expect_error([&] { model_from_gguf(parse_gguf(gguf_bytes(f), "x.gguf"), "x.gguf"); }, fragments);
  };
  refused([](GgufFile& f) { f.kv[0].second = GgufValue::text("bloom"); }, {"x.gguf", "architecture bloom"});
  refused([](GgufFile& f) {
    for (auto& t : f.tensors)
      if (t.name == "blk.1.ffn_up.weight") t.shape = {32, 128}, t.name = "blk.1.ffn_up.weight";
  }, {"blk.1.ffn_up.weight", "shape (32, 128), expected (128, 32)"});
  refused([](GgufFile& f) {
    for (auto& t : f.tensors)
      if (t.name == "blk.0.attn_qkv.bias") {
        const std::vector<float> ones(96, 1.0f);
        t.data = gguf_encode(GgufDtype::f32, ones.data(), 96);
      }
  }, {"blk.0.attn_qkv.bias", "not zero"});
  refused([](GgufFile& f) { std::erase_if(f.tensors, [](const GgufTensor& t) { return t.name == "blk.1.attn_output.weight"; }); },
          {"blk.1.attn_output.weight is missing"});
  // Without folio's own tokenizer keys, the file's vocabulary is read (test_gguf_elsewhere.cpp):
  // one of a kind folio does not read is refused by name.
  refused([](GgufFile& f) {
    std::erase_if(f.kv, [](const auto& kv) { return kv.first.rfind("folio.tokenizer.", 0) == 0; });
    for (auto& [k, v] : f.kv)
      if (k == "tokenizer.ggml.model") v = GgufValue::text("t5");
  }, {"x.gguf", "tokenizer.ggml.model is \"t5\""});
  refused([](GgufFile& f) {
    for (auto& [k, v] : f.kv)
      if (k == "gpt2.block_count") v = GgufValue::u32(1u << 30);
  }, {"gpt2.block_count is 1073741824, outside [1, 256]"});
}

// No tensor of a gptneox file bounds its context length, which sizes the rope tables:
// it is held to what a checkpoint may claim.
TEST(GgufModel, ImportBoundsTheRopeContextLength) {
  const auto tok = chars();
  nn::GPTConfig c = exportable(nn::Positions::rope);
  c.vocab_size = tok->vocab_size();
  GgufFile f = model_to_gguf(nn::GPT(c), *tok, GgufDtype::f32, "t");
  for (auto& [k, v] : f.kv)
    if (k == "gptneox.context_length") v = GgufValue::u32(1u << 30);
  expect_error([&] { model_from_gguf(f, "r.gguf"); }, {"r.gguf", "context_length is 1073741824, outside [1, 65536]"});
}

// ---- the commands ----

using GgufCli = CliCorpusTest;

TEST_F(GgufCli, ExportRefusesTheDefaultModelWithExit2AndWritesNothing) {
  ASSERT_EQ(folio("train --data " + text() + run("run", 2)).code, 0);
  const Result r = folio("export " + (dir_ / "run") + " " + (dir_ / "out.gguf"));
  EXPECT_EQ(r.code, 2) << r.err;
  expect_contains(r.err, {"maps to no llama.cpp architecture", "--activation gelu", "--no-bias"});
  EXPECT_FALSE(fs::exists(dir_ / "out.gguf"));
  EXPECT_EQ(folio("export " + (dir_ / "run")).code, 2);
  EXPECT_EQ(folio("export --dtype q4 " + (dir_ / "run") + " " + (dir_ / "out.gguf")).code, 2);
}

TEST_F(GgufCli, ExportImportRoundTripGeneratesTheSameText) {
  ASSERT_EQ(folio("train --data " + text() + run("run", 20) + " --activation gelu --no-bias --pos rope").code, 0);
  const Result e = folio("export " + (dir_ / "run") + " " + (dir_ / "m.gguf"));
  ASSERT_EQ(e.code, 0) << e.err;
  const Result i = folio("import " + (dir_ / "back") + " --from " + (dir_ / "m.gguf"));
  ASSERT_EQ(i.code, 0) << i.err;
  const auto a = load_model(dir_ / "run"), b = load_model(dir_ / "back");
  expect_same_weights(*a.model, *b.model);
  const std::string gen = " --prompt 'First' --greedy --max-new-tokens 40 --threads 1";
  const Result ga = folio("generate --checkpoint " + (dir_ / "run") + gen);
  const Result gb = folio("generate --checkpoint " + (dir_ / "back") + gen);
  ASSERT_EQ(ga.code, 0) << ga.err;
  EXPECT_EQ(ga.out, gb.out);
  const Result ev = folio("eval --checkpoint " + (dir_ / "back") + " --data " + text() + " --threads 1");
  EXPECT_EQ(ev.code, 0) << ev.err;
  // A second import into the same run is refused; so is a file that is not GGUF.
  EXPECT_EQ(folio("import " + (dir_ / "back") + " --from " + (dir_ / "m.gguf")).code, 2);
  const Result bad = folio("import " + (dir_ / "other") + " --from " + text());
  EXPECT_EQ(bad.code, 2);
  expect_contains(bad.err, {"not a GGUF file"});
  // The GGUF itself where a checkpoint is wanted: named as GGUF, with the import that
  // makes a run of it, not taken for a safetensors file with a strange length.
  for (const std::string& command : {"generate --checkpoint " + (dir_ / "m.gguf") + " --max-new-tokens 2",
                                     "eval --checkpoint " + (dir_ / "m.gguf") + " --data " + text(),
                                     "export " + (dir_ / "m.gguf") + " " + (dir_ / "again.gguf")}) {
    const Result r = folio(command);
    EXPECT_EQ(r.code, 2) << command << "\n" << r.err;
    expect_contains(r.err, {dir_ / "m.gguf", "a GGUF file", "folio import RUN --from " + (dir_ / "m.gguf")});
    EXPECT_EQ(r.err.find("header length"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace folio
