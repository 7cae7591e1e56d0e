// Checkpoints: a model round-trips whole, and every way of damaging its file is a
// clear Error from the check meant for it.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <limits>
#include <stdexcept>

#include "base/error.h"
#include "tests/support.h"
#include "io/checkpoint.h"
#include "io/folio_format.h"
#include "io/safetensors.h"
#include "nn/model_options.h"
#include "train/run_state.h"

namespace folio {
namespace {

using testing::TempDir;

nn::GPTConfig tiny(int64_t vocab) {
  return {.vocab_size = vocab, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16, .dropout = 0.1f};
}

TEST(Checkpoint, ModelRoundTripPreservesEveryTensorAndMetadata) {
  const TempDir dir("roundtrip");
  const auto vocab = make_tokenizer({}, "\n abcé—");
  nn::GPT model(tiny(vocab->vocab_size()));
  save_model(dir / "model.safetensors", model, *vocab, 42);
  const ModelCheckpoint ck = load_model(dir.path.string());  // a directory means DIR/model.safetensors
  EXPECT_EQ(ck.step, 42);
  EXPECT_EQ(ck.tokenizer->metadata(), vocab->metadata());
  EXPECT_EQ(to_json(ck.model->config()).dump(), to_json(model.config()).dump());
  const auto a = model.named_parameters(), b = ck.model->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].second.to_vector(), b[i].second.to_vector()) << a[i].first;
  }
}

// Hugging Face's loaders require "format": "pt"; folio's own kind is "folio_format".
// A file written before that split (the kind in "format") still loads.
TEST(Checkpoint, FormatIsPtAndOlderFilesStillLoad) {
  const TempDir dir("format");
  const auto vocab = make_tokenizer({}, "abc");
  nn::GPT model(tiny(vocab->vocab_size()));
  save_model(dir / "model.safetensors", model, *vocab, 3);
  SafetensorsFile f = load_safetensors(dir / "model.safetensors");
  EXPECT_EQ(f.meta("format"), "pt");
  EXPECT_EQ(f.meta("folio_format"), "folio-gpt-1-model");

  Metadata legacy;
  for (auto& [k, v] : f.metadata)
    if (k != "folio_format") legacy.emplace_back(k, k == "format" ? "folio-gpt-1-model" : v);
  save_safetensors(dir / "old.safetensors", f.tensors, legacy);
  EXPECT_EQ(load_model(dir / "old.safetensors").step, 3);

  for (auto& [k, v] : legacy)
    if (k == "format") v = "pt";  // "pt" alone says nothing of what the file holds
  save_safetensors(dir / "foreign.safetensors", f.tensors, legacy);
  EXPECT_THROW(load_model(dir / "foreign.safetensors"), Error);
  EXPECT_THROW(load_state(dir / "model.safetensors"), Error);  // a model is not a state
}

// A model with every option of issue 14 round-trips: config, tensors and logits. The
// file holds the tied matrix once (token_embedding.weight, no lm_head.weight) and no
// position table (rope).
TEST(Checkpoint, ModelOptionsRoundTrip) {
  const TempDir dir("options");
  const auto vocab = make_tokenizer({}, "abcdefg");
  nn::GPTConfig c = tiny(vocab->vocab_size());
  c.pos = nn::Positions::rope, c.qk_norm = true, c.activation = nn::Activation::relu2, c.zero_init_proj = true;
  c.logit_softcap = 15.5f, c.tie_weights = true, c.bigram = true;
  nn::GPT model(c);
  save_model(dir / "model.safetensors", model, *vocab, 7);
  const SafetensorsFile f = load_safetensors(dir / "model.safetensors");
  EXPECT_NE(f.find("token_embedding.weight"), nullptr);
  EXPECT_NE(f.find("lm_head.bias"), nullptr);
  EXPECT_EQ(f.find("lm_head.weight"), nullptr);
  EXPECT_EQ(f.find("position_embedding.weight"), nullptr);
  testing::expect_contains(f.meta("config"), {"\"pos\":\"rope\"", "\"qk_norm\":true", "\"activation\":\"relu2\"",
                                              "\"zero_init_proj\":true", "\"logit_softcap\":15.5",
                                              "\"tie_weights\":true", "\"bigram\":true"});

  const ModelCheckpoint ck = load_model(dir.path.string());
  const nn::GPTConfig& got = ck.model->config();
  EXPECT_EQ(got.pos, nn::Positions::rope);
  EXPECT_TRUE(got.qk_norm && got.zero_init_proj && got.tie_weights && got.bigram);
  EXPECT_EQ(got.activation, nn::Activation::relu2);
  EXPECT_EQ(got.logit_softcap, 15.5f);
  EXPECT_TRUE(ck.model->lm_head->weight.same(ck.model->token_embedding->weight));  // tied again
  EXPECT_EQ(ck.model->flat_parameters().to_vector(), model.flat_parameters().to_vector());
  model.eval(), ck.model->eval();
  NoGradGuard no_grad;
  const std::vector<int32_t> ids{1, 2, 3, 4, 5, 6};
  EXPECT_EQ(ck.model->forward(ids, 1, 6).logits.to_vector(), model.forward(ids, 1, 6).logits.to_vector());
}

