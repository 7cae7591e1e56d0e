// How the folio binary reads what a person types: repeated flags, recipes, typos,
// messages that name the flag, escapes in --prompt, and the small commands.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "folio/version.h"
#include "tests/support.h"

namespace folio {
namespace {

namespace fs = std::filesystem;
using testing::Result;

class CliOptions : public ::testing::Test {
 protected:
  Result folio(const std::string& args) const { return testing::run_folio(testing::words(args), dir_.path); }
  // A finished 2-step run in `run`, to generate from.
  std::string trained_run() const {
    const std::string run = dir_ / "run";
    if (!fs::exists(run)) {
      const Result t = folio("train --data " + corpus_ + " --out " + run +
                             " --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --max-iters 2 --eval-iters 1"
                             " --quiet");
      EXPECT_EQ(t.code, 0) << t.err;
    }
    return run;
  }
  testing::TempDir dir_{"cli_options"};
  std::string corpus_ = testing::write_small_corpus(dir_.path / "corpus.txt");
};

// `folio train $BASE_ARGS --max-iters 3`: the last of a repeated flag wins, on the
// command line and in a recipe; flags that collect values keep them all.
TEST_F(CliOptions, TheLastOfARepeatedFlagWins) {
  const std::string run = dir_ / "run";
  const Result t = folio("train --data " + corpus_ + " --out " + run +
                         " --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --eval-iters 1 --max-iters 50 --quiet"
                         " --max-iters 3 --quiet");
  ASSERT_EQ(t.code, 0) << t.err;
  testing::expect_contains(folio("info --checkpoint " + run).out, {"step         3\n"});
  const Result g = folio("gradcheck --op add --op sub");
  ASSERT_EQ(g.code, 0) << g.err;
  testing::expect_contains(g.out, {"add same shape", "sub "});
}

// A recipe may sit under a [train] heading; any other section, an unknown name or a bad
// value is an error naming the file and the line, with the option meant when it is a
// near miss (on the command line too).
TEST_F(CliOptions, RecipeErrorsNameTheLineAndTheNearestOption) {
  const std::string recipe = dir_ / "recipe.ini";
  std::ofstream(recipe) << "# tiny\n[train]\nn-layer = 1\nn-head = 2\nn-embd = 16\nblock-size = 16\n"
                           "max-iters = 2\neval-iters = 1\nmax-iters = 3\n";
  const Result t = folio("train --config " + recipe + " --data " + corpus_ + " --out " + (dir_ / "run") + " --quiet");
  ASSERT_EQ(t.code, 0) << t.err;
  testing::expect_contains(folio("info --checkpoint " + (dir_ / "run")).out, {"step         3\n"});
  // Saved by an editor that starts a UTF-8 file with a byte order mark: the same recipe.
  std::ofstream(dir_ / "bom.ini") << "\xEF\xBB\xBFn-layer = 1\nn-head = 2\nn-embd = 16\nblock-size = 16\n"
                                      "max-iters = 2\n";
  const Result bom = folio("train --config " + (dir_ / "bom.ini") + " --data " + corpus_ + " --out " +
                           (dir_ / "bom") + " --eval-iters 1 --quiet");
  ASSERT_EQ(bom.code, 0) << bom.err;
  testing::expect_contains(folio("info --checkpoint " + (dir_ / "bom")).out, {"1 layers, 2 heads, n_embd 16"});

  std::ofstream(dir_ / "section.ini") << "n-layer = 1\n\n[model]\nn-embd = 16\n";
  std::ofstream(dir_ / "typo.ini") << "# a comment\nn-layers = 2\n";
  std::ofstream(dir_ / "value.ini") << "n-layer = 1\nlr = fast\n";
  std::ofstream(dir_ / "noeq.ini") << "n-layer 1\n";
  std::ofstream(dir_ / "nested.ini") << "n-layer = 1\nconfig = " << recipe << "\n";
  std::ofstream(dir_ / "replaces.ini") << "n-layer = 1\noverwrite = true\n";
  for (const auto& [args, fragment] : std::vector<std::pair<std::string, std::string>>{
           {"train --config " + (dir_ / "section.ini"), "section.ini:3: section [model]"},
           {"train --config " + (dir_ / "typo.ini"), "typo.ini:2: unknown option 'n-layers' (did you mean --n-layer?)"},
           {"train --config " + (dir_ / "value.ini"), "value.ini:2: "},
           {"train --config " + (dir_ / "noeq.ini"), "noeq.ini:1: expected a line such as 'max-iters = 5000'"},
           {"train --config " + (dir_ / "nested.ini"),
            "nested.ini:2: 'config' cannot be set in a recipe (one --config on the command line"},
           {"train --config " + (dir_ / "replaces.ini"),
            "replaces.ini:2: 'overwrite' cannot be set in a recipe: give --overwrite on the command line"},
           {"train --n-embed 64", "unknown option '--n-embed' (did you mean --n-embd?)"},
           {"train --max_iters 64", "(did you mean --max-iters?)"},
           // A prefix is a typo too, not the one option it begins.
           {"train --max-iter 5", "unknown option '--max-iter' (did you mean --max-iters?)"},
           {"generate --max-new 5", "unknown option '--max-new' (did you mean --max-new-tokens?)"},
           {"trian --n-layer 1", "did you mean train?"}}) {
    const Result r = folio(args + " --out " + (dir_ / "x"));
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos) << args << ": " << r.err;
    EXPECT_FALSE(fs::exists(dir_ / "x")) << args;
  }
}

// The library checks fields (n_embd, lr); the command line says the flags the person
// typed, and where a value they did not type came from.
TEST_F(CliOptions, MessagesNameTheFlagAndTheSourceOfTheValue) {
  std::ofstream(dir_ / "inf.ini") << "lr = inf\n";
  // A recipe's relative path is read from the working directory, not the recipe's folder.
  fs::create_directories(dir_ / "recipes");
  std::ofstream(dir_ / "recipes/beside.txt") << "text beside the recipe\n";
  std::ofstream(dir_ / "recipes/data.ini") << "data = beside.txt\n";
  for (const auto& [args, fragment] : std::vector<std::pair<std::string, std::string>>{
           {"train --config " + (dir_ / "recipes/data.ini"),
            "--data beside.txt (from --config " + (dir_ / "recipes/data.ini") + ") is not there: a recipe's paths are "
            "read from the working directory"},
           {"train --n-embd 64 --n-head 3", "--n-embd 64 is not divisible by --n-head 3\n"},
           {"train --n-head 3", "--n-embd 128 is not divisible by --n-head 3 (--n-embd: the default)"},
           {"train --lr inf", "--lr must be positive, got inf\n"},
           {"train --grad-accum 0", "--grad-accum must be positive, got 0\n"},
           {"train --ffn-hidden 100.5", "--ffn-hidden must be a whole number in [0, "},
           {"train --overlap maybe", "--overlap must be on or off, got 'maybe'\n"},
           {"train --parallel both", "--parallel must be data or ops, got 'both'\n"},
           {"train --comm-timeout -1", "--comm-timeout must be >= 0, got -1\n"},
           {"train --config " + (dir_ / "inf.ini"), "--lr must be positive, got inf (--lr from --config "},
           {"train --data ''", "--data is empty: give a text file, a token directory or conversations"},
           {"train --min-lr 1", "--min-lr 1 outside [0, --lr = 0.001]"},
           {"train --pos rope --n-embd 36 --n-head 4", "--pos rope rotates pairs"},
           {"generate --checkpoint " + trained_run() + " --top-p 0", "--top-p must be in (0, 1], got 0"},
           {"generate --checkpoint " + trained_run() + " --temperature -0.5", "--temperature must be >= 0"},
           {"generate --checkpoint " + trained_run() + " --context-shift -1", "--context-shift must be >= 0"},
           {"eval --checkpoint " + trained_run() + " --max-windows -1", "--max-windows must be >= 0, got -1\n"},
           {"eval --checkpoint " + trained_run() + " --task t.jsonl --limit -2", "--limit must be >= 0, got -2\n"},
           {"serve --checkpoint " + trained_run() + " --queue -1", "--queue must be >= 0, got -1\n"},
           {"serve --checkpoint " + trained_run() + " --shutdown-grace -0.5", "--shutdown-grace must be in [0, 604800], got -0.5\n"},
           // chat needs a reply, generate may write the prompt alone: one bound each, whatever the value.
           {"chat --checkpoint " + trained_run() + " --max-new-tokens -5", "--max-new-tokens must be >= 1, got -5\n"},
           {"chat --checkpoint " + trained_run() + " --max-new-tokens 0", "--max-new-tokens must be >= 1, got 0\n"},
           {"generate --checkpoint " + trained_run() + " --max-new-tokens -1", "--max-new-tokens must be >= 0, got -1\n"},
           {"serve --checkpoint " + trained_run() + " --api-key-file nokey", "--api-key-file nokey: cannot open ("}}) {
    const Result r = folio(args + (args.starts_with("train") ? " --out " + (dir_ / "x") : ""));
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(r.err.find("[config]"), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(r.err.find("[generate]"), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(r.err.find("[data]"), std::string::npos) << args << ": " << r.err;
  }
  const Result no_out = folio("train --out ''");  // a variable the shell left empty
  EXPECT_EQ(no_out.code, 2) << no_out.err;
  testing::expect_contains(no_out.err, {"--out is empty: give the run's directory"});
}

// --prompt takes the escapes --help shows for its default ("\n"); --prompt-file with a
// --prompt is refused rather than one silently winning.
TEST_F(CliOptions, PromptEscapesAndOnePromptSource) {
  const std::string run = trained_run();
  const Result g = folio("generate --checkpoint " + run + " --prompt 'First\\nCitizen:\\n' --max-new-tokens 0");
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_EQ(g.out, "First\nCitizen:\n\n");
  testing::spit(dir_ / "prompt.txt", "First");
  const Result both = folio("generate --checkpoint " + run + " --prompt-file " + (dir_ / "prompt.txt") +
                            " --prompt 'Second'");
  EXPECT_EQ(both.code, 2);
  testing::expect_contains(both.err, {"--prompt and --prompt-file"});
  const Result file = folio("generate --checkpoint " + run + " --prompt-file " + (dir_ / "prompt.txt") +
                            " --max-new-tokens 0");
  EXPECT_EQ(file.out, "First\n") << file.err;
}

// generate without a checkpoint there says what it expected; --help says which weights
// a run directory means.
TEST_F(CliOptions, GenerateSaysWhatCheckpointItExpects) {
  const Result none = testing::run_folio({"generate"}, dir_.path);  // ./out: the default, absent
  EXPECT_EQ(none.code, 2);
  testing::expect_contains(none.err, {"no --checkpoint given", "--checkpoint RUN_DIR"});
  // Every command that reads a checkpoint says the same.
  for (const testing::Args& args : std::vector<testing::Args>{
           {"eval"}, {"info"}, {"tokens", "--text", "a"}, {"attention", "--prompt", "a"}}) {
    const Result r = testing::run_folio(args, dir_.path);
    EXPECT_EQ(r.code, 2) << args[0];
    testing::expect_contains(r.err, {"no --checkpoint given"});
  }
  const Result missing = folio("generate --checkpoint " + (dir_ / "nope"));
  EXPECT_EQ(missing.code, 2);
  testing::expect_contains(missing.err, {"--checkpoint " + (dir_ / "nope") + ": no such file or directory"});
  const Result empty_dir = folio("generate --checkpoint " + dir_.path.string());
  EXPECT_EQ(empty_dir.code, 2);
  testing::expect_contains(empty_dir.err, {"holds no model.safetensors"});
  const Result log = folio("generate --checkpoint " + trained_run() + "/log.csv");
  EXPECT_EQ(log.code, 2);
  testing::expect_contains(log.err, {"not a safetensors file?"});
  testing::expect_contains(folio("generate --help").out, {"latest weights", "best.safetensors"});
}

// folio gradcheck: a table of the registry's checks (the test suite runs every one, in
// test_gradcheck.cpp, where a failing one is shown to make the table say FAIL), the
// names with --list, and a name it does not know is a usage error that lists them.
TEST_F(CliOptions, GradcheckPrintsATableOfTheChosenChecks) {
  const Result r = folio("gradcheck --op add --layer LayerNorm --op causal_softmax");
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream lines(r.out);
  std::vector<std::string> rows;
  for (std::string line; std::getline(lines, line);) rows.push_back(line);
  ASSERT_EQ(rows.size(), 9u) << r.out;  // header, 3 add, 2 causal_softmax, LayerNorm and its rms, summary
  EXPECT_EQ(rows[0].find("check"), 0u) << r.out;
  testing::expect_contains(rows[0], {"shapes", "max abs err", "max rel err", "result"});
  EXPECT_EQ(rows[1].find("add same shape "), 0u) << r.out;
  testing::expect_contains(rows[1], {"(3, 4) (3, 4) -> (3, 4)", "e-0", "PASS"});
  EXPECT_EQ(rows[4].find("causal_softmax scale 0.5 "), 0u) << r.out;  // in the registry's order
  EXPECT_EQ(rows[6].find("LayerNorm "), 0u) << r.out;
  testing::expect_contains(rows[6], {"(3, 6) + 12 weights -> (3, 6)", "PASS"});
  testing::expect_contains(rows[7], {"LayerNorm rms", "(3, 6) + 6 weights -> (3, 6)", "PASS"});
  EXPECT_EQ(rows[8].find("7 checks: 7 passed, 0 failed"), 0u) << r.out;

  const Result list = folio("gradcheck --list");
  ASSERT_EQ(list.code, 0) << list.err;
  testing::expect_contains(list.out, {"ops (--op NAME):", "  matmul ", "16 checks", "layers (--layer NAME):", "  GPT "});

  for (const auto& [args, names] : std::vector<std::pair<std::string, std::string>>{
           {"gradcheck --op matmull", "--op 'matmull' has no gradient check; expected one of: add, sub, mul,"},
           {"gradcheck --op add --layer gpt", "expected one of: Embedding, Linear, LayerNorm, Gates, Dropout, DropPath, Head,"},
           {"gradcheck --op LayerNorm", "layer_norm, rms_norm, rope, position_qk_packed, dropout"}}) {
    const Result bad = folio(args);
    EXPECT_EQ(bad.code, 2) << args << "\n" << bad.err;
    EXPECT_NE(bad.err.find(names), std::string::npos) << args << ": " << bad.err;
    EXPECT_EQ(bad.out, "") << args;
  }
  EXPECT_NE(folio("--help").out.find("  gradcheck  "), std::string::npos);
}

// folio gradcheck --list names each op once, and its counts add up to the full run's.
TEST_F(CliOptions, GradcheckListCountsEveryCheckOnce) {
  const Result list = folio("gradcheck --list");
  ASSERT_EQ(list.code, 0) << list.err;
  std::istringstream lines(list.out);
  std::set<std::string> names;
  int64_t total = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("  ", 0) != 0) continue;
    std::istringstream row(line);
    std::string name;
    int64_t n = 0;
    row >> name >> n;
    EXPECT_TRUE(names.insert(name).second) << name << " listed twice:\n" << list.out;
    total += n;
  }
  const Result all = folio("gradcheck");
  ASSERT_EQ(all.code, 0) << all.err;
  testing::expect_contains(all.out, {std::to_string(total) + " checks: " + std::to_string(total) + " passed"});
}

TEST_F(CliOptions, VersionCommandAndSingularCounts) {
  EXPECT_EQ(folio("version").out, "folio " FOLIO_VERSION "\n");
  const std::string run = trained_run();
  const Result p = folio("plot " + run + " --out " + (dir_ / "one.svg"));
  ASSERT_EQ(p.code, 0) << p.err;
  testing::expect_contains(p.out, {"(1 run)"});
}

// An output file that cannot be written is bad input found before the work, as an
// unusable --out of train is (exit 2), not a failure after it (exit 1).
TEST_F(CliOptions, AnUnwritableOutputFileIsExitTwo) {
  const std::string run = trained_run();
  for (const std::string& out : {std::string("/proc/folio.svg"), dir_ / "nope/plot.svg", dir_.path.string()}) {
    const Result r = folio("plot " + run + " --out " + out);
    EXPECT_EQ(r.code, 2) << out << "\n" << r.err;
    EXPECT_NE(r.err.find("--out " + out), std::string::npos) << r.err;
  }
}

// More threads than cores works, but says it only slows the run down.
TEST_F(CliOptions, ThreadsAboveTheCoreCountWarn) {
  const Result r = folio("gradcheck --op add --threads 1000");
  ASSERT_EQ(r.code, 0) << r.err;
  testing::expect_contains(r.err, {"warning: --threads 1000 is more than the ", "core"});
  EXPECT_EQ(folio("gradcheck --op add --threads 1").err, "");
}

}  // namespace
}  // namespace folio
