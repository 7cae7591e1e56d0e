// The folio binary end to end: train, generate, eval, info, and bad input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "autograd/kernels/matmul.h"
#include "data/dataset.h"
#include "data/vocab.h"
#include "folio/version.h"
#include "tests/support.h"

namespace folio {
namespace {

namespace fs = std::filesystem;

using testing::Result;

// Runs the folio binary with `args`, one string with '...' quoting, capturing both streams.
Result folio(const std::string& args) { return testing::run_folio(testing::words(args), fs::temp_directory_path()); }

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("folio_cli_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ifstream in(default_corpus_path(), std::ios::binary);
    std::string text(30000, '\0');
    in.read(text.data(), std::streamsize(text.size()));
    std::ofstream(corpus(), std::ios::binary) << text;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string corpus() const { return (dir_ / "corpus.txt").string(); }
  std::string run_dir() const { return (dir_ / "run").string(); }
  std::string tiny_train(int iters = 60, int layers = 1) const {
    return "train --data " + corpus() + " --out " + run_dir() + " --n-layer " + std::to_string(layers) +
           " --n-head 2 --n-embd 32 --block-size 16 --batch-size 8 --eval-interval 30"
           " --eval-iters 4 --warmup-iters 5 --lr 3e-3 --log-interval 20 --max-iters " + std::to_string(iters);
  }
  fs::path dir_;
};

// Column `i` (0-based) of a log.csv row.
double log_cell(const std::string& row, int i) {
  std::stringstream s(row);
  std::string cell;
  for (int c = 0; c <= i; ++c) std::getline(s, cell, ',');
  return std::stod(cell);
}

TEST_F(Cli, TrainGenerateEvalInfo) {
  const Result t = folio(tiny_train());
  ASSERT_EQ(t.code, 0) << t.err;
  for (const char* f : {"model.safetensors", "best.safetensors", "state.safetensors", "log.csv"})
    EXPECT_TRUE(fs::exists(dir_ / "run" / f)) << f;
  // The loss falls: compare the first and last evaluation rows of the log.
  std::ifstream log(dir_ / "run" / "log.csv");
  std::string header, first, line, last;
  std::getline(log, header);
  std::getline(log, first);
  while (std::getline(log, line)) last = line;
  EXPECT_EQ(header, "step,train_loss,val_loss,lr,tokens_per_sec,elapsed_s,val_bpc,train_s,val_bpb,grad_norm,clipped,"
                    "skipped,rollbacks,update_ratio_embeddings,update_ratio_attention,update_ratio_feed_forward,"
                    "update_ratio_norms,update_ratio_output");
  auto val_loss = [](const std::string& row) { return log_cell(row, 2); };
  EXPECT_LT(val_loss(last), val_loss(first) - 0.3);
  EXPECT_NEAR(log_cell(last, 6), val_loss(last) / std::log(2.0), 1e-4);  // bits per character
  EXPECT_GT(log_cell(last, 7), 0.0);                                      // seconds of training steps
  EXPECT_LE(log_cell(last, 7), log_cell(last, 5));                        // within the wall time
  // The end of the run reports the time the sampler took (README, token directories).
  testing::expect_contains(t.out, {"drawing batches: ", " us a step, ", "% of the steps' time"});

  const Result g = folio("generate --checkpoint " + run_dir() + " --prompt 'First' --max-new-tokens 57 --seed 3");
  ASSERT_EQ(g.code, 0) << g.err;
  ASSERT_EQ(g.out.substr(0, 5), "First");
  EXPECT_EQ(decode_utf8(g.out).size(), 5u + 57u + 1u);  // prompt, the characters asked for, a final newline
  const Result again = folio("generate --checkpoint " + run_dir() + " --prompt 'First' --max-new-tokens 57 --seed 3");
  EXPECT_EQ(again.out, g.out);  // the seed decides the sample

  const Result e = folio("eval --checkpoint " + run_dir() + "/best.safetensors --data " + corpus());
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_NE(e.out.find("loss "), std::string::npos) << e.out;

  const Result i = folio("info --checkpoint " + run_dir());
  ASSERT_EQ(i.code, 0) << i.err;
  // Options as flags, with the numbers as they were typed.
  testing::expect_contains(i.out, {"parameters", "step         60", "--lr 0.003 --min-lr 0.0001 ", "--val-fraction 0.1 "});
}

// The model options (issue 14's and later ones), all at once: the run trains (its loss falls), info
// shows them as flags, generate and eval read the model, and --resume keeps them and
// refuses to change one.
TEST_F(Cli, ModelOptionsTrainAndAreSavedWithTheRun) {
  const std::string options =
      " --pos rope --qk-norm --activation relu2 --zero-init-proj --logit-softcap 30 --tie-weights --drop-path 0.2 --dropout 0.1 --dropout-at residual "
      "--unet-skips --mtp 0.3";
  const Result t = folio(tiny_train(60, 2) + options + " --quiet");  // two blocks: one U-net pair
  ASSERT_EQ(t.code, 0) << t.err;
  std::ifstream log(dir_ / "run" / "log.csv");
  std::string line;
  std::vector<double> val;
  std::getline(log, line);  // header
  while (std::getline(log, line)) {
    std::stringstream row(line);
    std::string cell;
    for (int i = 0; i < 3; ++i) std::getline(row, cell, ',');
    val.push_back(std::stod(cell));
  }
  ASSERT_EQ(val.size(), 3u);  // steps 0, 30, 60
  EXPECT_LT(val.back(), val.front() - 0.3);

  const std::string shown =
      "options      --pos rope --norm layer --qk-norm --zero-init-proj --logit-softcap 30 --tie-weights --drop-path 0.2 "
      "--dropout-at residual --unet-skips --mtp 0.3 --ffn-hidden 0\n";
  const Result i = folio("info --checkpoint " + run_dir());
  ASSERT_EQ(i.code, 0) << i.err;
  testing::expect_contains(i.out, {shown, "bias on, relu2\n"});
  const Result g = folio("generate --checkpoint " + run_dir() + " --prompt 'First' --max-new-tokens 40 --seed 3");
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_EQ(g.out.substr(0, 5), "First");
  const Result e = folio("eval --checkpoint " + run_dir() + " --data " + corpus());
  ASSERT_EQ(e.code, 0) << e.err;

  const Result change = folio("train --out " + run_dir() + " --resume --max-iters 70 --pos learned");
  EXPECT_EQ(change.code, 2);
  testing::expect_contains(change.err, {"--pos cannot change when resuming"});
  const Result resume = folio("train --out " + run_dir() + " --resume --max-iters 70 --quiet");
  ASSERT_EQ(resume.code, 0) << resume.err;
  testing::expect_contains(folio("info --checkpoint " + run_dir()).out, {shown, "step         70"});

  // The defaults, shown for a run without the options.
  const Result plain = folio("train --data " + corpus() + " --out " + (dir_ / "plain").string() +
                             " --n-layer 1 --n-head 2 --n-embd 16 --block-size 8 --max-iters 2 --eval-iters 1 --quiet");
  ASSERT_EQ(plain.code, 0) << plain.err;
  testing::expect_contains(folio("info --checkpoint " + (dir_ / "plain").string()).out,
                           {"options      --pos learned --norm layer --logit-softcap 0 --drop-path 0 --dropout-at all --mtp 0 "
                            "--ffn-hidden 0\n"});
}

// --dtype is saved with the run: --resume keeps it, and may override it. generate and
// eval take it too; a bf16 evaluation of the (fp32) checkpoint is near the fp32 one.
TEST_F(Cli, DtypeIsSavedWithTheRunAndResumeMayOverrideIt) {
  if (!kernels::bf16_native()) GTEST_SKIP() << "this CPU lacks AVX512-BF16";
  auto dtype_of_run = [&] {
    const Result i = folio("info --checkpoint " + run_dir());
    return i.out.find("--dtype bf16") != std::string::npos   ? "bf16"
           : i.out.find("--dtype fp32") != std::string::npos ? "fp32"
                                                               : i.out;
  };
  ASSERT_EQ(folio(tiny_train(30) + " --dtype bf16").code, 0);
  EXPECT_EQ(dtype_of_run(), "bf16");
  ASSERT_EQ(folio("train --out " + run_dir() + " --resume --max-iters 40 --quiet").code, 0);
  EXPECT_EQ(dtype_of_run(), "bf16");
  ASSERT_EQ(folio("train --out " + run_dir() + " --resume --max-iters 50 --dtype fp32 --quiet").code, 0);
  EXPECT_EQ(dtype_of_run(), "fp32");

  const Result g = folio("generate --checkpoint " + run_dir() + " --prompt 'First' --max-new-tokens 20 --dtype bf16");
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_EQ(g.out.substr(0, 5), "First");
  auto loss = [&](const char* dtype) {
    const Result e = folio("eval --checkpoint " + run_dir() + " --data " + corpus() + " --dtype " + dtype);
    EXPECT_EQ(e.code, 0) << e.err;
    const size_t at = e.out.find("\nloss ");  // after the line that says what is evaluated
    return at != std::string::npos ? std::stod(e.out.substr(at + 6)) : -1.0;
  };
  const double fp32 = loss("fp32"), bf16 = loss("bf16");
  EXPECT_GT(fp32, 0.0);
  EXPECT_NEAR(bf16, fp32, 0.01);
}

TEST_F(Cli, HelpListsEveryOptionWithDefaults) {
  const Result h = folio("train --help");
  EXPECT_EQ(h.code, 0);
  for (const char* opt : {"--n-layer", "--n-head", "--n-embd", "--block-size", "--batch-size", "--dropout", "--lr",
                          "--min-lr", "--warmup-iters", "--max-iters", "--weight-decay", "--beta2", "--grad-clip",
                          "--eval-interval", "--eval-iters", "--seed", "--threads", "--parallel", "--data", "--out", "--resume",
                          "--dtype", "--pos", "--norm", "--qk-norm", "--activation", "--zero-init-proj", "--logit-softcap",
                          "--tie-weights", "--optimizer", "--muon-lr", "--muon-weight-decay", "--muon-momentum-warmup",
                          "--max-time", "--seq-warmup", "--batch-warmup"})
    EXPECT_NE(h.out.find(opt), std::string::npos) << opt;
  EXPECT_NE(h.out.find("(=4)"), std::string::npos);  // defaults are shown
  EXPECT_EQ(folio("--help").code, 0);
  for (const char* cmd : {"generate", "eval", "info"}) EXPECT_EQ(folio(std::string(cmd) + " --help").code, 0) << cmd;
  for (const char* cmd : {"train", "generate", "eval"})
    EXPECT_NE(folio(std::string(cmd) + " --help").out.find("--dtype arg (=fp32)"), std::string::npos) << cmd;
}

// --optimizer muon end to end: the loss falls, info shows it, --resume keeps it (and
// its momentum's warm-up, or warns of a change) and refuses another optimizer.
TEST_F(Cli, MuonTrainsAndIsKeptOnResume) {
  const Result t = folio(tiny_train(60) + " --optimizer muon --muon-lr 0.03 --muon-momentum-warmup 100");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("optimizer: Muon on 6 hidden matrices"), std::string::npos) << t.out;
  std::ifstream log(dir_ / "run" / "log.csv");
  std::string header, first, line, last;
  std::getline(log, header);
  std::getline(log, first);
  while (std::getline(log, line)) last = line;
  EXPECT_LT(log_cell(last, 2), log_cell(first, 2) - 0.3);  // val loss
  EXPECT_NE(folio("info --checkpoint " + run_dir()).out.find("--optimizer muon "), std::string::npos);
  const Result r = folio("train --out " + run_dir() + " --resume --max-iters 70 --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const Result i = folio("info --checkpoint " + run_dir());
  testing::expect_contains(i.out,
                           {"step         70", "--optimizer muon ", "--muon-lr 0.03 ", "--muon-momentum-warmup 100"});
  const Result off = folio("train --out " + run_dir() + " --resume --max-iters 75 --muon-momentum-warmup 0 --quiet");
  ASSERT_EQ(off.code, 0) << off.err;
  testing::expect_contains(off.err, {"warning: Muon's momentum at step 70 changes from 0.92 to 0.95"});
  const Result bad = folio("train --out " + run_dir() + " --resume --optimizer adamw --max-iters 80");
  EXPECT_EQ(bad.code, 2);
  testing::expect_contains(bad.err, {"--optimizer cannot change when resuming"});
}

// --max-time without --max-iters: the budget alone ends the run, and the cosine ends
// with it (the last evaluation's lr is --min-lr).
TEST_F(Cli, TimeBudgetAloneEndsTheRun) {
  const Result t = folio("train --data " + corpus() + " --out " + run_dir() +
                         " --n-layer 1 --n-head 2 --n-embd 32 --block-size 16 --batch-size 8 --eval-iters 2"
                         " --warmup-iters 2 --max-time 0.4 --quiet");
  ASSERT_EQ(t.code, 0) << t.err;
  std::ifstream log(dir_ / "run" / "log.csv");
  std::string line, last;
  while (std::getline(log, line)) last = line;
  EXPECT_GE(log_cell(last, 7), 0.4);        // train_s
  EXPECT_NEAR(log_cell(last, 3), 1e-4, 1e-9);  // lr
  testing::expect_contains(folio("info --checkpoint " + run_dir()).out, {"--max-iters 0 --max-time 0.4 "});
}

// --seq-warmup and --batch-warmup end to end: info shows them, --resume keeps them
// quietly, and says so when new values change the window or the batch of the step it
// resumes at. Window: 16 tokens at step 42 of a 30-step warm-up; 8 + 8 * 42 / 60 rounds
// down to 8 on a 60-step one. Batch: 1 + 7 * 42 / 60 rounds down to 5 on a 60-step
// warm-up; a 30-step one is over, at 8.
TEST_F(Cli, SizeWarmupsAreKeptOrTheirChangeSaidOnResume) {
  const Result t = folio(tiny_train(40) + " --seq-warmup 30 --batch-warmup 60 --quiet");
  ASSERT_EQ(t.code, 0) << t.err;
  testing::expect_contains(folio("info --checkpoint " + run_dir()).out, {"--seq-warmup 30 --batch-warmup 60\n"});
  const Result same = folio("train --out " + run_dir() + " --resume --max-iters 42 --quiet");
  ASSERT_EQ(same.code, 0) << same.err;
  EXPECT_EQ(same.err, "");
  const Result changed =
      folio("train --out " + run_dir() + " --resume --max-iters 44 --seq-warmup 60 --batch-warmup 30 --quiet");
  ASSERT_EQ(changed.code, 0) << changed.err;
  testing::expect_contains(changed.err, {"warning: the training window at step 42 changes from 16 to 8 tokens",
                                         "warning: the batch at step 42 changes from 5 to 8 sequences"});
  testing::expect_contains(folio("info --checkpoint " + run_dir()).out,
                           {"step         44", "--seq-warmup 60 --batch-warmup 30\n"});
}

// folio attention and folio plot on a trained run: tables, SVG files, and bad choices.
TEST_F(Cli, AttentionAndPlotOfARun) {
  ASSERT_EQ(folio(tiny_train(2)).code, 0);
  const Result t = folio("attention --checkpoint " + run_dir() + " --prompt 'To be' --layer 0 --head 1");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_EQ(t.out.find("layer 0, head 1 (rows: queries, columns: keys)\n"), 0u) << t.out;
  EXPECT_NE(t.out.find("     T 1.000 0.000 0.000 0.000 0.000\n"), std::string::npos) << t.out;
  const std::string svg = (dir_ / "att.svg").string();
  const Result s = folio("attention --checkpoint " + run_dir() + " --prompt 'To be' --format svg --out " + svg);
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_NE(s.out.find("(2 heads)"), std::string::npos) << s.out;  // 1 layer x 2 heads
  EXPECT_TRUE(fs::file_size(svg) > 1000);
  // An --out named .svg is an SVG without --format (it was a text table under that name).
  ASSERT_EQ(folio("attention --checkpoint " + run_dir() + " --prompt 'To be' --out " + svg + " --overwrite").code, 0);
  EXPECT_EQ(testing::slurp(svg).rfind("<?xml", 0), 0u) << testing::slurp(svg).substr(0, 80);
  const std::string plot = (dir_ / "loss.svg").string();
  const Result p = folio("plot " + run_dir() + " " + run_dir() + "/log.csv --out " + plot);
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_NE(p.out.find("(2 runs)"), std::string::npos) << p.out;
  // The same --out again replaces it only when asked to.
  EXPECT_EQ(folio("plot " + run_dir() + " --y bpb --out " + plot).code, 2);
  const Result bits = folio("plot " + run_dir() + " --y bpb --overwrite --out " + plot);
  ASSERT_EQ(bits.code, 0) << bits.err;
  EXPECT_NE(testing::slurp(plot).find("bits per byte against step"), std::string::npos);
  // Any column of the log: the gradient norm the divergence guards log.
  const Result norm = folio("plot " + run_dir() + " --y grad_norm --overwrite --out " + plot);
  ASSERT_EQ(norm.code, 0) << norm.err;
  EXPECT_NE(testing::slurp(plot).find("grad_norm against step"), std::string::npos);
  // Inside the run's directory, its bare log.csv is the run, named after the directory;
  // a run name that is not there is refused by that name.
  const Result here = testing::run_folio(testing::words("plot log.csv --overwrite --out " + plot), dir_, 300, {}, run_dir());
  ASSERT_EQ(here.code, 0) << here.err;
  EXPECT_NE(testing::slurp(plot).find(">run: best val"), std::string::npos);
  const Result typo = testing::run_folio(testing::words("plot nope --out " + plot), dir_, 300, {}, run_dir());
  EXPECT_EQ(typo.code, 2);
  EXPECT_NE(typo.err.find("nope: cannot open"), std::string::npos) << typo.err;
  for (const auto& [args, fragment] : std::vector<std::pair<std::string, std::string>>{
           {"attention --checkpoint " + run_dir() + " --prompt 'To be' --layer 1", "--layer"},
           {"attention --checkpoint " + run_dir() + " --prompt ''", "--prompt is empty"},
           {"attention --checkpoint " + run_dir() + " --prompt 'x' --format png", "--format"},
           {"attention --checkpoint " + run_dir(), "prompt"},
           {"plot " + (dir_ / "nope").string(), "nope"},
           {"plot " + run_dir() + " --y bits", "--y bits: expected loss, bpb or a column of the log"},
           {"plot", "at least one run"}}) {
    const Result r = folio(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos) << args << ": " << r.err;
  }
}

// --config FILE: a recipe as an INI file; the command line overrides it; info names it.
TEST_F(Cli, ConfigFileGivesOptionsTheCommandLineOverrides) {
  const std::string recipe = (dir_ / "recipe.ini").string();
  std::ofstream(recipe) << "# a tiny recipe\nn-layer = 1\nn-head = 2\nn-embd = 32\nblock-size = 16\n"
                           "batch-size = 8\nmax-iters = 50\neval-interval = 2\neval-iters = 2\nlr = 2e-3\n";
  const Result t = folio("train --config " + recipe + " --data " + corpus() + " --out " + run_dir() +
                         " --max-iters 4 --quiet");
  ASSERT_EQ(t.code, 0) << t.err;
  const Result i = folio("info --checkpoint " + run_dir());
  EXPECT_NE(i.out.find("recipe       --config " + recipe), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("--max-iters 4 "), std::string::npos) << i.out;  // the command line won
  EXPECT_NE(i.out.find("--lr 0.002 "), std::string::npos) << i.out;     // the file gave the rest
  EXPECT_NE(i.out.find("n_embd 32, block_size 16"), std::string::npos) << i.out;

  // Every shipped recipe parses and starts (one step each).
  for (const auto& e : fs::directory_iterator(fs::path(FOLIO_SOURCE_DIR) / "configs")) {
    const Result r = folio("train --config " + e.path().string() + " --data " + corpus() + " --out " +
                           (dir_ / e.path().stem()).string() + " --max-iters 1 --eval-iters 1 --quiet");
    EXPECT_EQ(r.code, 0) << e.path() << ": " << r.err;
  }

  std::ofstream(dir_ / "bad.ini") << "n-layer = 1\nlearning-rate = 3\n";
  for (const auto& [args, fragment] : std::vector<std::pair<std::string, std::string>>{
           {"train --config " + (dir_ / "bad.ini").string() + " --out " + (dir_ / "x").string(), "learning-rate"},
           {"train --config " + (dir_ / "none.ini").string() + " --out " + (dir_ / "x").string(), "none.ini"},
           {"train --config " + recipe + " --resume --out " + run_dir(), "--resume"}}) {
    const Result r = folio(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos) << args << ": " << r.err;
  }
}

// Defaults read as a person types them, not as float round-off or a raw newline.
TEST_F(Cli, HelpShowsDefaultsAsTyped) {
  const Result t = folio("train --help");
  for (const char* shown : {"--lr arg (=0.001)", "--min-lr arg (=0.0001)", "--val-fraction arg (=0.1)",
                            "--beta2 arg (=0.99)", "--weight-decay arg (=0.1)"})
    EXPECT_NE(t.out.find(shown), std::string::npos) << shown << "\n" << t.out;
  testing::expect_contains(folio("generate --help").out, {"--temperature arg (=0.8)", "--prompt arg (=\"\\n\")"});
  EXPECT_EQ(t.out.find("00000"), std::string::npos) << t.out;
}

TEST_F(Cli, VersionIsTheProjectVersion) {
  const Result v = folio("--version");
  EXPECT_EQ(v.code, 0);
  EXPECT_EQ(v.out, "folio " FOLIO_VERSION "\n");
}

// Bad input: exit code 2, one clear line on stderr, nothing written.
TEST_F(Cli, BadInputExitsTwoAndWritesNothing) {
  const std::string out = " --out " + run_dir();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"train --bogus" + out, "bogus"},
      {"train --n-layer" + out, "n-layer"},
      {"train --n-layer -1" + out, "n-layer"},
      {"train --batch-size 0" + out, "batch-size"},
      {"train --n-embd 30 --n-head 4" + out, "divisible"},
      {"train --dropout 1" + out, "dropout"},
      {"train --pos foo" + out, "--pos must be learned or rope, got 'foo'"},
      {"train --logit-softcap -1" + out, "--logit-softcap must be a number >= 0 (0: off), got '-1'"},
      {"train --drop-path 1" + out, "--drop-path must be a number in [0, 0.99] (0: off), got '1'"},
      {"train --dropout-at heads" + out, "--dropout-at must be all, residual or attention, got 'heads'"},
      {"train --lr abc" + out, "lr"},
      {"train --data " + (dir_ / "nope.txt").string() + out, "nope.txt"},
      {"train --data " + dir_.string() + out, "directory"},
      {"frobnicate", "unknown command"},
      {"generate --checkpoint " + (dir_ / "nope").string(), "nope"},
  };
  for (const auto& [args, fragment] : cases) {
    const Result r = folio(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
    EXPECT_FALSE(fs::exists(run_dir())) << args << " created the output directory";
  }
}

TEST_F(Cli, GenerateRejectsUnknownPromptCharacter) {
  ASSERT_EQ(folio(tiny_train(2)).code, 0);
  const Result r = folio("generate --checkpoint " + run_dir() + " --prompt 'caf\xc3\xa9 \xe2\x98\x83'");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("U+"), std::string::npos) << r.err;
  EXPECT_EQ(folio("generate --checkpoint " + run_dir() + " --temperature -1").code, 2);
  EXPECT_EQ(folio("generate --checkpoint " + run_dir() + " --top-p 1.5").code, 2);
}

}  // namespace
}  // namespace folio