// A checkpoint written before the options existed has none of their fields: it loads
// as the model their defaults describe. One from the fuzz corpus, and one of today's
// with the fields taken out.
TEST(Checkpoint, FilesWithoutTheModelOptionsLoadWithTheDefaults) {
  auto expect_defaults = [](const nn::GPTConfig& c) {
    EXPECT_EQ(c.pos, nn::Positions::learned);
    EXPECT_FALSE(c.qk_norm || c.zero_init_proj || c.tie_weights || c.bigram);
    EXPECT_EQ(c.logit_softcap, 0.0f);
  };
  const ModelCheckpoint old = load_model(std::string(FOLIO_SOURCE_DIR) + "/fuzz/corpus/accept-model.safetensors");
  EXPECT_EQ(old.model->config().activation, nn::Activation::gelu);
  expect_defaults(old.model->config());

  const TempDir dir("no-options");
  const auto vocab = make_tokenizer({}, "abc");
  nn::GPT model(tiny(vocab->vocab_size()));
  save_model(dir / "model.safetensors", model, *vocab, 3);
  SafetensorsFile f = load_safetensors(dir / "model.safetensors");
  Metadata meta = f.metadata;
  for (auto& [k, v] : meta)
    if (k == "config") {
      Json::Object o = Json::parse(v).as_object();
      std::erase_if(o, [](const auto& kv) {
        return std::ranges::any_of(nn::model_options(), [&](const nn::ModelOption& m) { return kv.first == m.key; });
      });
      v = Json(o).dump();
      EXPECT_EQ(v.find("pos"), std::string::npos) << v;
    }
  save_safetensors(dir / "before.safetensors", f.tensors, meta);
  const ModelCheckpoint before = load_model(dir / "before.safetensors");
  expect_defaults(before.model->config());
  EXPECT_EQ(before.model->flat_parameters().to_vector(), model.flat_parameters().to_vector());
}

// A bad value of an option is a ConfigError naming the field and the value.
TEST(Checkpoint, BadModelOptionValuesAreClearErrors) {
  const Json good = to_json(tiny(3));
  auto expect_refused = [&](const char* key, const Json& value, std::initializer_list<std::string> fragments) {
    Json::Object o = good.as_object();
    for (auto& [k, v] : o)
      if (k == key) v = value;
    try {
      model_config_from_json(Json(o), "file.safetensors");
      ADD_FAILURE() << key << " = " << value.dump() << " was accepted";
    } catch (const ConfigError& e) {
      testing::expect_contains(e.what(), {"file.safetensors"});
      testing::expect_contains(e.what(), fragments);
    }
  };
  expect_refused("pos", Json("foo"), {"pos must be \"learned\" or \"rope\", got \"foo\""});
  expect_refused("pos", Json(1), {"pos must be"});
  expect_refused("qk_norm", Json("yes"), {"qk_norm must be true or false, got \"yes\""});
  expect_refused("tie_weights", Json(1), {"tie_weights must be true or false"});
  expect_refused("zero_init_proj", Json(Json::Array{}), {"zero_init_proj must be true or false"});
  expect_refused("logit_softcap", Json(-1.0), {"logit_softcap = -1.0 outside [0, "});
  expect_refused("logit_softcap", Json("30"), {"logit_softcap = \"30\" outside"});
  expect_refused("activation", Json("relu3"), {"activation must be", "relu2", "got \"relu3\""});
  Json::Object odd = good.as_object();  // head size 16 / 2 = 8 is even; make it 5
  for (auto& [k, v] : odd) {
    if (k == "n_embd") v = Json(10);
    if (k == "pos") v = Json("rope");
  }
  try {
    model_config_from_json(Json(odd), "file.safetensors");
    ADD_FAILURE() << "rope with a head size of 5 was accepted";
  } catch (const ConfigError& e) {
    testing::expect_contains(e.what(), {"pos rope rotates pairs", "n_embd / n_head = 5"});
  }
}

