// Bad input, across options and files: each case must exit with code 2 (unusable
// input; 1 would be a failure during a run), print exactly one line on stderr that
// names the option, file or value at fault, print nothing on stdout, and leave every
// file as it was: nothing created, removed or modified (path, type, size, mtime and
// inode of everything under the test's directory are compared).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "base/error.h"
#include "tests/support.h"
#include "io/json.h"
#include "io/run_dir.h"
#include "train/run_state.h"

namespace folio {
namespace {

using namespace folio::testing;

// A copy of a safetensors file whose __metadata__.<key> (a JSON object: the model's
// "config", or a state's "train_config") is edited by `edit`; the tensors are unchanged.
void rewrite_meta(const std::string& src, const std::string& dst, const char* meta_key,
                  const std::function<void(Json::Object&)>& edit) {
  const std::string bytes = slurp(src);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(bytes[i])) << (8 * i);
  Json header = Json::parse(std::string_view(bytes).substr(8, n));
  for (auto& [key, value] : header.as_object())
    if (key == "__metadata__")
      for (auto& [mkey, mvalue] : value.as_object())
        if (mkey == meta_key) {
          Json config = Json::parse(mvalue.as_string());
          edit(config.as_object());
          mvalue = Json(config.dump());
        }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = char((uint64_t(text.size()) >> (8 * i)) & 0xff);
  spit(dst, out + text + bytes.substr(8 + n));
}

void rewrite_config(const std::string& src, const std::string& dst, const std::function<void(Json::Object&)>& edit) {
  rewrite_meta(src, dst, "config", edit);
}

void set(Json::Object& o, const std::string& key, Json v) {
  for (auto& [k, x] : o)
    if (k == key) x = std::move(v);
}

class BadInput : public ::testing::Test {
 protected:
  // One directory of inputs for every case: a real run, damaged copies of its files,
  // odd corpora. Built once; each case must leave it exactly as it was.
  static void SetUpTestSuite() {
    files_ = std::make_unique<TempDir>("bad_input");
    scratch_ = std::make_unique<TempDir>("bad_input_scratch");  // captured stdout/stderr, not compared
    const auto& d = *files_;
    write_small_corpus(d.path / "corpus.txt");
    const Result t = run_folio({"train", "--data", d / "corpus.txt", "--out", d / "run", "--n-layer", "1",
                                "--n-head", "2", "--n-embd", "16", "--block-size", "16", "--batch-size", "4",
                                "--max-iters", "4", "--eval-interval", "2", "--eval-iters", "1", "--threads", "1",
                                "--quiet"},
                               scratch_->path);
    ASSERT_EQ(t.code, 0) << t.err;
    const std::string model = d / "run/model.safetensors";
    const std::string bytes = slurp(model);
    spit(d / "truncated.safetensors", bytes.substr(0, bytes.size() / 2));
    // Tensors that do not match the config beside them (n_embd 16 -> 32).
    rewrite_config(model, d / "wrong_arch.safetensors", [](Json::Object& c) { set(c, "n_embd", Json(32)); });
    rewrite_config(model, d / "huge_layers.safetensors", [](Json::Object& c) { set(c, "n_layer", Json(100000)); });
    rewrite_config(model, d / "negative_layers.safetensors", [](Json::Object& c) { set(c, "n_layer", Json(-3)); });
    rewrite_config(model, d / "bad_heads.safetensors", [](Json::Object& c) { set(c, "n_head", Json(3)); });
    rewrite_config(model, d / "string_block.safetensors", [](Json::Object& c) { set(c, "block_size", Json("16")); });
    // A run directory whose training state is damaged.
    fs::create_directories(d.path / "bad_state");
    fs::copy_file(model, d.path / "bad_state/model.safetensors");
    const std::string state = slurp(d / "run/state.safetensors");
    spit(d / "bad_state/state.safetensors", state.substr(0, state.size() - 5));
    // Runs saved with --dtype bf16, and with a dtype no folio writes.
    for (const auto& [dir, dtype] : {std::pair{"bf16_state", "bf16"}, std::pair{"fp16_state", "fp16"}}) {
      fs::create_directories(d.path / dir);
      fs::copy_file(model, d.path / dir / "model.safetensors");
      rewrite_meta(d / "run/state.safetensors", d.path / dir / "state.safetensors", "train_config",
                   [dtype](Json::Object& c) { set(c, "dtype", Json(dtype)); });
    }
    fs::create_directories(d.path / "empty_dir");
    spit(d / "empty.txt", "");
    spit(d / "short.txt", "hello");
    spit(d / "other_vocab.txt", std::string(2000, 'a') + "\xe2\x98\x83 snowmen are not Shakespeare\n");
    spit(d / "file.txt", "a regular file, not a directory");
    spit(d / "prompt_unknown.txt", "\xe2\x98\x83");
    spit(d / "prompt_bad_utf8.txt", "ab\xff");
    // A corpus whose NAME is not valid UTF-8: it could not be saved in a checkpoint.
    fs::copy_file(d.path / "corpus.txt", d.path / "corpus\xff.txt");
  }
  static void TearDownTestSuite() {
    files_.reset();
    scratch_.reset();
  }

