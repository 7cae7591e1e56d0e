// folio train's data through the binary, as a user's second hour meets it: what info
// says of a run's tokenizer and what --resume accepts, a folder of text, bytes that are
// not UTF-8, a resumed run on other data, and a conversation file or text changed under a run.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "base/error.h"
#include "tests/support.h"
#include "train/chat_data.h"
#include "train/run_state.h"

namespace folio {
namespace {

namespace fs = std::filesystem;
using testing::expect_contains;
using testing::Result;

using CliData = testing::CliCorpusTest;

// A run on a token directory, and one started --init-from it, took their tokenizer from
// there: info gives the flags that describe it, not the defaults, and --resume accepts
// them (and still refuses others).
TEST_F(CliData, InfoAndResumeKnowATokenizerThatCameFromTheData) {
  ASSERT_EQ(folio("tokenize " + text() + " --tokenizer bpe --vocab-size 400 --out " + (dir_ / "tok")).code, 0);
  ASSERT_EQ(folio("train --data " + (dir_ / "tok") + run("dir", 5)).code, 0);
  const Result info = folio("info --checkpoint " + (dir_ / "dir"));
  ASSERT_EQ(info.code, 0) << info.err;
  expect_contains(info.out, {"spm (SentencePiece), 400 pieces",
                             "tokenizer    --tokenizer bpe --vocab-size 400 (the token directory's)"});
  EXPECT_EQ(info.out.find("--tokenizer char"), std::string::npos) << info.out;
  const Result resumed = folio("train --resume --tokenizer bpe --vocab-size 400" + run("dir", 10));
  EXPECT_EQ(resumed.code, 0) << resumed.err;
  const Result unigram = folio("train --resume --tokenizer unigram --vocab-size 400" + run("dir", 15));
  EXPECT_EQ(unigram.code, 2);
  expect_contains(unigram.err, {"--tokenizer unigram --vocab-size 400 is not the tokenizer of the run", "400 pieces"});
  // A new run may give them too: they describe the directory's tokenizer.
  EXPECT_EQ(folio("train --data " + (dir_ / "tok") + " --tokenizer bpe --vocab-size 400" + run("again", 2)).code, 0);
  const Result wrong = folio("train --data " + (dir_ / "tok") + " --tokenizer bpe --vocab-size 500" + run("wrong", 2));
  EXPECT_EQ(wrong.code, 2);
  expect_contains(wrong.err, {"goes with a text file", "400 pieces"});

  ASSERT_EQ(folio("train --init-from " + (dir_ / "dir") + " --data " + text() + run("tuned", 5, false)).code, 0);
  expect_contains(folio("info --checkpoint " + (dir_ / "tuned")).out,
                  {"tokenizer    --tokenizer bpe --vocab-size 400 (the --init-from checkpoint's)"});
  const Result tuned = folio("train --resume --tokenizer bpe --vocab-size 400" + run("tuned", 10, false));
  EXPECT_EQ(tuned.code, 0) << tuned.err;
}

// char, folio train's default, given on a directory of other tokens: it trained on the
// bpe ids as if they were the directory's characters' ids, without a word. It is
// refused as any other name is; a directory of characters takes it.
TEST_F(CliData, TokenizerCharOnAnotherTokenDirectoryIsRefused) {
  ASSERT_EQ(folio("tokenize " + text() + " --tokenizer bpe --vocab-size 400 --out " + (dir_ / "tok")).code, 0);
  const Result chars = folio("train --data " + (dir_ / "tok") + " --tokenizer char" + run("chars", 2));
  EXPECT_EQ(chars.code, 2) << chars.err;
  expect_contains(chars.err, {"--tokenizer char goes with a text file", "tok was tokenized already, with spm",
                              "400 pieces"});
  EXPECT_FALSE(fs::exists(dir_.path / "chars" / "model.safetensors"));
  ASSERT_EQ(folio("tokenize " + text() + " --tokenizer char --out " + (dir_ / "tokc")).code, 0);
  const Result same = folio("train --data " + (dir_ / "tokc") + " --tokenizer char" + run("c", 2));
  EXPECT_EQ(same.code, 0) << same.err;
}

// A folder of text files is not a token directory: the refusal says how to make one.
TEST_F(CliData, AFolderOfTextSuggestsTokenize) {
  fs::create_directories(dir_.path / "texts");
  testing::spit(dir_.path / "texts" / "a.txt", "some text\n");
  const Result r = folio("train --data " + (dir_ / "texts") + run("r", 5));
  EXPECT_EQ(r.code, 2);
  expect_contains(r.err, {"not a token directory", "folio tokenize " + (dir_ / "texts") + " --out DATA_DIR",
                          "folio train --data DATA_DIR"});
}

// Bytes that are not UTF-8 are read as U+FFFD, as folio tokenize reads them, and counted.
TEST_F(CliData, InvalidUtf8IsReplacedAndCounted) {
  std::string bad = testing::slurp(text());
  bad[100] = '\xff', bad[2000] = '\xe9', bad[29000] = '\xc3';  // a Latin-1 byte, a cut-off sequence
  testing::spit(dir_.path / "bad.txt", bad);
  const Result r = folio("train --data " + (dir_ / "bad.txt") + run("r", 2));
  EXPECT_EQ(r.code, 0) << r.err;
  expect_contains(r.err, {"bad.txt: not valid UTF-8; 3 bytes replaced by U+FFFD"});
  const Result clean = folio("train --data " + text() + run("clean", 2));
  EXPECT_EQ(clean.code, 0);
  EXPECT_EQ(clean.err.find("UTF-8"), std::string::npos) << clean.err;
  bad = testing::slurp(text()), bad[100] = '\xff';  // one: every command says it as tokens does
  testing::spit(dir_.path / "one.txt", bad);
  const Result one = folio("train --data " + (dir_ / "one.txt") + run("one", 2));
  EXPECT_EQ(one.code, 0) << one.err;
  expect_contains(one.err, {"one.txt: not valid UTF-8; 1 byte replaced by U+FFFD"});
}

// folio tokens reads such bytes as train and tokenize read them, with their warning: it
// refused them, so the tokens of a text a model had trained on could not be shown.
TEST_F(CliData, TokensReadsInvalidUtf8AsTrainingDoes) {
  ASSERT_EQ(folio("train --tokenizer bpe --vocab-size 400 --data " + text() + run("bpe", 1)).code, 0);
  testing::spit(dir_.path / "bad.txt", "To be\xff or not\n");
  testing::spit(dir_.path / "read.txt", "To be\xEF\xBF\xBD or not\n");  // as read: U+FFFD
  const std::string tokens = "tokens --format ids --checkpoint " + (dir_ / "bpe") + " --file ";
  const Result bad = folio(tokens + (dir_ / "bad.txt"));
  ASSERT_EQ(bad.code, 0) << bad.err;
  expect_contains(bad.err, {"bad.txt: not valid UTF-8; 1 byte replaced by U+FFFD"});
  const Result read = folio(tokens + (dir_ / "read.txt"));
  EXPECT_EQ(bad.out, read.out);
  EXPECT_EQ(read.err, "");
  // A char vocabulary without U+FFFD: refused, saying where the character came from.
  ASSERT_EQ(folio("train --data " + text() + run("char", 1)).code, 0);
  const Result chars = folio("tokens --checkpoint " + (dir_ / "char") + " --file " + (dir_ / "bad.txt"));
  EXPECT_EQ(chars.code, 2);
  expect_contains(chars.err, {"bad.txt", "U+FFFD", "(1 byte of the text, not UTF-8, read as U+FFFD)"});
}

// --resume on other data: best.safetensors was chosen on the old val split, and the
// warning says its loss will be compared with the new one's. The same data says nothing.
TEST_F(CliData, ResumeOnOtherDataWarnsAboutTheBestCheckpoint) {
  testing::write_small_corpus(dir_.path / "other.txt", 20000);
  ASSERT_EQ(folio("train --data " + text() + run("r", 5)).code, 0);
  const Result same = folio("train --resume --data " + text() + run("r", 8));
  EXPECT_EQ(same.code, 0) << same.err;
  EXPECT_EQ(same.err.find("best.safetensors"), std::string::npos) << same.err;
  const Result other = folio("train --resume --data " + (dir_ / "other.txt") + run("r", 10));
  EXPECT_EQ(other.code, 0) << other.err;
  expect_contains(other.err, {"--data " + (dir_ / "other.txt") + " is not the data the run trained on so far (" + text(),
                              "best.safetensors", "compared"});
}

// --resume with another --val-fraction moves the text's split: best.safetensors was
// chosen on the old val split, and text the model trained on may now be val. Said as
// for other data; the run's own fraction, repeated, says nothing.
TEST_F(CliData, ResumeWithAnotherValFractionWarnsThatTheSplitMoves) {
  ASSERT_EQ(folio("train --data " + text() + run("r", 5)).code, 0);
  const Result same = folio("train --resume --val-fraction 0.1" + run("r", 8));
  EXPECT_EQ(same.code, 0) << same.err;
  EXPECT_EQ(same.err.find("val-fraction"), std::string::npos) << same.err;
  const Result moved = folio("train --resume --val-fraction 0.5" + run("r", 10));
  EXPECT_EQ(moved.code, 0) << moved.err;
  expect_contains(moved.err, {"--val-fraction 0.5 is not the run's 0.1", "best.safetensors", "compared",
                              "trained on"});
}

// `n` conversations whose replies copy the prompt's two digits (30 tokens each with a
// char tokenizer: they fit block_size 32); conversation `reversed` answers backwards.
std::string copy_conversations(int n, int reversed = -1) {
  std::string lines;
  for (int i = 0; i < n; ++i) {
    const std::string digits = std::to_string(10 + i);
    const std::string reply = i == reversed ? std::string{digits[1], digits[0]} : digits;
    lines += cat(R"({"messages":[{"role":"user","content":"Copy )", digits, R"("},{"role":"assistant","content":")",
                 reply, "\"}]}\n");
  }
  return lines;
}

// A chat run's loss spike test is off unless --spike-threshold is given (a batch's loss
// averages a few answers, and batches of different tasks spread wider than a spike);
// the run says so, and saves it. A text run keeps the test, and a given threshold holds.
TEST_F(CliData, AChatRunsLossSpikeTestIsOffUnlessGiven) {
  const std::string chat = dir_ / "chat.jsonl";
  testing::spit(chat, copy_conversations(20));
  std::string loud = run("chat", 2);
  loud.replace(loud.find(" --quiet"), 8, "");
  const Result said = folio("train --data " + chat + loud);
  ASSERT_EQ(said.code, 0) << said.err;
  expect_contains(said.out, {"conversations: the loss spike test is off", "--spike-threshold N turns it on"});
  expect_contains(folio("info --checkpoint " + (dir_ / "chat")).out, {" --spike-threshold 0 "});
  ASSERT_EQ(folio("train --data " + chat + run("given", 2) + " --spike-threshold 6").code, 0);
  expect_contains(folio("info --checkpoint " + (dir_ / "given")).out, {" --spike-threshold 6 "});
  ASSERT_EQ(folio("train --data " + text() + run("text", 2)).code, 0);
  expect_contains(folio("info --checkpoint " + (dir_ / "text")).out, {" --spike-threshold 6 "});
}

// A chat run's data is checked on --resume as a token directory's is: the same file
// resumes, an edited one is refused naming it (exit 2, the run untouched). A state saved
// before conversations had a fingerprint resumes with a warning, and its next save
// records one, which the resume after it checks. info calls the data conversations.
TEST_F(CliData, ResumeRefusesChangedConversations) {
  const std::string chat = dir_ / "chat.jsonl", run_dir = dir_ / "chat";
  testing::spit(chat, copy_conversations(20));
  ASSERT_EQ(folio("train --data " + chat + run("chat", 4)).code, 0);
  const Result info = folio("info --checkpoint " + run_dir);
  expect_contains(info.out, {"data         conversations, fingerprint "});
  EXPECT_EQ(info.out.find("token directory"), std::string::npos) << info.out;
  const Result same = folio("train --resume --data " + chat + run("chat", 6));
  EXPECT_EQ(same.code, 0) << same.err;

  const std::string original = testing::slurp(chat);
  testing::spit(chat, copy_conversations(20, 3));
  const testing::Snapshot before = testing::snapshot(run_dir);
  const Result changed = folio("train --resume --data " + chat + run("chat", 8));
  EXPECT_EQ(changed.code, 2) << changed.err;
  expect_contains(changed.err, {chat + ": its conversations are not the ones this run trained on (fingerprint "});
  EXPECT_EQ(testing::diff(before, testing::snapshot(run_dir)), "");

  const std::string state_file = run_dir + "/state.safetensors";
  TrainState old = load_state(state_file);
  old.data_fingerprint = "";  // as a folio before conversations had one saved it
  save_state(state_file, old);
  const Result unchecked = folio("train --resume --data " + chat + run("chat", 8));
  EXPECT_EQ(unchecked.code, 0) << unchecked.err;
  expect_contains(unchecked.err, {chat + ": the run's state records no fingerprint of the conversations"});
  testing::spit(chat, original);
  const Result back = folio("train --resume --data " + chat + run("chat", 10));
  EXPECT_EQ(back.code, 2) << back.err;
  expect_contains(back.err, {"its conversations are not the ones this run trained on"});
}

// Conversations too few for a train and a validation split are refused naming the flag
// that chooses the split, --val-fraction (there is no --train-fraction), and what to do.
TEST_F(CliData, TooFewConversationsToSplitNameValFraction) {
  const std::string one = dir_ / "one.jsonl", three = dir_ / "three.jsonl";
  testing::spit(one, copy_conversations(1));
  testing::spit(three, copy_conversations(3));
  const Result alone = folio("train --data " + one + run("one", 2));
  EXPECT_EQ(alone.code, 2) << alone.err;
  expect_contains(alone.err, {one + ": 1 conversation cannot be split into train and validation: give 2 at least"});
  const Result held = folio("train --data " + three + " --val-fraction 0.7" + run("three", 2));
  EXPECT_EQ(held.code, 2) << held.err;
  expect_contains(held.err, {three + ": 3 conversations split by --val-fraction 0.7 give 0 to train and 3 to validate",
                             "give a --val-fraction nearer 0.5 (0.5 gives 1 and 2), or more conversations"});
  for (const Result* r : {&alone, &held}) EXPECT_EQ(r->err.find("--train-fraction"), std::string::npos) << r->err;
  EXPECT_FALSE(fs::exists(dir_ / "one") || fs::exists(dir_ / "three")) << "a refused run wrote its directory";
}

// A conversation file as other tools write it: a UTF-8 byte order mark at its start (a
// Windows editor, Python's utf-8-sig) and a weight of 1.0 (JSON's 1) are read; a mark
// inside the file, and a weight of 0.5, are still refused naming their line.
TEST_F(CliData, ConversationsWithAByteOrderMarkAndFloatWeightsAreRead) {
  const std::string bom = "\xEF\xBB\xBF";
  const std::string weighted = R"({"messages":[{"role":"assistant","content":"8","weight":0.0},)"
                               R"({"role":"assistant","content":"9","weight":1.0}]})"
                               "\n";  // 28 tokens: within the context of 32
  const std::string good = dir_ / "good.jsonl";
  testing::spit(good, bom + weighted + copy_conversations(10));
  const Result read = folio("train --data " + good + run("good", 2));
  EXPECT_EQ(read.code, 0) << read.err;
  const std::string half = dir_ / "half.jsonl";
  std::string halved = weighted;
  halved.replace(halved.find("1.0"), 3, "0.5");
  testing::spit(half, copy_conversations(3) + halved);
  const Result refused = folio("train --data " + half + run("half", 2));
  EXPECT_EQ(refused.code, 2) << refused.err;
  expect_contains(refused.err, {half + ":4: message 1: weight must be 0 or 1, got 0.5"});
  const std::string inside = dir_ / "inside.jsonl";
  testing::spit(inside, copy_conversations(3) + bom + weighted);
  const Result mark = folio("train --data " + inside + run("inside", 2));
  EXPECT_EQ(mark.code, 2) << mark.err;
  expect_contains(mark.err, {inside + ":4: not one JSON value"});
  EXPECT_FALSE(fs::exists(dir_ / "half") || fs::exists(dir_ / "inside")) << "a refused run wrote its directory";
}

// What --resume and folio info take a run's --data to have been, from its path.
TEST_F(CliData, DataPathKindTellsTheKindsApart) {
  const std::string text_file = dir_ / "t.txt", chat = dir_ / "c.jsonl", tokens = dir_ / "tokens";
  testing::spit(text_file, "some text");
  testing::spit(chat, copy_conversations(1));
  std::filesystem::create_directories(tokens);
  EXPECT_EQ(data_path_kind(text_file), DataPathKind::text);
  EXPECT_EQ(data_path_kind(chat), DataPathKind::conversations);
  EXPECT_EQ(data_path_kind(tokens), DataPathKind::token_directory);
  EXPECT_EQ(data_path_kind(dir_ / "moved.txt"), DataPathKind::missing);
  EXPECT_EQ(data_path_kind(dir_ / "moved.jsonl"), DataPathKind::conversations);  // by its name, as --data reads it
}

// The text twin of the test above: a text edited in place under a run is refused
// naming it (exit 2, the run untouched), the same text resumes, and a state saved before
// texts had a fingerprint resumes with a warning and records one at its next save.
// (Another text named by --data is other data, a warning: the test further up.)
TEST_F(CliData, ResumeRefusesAChangedText) {
  const std::string run_dir = dir_ / "r";
  ASSERT_EQ(folio("train --data " + text() + run("r", 4)).code, 0);
  const Result info = folio("info --checkpoint " + run_dir);
  expect_contains(info.out, {"data         a text, fingerprint "});
  const Result same = folio("train --resume --data " + text() + run("r", 6));
  EXPECT_EQ(same.code, 0) << same.err;
  EXPECT_EQ(same.err.find("fingerprint"), std::string::npos) << same.err;

  // Two neighbouring characters swapped: the same length, characters and split, so
  // only the fingerprint can tell.
  const std::string original = testing::slurp(text());
  std::string edited = original;
  size_t at = 100;
  while (edited[at] == edited[at + 1]) ++at;
  std::swap(edited[at], edited[at + 1]);
  testing::spit(text(), edited);
  const testing::Snapshot before = testing::snapshot(run_dir);
  const Result changed = folio("train --resume --data " + text() + run("r", 8));
  EXPECT_EQ(changed.code, 2) << changed.err;
  expect_contains(changed.err, {text() + ": its text is not the one this run trained on (fingerprint "});
  EXPECT_EQ(testing::diff(before, testing::snapshot(run_dir)), "");

  const std::string state_file = run_dir + "/state.safetensors";
  TrainState old = load_state(state_file);
  old.data_fingerprint = "";  // as a folio before texts had one saved it
  save_state(state_file, old);
  const Result unchecked = folio("train --resume --data " + text() + run("r", 8));
  EXPECT_EQ(unchecked.code, 0) << unchecked.err;
  expect_contains(unchecked.err, {text() + ": the run's state records no fingerprint of the text it trained on"});
  EXPECT_NE(load_state(state_file).data_fingerprint, "");
  testing::spit(text(), original);
  const Result back = folio("train --resume --data " + text() + run("r", 10));
  EXPECT_EQ(back.code, 2) << back.err;
  expect_contains(back.err, {"its text is not the one this run trained on"});
}

}  // namespace
}  // namespace folio