// Every way of breaking a checkpoint is a clear Error naming the file, never a crash.
class DamagedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    save_model(good_, model_, *make_tokenizer({}, "abc"), 1);
    std::ifstream in(good_, std::ios::binary);
    bytes_.assign(std::istreambuf_iterator<char>(in), {});
  }
  // load_model(file) must throw an Error naming the file and containing `fragment`.
  void expect_error(const std::string& file, const std::string& fragment) {
    try {
      load_model(file);
      ADD_FAILURE() << "loaded a damaged file; expected " << fragment;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  }
  void expect_bytes_error(const std::string& content, const std::string& fragment) {
    std::ofstream(bad_, std::ios::binary | std::ios::trunc) << content;
    expect_error(bad_, fragment);
  }
  // The good file's tensors, with `edit` applied, saved under the good file's metadata.
  void expect_tensors_error(const std::function<void(std::vector<NamedTensor>&)>& edit, const std::string& fragment) {
    std::vector<NamedTensor> tensors;
    for (const auto& [name, t] : model_.named_parameters()) tensors.push_back({name, t});
    edit(tensors);
    save_safetensors(bad_, tensors, load_safetensors(good_).metadata);
    expect_error(bad_, fragment);
  }
  NamedTensor& find(std::vector<NamedTensor>& tensors, const std::string& name) {
    for (NamedTensor& t : tensors)
      if (t.name == name) return t;
    throw std::logic_error("no tensor " + name);
  }

  const TempDir dir_{"damaged"};
  const std::string good_ = dir_ / "good.safetensors", bad_ = dir_ / "bad.safetensors";
  nn::GPT model_{tiny(3)};
  std::string bytes_;
};

TEST_F(DamagedCheckpoint, Truncated) {
  expect_bytes_error(bytes_.substr(0, bytes_.size() / 2), "exceeds the data section size");
}

TEST_F(DamagedCheckpoint, HeaderLengthPastTheEnd) {
  expect_bytes_error(std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8) + bytes_.substr(8), "header length");
}

TEST_F(DamagedCheckpoint, CorruptJson) {
  std::string flipped = bytes_;
  flipped[8] = '!';  // the header's opening brace
  expect_bytes_error(flipped, "header: invalid JSON");
}

TEST_F(DamagedCheckpoint, MetadataKeyDamaged) {
  std::string flipped = bytes_;
  flipped[20] = '!';  // "__metadata__" becomes "__metadata!_": a tensor entry, and not a valid one
  expect_bytes_error(flipped, "tensor \"__metadata!_\": unexpected key \"format\"");
}

TEST_F(DamagedCheckpoint, TensorOfTheWrongShape) {  // as many values, another shape
  expect_tensors_error([&](auto& ts) { find(ts, "lm_head.bias").tensor = Tensor::zeros({1, 3}); },
                       "tensor lm_head.bias: shape (1, 3) but the config needs (3)");
}

TEST_F(DamagedCheckpoint, TensorTheConfigDoesNotHave) {  // as many values, one unknown name
  expect_tensors_error([&](auto& ts) { find(ts, "lm_head.bias").name = "extra"; },
                       "tensor \"extra\" is not a parameter of this config");
}

TEST_F(DamagedCheckpoint, TensorMissing) {  // its values moved into another tensor
  expect_tensors_error(
      [&](auto& ts) {
        const int64_t moved = find(ts, "token_embedding.weight").tensor.numel();
        ts.erase(ts.begin());
        find(ts, "lm_head.bias").tensor = Tensor::zeros({3 + moved});
      },
      "tensor token_embedding.weight is missing for this config");
}

TEST_F(DamagedCheckpoint, MoreValuesThanTheConfig) {
  const int64_t n = model_.config().parameter_count();
  expect_tensors_error([&](auto& ts) { ts.push_back({"extra", Tensor::zeros({1})}); },
                       cat("tensors hold ", n + 1, " values but the config needs ", n));
}

TEST_F(DamagedCheckpoint, NonFiniteWeight) {
  expect_tensors_error(
      [&](auto& ts) {
        Tensor t = find(ts, "lm_head.weight").tensor.detach().clone();  // not the model's own
        t.data()[5] = std::numeric_limits<float>::quiet_NaN();
        find(ts, "lm_head.weight").tensor = t;
      },
      "tensor lm_head.weight: value nan at index 5 (must be finite)");
}

