// folio eval --task through the binary: what it reports, and every bad task file refused
// with exit 2, naming the file and the line, with nothing written. The scores themselves
// are held against an independent numpy scorer in test_task_eval.sh.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "io/json.h"
#include "support.h"

namespace folio {
namespace {

using testing::expect_contains;
using testing::Args;
using testing::Result;
using testing::slurp;
using testing::spit;
namespace fs = std::filesystem;

class CliTaskEval : public testing::CliCorpusTest {
 protected:
  void SetUp() override {
    CliCorpusTest::SetUp();
    spit(text(), slurp(text()) + "Question: Answer:\n");  // ARC's words; the corpus has no Q
    ASSERT_EQ(folio("train --data " + text() + run("run", 2)).code, 0);  // block_size 32
  }
  std::string eval(const std::string& task, const std::string& more = "") const {
    return "eval --checkpoint " + (dir_ / "run") + " --task " + task + " --threads 2" + more;
  }
  // `lines` as a task file, which must be refused with exit 2 naming it, line `line`
  // and `what`, with nothing written (not even --log-samples' file).
  void expect_bad(const std::string& lines, int line, const std::string& what) const {
    const std::string task = dir_ / "bad.jsonl";
    spit(task, lines);
    const auto before = testing::snapshot(dir_.path);
    const Result r = folio(eval(task, " --log-samples " + (dir_ / "samples.jsonl")));
    EXPECT_EQ(r.code, 2) << lines << "\n" << r.err;
    expect_contains(r.err, {task + ":" + std::to_string(line) + ": ", what});
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(testing::diff(before, testing::snapshot(dir_.path)), "") << lines;
  }
};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  for (size_t at = 0, end; at < text.size(); at = end + 1) {
    end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    if (end > at) out.push_back(text.substr(at, end - at));
  }
  return out;
}

const std::string kGood = R"({"context": "To be, or not", "choices": ["to be", "the king"], "answer": 0})" "\n";

TEST_F(CliTaskEval, ReportsAccuracyAndWritesSamplesOnlyWhereAsked) {
  const std::string task = dir_ / "task.jsonl";
  spit(task, kGood + R"({"ctx": "First Citizen:", "endings": ["Before", "we", "proceed", "any"], "label": 3})" "\n" +
                 R"({"question": {"stem": "Who speaks?", "choices": [{"text": "All", "label": "A"}, )"
                 R"({"text": "None", "label": "B"}]}, "answerKey": "B"})" "\n");
  const Result plain = folio(eval(task));
  ASSERT_EQ(plain.code, 0) << plain.err;
  expect_contains(plain.out, {"3 items", "plain format", "acc       ", "acc_norm  ", "(n 3, "});

  const std::string samples = dir_ / "samples.jsonl";
  const Result json = folio(eval(task, " --json --limit 2 --log-samples " + samples));
  ASSERT_EQ(json.code, 0) << json.err;
  const Json out = Json::parse(json.out);
  EXPECT_EQ(out.find("n")->as_int(), 2);
  EXPECT_EQ(out.find("task")->as_string(), "task");
  for (const char* key : {"acc", "acc_stderr", "acc_norm", "acc_norm_stderr", "items_per_s", "cut"})
    EXPECT_TRUE(out.find(key) && out.find(key)->is_number()) << key;
  const std::string lines = slurp(samples);
  ASSERT_EQ(std::count(lines.begin(), lines.end(), '\n'), 2) << lines;
  const Json second = Json::parse(lines.substr(lines.find('\n') + 1));
  EXPECT_EQ(second.find("logprobs")->as_array().size(), 4u);
  EXPECT_EQ(second.find("label")->as_int(), 3);
  EXPECT_LT(second.find("logprobs")->as_array()[0].as_double(), 0.0);

  // An existing samples file is kept unless --overwrite.
  spit(samples, "mine");
  const Result again = folio(eval(task, " --log-samples " + samples));
  EXPECT_EQ(again.code, 2);
  expect_contains(again.err, {samples, "--overwrite replaces"});
  EXPECT_EQ(slurp(samples), "mine");
  EXPECT_EQ(folio(eval(task, " --log-samples " + samples + " --overwrite")).code, 0);
  EXPECT_NE(slurp(samples), "mine");

  // --overwrite replaces an earlier log, never a file the command reads: the task file
  // (named another way) or the checkpoint.
  for (const std::string& input : {dir_ / "./task.jsonl", dir_ / "run/model.safetensors"}) {
    const std::string kept = slurp(input);
    const Result refused = folio(eval(task, " --log-samples " + input + " --overwrite"));
    EXPECT_EQ(refused.code, 2) << input << "\n" << refused.err;
    expect_contains(refused.err, {"--log-samples " + input + " is the ", "which the samples would replace"});
    EXPECT_EQ(slurp(input), kept) << input;
  }
  // Nor a symbolic link or a FIFO (as /dev/stdout is one, to a pipe or a terminal): the
  // file written whole and renamed would replace the link, or the FIFO, with a file.
  fs::create_symlink(samples, dir_ / "link.jsonl");
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  for (const std::string& special : {dir_ / "link.jsonl", dir_ / "fifo"}) {
    const Result refused = folio(eval(task, " --log-samples " + special + " --overwrite"));
    EXPECT_EQ(refused.code, 2) << special << "\n" << refused.err;
    expect_contains(refused.err, {"--log-samples " + special + ": is a ", "give a regular file's path"});
  }
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dir_ / "link.jsonl")));
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(dir_ / "fifo")));
}

