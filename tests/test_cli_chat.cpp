// A chat model's commands through the binary, as a user meets them: folio eval on
// conversations refuses the text evaluation's options it cannot honour, folio chat
// refuses a --system message that would leave every turn refused, and a character the
// model lacks is named in its message, at its place there. Each refusal is exit 2 with
// nothing written.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "support.h"

namespace folio {
namespace {

using testing::expect_contains;
using testing::Result;
using testing::slurp;
using testing::spit;

// `n` conversations that copy two digits (about 30 tokens each with a char vocabulary,
// which a chat model trained on them from scratch has: no '_').
std::string copy_chats(int n) {
  std::string lines;
  for (int i = 0; i < n; ++i)
    lines += cat(R"({"messages":[{"role":"user","content":"Copy )", 10 + i, R"("},{"role":"assistant","content":")",
                 10 + i, "\"}]}\n");
  return lines;
}

class CliChat : public testing::CliCorpusTest {
 protected:
  void SetUp() override {
    CliCorpusTest::SetUp();
    spit(chats(), copy_chats(20));
    const Result r = folio("train --data " + chats() + run("chat", 2) + " --block-size 64");
    ASSERT_EQ(r.code, 0) << r.err;
  }
  std::string chats() const { return dir_ / "chats.jsonl"; }
  std::string model() const { return dir_ / "chat"; }
  // Refused with exit 2, its message holding every fragment, nothing written.
  void expect_refused(const std::string& args, std::initializer_list<std::string> fragments) const {
    const testing::Snapshot before = testing::snapshot(dir_.path);
    const Result r = folio(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out << r.err;
    expect_contains(r.err, fragments);
    EXPECT_EQ(testing::diff(before, testing::snapshot(dir_.path)), "") << args;
  }
};

// The loss over conversations runs every conversation of the split through the f32
// forward pass: --weights and --max-windows, which a text's evaluation takes, would
// change nothing, so the figure would be shown as what it is not.
TEST_F(CliChat, EvalOnConversationsRefusesTheTextsOptions) {
  const std::string eval = "eval --checkpoint " + model() + " --threads 2";
  const Result plain = folio(eval + " --json");
  ASSERT_EQ(plain.code, 0) << plain.err;
  expect_contains(plain.out, {"\"conversations\":2"});
  EXPECT_EQ(folio(eval + " --weights f32 --max-windows 0").code, 0);
  expect_refused(eval + " --weights int8", {"--weights int8 applies to a text's loss", chats()});
  expect_refused(eval + " --weights bf16 --data " + chats(), {"--weights bf16"});
  expect_refused(eval + " --max-windows 1", {"--max-windows counts a text's windows", chats()});
}

// A --system message begins every prompt: one the model cannot encode, or that leaves no
// room for a turn in the context, is refused before the conversation starts (it was
// taken, and then every turn refused, blamed on the turn, with exit 0).
TEST_F(CliChat, ChatRefusesASystemMessageNoTurnCouldFollow) {
  const std::string chat = "chat --checkpoint " + model() + " --threads 2 --system ";
  expect_refused(chat + std::string(70, '1'), {"--system leaves no room for a turn", "context of 64 (block_size)"});
  expect_refused(chat + "Copy_1", {"--system cannot be encoded", "character '_' (U+005F) at position 4"});
}

// Piped, a turn left out (a character the model lacks, or longer than the context alone)
// had its notice on stderr and no line on stdout: a script reading a reply a turn lost
// its place. Its line is empty now, so line N answers turn N. (The test's children
// read /dev/null: a shell feeds this one its turns.)
TEST_F(CliChat, PipedARefusedTurnKeepsItsLineOfOutput) {
  spit(dir_ / "turns.txt", "Copy 11\nCopy 1_\nCopy 12\n" + std::string(70, '1') + "\nCopy 13\n");
  const std::string out = dir_ / "replies.txt", err = dir_ / "notices.txt";
  const int status = std::system((std::string("'") + FOLIO_BINARY + "' chat --checkpoint '" + model() +
                                  "' --threads 2 --greedy --max-new-tokens 4 < '" + (dir_ / "turns.txt") + "' > '" +
                                  out + "' 2> '" + err + "'")
                                     .c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << slurp(err);
  const std::string replies = slurp(out), notices = slurp(err);
  EXPECT_EQ(std::count(replies.begin(), replies.end(), '\n'), 5) << replies << notices;
  const std::string left_out = "the turn is left out; the conversation before it is kept";
  int notes = 0;
  for (size_t at = notices.find(left_out); at != std::string::npos; at = notices.find(left_out, at + 1)) ++notes;
  EXPECT_EQ(notes, 2) << notices;
  expect_contains(notices, {"character '_' (U+005F)", "does not fit"});
  std::istringstream lines(replies);
  std::vector<std::string> line(5);
  for (std::string& l : line) std::getline(lines, l);
  EXPECT_EQ(line[1], "") << replies;  // "Copy 1_"
  EXPECT_EQ(line[3], "") << replies;  // 70 digits
}

// A model trained from scratch on conversations without a system message can still
// render one: its tokenizer learnt the three roles' lines (a char vocabulary lacked the
// 'm' of "system", and every system message was refused, naming a character it lacked).
TEST_F(CliChat, AModelFromScratchRendersARoleItsDataLacks) {
  const Result chat = folio("chat --checkpoint " + model() + " --threads 2 --system 'Copy 1'");
  EXPECT_EQ(chat.code, 0) << chat.err;
  spit(dir_ / "system.jsonl", copy_chats(2) + R"({"messages":[{"role":"system","content":"Copy 1"},)"
                                             R"({"role":"user","content":"Copy 1"},{"role":"assistant","content":"1"}]})"
                                             "\n");
  const Result eval = folio("eval --checkpoint " + model() + " --split all --data " + (dir_ / "system.jsonl"));
  EXPECT_EQ(eval.code, 0) << eval.err;
}

// A character the model lacks is named in its message, at its place in the message as
// written (position 6 of "Copy 1_"), not in the template's text around it, which put it
// 5 characters later ("user\n" first).
TEST_F(CliChat, AnUnknownCharacterIsNamedInItsMessage) {
  spit(dir_ / "odd.jsonl", copy_chats(2) + R"({"messages":[{"role":"user","content":"Copy 1_"},)"
                                          R"({"role":"assistant","content":"1"}]})" "\n");
  expect_refused("eval --checkpoint " + model() + " --split all --data " + (dir_ / "odd.jsonl"),
                 {"odd.jsonl:3: [chat] message 0 (user): [tokenizer] character '_' (U+005F) at position 6 "});
  // A base model whose vocabulary is digits: what it cannot encode is the template's
  // own line, the role's name, which the message says.
  std::string digits;
  for (int i = 0; i < 400; ++i) digits += "0123456789\n";
  spit(dir_ / "digits.txt", digits);
  ASSERT_EQ(folio("train --data " + (dir_ / "digits.txt") + run("digits", 1)).code, 0);
  spit(dir_ / "numbers.jsonl", std::string(R"({"messages":[{"role":"user","content":"12"},)"
                                           R"({"role":"assistant","content":"21"}]})" "\n") + "\n" +
                                   R"({"messages":[{"role":"user","content":"34"},)"
                                   R"({"role":"assistant","content":"43"}]})" "\n");
  expect_refused("train --init-from " + (dir_ / "digits") + " --data " + (dir_ / "numbers.jsonl") + run("tuned", 1, false),
                 {"numbers.jsonl:1: [chat] message 0: the template's line \"user\" cannot be encoded: [tokenizer] "
                  "character 'u' (U+0075) at position 0"});
}

}  // namespace
}  // namespace folio
