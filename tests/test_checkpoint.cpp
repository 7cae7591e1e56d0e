// Checkpoints: a model round-trips whole, and every way of damaging its file is a
// clear Error from the check meant for it.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <stdexcept>

#include "autograd/error.h"
#include "tests/support.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"

namespace folio {
namespace {

using testing::TempDir;

nn::GPTConfig tiny(int64_t vocab) {
  return {.vocab_size = vocab, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16, .dropout = 0.1f};
}

TEST(Checkpoint, ModelRoundTripPreservesEveryTensorAndMetadata) {
  const TempDir dir("roundtrip");
  const Vocab vocab = Vocab::from_utf8("\n abcé—");
  nn::GPT model(tiny(vocab.size()));
  save_model(dir / "model.safetensors", model, vocab, 42);
  const ModelCheckpoint ck = load_model(dir.path.string());  // a directory means DIR/model.safetensors
  EXPECT_EQ(ck.step, 42);
  EXPECT_EQ(ck.vocab.chars(), vocab.chars());
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
  const Vocab vocab = Vocab::from_utf8("abc");
  nn::GPT model(tiny(vocab.size()));
  save_model(dir / "model.safetensors", model, vocab, 3);
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

// Every way of breaking a checkpoint is a clear Error naming the file, never a crash.
class DamagedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    save_model(good_, model_, Vocab::from_utf8("abc"), 1);
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

TEST_F(DamagedCheckpoint, Missing) {
  expect_error(dir_ / "missing.safetensors", "file: cannot open: No such file or directory");
}

}  // namespace
}  // namespace folio