TEST_F(CliTaskEval, RefusesEveryBadLineNamingFileAndLine) {
  expect_bad(kGood + "{\"context\": \"a\", \"choices\": [\"b\", \"c\"], \"answer\": 0\n", 2, "not one JSON value");
  expect_bad(kGood + "\n" + R"({"prompt": "a", "answer": "b"})" "\n", 3, "a generative item (prompt, answer) in a "
                                                                         "multiple-choice file");
  expect_bad(R"({"prompt": "a", "target": "b"})" "\n", 1, "a generative item without \"answer\"");
  expect_bad(R"({"text": "a"})" "\n", 1, "not a task item");
  expect_bad(R"({"prompt": "", "answer": "b"})" "\n", 1, "the prompt is empty");
  expect_bad(R"({"question": "a", "answer": "b\n#### 1"})" "\n" R"({"question": "a", "answer": "So.\n#### $,."})" "\n",
             2, "the answer \"So.\\n#### $,.\" is empty once normalised");
  expect_bad(R"({"prompt": "a", "answer": "caf\u00e9"})" "\n" R"({"prompt": "caf\u00e9", "answer": "b"})" "\n", 2,
             "the prompt: [tokenizer]");
  expect_bad(R"({"context": "a", "choices": ["b", "c"], "answer": 2})" "\n", 1, "answer 2 is out of range");
  expect_bad(R"({"ctx": "a", "endings": ["b", "c"], "label": -1})" "\n", 1, "answer -1 is out of range");
  expect_bad(R"({"context": "a", "choices": ["b", ""], "answer": 0})" "\n", 1, "choice 1 is empty");
  expect_bad(R"({"context": "", "choices": ["b", "c"], "answer": 0})" "\n", 1, "the context is empty");
  expect_bad(R"({"context": "a", "choices": ["b"], "answer": 0})" "\n", 1, "1 choice, needs at least 2");
  expect_bad(kGood + kGood + "{\"context\": \"a\xff\", \"choices\": [\"b\", \"c\"], \"answer\": 0}\n", 3,
             "not valid UTF-8");
  expect_bad(R"({"ctx": "a", "endings": ["b", "c"]})" "\n", 1, "without \"label\"");
  expect_bad(R"({"context": "a", "choices": "b c", "answer": 0})" "\n", 1, "choices must be an array");
  expect_bad(R"({"question": {"stem": "a", "choices": [{"text": "b", "label": "A"}, {"text": "c", "label": "B"}]},)"
             R"( "answerKey": "C"})" "\n",
             1, "answerKey \"C\" is none of the choices' labels");
  expect_bad("[1, 2]\n", 1, "must be a JSON object");
  // A char model's vocabulary lacks é.
  expect_bad(R"({"context": "caf\u00e9", "choices": ["b", "c"], "answer": 0})" "\n", 1, "the context: [tokenizer]");
  expect_bad(R"({"context": "a", "choices": ["b", "caf\u00e9"], "answer": 0})" "\n", 1, "choice 1: the choice: [tokenizer]");
  // The model's window is 32 tokens: a choice of 40 characters cannot be scored whole.
  expect_bad(kGood + R"({"context": "a", "choices": ["b", ")" + std::string(40, 'e') + R"("], "answer": 0})" "\n", 2,
             "choice 1: the choice is 41 tokens, more than the model's window of 32");
}