  struct Case {
    Args args;
    std::vector<std::string> fragments;  // each must appear on the stderr line
    int code = 2;
    std::vector<std::string> env = {};   // NAME=value, added to the environment
  };

  void expect_refused(const Case& c) {
    SCOPED_TRACE(show(c.args));
    const Snapshot before = snapshot(files_->path);
    const Result r = run_folio(c.args, scratch_->path, 30, c.env);  // refusals are immediate
    EXPECT_EQ(r.code, c.code) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr: " << r.err;
    EXPECT_TRUE(!r.err.empty() && r.err.back() == '\n') << "stderr: " << r.err;
    for (const auto& f : c.fragments) EXPECT_NE(r.err.find(f), std::string::npos) << "lacks '" << f << "': " << r.err;
    EXPECT_EQ(r.out, "") << "printed on stdout";
    EXPECT_EQ(diff(before, snapshot(files_->path)), "") << "files changed";
  }

  static std::string at(const std::string& rel) { return *files_ / rel; }
  static std::unique_ptr<TempDir> files_, scratch_;
};
std::unique_ptr<TempDir> BadInput::files_, BadInput::scratch_;

TEST_F(BadInput, Options) {
  const std::string out = at("out");  // never created
  const std::string corpus = at("corpus.txt");
  const std::vector<Case> cases = {
      {{"frobnicate"}, {"unknown command", "frobnicate"}},
      {{"train", "--bogus", "--out", out}, {"--bogus"}},
      {{"train", "--out"}, {"--out"}},                                          // missing value
      {{"train", "--out", out, "--n-layer"}, {"--n-layer"}},                    // missing value, last
      {{"train", "--out", out, "--n-layer", "-1"}, {"--n-layer", "-1"}},
      {{"train", "--out", out, "--n-embd", "0"}, {"--n-embd", "0"}},
      {{"train", "--out", out, "--block-size", "0"}, {"--block-size", "0"}},
      {{"train", "--out", out, "--batch-size", "0"}, {"--batch-size", "0"}},
      {{"train", "--out", out, "--max-iters", "-5"}, {"--max-iters", "-5"}},
      {{"train", "--out", out, "--eval-interval", "0"}, {"--eval-interval"}},
      {{"train", "--out", out, "--n-embd", "30", "--n-head", "4"}, {"30", "divisible", "4"}},
      {{"train", "--out", out, "--dropout", "1"}, {"dropout", "1"}},
      {{"train", "--out", out, "--lr", "abc"}, {"--lr", "abc"}},
      {{"train", "--out", out, "--lr", "nan"}, {"lr", "nan"}},
      {{"train", "--out", out, "--lr", "0"}, {"lr", "0"}},
      {{"train", "--out", out, "--lr", "1e39"}, {"--lr", "1e39"}},              // not a float
      {{"train", "--out", out, "--min-lr", "1", "--lr", "0.1"}, {"--min-lr", "1"}},
      {{"train", "--out", out, "--beta2", "1"}, {"beta2", "1"}},
      {{"train", "--out", out, "--val-fraction", "1.5"}, {"--val-fraction", "1.5"}},
      {{"train", "--out", out, "--activation", "tanh"}, {"--activation", "tanh", "relu2"}},
      {{"train", "--out", out, "--pos", "foo"}, {"--pos", "foo", "learned or rope"}},
      {{"train", "--out", out, "--pos", "rope", "--n-embd", "12", "--n-head", "4"}, {"pos rope", "3", "even"}},
      {{"train", "--out", out, "--logit-softcap", "-1"}, {"--logit-softcap", "-1", ">= 0"}},
      {{"train", "--out", out, "--logit-softcap", "inf"}, {"--logit-softcap", "inf"}},
      {{"train", "--out", out, "--logit-softcap", "abc"}, {"--logit-softcap", "abc"}},
      {{"train", "--out", out, "--qk-norm", "yes"}, {"unexpected argument 'yes'"}},
      {{"train", "--out", out, "--threads", "-1"}, {"--threads", "-1"}},
      {{"train", "--out", out, "--parallel", "both"}, {"--parallel", "both", "data or ops"}},
      {{"train", "--out", out, "--dtype", "fp16"}, {"--dtype", "fp16", "fp32, bf16 or auto"}},
      {{"train", "--out", out, "--decay", "linear"}, {"--decay", "linear", "cosine or wsd"}},
      {{"train", "--out", out, "--cooldown", "0"}, {"--cooldown", "positive", "0"}},
      {{"train", "--out", out, "--cooldown", "1.5"}, {"--cooldown", "1.5", "(0, 1]"}},
      {{"train", "--out", out, "--ema", "1"}, {"--ema", "1", "[0, 1)"}},
      {{"train", "--out", out, "--ema", "-0.5"}, {"--ema", "-0.5", ">= 0"}},
      {{"train", "--out", out, "--optimizer", "sgd"}, {"--optimizer", "sgd", "adamw or muon"}},
      {{"train", "--out", out, "--muon-lr", "0"}, {"--muon-lr", "positive", "0"}},
      {{"train", "--out", out, "--muon-lr", "nan"}, {"--muon-lr", "nan"}},
      {{"train", "--out", out, "--muon-weight-decay", "-0.1"}, {"--muon-weight-decay", "-0.1"}},
      {{"train", "--out", out, "--muon-momentum-warmup", "-5"}, {"--muon-momentum-warmup", "-5", ">= 0"}},
      {{"train", "--out", out, "--muon-momentum-warmup", "1.5"}, {"--muon-momentum-warmup", "1.5"}},
      {{"train", "--out", out, "--seq-warmup", "-8"}, {"--seq-warmup", "-8", ">= 0"}},
      {{"train", "--out", out, "--seq-warmup", "100", "--sampling", "epoch"},
       {"--seq-warmup 100 needs --sampling random", "epoch"}},
      {{"train", "--out", out, "--batch-warmup", "-8"}, {"--batch-warmup", "-8", ">= 0"}},
      {{"train", "--out", out, "--batch-warmup", "2.5"}, {"--batch-warmup", "2.5"}},
      {{"train", "--out", out, "--max-time", "-1"}, {"--max-time", "-1"}},
      {{"train", "--out", out, "--max-time", "ten"}, {"--max-time", "ten"}},
      {{"train", "--out", out, "--max-time", "1e12"}, {"--max-time", "1e+12"}},
      {{"train", "--out", out, "--max-iters", "0"}, {"--max-iters 0", "--max-time"}},
      {{"train", "--out", out, "stray"}, {"unexpected argument 'stray'"}},
      // Beyond what a checkpoint may hold: refused at the start, not at the first save.
      {{"train", "--data", corpus, "--out", out, "--batch-size", "2000000"}, {"--batch-size", "2000000"}},
      {{"train", "--data", corpus, "--out", out, "--n-layer", "300"}, {"n_layer", "300", "limits of a checkpoint"}},
      {{"train", "--out", out, "--seed", "-1"}, {"--seed", "-1"}},
      {{"generate", "--checkpoint", at("run"), "--temperature", "-0.5"}, {"temperature", "-0.5"}},
      {{"generate", at("run")}, {"unexpected argument", at("run")}},  // a run given without --checkpoint
      {{"generate", "--checkpoint", at("run"), "--temperature", "-1"}, {"temperature", "-1"}},
      {{"generate", "--checkpoint", at("run"), "--top-p", "0"}, {"--top-p", "0"}},
      {{"generate", "--checkpoint", at("run"), "--top-p", "1.5"}, {"--top-p", "1.5"}},
      {{"generate", "--checkpoint", at("run"), "--top-k", "-2"}, {"--top-k", "-2"}},
      // generate has no --block-size (the checkpoint fixes it; a longer prompt keeps
      // its last block_size characters): its size option is --max-new-tokens.
      {{"generate", "--checkpoint", at("run"), "--max-new-tokens", "-1"}, {"--max-new-tokens", "-1"}},
      {{"generate", "--checkpoint", at("run"), "--num-samples", "0"}, {"--num-samples", "0"}},
      {{"generate", "--checkpoint", at("run"), "--decode-threads", "0"}, {"--decode-threads", "0"}},
      {{"generate", "--checkpoint", at("run"), "--decode-threads", "2", "--no-kv-cache"},
       {"--decode-threads 2", "--no-kv-cache"}},
      {{"generate", "--checkpoint", at("run"), "--prompt", ""}, {"prompt is empty"}},
      {{"eval", "--checkpoint", at("run"), "--split", "bogus"}, {"--split", "bogus"}},
      {{"eval", "--checkpoint", at("run"), "--batch-size", "0"}, {"--batch-size", "0"}},
      {{"eval", "--checkpoint", at("run"), "--val-fraction", "0"}, {"--val-fraction", "0"}},
      {{"eval", "--checkpoint", at("run"), "--dtype", "BF16"}, {"--dtype", "BF16"}},
      {{"generate", "--checkpoint", at("run"), "--dtype", "half"}, {"--dtype", "half"}},
  };
  for (const Case& c : cases) expect_refused(c);
}

// Numbers that parse but mean nothing or overflow where they are used: a loss weight of
// 1e30, a thread count OpenMP cannot start (or that wraps an int), a wait of NaN or
// infinite seconds (a grace of 1e30 s overflowed its milliseconds into no grace at all).
TEST_F(BadInput, NumbersBeyondTheirUse) {
  const std::vector<Case> cases = {
      {{"train", "--out", at("out"), "--mtp", "1e30"}, {"--mtp", "1e30", "[0, 10]"}},
      {{"generate", "--checkpoint", at("run"), "--decode-threads", "1000000000"},
       {"--decode-threads must be in [1, 1024], got 1000000000"}},
      {{"generate", "--checkpoint", at("run"), "--decode-threads", "5000000000"}, {"--decode-threads", "[1, 1024]"}},
      {{"serve", "--checkpoint", at("run"), "--port", "0", "--timeout", "nan"}, {"--timeout must be in (0, 604800]"}},
      {{"serve", "--checkpoint", at("run"), "--port", "0", "--timeout", "inf"}, {"--timeout", "inf"}},
      {{"serve", "--checkpoint", at("run"), "--port", "0", "--timeout", "1e30"}, {"--timeout", "1e+30"}},
      {{"serve", "--checkpoint", at("run"), "--port", "0", "--shutdown-grace", "1e30"},
       {"--shutdown-grace must be in [0, 604800], got 1e+30"}},
      {{"serve", "--checkpoint", at("run"), "--port", "0", "--shutdown-grace", "inf"}, {"--shutdown-grace", "inf"}},
  };
  for (const Case& c : cases) expect_refused(c);
}

TEST_F(BadInput, Files) {
  const std::string out = at("out");
  const std::vector<Case> cases = {
      {{"train", "--data", at("missing.txt"), "--out", out}, {"missing.txt", "No such file"}},
      {{"train", "--data", at("empty_dir"), "--out", out}, {"empty_dir", "directory"}},
      {{"train", "--data", at("empty.txt"), "--out", out}, {"empty.txt", "empty"}},
      {{"train", "--data", "/dev/zero", "--out", out}, {"/dev/zero", "not a regular file"}},  // endless
      {{"train", "--data", at("short.txt"), "--out", out}, {"short.txt", "block_size + 1"}},
      {{"train", "--data", at("corpus\xff.txt"), "--out", out}, {"UTF-8", "--data"}},
      // An output directory that cannot be created: a path through a regular file.
      {{"train", "--data", at("corpus.txt"), "--out", at("file.txt/sub")}, {"file.txt", "not a directory"}},
      {{"train", "--data", at("corpus.txt"), "--out", at("file.txt")}, {"file.txt", "not a directory"}},
      // Resuming: nothing to resume, a damaged state, an architecture that differs.
      {{"train", "--resume", "--out", at("empty_dir")},
       {"empty_dir/state.safetensors", "holds no checkpoint to continue"}},
      {{"train", "--resume", "--out", at("bad_state")}, {"bad_state/state.safetensors"}},
      {{"train", "--resume", "--out", at("run"), "--n-layer", "3"}, {"--n-layer", "cannot change"}},
      {{"train", "--resume", "--out", at("run"), "--n-embd", "32"}, {"--n-embd", "cannot change"}},
      {{"train", "--resume", "--out", at("run"), "--max-iters", "0"}, {"--max-iters", "0"}},
      {{"train", "--resume", "--out", at("run"), "--optimizer", "muon"}, {"--optimizer", "cannot change"}},
      {{"train", "--resume", "--out", at("run"), "--data", at("other_vocab.txt")}, {"other_vocab.txt", "vocabulary"}},
      {{"train", "--resume", "--out", at("fp16_state")}, {"fp16_state/state.safetensors", "dtype", "fp16"}},
      // Checkpoints that are not whole, or whose header lies.
      {{"generate", "--checkpoint", at("missing")}, {"missing", "no such file or directory"}},
      {{"generate", "--checkpoint", at("empty_dir")}, {"empty_dir", "holds no model.safetensors"}},
      {{"generate", "--checkpoint", "/dev/null"}, {"/dev/null", "not a regular file"}},
      {{"generate", "--checkpoint", at("corpus.txt")}, {"corpus.txt", "header length"}},
      {{"info", "--checkpoint", at("truncated.safetensors")}, {"truncated.safetensors"}},
      {{"info", "--checkpoint", at("wrong_arch.safetensors")}, {"wrong_arch.safetensors", "the config needs"}},
      {{"info", "--checkpoint", at("huge_layers.safetensors")}, {"huge_layers.safetensors", "n_layer", "100000"}},
      {{"info", "--checkpoint", at("negative_layers.safetensors")}, {"negative_layers.safetensors", "n_layer", "-3"}},
      {{"eval", "--checkpoint", at("bad_heads.safetensors")}, {"bad_heads.safetensors", "n_head 3"}},
      {{"generate", "--checkpoint", at("string_block.safetensors")}, {"string_block.safetensors", "block_size"}},
      {{"eval", "--checkpoint", at("run"), "--data", at("other_vocab.txt")}, {"other_vocab.txt", "U+2603"}},
      {{"eval", "--checkpoint", at("run"), "--data", at("short.txt")}, {"short.txt", "block_size + 1"}},
      // Prompts the vocabulary cannot encode, inline and from a file.
      {{"generate", "--checkpoint", at("run"), "--prompt", "caf\xc3\xa9"}, {"U+00E9"}},
      {{"generate", "--checkpoint", at("run"), "--prompt-file", at("prompt_unknown.txt")},
       {"--prompt-file " + at("prompt_unknown.txt"), "U+2603"}},
      {{"generate", "--checkpoint", at("run"), "--prompt-file", at("prompt_bad_utf8.txt")},
       {"--prompt-file " + at("prompt_bad_utf8.txt"), "invalid UTF-8"}},
      {{"generate", "--checkpoint", at("run"), "--prompt-file", at("missing.txt")}, {"missing.txt"}},
      {{"generate", "--checkpoint", at("run"), "--prompt", "\xff"}, {"invalid UTF-8"}},
  };
  for (const Case& c : cases) expect_refused(c);
}

// --dtype bf16 where oneDNN would have to emulate bf16. ONEDNN_MAX_CPU_ISA hides the
// instructions from oneDNN (and from folio's check, which asks oneDNN), so this runs
// the refusal on a machine that has them, and on any other.
TEST_F(BadInput, Bf16WithoutAvx512Bf16) {
  const std::vector<std::string> no_bf16 = {"ONEDNN_MAX_CPU_ISA=AVX512_CORE_VNNI"};
  const std::vector<std::string> fragments = {"--dtype bf16", "AVX512-BF16", "avx512_bf16"};
  const std::vector<Case> cases = {
      {{"train", "--data", at("corpus.txt"), "--out", at("out"), "--dtype", "bf16"}, fragments, 2, no_bf16},
      {{"train", "--resume", "--out", at("bf16_state")}, fragments, 2, no_bf16},  // the run's saved dtype
      {{"generate", "--checkpoint", at("run"), "--dtype", "bf16"}, fragments, 2, no_bf16},
      {{"eval", "--checkpoint", at("run"), "--dtype", "bf16"}, fragments, 2, no_bf16},
  };
  for (const Case& c : cases) expect_refused(c);
}

// --dtype auto is the refusal's way out: where bf16 would be emulated, it trains in fp32,
// says so on the run's first line, and saves fp32 with the run.
TEST_F(BadInput, DtypeAutoFallsBackToFp32WithoutAvx512Bf16) {
  const TempDir dir("dtype_auto");
  const Result r = run_folio({"train", "--data", at("corpus.txt"), "--out", dir / "run", "--dtype", "auto",
                              "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "16",
                              "--batch-size", "4", "--max-iters", "2", "--eval-iters", "1", "--threads", "1"},
                             scratch_->path, 120, {"ONEDNN_MAX_CPU_ISA=AVX512_CORE_VNNI"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.out.starts_with("--dtype auto: fp32 matrix products (this CPU lacks AVX512-BF16)\n")) << r.out;
  EXPECT_EQ(saved_run(dir / "run").config.dtype, Precision::fp32);
}

}  // namespace
}  // namespace folio
