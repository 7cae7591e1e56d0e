// Optimizer, schedule, exact resume, the trainer's checks, generation.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "base/error.h"
#include "autograd/parallel.h"
#include "tests/support.h"
#include "train/trainer.h"
#include "train/run_state.h"
#include "train/config_json.h"

namespace folio {

// gtest names a parameter by this (the enum's namespace is folio).
void PrintTo(OptimizerKind k, std::ostream* os) { *os << to_string(k); }

namespace {

namespace fs = std::filesystem;

TEST(AdamW, OneStepMatchesHandComputation) {
  nn::NamedParameters params{{"w", Tensor::from({1, 2}, std::vector<float>{1.0f, -2.0f}).set_requires_grad()},
                             {"b", Tensor::from({2}, std::vector<float>{0.5f, 0.5f}).set_requires_grad()}};
  AdamW opt(params, {.beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f, .weight_decay = 0.1f});
  const float gw[] = {0.5f, -1.0f}, gb[] = {2.0f, 0.0f};
  for (int i = 0; i < 2; ++i) params[0].second.grad_data()[i] = gw[i], params[1].second.grad_data()[i] = gb[i];
  opt.step(0.01f);
  // Step 1: m_hat = g, v_hat = g^2, so the update is lr * g / (|g| + eps) = lr * sign(g);
  // decay multiplies 2-D weights by (1 - lr * wd) first and leaves the 1-D bias alone.
  EXPECT_FLOAT_EQ(params[0].second.data()[0], 1.0f * (1 - 0.001f) - 0.01f);
  EXPECT_FLOAT_EQ(params[0].second.data()[1], -2.0f * (1 - 0.001f) + 0.01f);
  EXPECT_FLOAT_EQ(params[1].second.data()[0], 0.5f - 0.01f);
  EXPECT_FLOAT_EQ(params[1].second.data()[1], 0.5f);  // zero gradient: no move, no decay
  // Step 2 with the same gradient: m = g (0.9 g + 0.1 g), v = g^2, corrections 0.19 and 0.0199.
  opt.step(0.01f);
  const double m_hat = 0.19 * 0.5 / 0.19, v_hat = 0.0199 * 0.25 / 0.0199;
  const double expected = (1.0 * (1 - 0.001) - 0.01) * (1 - 0.001) - 0.01 * m_hat / (std::sqrt(v_hat) + 1e-8);
  EXPECT_NEAR(params[0].second.data()[0], expected, 1e-6);
}

// An optimizer step writes the weights in place: after it, the graph of the forward
// before it must not run backward (its gradients would be for other weights), and
// the usual order (backward, step, then the next forward) must work.
TEST(AdamW, StepBetweenForwardAndBackwardIsAnError) {
  const Tensor x = Tensor::from({1, 2}, std::vector<float>{1.0f, -1.0f});
  nn::NamedParameters params{{"w", Tensor::from({2, 2}, std::vector<float>{1, 2, 3, 4}).set_requires_grad()}};
  AdamW opt(params, {});
  for (int step = 0; step < 3; ++step) {
    sum(linear(x, params[0].second)).backward();
    opt.step(0.01f);
  }
  const Tensor stale = sum(linear(x, params[0].second));
  opt.step(0.01f);
  // backward through weights the optimizer changed since forward
  testing::expect_error([&] { stale.backward(); }, {"linear"});
}

// AdamW's one parallel region gives every thread its share of every segment: the
// update is the same on one thread and two, on segments above the threading grain
// (with and without decay) and one below it.
TEST(AdamW, SameStepOnOneThreadAndTwo) {
  auto weights_after = [](int threads) {
    set_num_threads(threads);
    Rng r(7);
    nn::NamedParameters params{{"w", Tensor::randn({160, 129}, r).set_requires_grad()},
                               {"b", Tensor::randn({30001}, r).set_requires_grad()},
                               {"g", Tensor::randn({7}, r).set_requires_grad()}};
    AdamW opt(params, {});
    for (int step = 0; step < 3; ++step) {
      for (auto& [name, p] : params)
        for (int64_t i = 0; i < p.numel(); ++i) p.grad_data()[i] = r.normal();
      opt.step(0.01f);
    }
    set_num_threads(0);
    std::vector<float> all;
    for (auto& [name, p] : params) all.insert(all.end(), p.data(), p.data() + p.numel());
    return all;
  };
  static_assert(160 * 129 > kParallelGrain && 30001 > kParallelGrain);
  EXPECT_EQ(weights_after(1), weights_after(2));
}

TEST(AdamW, ClipGradNorm) {
  Tensor a = Tensor::zeros({2}).set_requires_grad(), b = Tensor::zeros({1}).set_requires_grad();
  a.grad_data()[0] = 3.0f, a.grad_data()[1] = 0.0f, b.grad_data()[0] = 4.0f;  // norm 5
  EXPECT_FLOAT_EQ(clip_grad_norm({a, b}, 10.0f), 5.0f);
  EXPECT_FLOAT_EQ(a.grad_data()[0], 3.0f);  // under the limit: untouched
  EXPECT_FLOAT_EQ(clip_grad_norm({a, b}, 1.0f), 5.0f);
  EXPECT_NEAR(a.grad_data()[0], 0.6f, 1e-6f);
  EXPECT_NEAR(b.grad_data()[0], 0.8f, 1e-6f);
}

TEST(Schedule, WarmupCosineAndFloor) {
  const Schedule s{.lr = 1e-3f, .min_lr = 1e-4f, .warmup_iters = 10, .decay_iters = 110};
  EXPECT_FLOAT_EQ(s.at(0), 1e-3f / 11);
  EXPECT_FLOAT_EQ(s.at(9), 1e-3f * 10 / 11);
  EXPECT_FLOAT_EQ(s.at(10), 1e-3f);               // peak after warm-up
  EXPECT_NEAR(s.at(60), 0.55e-3f, 1e-9f);         // halfway: midpoint of lr and min_lr
  EXPECT_FLOAT_EQ(s.at(110), 1e-4f);
  EXPECT_FLOAT_EQ(s.at(5000), 1e-4f);
  const Schedule constant{.lr = 3e-4f, .min_lr = 3e-4f, .warmup_iters = 0, .decay_iters = 100};
  for (int step : {0, 50, 99, 200}) EXPECT_FLOAT_EQ(constant.at(step), 3e-4f);
}

nn::GPTConfig tiny(int64_t vocab) {
  return {.vocab_size = vocab, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16, .dropout = 0.1f};
}

// The dtype of a run: saved by name, absent from runs saved before it existed (fp32),
// anything else refused naming the field.
TEST(Checkpoint, TrainConfigDtype) {
  TrainConfig c;
  c.data = "corpus.txt";
  c.dtype = Precision::bf16;
  Json j = to_json(c);
  EXPECT_EQ(train_config_from_json(j, "f").dtype, Precision::bf16);
  auto& fields = j.as_object();
  std::erase_if(fields, [](const auto& kv) { return kv.first == "dtype"; });
  EXPECT_EQ(train_config_from_json(j, "f").dtype, Precision::fp32);
  for (const Json& bad : {Json("fp16"), Json(16), Json("BF16")}) {
    fields.emplace_back("dtype", bad);
    try {
      train_config_from_json(j, "f");
      ADD_FAILURE() << "accepted dtype " << bad.dump();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("dtype"), std::string::npos) << e.what();
    }
    fields.pop_back();
  }
}

// A small corpus file for training tests.
std::string write_corpus(const fs::path& dir) {
  std::ifstream in(default_corpus_path(), std::ios::binary);
  std::string text(20000, '\0');
  in.read(text.data(), std::streamsize(text.size()));
  const std::string path = (dir / "corpus.txt").string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TrainOptions tiny_run(const fs::path& dir, int64_t max_iters) {
  TrainOptions o;
  o.model = tiny(0);
  o.train.data = write_corpus(dir);
  o.train.batch_size = 4;
  o.train.max_iters = max_iters;
  o.train.warmup_iters = 20;
  o.train.eval_interval = 50;
  o.train.eval_iters = 2;
  o.out_dir = (dir / "run").string();
  o.quiet = true;
  return o;
}

// A config field the reader refuses is a ConfigError: what() names the file, detail()
// is the complaint alone, which the trainer reports for its own options.
TEST(Checkpoint, ConfigFieldErrorsAreTyped) {
  Json j = to_json(tiny(3));
  for (auto& [key, value] : j.as_object())
    if (key == "block_size") value = Json(100000);
  try {
    model_config_from_json(j, "some.safetensors");
    ADD_FAILURE() << "read block_size 100000";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.detail(), "block_size = 100000 outside [1, 65536]");
    EXPECT_EQ(std::string(e.what()), "[checkpoint] some.safetensors: config: " + e.detail());
  }
  const testing::TempDir tmp("config_limits");
  const fs::path& dir = tmp.path;
  TrainOptions o = tiny_run(dir, 1);
  o.model.block_size = 100000;
  try {
    Trainer t(o);
    ADD_FAILURE() << "started a run whose checkpoint could not be read back";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "[config] block_size = 100000 outside [1, 65536] (the limits of a checkpoint)");
  }
}