// A generative file: the text the model writes is its answer. Planted answers (what it
// wrote, with GSM8K's "#### " before it) score exactly their share, scored in one
// command beside a multiple-choice file.
TEST_F(CliTaskEval, GenerativeTasksScoreExactMatchAndSeveralFilesRunInOneCommand) {
  const std::string gen = dir_ / "gen.jsonl", samples = dir_ / "gen.samples.jsonl";
  spit(gen, R"({"prompt": "First Citizen:", "answer": "x"})" "\n" R"({"prompt": "To be", "answer": "y"})" "\n"
                R"({"question": "Who speaks?", "answer": "z"})" "\n");
  const Result first = folio(eval(gen, " --max-new-tokens 6 --stop . --log-samples " + samples));
  ASSERT_EQ(first.code, 0) << first.err;
  expect_contains(first.out, {"3 items", "prompt format", "exact_match  ", "greedy, at most 6 tokens"});
  std::vector<std::string> outputs;
  for (const std::string& line : lines_of(slurp(samples))) {
    const Json j = Json::parse(line);
    EXPECT_EQ(j.find("task")->as_string(), "gen");
    EXPECT_LE(j.find("tokens")->as_int(), 6);
    EXPECT_EQ(j.find("output")->as_string().find('.'), std::string::npos);  // cut before the stop
    outputs.push_back(j.find("output")->as_string());
  }
  ASSERT_EQ(outputs.size(), 3u);
  const std::string planted = dir_ / "planted.jsonl";
  spit(planted, Json(Json::Object{{"prompt", "First Citizen:"}, {"answer", "work\n#### " + outputs[0]}}).dump() + "\n" +
                    R"({"prompt": "To be", "answer": "\u2603"})" "\n");
  const std::string choice = dir_ / "choice.jsonl";
  spit(choice, kGood + kGood);
  const Result both = folio(eval(planted, " --task " + choice + " --max-new-tokens 6 --stop . --json"));
  ASSERT_EQ(both.code, 0) << both.err;
  const std::vector<std::string> lines = lines_of(both.out);
  ASSERT_EQ(lines.size(), 2u) << both.out;
  const Json p = Json::parse(lines[0]), c = Json::parse(lines[1]);
  EXPECT_EQ(p.find("task")->as_string(), "planted");
  EXPECT_EQ(p.find("n")->as_int(), 2);
  const bool plantable = outputs[0].find_first_not_of(" \n") != std::string::npos &&
                         outputs[0].find_first_of(",$") == std::string::npos;
  if (plantable) {
    EXPECT_EQ(p.find("exact_match")->as_double(), 0.5) << outputs[0];
  }
  EXPECT_TRUE(p.find("exact_match_stderr")->is_number());
  EXPECT_EQ(p.find("acc"), nullptr);
  EXPECT_EQ(c.find("task")->as_string(), "choice");
  EXPECT_TRUE(c.find("acc_norm")->is_number());
  Args empty_stop = testing::words(eval(gen));
  empty_stop.insert(empty_stop.end(), {"--stop", ""});
  EXPECT_EQ(testing::run_folio(empty_stop, dir_.path).code, 2);
  // A bad second file stops the run before the first is scored.
  const Result bad = folio(eval(gen, " --task " + (dir_ / "none.jsonl")));
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(bad.out, "");
}

TEST_F(CliTaskEval, RefusesOptionsOfTheOtherEvaluation) {
  const std::string task = dir_ / "task.jsonl";
  spit(task, kGood + kGood);
  const Result data = folio(eval(task, " --data " + text()));
  EXPECT_EQ(data.code, 2);
  expect_contains(data.err, {"--data belongs to the loss evaluation"});
  const Result limit = folio("eval --checkpoint " + (dir_ / "run") + " --data " + text() + " --limit 3");
  EXPECT_EQ(limit.code, 2);
  expect_contains(limit.err, {"--limit goes with --task"});
  const Result missing = folio(eval(dir_ / "none.jsonl"));
  EXPECT_EQ(missing.code, 2);
  expect_contains(missing.err, {"none.jsonl", "cannot open"});
}

}  // namespace
}  // namespace folio
