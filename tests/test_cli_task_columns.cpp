// folio train --eval-task: each task's figure is a log.csv column named after its file,
// filled at the evaluations at multiples of --eval-task-interval ("nan" at the others),
// equal to what folio eval --task says of the checkpoint saved at that step; folio plot
// draws it; a resumed run goes on with the columns and gains new ones. Bad task options
// are refused before the run. (On MPI ranks: test_mpi.sh.)
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "io/json.h"
#include "support.h"

namespace folio {
namespace {

using namespace testing;  // support.h's helpers: Result, slurp, spit, expect_contains

using Table = std::vector<std::vector<std::string>>;  // (rows, columns), the header first

Table read_csv(const std::string& path) {
  Table rows;
  std::istringstream in(slurp(path));
  for (std::string line; std::getline(in, line);) {
    rows.emplace_back();
    std::istringstream cells(line);
    for (std::string cell; std::getline(cells, cell, ',');) rows.back().push_back(cell);
  }
  return rows;
}

// The column named `name`'s cell of each row after the header.
std::vector<std::string> column(const Table& t, const std::string& name) {
  const auto at = std::find(t[0].begin(), t[0].end(), name);
  EXPECT_NE(at, t[0].end()) << name;
  std::vector<std::string> out;
  for (size_t r = 1; r < t.size() && at != t[0].end(); ++r) out.push_back(t[r].at(size_t(at - t[0].begin())));
  return out;
}

class CliTaskColumns : public testing::CliCorpusTest {
 protected:
  void SetUp() override {
    CliCorpusTest::SetUp();
    const std::string item = R"({"context": "To be, or not", "choices": ["to be", "the king", "a"], "answer": 0})" "\n";
    spit(dir_ / "choice.jsonl", item + item + item);
    spit(dir_ / "gen.jsonl", R"({"prompt": "To be", "answer": "x"})" "\n" R"({"prompt": "the", "answer": "y"})" "\n");
    spit(dir_ / "later.jsonl", item);
  }
  std::string tasks(std::initializer_list<const char*> names) const {
    std::string s;
    for (const char* n : names) s += " --eval-task " + (dir_ / n);
    return s;
  }
};

TEST_F(CliTaskColumns, TasksAreLogColumnsThatPlotAndGoOnAcrossResume) {
  const Result r = folio("train --data " + text() + run("run", 20) + tasks({"choice.jsonl", "gen.jsonl"}) +
                         " --eval-task-interval 20");
  ASSERT_EQ(r.code, 0) << r.err;
  Table log = read_csv(dir_ / "run/log.csv");
  ASSERT_EQ(log.size(), 4u);  // steps 0, 10, 20
  EXPECT_EQ(log[0].end()[-2], "choice");
  EXPECT_EQ(log[0].end()[-1], "gen");
  const std::vector<std::string> choice = column(log, "choice"), gen = column(log, "gen");
  EXPECT_EQ(choice[1], "nan");  // step 10 is no multiple of 20
  EXPECT_EQ(gen[1], "nan");
  for (size_t row : {0u, 2u}) {
    const double c = std::stod(choice[row]), g = std::stod(gen[row]);
    EXPECT_TRUE(c >= 0 && c <= 1 && g >= 0 && g <= 1) << choice[row] << " " << gen[row];
  }
  // The last row's scores are those of the checkpoint saved at that step.
  const Result eval = folio("eval --checkpoint " + (dir_ / "run") + " --task " + (dir_ / "choice.jsonl") + " --task " +
                            (dir_ / "gen.jsonl") + " --json --threads 2");
  ASSERT_EQ(eval.code, 0) << eval.err;
  const Json c = Json::parse(eval.out.substr(0, eval.out.find('\n')));
  const Json g = Json::parse(eval.out.substr(eval.out.find('\n') + 1));
  EXPECT_NEAR(std::stod(choice[2]), c.find("acc_norm")->as_double(), 1e-5);
  EXPECT_NEAR(std::stod(gen[2]), g.find("exact_match")->as_double(), 1e-5);

  const Result plot = folio("plot " + (dir_ / "run") + " --y choice --out " + (dir_ / "choice.svg"));
  ASSERT_EQ(plot.code, 0) << plot.err;
  expect_contains(slurp(dir_ / "choice.svg"), {"<svg", "</svg>"});

  // Resumed with one of the tasks and a new one: the columns go on, the new one added.
  const Result resumed = folio("train --resume --out " + (dir_ / "run") + " --max-iters 30 --quiet --threads 2" +
                               tasks({"choice.jsonl", "later.jsonl"}));
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  log = read_csv(dir_ / "run/log.csv");
  ASSERT_EQ(log.size(), 5u);
  EXPECT_EQ(log[0].end()[-3], "choice");
  EXPECT_EQ(log[0].end()[-1], "later");
  for (const auto& row : log) EXPECT_EQ(row.size(), log[0].size());
  EXPECT_EQ(column(log, "later")[0], "nan");  // before it was given
  EXPECT_NE(column(log, "later")[3], "nan");  // step 30: the interval is every evaluation now
  EXPECT_NE(column(log, "choice")[3], "nan");
  EXPECT_EQ(column(log, "gen")[3], "nan");  // not given on resume
}

TEST_F(CliTaskColumns, BadTaskOptionsAreRefusedBeforeTheRun) {
  const auto refused = [&](const std::string& more, std::initializer_list<std::string> what) {
    const Result r = folio("train --data " + text() + run("bad", 10) + more);
    EXPECT_EQ(r.code, 2) << more << "\n" << r.err;
    expect_contains(r.err, what);
    EXPECT_FALSE(std::filesystem::exists(dir_ / "bad")) << more;
  };
  spit(dir_ / "broken.jsonl", slurp(dir_ / "later.jsonl") + "{\"context\": \"a\"}\n");
  refused(tasks({"broken.jsonl"}), {"--eval-task ", "broken.jsonl:2: "});
  refused(tasks({"choice.jsonl"}) + " --eval-task-interval 15", {"--eval-task-interval 15 must be a multiple of "
                                                                  "--eval-interval 10"});
  refused(" --eval-task-interval 20", {"--eval-task-interval goes with --eval-task"});
  std::filesystem::create_directories(dir_ / "other");
  spit(dir_ / "other/choice.jsonl", slurp(dir_ / "choice.jsonl"));
  refused(tasks({"choice.jsonl", "other/choice.jsonl"}), {"its log.csv column would be 'choice'"});
  spit(dir_ / "val_loss.jsonl", slurp(dir_ / "choice.jsonl"));
  refused(tasks({"val_loss.jsonl"}), {"its log.csv column would be 'val_loss'"});
  // What only the run's model can tell, its tokenizer and window, is checked before
  // the run too (it was found at step 0's evaluation: exit 1, a run directory left).
  spit(dir_ / "accent.jsonl", R"({"context": "To be", "choices": ["caf\u00e9", "a"], "answer": 0})" "\n");
  refused(tasks({"choice.jsonl", "accent.jsonl"}), {"--eval-task ", "accent.jsonl:1: choice 0: ", "U+00E9"});
  spit(dir_ / "long.jsonl", R"({"context": "To be", "choices": [")" + std::string(40, 'e') + R"(", "a"], "answer": 0})" "\n");
  refused(tasks({"long.jsonl"}), {"long.jsonl:1: choice 0: the choice is 41 tokens, more than the model's window of 32"});
}

}  // namespace
}  // namespace folio
