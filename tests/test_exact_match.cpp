// Generative tasks (io/task_file.h, infer/exact_match.h): how answers are normalised,
// how the two generative layouts read, and that a file keeps to one kind. The greedy
// text itself is held against numpy's in test_task_eval.sh.
#include <gtest/gtest.h>

#include "infer/exact_match.h"
#include "io/task_file.h"
#include "support.h"

namespace folio {
namespace {

TEST(ExactMatch, AnswersAreTrimmedAndGsm8kKeepsTheNumberAfterItsHashes) {
  EXPECT_EQ(normalised_answer("  to be \n"), "to be");
  EXPECT_EQ(normalised_answer("To be"), "To be");  // case is kept
  EXPECT_EQ(normalised_answer("She has 3 + 4 = 7 apples.\n#### 7"), "7");
  EXPECT_EQ(normalised_answer("#### 1,234."), "1234");
  EXPECT_EQ(normalised_answer("#### $5"), "5");
  EXPECT_EQ(normalised_answer("a #### 2\n#### -3 "), "-3");  // the last one
  EXPECT_EQ(normalised_answer("####"), "");
  EXPECT_EQ(normalised_answer(" 1,234. "), "1,234.");  // without hashes only the trim
  EXPECT_EQ(normalised_answer("The answer is 7\n\n#### 7"), normalised_answer("#### 7."));
}

TEST(ExactMatch, GenerativeFilesReadInBothLayoutsAndKeepToOneKind) {
  testing::TempDir dir("exact_match");
  const std::string path = dir / "g.jsonl";
  testing::spit(path, R"({"prompt": "2 + 2 =", "answer": 4})" "\n\n"
                      R"({"question": "Tom has 3 apples and gets 4. How many?", "answer": "3 + 4 = 7\n#### 7"})" "\n");
  const TaskFile task = read_task_file(path);
  ASSERT_TRUE(task.is_generative());
  EXPECT_EQ(task.format, "prompt");
  ASSERT_EQ(task.size(), 2);
  EXPECT_EQ(task.generative[0].answer, "4");
  EXPECT_EQ(task.generative[1].prompt, "Question: Tom has 3 apples and gets 4. How many?\nAnswer:");
  EXPECT_EQ(task.generative[1].line, 3);
  EXPECT_EQ(read_task_file(path, 1).size(), 1);

  const auto refused = [&](const std::string& lines, const std::string& what) {
    testing::spit(path, lines);
    try {
      read_task_file(path);
      ADD_FAILURE() << "read: " << lines;
    } catch (const Error& e) {
      testing::expect_contains(e.what(), {what});
    }
  };
  const std::string choice = R"({"context": "a", "choices": ["b", "c"], "answer": 0})" "\n";
  refused(R"({"prompt": "a", "answer": "b"})" "\n" + choice, "g.jsonl:2: a multiple-choice item in a generative file");
  refused(choice + R"({"prompt": "a", "answer": "b"})" "\n", "g.jsonl:2: a generative item (prompt, answer) in a "
                                                              "multiple-choice file");
  refused(R"({"prompt": "", "answer": "b"})" "\n", "g.jsonl:1: the prompt is empty");
  refused(R"({"prompt": "a", "answer": " \n"})" "\n", "g.jsonl:1: the answer is empty");
  refused(R"({"prompt": "a"})" "\n", "g.jsonl:1: a generative item without \"answer\"");
  refused(R"({"question": "a", "answer": ["b"]})" "\n", "g.jsonl:1: answer must be a string, got array");
  refused(R"({"prompt": 3, "answer": "b"})" "\n", "g.jsonl:1: prompt must be a string");
}

}  // namespace
}  // namespace folio