// Two threads, with dropout and stochastic depth: data-parallel (a replica per thread,
// reseeded from the model's generator every step) and threads inside the ops must both
// resume exactly, and so must a bf16 run (its dtype is saved with the run and
// restored) and a Muon run (its momentum is saved beside AdamW's moments), in fp32 and
// in bf16; the fp32 one also in the middle of a sequence-length warm-up. A data-parallel
// run in the middle of a batch-size warm-up (batches of 1 to 4, on one shard, then two)
// resumes exactly too.
struct ResumeCase {
  bool data_parallel;
  Precision dtype;
  OptimizerKind optimizer = OptimizerKind::adamw;
  bool seq_warmup = false;    // a context of 24 and a sequence-length warm-up
  bool batch_warmup = false;  // a batch-size warm-up
};
void PrintTo(const ResumeCase& c, std::ostream* os) {
  *os << (c.data_parallel ? "data-parallel, " : "inside ops, ") << to_string(c.dtype) << ", " << to_string(c.optimizer)
      << (c.seq_warmup ? ", seq-warmup" : "") << (c.batch_warmup ? ", batch-warmup" : "");
}
class TrainerResume : public ::testing::TestWithParam<ResumeCase> {
 protected:
  void SetUp() override { set_num_threads(2); }
  void TearDown() override { set_num_threads(0); }
};

