// GGUF files folio did not write (io/gguf_model.h): without folio.* keys, the tokenizer
// comes from tokenizer.ggml.* (io/gguf_vocab_import.cpp) and the feed-forward width
// from feed_forward_length (--ffn-hidden). That llama.cpp computes what folio computes
// from such a file, made by llama.cpp's gguf-py, is tests/test_gguf_elsewhere.sh.
#include <sstream>

#include "data/tokenizer.h"
#include "io/gguf.h"
#include "io/checkpoint.h"
#include "io/gguf_model.h"
#include "serve/api.h"
#include "gguf_weights.h"
#include "support.h"

namespace folio {
namespace {

using namespace testing;

nn::GPTConfig llama_config(const Tokenizer& tok) {
  nn::GPTConfig c;
  c.vocab_size = tok.vocab_size();
  c.n_layer = 2, c.n_head = 2, c.n_embd = 32, c.block_size = 16, c.seed = 11;
  c.pos = nn::Positions::rope, c.norm = nn::Norm::rms, c.activation = nn::Activation::swiglu;
  c.bias = false;
  return c;
}

int64_t integer(const GgufFile& f, const std::string& key) { return std::get<int64_t>(f.find(key)->value); }

// The file as one made elsewhere would be: no folio.* key.
GgufFile without_folio_keys(GgufFile f) {
  std::erase_if(f.kv, [](const auto& kv) { return kv.first.rfind("folio.", 0) == 0; });
  return f;
}

void set(GgufFile& f, const std::string& key, GgufValue v) {
  std::erase_if(f.kv, [&](const auto& kv) { return kv.first == key; });
  f.kv.emplace_back(key, std::move(v));
}

// 20,000 bytes of the bundled Shakespeare: enough for merges whose order matters.
std::string text() {
  static const std::string t = [] {
    TempDir dir("gguf_elsewhere_text");
    return slurp(write_small_corpus(dir.path / "text.txt", 20000));
  }();
  return t;
}

// --ffn-hidden is feed_forward_length both ways, for llama's SwiGLU and gptneox's GELU.
TEST(GgufElsewhere, FfnHiddenIsTheFeedForwardLengthBothWays) {
  const auto tok = make_tokenizer({}, "hello world, a small text\n");
  for (const bool swiglu : {true, false}) {
    SCOPED_TRACE(swiglu ? "llama" : "gptneox");
    nn::GPTConfig c = llama_config(*tok);
    if (!swiglu) c.norm = nn::Norm::layer, c.activation = nn::Activation::gelu;
    c.ffn_hidden = 40.0f;
    const nn::GPT model(c);
    const GgufFile f = parse_gguf(gguf_bytes(model_to_gguf(model, *tok, GgufDtype::f32, "t")), "t.gguf");
    const std::string arch = swiglu ? "llama" : "gptneox";
    EXPECT_EQ(integer(f, arch + ".feed_forward_length"), 40);
    EXPECT_EQ(f.tensor("blk.1.ffn_up.weight")->shape, (std::vector<int64_t>{40, 32}));
    EXPECT_EQ(f.tensor("blk.1.ffn_down.weight")->shape, (std::vector<int64_t>{32, 40}));
    const ImportedModel back = model_from_gguf(f, "t.gguf");
    EXPECT_EQ(back.model->config().ffn_hidden, 40.0f);
    expect_same_weights(model, *back.model);
  }
  // The default width imports as the default (0), not as a number that happens to equal it.
  const nn::GPT plain(llama_config(*tok));
  EXPECT_EQ(model_from_gguf(model_to_gguf(plain, *tok, GgufDtype::f32, "t"), "t.gguf").model->config().ffn_hidden, 0.0f);
}

// A llama file of a SentencePiece model without folio's keys: the tokenizer is rebuilt
// from tokens, scores and types, and tokenizes as the model it was written from.
TEST(GgufElsewhere, LlamaVocabularyBecomesTheSameSentencePieceTokenization) {
  const auto tok = make_tokenizer({"bpe", 500}, text());
  const nn::GPT model(llama_config(*tok));
  const GgufFile f = without_folio_keys(model_to_gguf(model, *tok, GgufDtype::f32, "t"));
  const ImportedModel back = model_from_gguf(f, "t.gguf");
  EXPECT_STREQ(back.tokenizer->kind(), "spm");
  EXPECT_EQ(back.tokenizer->vocab_size(), tok->vocab_size());
  for (const char* s : {"First Citizen:\nWe are", "the patricians good", "  two  spaces", "unseen: zebra ÿ 名"})
    EXPECT_EQ(back.tokenizer->encode(s), tok->encode(s)) << s;
  EXPECT_EQ(back.tokenizer->encode(text()), tok->encode(text())) << "the text the vocabulary was learned from";
  EXPECT_EQ(back.tokenizer->prompt_start(), std::nullopt);  // folio's export says add_bos_token false
  expect_same_weights(model, *back.model);

  // add_bos_token true, llama.cpp's default: prompts start with BOS, which the checkpoint keeps.
  GgufFile bos = f;
  set(bos, "tokenizer.ggml.add_bos_token", GgufValue::flag(true));
  const ImportedModel with_bos = model_from_gguf(bos, "b.gguf");
  EXPECT_EQ(with_bos.tokenizer->prompt_start(), std::optional<int32_t>(integer(f, "tokenizer.ggml.bos_token_id")));
  EXPECT_EQ(with_bos.tokenizer->encode("We are"), tok->encode("We are"));  // encode() adds nothing
  const auto reloaded = load_tokenizer(with_bos.tokenizer->metadata(), "checkpoint");
  EXPECT_EQ(reloaded->prompt_start(), with_bos.tokenizer->prompt_start());
  EXPECT_EQ(reloaded->fingerprint(), with_bos.tokenizer->fingerprint());
  EXPECT_NE(reloaded->fingerprint(), back.tokenizer->fingerprint());
}

// folio serve puts the BOS such a tokenizer asks for before every prompt's ids (and
// folio generate, which tests/test_gguf_elsewhere.sh holds to llama.cpp's text).
TEST(GgufElsewhere, ServePutsTheBosBeforeThePrompt) {
  const auto tok = make_tokenizer({"bpe", 500}, text());
  TokenizerMetadata meta = tok->metadata();
  meta.emplace_back("tokenizer_prompt_start", "1");
  const auto with_bos = load_tokenizer(meta, "checkpoint");
  std::vector<int32_t> want = tok->encode("We are");
  EXPECT_EQ(serve::parse_completion(R"({"prompt": "We are"})", *tok, {}).prompt, want);
  want.insert(want.begin(), 1);
  EXPECT_EQ(serve::parse_completion(R"({"prompt": "We are"})", *with_bos, {}).prompt, want);
  // Only a control piece can start prompts.
  meta.back().second = "300";
  expect_error([&] { load_tokenizer(meta, "checkpoint"); }, {"checkpoint", "300 is not one of the model's control pieces"});
}

// folio attention shows the window the model continues from, BOS first, as generate and
// serve's page run it: it showed the prompt's tokens alone, weights of a forward pass
// the model is never given.
TEST(GgufElsewhere, AttentionPutsTheBosBeforeThePrompt) {
  TempDir dir("gguf_elsewhere_attention");
  const auto tok = make_tokenizer({"bpe", 500}, text());
  TokenizerMetadata meta = tok->metadata();
  meta.emplace_back("tokenizer_prompt_start", "1");
  const auto with_bos = load_tokenizer(meta, "checkpoint");
  const nn::GPT model(llama_config(*tok));
  save_model((dir.path / "model.safetensors").string(), model, *with_bos, 0);
  const size_t n = tok->encode("We are").size();
  const Result r = run_folio(words("attention --layer 0 --head 0 --prompt 'We are' --checkpoint " +
                                   (dir.path / "model.safetensors").string()),
                             dir.path);
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream table(r.out);
  std::vector<std::string> rows;
  for (std::string line; std::getline(table, line);) rows.push_back(line);
  ASSERT_EQ(rows.size(), n + 3) << r.out;  // the title, the keys, the BOS's row and the prompt's
  EXPECT_EQ(rows[1].find("<bos>"), rows[1].find_first_not_of(' ')) << r.out;  // the first key
  EXPECT_EQ(rows[2].rfind(" <bos> 1.000 0.000", 0), 0u) << r.out;              // the first query
}

// Another tokenizer kind, or a "llama" vocabulary folio's SentencePiece model cannot
// hold, is refused naming the key.
TEST(GgufElsewhere, OtherVocabulariesAreRefusedNamingTheKey) {
  const auto tok = make_tokenizer({"bpe", 500}, text());
  const GgufFile good = without_folio_keys(model_to_gguf(nn::GPT(llama_config(*tok)), *tok, GgufDtype::f32, "t"));
  struct Row {
    std::string key;
    GgufValue value;
    std::string says;
  };
  const Row rows[] = {
      {"tokenizer.ggml.model", GgufValue::text("bert"), "tokenizer.ggml.model is \"bert\""},
      {"tokenizer.ggml.model", GgufValue::text("gpt2"), "tokenizer.ggml.model is \"gpt2\""},
      {"tokenizer.ggml.add_eos_token", GgufValue::flag(true), "tokenizer.ggml.add_eos_token"},
      {"tokenizer.ggml.merges", GgufValue::texts({"a b"}), "tokenizer.ggml.merges"},
      {"tokenizer.ggml.unknown_token_id", GgufValue::u32(5), "unknown_token_id"},
      {"tokenizer.ggml.bos_token_id", GgufValue::u32(100000), "tokenizer.ggml.bos_token_id is 100000"},
      {"tokenizer.ggml.scores", GgufValue::f32s({1.0}), "tokenizer.ggml.scores has 1"},
      {"tokenizer.ggml.token_type", GgufValue::i32s(std::vector<int64_t>(size_t(tok->vocab_size()), 9)),
       "token_type[0] is 9"},
  };
  for (const Row& row : rows) {
    GgufFile f = good;
    set(f, row.key, row.value);
    expect_error([&] { model_from_gguf(f, "x.gguf"); }, {"x.gguf", row.says});
  }
}

}  // namespace
}  // namespace folio