// The check runs a block of values at a time: a bad value is found, and named, in any
// block and the partial one at the end, and the first of two is the one named.
TEST(CheckFinite, NamesTheFirstBadValueInAnyBlock) {
  const int64_t n = 3 * 4096 + 17;
  for (const int64_t at : {int64_t(0), int64_t(4095), int64_t(4096), int64_t(9000), n - 1}) {
    Tensor t = Tensor::zeros({n});
    t.data()[at] = -std::numeric_limits<float>::infinity();
    if (at + 1 < n) t.data()[at + 1] = std::numeric_limits<float>::quiet_NaN();
    try {
      check_finite(t, "w", "f.safetensors");
      ADD_FAILURE() << "accepted -inf at " << at;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(cat("value -inf at index ", at, " ")), std::string::npos) << e.what();
    }
  }
  Tensor t = Tensor::zeros({n});
  t.data()[n - 2] = -1.0f;
  EXPECT_NO_THROW(check_finite(t, "w", "f.safetensors"));
  EXPECT_THROW(check_finite(t, "w", "f.safetensors", /*non_negative=*/true), Error);
  t.data()[n - 2] = -0.0f;  // not below 0
  EXPECT_NO_THROW(check_finite(t, "w", "f.safetensors", true));
}

TEST_F(DamagedCheckpoint, Missing) {
  expect_error(dir_ / "missing.safetensors", "file: cannot open: No such file or directory");
}

// checkpoint_step and load_checkpoint_header read the header alone: what damages the
// header (or the file's size against it, or the tensors' total against the config)
// they refuse with load_model's own Error; what only the weights show (a NaN) they do
// not see, as their comments say.
TEST_F(DamagedCheckpoint, HeaderAloneRefusesWhatTheHeaderBreaks) {
  EXPECT_EQ(checkpoint_step(good_), 1);
  const CheckpointHeader h = load_checkpoint_header(good_);
  const ModelCheckpoint whole = load_model(good_);
  EXPECT_EQ(to_json(h.config).dump(), to_json(whole.model->config()).dump());
  EXPECT_EQ(h.tokenizer->metadata(), whole.tokenizer->metadata());
  EXPECT_EQ(h.step, whole.step);
  EXPECT_EQ(h.path, whole.path);
  auto same_error = [&](const std::string& what) {
    const std::string want = testing::error_of([&] { load_model(bad_); });
    EXPECT_EQ(testing::error_of([&] { checkpoint_step(bad_); }), want) << what;
    EXPECT_EQ(testing::error_of([&] { load_checkpoint_header(bad_); }), want) << what;
  };
  std::string flipped = bytes_;
  flipped[8] = '!';  // the header's opening brace
  for (const std::string& damaged : {bytes_.substr(0, bytes_.size() / 2), bytes_.substr(0, bytes_.size() - 1),
                                     std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8) + bytes_.substr(8), flipped}) {
    std::ofstream(bad_, std::ios::binary | std::ios::trunc) << damaged;
    same_error(cat(damaged.size(), " bytes"));
  }
  const SafetensorsFile good = load_safetensors(good_);
  for (const auto& [key, value] : {std::pair("step", "-1"), std::pair("step", "\"7\""), std::pair("folio_format", "folio-gpt-1-state")}) {
    Metadata m = good.metadata;
    for (auto& [k, v] : m)
      if (k == key) v = value;
    save_safetensors(bad_, good.tensors, m);
    same_error(cat(key, " ", value));
  }
  std::vector<NamedTensor> more = good.tensors;
  more.push_back({"extra", Tensor::zeros({1})});
  save_safetensors(bad_, more, good.metadata);
  const std::string too_many = testing::error_of([&] { load_model(bad_); });
  EXPECT_NE(too_many.find("values but the config needs"), std::string::npos) << too_many;
  EXPECT_EQ(testing::error_of([&] { load_checkpoint_header(bad_); }), too_many);
  expect_tensors_error(
      [&](auto& ts) {
        Tensor t = find(ts, "lm_head.weight").tensor.detach().clone();
        t.data()[0] = std::numeric_limits<float>::quiet_NaN();
        find(ts, "lm_head.weight").tensor = t;
      },
      "value nan");
  EXPECT_EQ(checkpoint_step(bad_), 1) << "the weights are not read";
  EXPECT_EQ(load_checkpoint_header(bad_).step, 1) << "the weights are not read";
}

}  // namespace
}  // namespace folio