TEST_P(TrainerResume, IsBitExact) {
  if (GetParam().dtype == Precision::bf16) {
    FOLIO_SKIP_WITHOUT_BF16();
  }
  const std::string tag = std::string(GetParam().data_parallel ? "dp_" : "ops_") + to_string(GetParam().dtype) + "_" +
                          to_string(GetParam().optimizer);
  const testing::TempDir straight_dir("straight_" + tag), split_dir("split_" + tag);
  const fs::path &straight = straight_dir.path, &split = split_dir.path;
  auto run = [&](const fs::path& dir) {
    TrainOptions o = tiny_run(dir, 200);
    o.model.drop_path = 0.2f;  // its masks come from the saved generator too
    o.data_parallel = GetParam().data_parallel;
    o.train.dtype = GetParam().dtype;
    o.train.optimizer = GetParam().optimizer;
    o.train.muon_momentum_warmup = 150;  // Muon's cases resume at 100: the warm-up goes on from there
    if (GetParam().seq_warmup) {
      o.model.block_size = 24;
      o.train.seq_warmup = 150;  // windows of 8 until step 75, 16 until 150, then 24: it goes on too
    }
    if (GetParam().batch_warmup) o.train.batch_warmup = 150;  // 1 + 3 * step / 150 of the 4 sequences
    return o;
  };
  Trainer(run(straight)).run();
  // A run planned for 200 steps (its schedule decays until 200) that stops at 100.
  TrainOptions first = run(split);
  first.train.max_iters = 100;
  first.train.lr_decay_iters = 200;
  Trainer(first).run();
  TrainOptions second = run(split);
  second.resume = true;
  second.train = saved_run(second.out_dir).config;
  EXPECT_EQ(second.train.dtype, GetParam().dtype);
  EXPECT_EQ(second.train.optimizer, GetParam().optimizer);
  second.train.max_iters = 200;
  Trainer resumed(second);
  EXPECT_EQ(resumed.step(), 100);
  resumed.run();
  const ModelCheckpoint a = load_model((straight / "run").string()), b = load_model((split / "run").string());
  EXPECT_EQ(a.step, 200);
  EXPECT_EQ(b.step, 200);
  const auto pa = a.model->named_parameters(), pb = b.model->named_parameters();
  for (size_t i = 0; i < pa.size(); ++i)
    ASSERT_EQ(pa[i].second.to_vector(), pb[i].second.to_vector()) << pa[i].first << " differs after resume";
  // The resumed run's log continues the first one's.
  std::ifstream log(split / "run" / "log.csv");
  std::string line, last;
  int lines = 0;
  while (std::getline(log, line)) ++lines, last = line;
  EXPECT_EQ(lines, 1 + 5);  // header + steps 0, 50, 100, 150, 200
  EXPECT_EQ(last.substr(0, 4), "200,");
}
INSTANTIATE_TEST_SUITE_P(Parallel, TrainerResume,
                         ::testing::Values(ResumeCase{false, Precision::fp32},
                                           ResumeCase{true, Precision::fp32, OptimizerKind::adamw, false, true},
                                           ResumeCase{true, Precision::bf16},
                                           ResumeCase{true, Precision::fp32, OptimizerKind::muon, true},
                                           ResumeCase{true, Precision::bf16, OptimizerKind::muon}),
                         [](const auto& info) {
                           return std::string(info.param.data_parallel ? "DataParallel" : "InsideOps") +
                                  (info.param.dtype == Precision::bf16 ? "Bf16" : "") +
                                  (info.param.optimizer == OptimizerKind::muon ? "Muon" : "") +
                                  (info.param.seq_warmup ? "SeqWarmup" : "") +
                                  (info.param.batch_warmup ? "BatchWarmup" : "");
                         });

// 60 steps of a tiny model in bf16 and in fp32 from the same start: the bf16 run's
// evaluated train losses (every 20 steps, in bf16) stay within 0.01 of fp32's
// (measured: at most 0.0009) while they fall by more than 0.5 (measured: 0.74).
TEST(Trainer, Bf16LossTracksFp32) {
  FOLIO_SKIP_WITHOUT_BF16();
  auto losses = [](Precision dtype) {
    const testing::TempDir tmp(std::string("track_") + to_string(dtype));
    const fs::path& dir = tmp.path;
    TrainOptions o = tiny_run(dir, 60);
    o.model.dropout = 0.0f;
    o.train.dtype = dtype;
    o.train.eval_interval = 20;
    o.train.lr = 3e-3f;
    o.train.warmup_iters = 5;
    o.train.batch_size = 8;
    Trainer(o).run();
    std::vector<float> out;
    std::ifstream log(dir / "run" / "log.csv");
    std::string line;
    std::getline(log, line);  // header
    while (std::getline(log, line)) out.push_back(std::stof(line.substr(line.find(',') + 1)));  // train_loss
    return out;
  };
  const std::vector<float> fp32 = losses(Precision::fp32), bf16 = losses(Precision::bf16);
  ASSERT_EQ(fp32.size(), 4u);  // steps 0, 20, 40, 60
  ASSERT_EQ(bf16.size(), 4u);
  for (size_t i = 0; i < fp32.size(); ++i) EXPECT_NEAR(bf16[i], fp32[i], 0.01f) << "evaluation " << i;
  EXPECT_LT(bf16.back(), bf16.front() - 0.5f);
  EXPECT_NE(bf16, fp32) << "identical losses: the bf16 run did not compute in bf16";
}

// A corpus of `n` characters cycling through one short line: any two such corpora
// (of at least a line) have the same vocabulary, so one can resume the other's run.
std::string write_cycle_corpus(const fs::path& dir, const std::string& name, size_t n) {
  const std::string line = "abcdefghij\n";
  std::string text;
  while (text.size() < n) text += line;
  const std::string path = (dir / name).string();
  std::ofstream(path, std::ios::binary) << text.substr(0, n);
  return path;
}

// On --resume the splits must be long enough for the checkpoint's block_size, not for
// the one in the options (the command line's default, 64, when not given).
TEST(Trainer, ResumeChecksTheSplitsAgainstTheCheckpointsBlockSize) {
  const testing::TempDir tmp("resume_block");
  const fs::path& dir = tmp.path;
  auto first_run = [&](int64_t block_size) {
    TrainOptions o = tiny_run(dir, 2);
    o.model.block_size = block_size;
    o.train.data = write_cycle_corpus(dir, "long.txt", 2000);  // val: 200 characters
    o.data_parallel = false;
    Trainer(o).run();
    TrainOptions again = o;
    again.resume = true;
    again.train.max_iters = 4;
    again.model.block_size = 64;  // as the CLI passes it when --block-size is not given
    return again;
  };
  // A block of 8 on a val split of 20 characters: a valid resume.
  TrainOptions fits = first_run(8);
  fits.train.data = write_cycle_corpus(dir, "short.txt", 200);
  Trainer resumed(fits);
  EXPECT_EQ(resumed.model().config().block_size, 8);
  resumed.run();
  EXPECT_EQ(resumed.step(), 4);
  // A block of 100 on a val split of 80 (enough for 64): refused up front, naming the file.
  TrainOptions too_short = first_run(100);
  too_short.train.data = write_cycle_corpus(dir, "medium.txt", 800);
  try {
    Trainer t(too_short);
    ADD_FAILURE() << "resumed a block_size 100 model on an 80-character val split";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("medium.txt: the val split has 80 tokens, needs at least "
                                         "block_size + 1 = 101"),
              std::string::npos)
        << e.what();
  }
}

class TrainerLoss : public ::testing::TestWithParam<OptimizerKind> {};

TEST_P(TrainerLoss, Falls) {
  const testing::TempDir tmp(std::string("falls_") + to_string(GetParam()));
  const fs::path& dir = tmp.path;
  TrainOptions o = tiny_run(dir, 150);
  o.model.dropout = 0.0f;
  o.train.optimizer = GetParam();
  Trainer t(o);
  const float before = t.evaluate().train;
  EXPECT_LT(t.run().train, before - 0.5f);
}
INSTANTIATE_TEST_SUITE_P(Optimizer, TrainerLoss, ::testing::Values(OptimizerKind::adamw, OptimizerKind::muon),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(Training, SmallGPTOverfitsOneBatch) {
  nn::GPT gpt({.vocab_size = 12, .block_size = 16, .n_layer = 2, .n_head = 2, .n_embd = 32});
  Rng r(5);
  std::vector<int32_t> x(4 * 16), y(4 * 16);
  for (auto& v : x) v = int32_t(r.below(12));
  for (auto& v : y) v = int32_t(r.below(12));
  AdamW opt(gpt.named_parameters(), {.weight_decay = 0.0f});
  float loss = 0;
  for (int step = 0; step < 300 && !(loss < 0.1f && step > 0); ++step) {
    const Tensor l = gpt.forward(x, 4, 16, y).loss;
    loss = l.item();
    l.backward();
    opt.step(3e-3f);
    gpt.zero_grad();
  }
  EXPECT_LT(loss, 0.1f);
}

}  // namespace
}  // namespace folio
