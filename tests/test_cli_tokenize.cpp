// folio tokenize through the binary, and a token directory's way into folio train:
// where tokenize may write, a checkpoint's tokenizer reused, fine-tuning on the result.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/checkpoint.h"
#include "io/json.h"
#include "tests/support.h"
#include "train/init_from.h"

namespace folio {
namespace {

namespace fs = std::filesystem;
using testing::expect_contains;
using testing::Result;

class CliTokenize : public testing::CliCorpusTest {
 protected:
  CliTokenize() : CliCorpusTest(false) {}  // the runs started --init-from print what they took
};

// --overwrite replaces a token directory; a folder of anything else (runs, notes) is
// refused before a byte is written, naming the folder and what it holds.
TEST_F(CliTokenize, OverwriteNeverWritesIntoAFolderOfOtherFiles) {
  for (int i = 1; i <= 4; ++i) {
    fs::create_directories(dir_.path / "runs" / ("run" + std::to_string(i)));
    testing::spit(dir_.path / "runs" / ("run" + std::to_string(i)) / "log.csv", "step\n");
  }
  fs::create_directories(dir_.path / "notes");
  testing::spit(dir_.path / "notes" / "notes.txt", "mine");
  for (const std::string overwrite : {"", " --overwrite"})
    for (const std::string out : {"runs", "notes"}) {
      const testing::Snapshot before = testing::snapshot(dir_.path / out);
      const Result r = folio("tokenize " + text() + " --tokenizer char --out " + (dir_ / out) + overwrite);
      EXPECT_EQ(r.code, 2) << out << overwrite << "\n" << r.err;
      expect_contains(r.err, {"--out " + (dir_ / out), "is not a token directory",
                              out == "runs" ? "4 entries of its own (run1/, run2/, run3/, run4/)"
                                            : "1 entry of its own (notes.txt)"});
      EXPECT_EQ(testing::diff(before, testing::snapshot(dir_.path / out)), "") << out << overwrite;
    }
  // A token directory is replaced with --overwrite, and only with it.
  ASSERT_EQ(folio("tokenize " + text() + " --tokenizer char --out " + (dir_ / "tok")).code, 0);
  const Result again = folio("tokenize " + text() + " --tokenizer char --out " + (dir_ / "tok"));
  EXPECT_EQ(again.code, 2);
  expect_contains(again.err, {"already holds a token directory", "--overwrite"});
  const Result replaced = folio("tokenize " + text() + " --tokenizer char --val-fraction 0.2 --overwrite --out " +
                                (dir_ / "tok"));
  EXPECT_EQ(replaced.code, 0) << replaced.err;
}

// A char model fine-tunes on a token directory of text it can encode: the directory's
// vocabulary is the model's characters and end-of-text, whether made with --tokenizer
// char from the same text or with --tokenizer-from the checkpoint. The model gains the
// end-of-text rows and says so; the run resumes on the directory. Another tokenizer is
// refused with the way to make a directory that fits.
TEST_F(CliTokenize, CharModelFineTunesOnATokenDirectory) {
  ASSERT_EQ(folio("train --quiet --data " + text() + run("base", 10)).code, 0);
  ASSERT_EQ(folio("tokenize " + text() + " --tokenizer char --out " + (dir_ / "chars")).code, 0);
  const Result from = folio("tokenize " + text() + " --tokenizer-from " + (dir_ / "base") + " --out " + (dir_ / "from"));
  ASSERT_EQ(from.code, 0) << from.err;
  expect_contains(from.out, {"and end-of-text"});
  for (const std::string dir : {"chars", "from"}) {
    const Result t = folio("train --init-from " + (dir_ / "base") + " --data " + (dir_ / dir) + run("tuned_" + dir, 10, false));
    ASSERT_EQ(t.code, 0) << t.err;
    expect_contains(t.out, {"vocabulary: the checkpoint's ", " ids and end-of-text", "token_embedding.weight",
                            "lm_head.weight", "start as the mean of the other rows"});
    expect_contains(folio("info --checkpoint " + (dir_ / ("tuned_" + dir))).out,
                    {"characters and end-of-text", " y z <end-of-text>\n"});
  }
  const Result resumed = folio("train --resume --quiet" + run("tuned_from", 15, false));
  EXPECT_EQ(resumed.code, 0) << resumed.err;

  // A directory of another tokenizer: refused, naming both routes.
  ASSERT_EQ(folio("tokenize " + text() + " --tokenizer bpe --vocab-size 400 --out " + (dir_ / "bpe")).code, 0);
  const Result other = folio("train --init-from " + (dir_ / "base") + " --data " + (dir_ / "bpe") + run("x", 5, false));
  EXPECT_EQ(other.code, 2);
  expect_contains(other.err, {"was tokenized with spm", "--tokenizer-from " + (dir_ / "base")});
  EXPECT_FALSE(fs::exists(dir_.path / "x" / "model.safetensors"));
  // Text the checkpoint's characters do not cover is named.
  testing::spit(dir_.path / "snow.txt", std::string(3000, 'a') + "\xE2\x98\x83");
  const Result snow = folio("tokenize " + (dir_ / "snow.txt") + " --tokenizer-from " + (dir_ / "base") + " --out " +
                            (dir_ / "snow"));
  EXPECT_EQ(snow.code, 2) << "the input is at fault, not the run";
  expect_contains(snow.err, {"snow.txt", "U+2603", "not in the model's vocabulary"});
  EXPECT_FALSE(fs::exists(dir_.path / "snow")) << "a failed run leaves nothing";
  const Result both = folio("tokenize " + text() + " --tokenizer char --tokenizer-from " + (dir_ / "base") + " --out " +
                            (dir_ / "both"));
  EXPECT_EQ(both.code, 2);
  expect_contains(both.err, {"--tokenizer and --tokenizer-from"});
}

// A character a --tokenizer-from char vocabulary lacks is bad input found before a
// byte is written: an earlier token directory --overwrite would replace stays whole,
// and the character is named where it is in its file, far past the first block.
TEST_F(CliTokenize, UnknownCharacterIsFoundBeforeWritingAndPlacedInItsFile) {
  ASSERT_EQ(folio("train --quiet --data " + text() + run("base", 2)).code, 0);
  ASSERT_EQ(folio("tokenize " + text() + " --tokenizer-from " + (dir_ / "base") + " --out " + (dir_ / "old")).code, 0);
  const testing::Snapshot old = testing::snapshot(dir_.path / "old");
  const std::string known = testing::slurp(dir_.path / "text.txt");
  std::string late;  // the snowman after 10 copies of known text: character 10 * |known|
  for (int i = 0; i < 10; ++i) late += known;
  const size_t at = late.size();
  late += "\xE2\x98\x83\n" + known;
  testing::spit(dir_.path / "late.txt", late);
  const Result r = folio("tokenize " + (dir_ / "late.txt") + " --tokenizer-from " + (dir_ / "base") +
                         " --overwrite --out " + (dir_ / "old"));
  EXPECT_EQ(r.code, 2) << r.err;
  expect_contains(r.err, {dir_ / "late.txt", "U+2603", "at position " + std::to_string(at) + " ", "not in the model's vocabulary"});
  EXPECT_EQ(testing::diff(old, testing::snapshot(dir_.path / "old")), "") << "bad input replaced the old directory";
}

// A SentencePiece model fine-tunes on a directory made with its own model: from the
// checkpoint, or exported to a .model file first; the message for another names both.
TEST_F(CliTokenize, BpeModelFineTunesOnADirectoryOfItsTokenizer) {
  ASSERT_EQ(folio("train --quiet --tokenizer bpe --vocab-size 400 --data " + text() + run("base", 5)).code, 0);
  ASSERT_EQ(folio("info --checkpoint " + (dir_ / "base") + " --export-tokenizer " + (dir_ / "m.model")).code, 0);
  ASSERT_EQ(folio("tokenize " + text() + " --tokenizer " + (dir_ / "m.model") + " --out " + (dir_ / "file")).code, 0);
  ASSERT_EQ(folio("tokenize " + text() + " --tokenizer-from " + (dir_ / "base") + " --out " + (dir_ / "from")).code, 0);
  for (const std::string dir : {"file", "from"}) {
    const Result t = folio("train --init-from " + (dir_ / "base") + " --data " + (dir_ / dir) + run("tuned_" + dir, 5, false));
    EXPECT_EQ(t.code, 0) << t.err;
    EXPECT_EQ(t.out.find("vocabulary:"), std::string::npos) << "the same tokenizer: nothing grows";
  }
  ASSERT_EQ(folio("tokenize " + text() + " --tokenizer bpe --vocab-size 500 --out " + (dir_ / "other")).code, 0);
  const Result other = folio("train --init-from " + (dir_ / "base") + " --data " + (dir_ / "other") + run("x", 5, false));
  EXPECT_EQ(other.code, 2);
  expect_contains(other.err, {"--tokenizer-from " + (dir_ / "base"), "--export-tokenizer", "--tokenizer FILE.model"});
}

// The grown model: every table indexed by token keeps its rows where the tokens are
// (the bigram table's pairs move to their new places) and the new rows are the mean of
// the old; every other weight is the checkpoint's.
TEST(InitFrom, NewTokenRowsAreTheMeanOfTheOld) {
  nn::GPTConfig c;
  c.vocab_size = 5, c.block_size = 8, c.n_layer = 1, c.n_head = 2, c.n_embd = 8;
  c.bigram = c.value_embed = true, c.mtp = 0.5f;
  ModelCheckpoint ck{std::make_unique<nn::GPT>(c), make_tokenizer({"char"}, "abcde"), 0, "ck"};
  const InitModel grown = model_from(ck, c, false, 6);
  ASSERT_EQ(grown.model->config().vocab_size, 6);
  const nn::NamedParameters old = ck.model->named_parameters(), now = grown.model->named_parameters();
  ASSERT_EQ(old.size(), now.size());
  const int64_t V = 5;
  std::vector<std::string> grown_names;
  for (size_t k = 0; k < old.size(); ++k) {
    const auto& [name, from] = old[k];
    const Tensor& to = now[k].second;
    ASSERT_EQ(name, now[k].first);
    if (from.numel() == to.numel()) {
      EXPECT_TRUE(std::equal(from.data(), from.data() + from.numel(), to.data())) << name;
      continue;
    }
    grown_names.push_back(name);
    const int64_t width = from.numel() / from.shape()[0];
    auto row = [&](const Tensor& t, int64_t r) { return std::vector<float>(t.data() + r * width, t.data() + (r + 1) * width); };
    std::vector<double> mean(static_cast<size_t>(width), 0.0);
    for (int64_t r = 0; r < from.shape()[0]; ++r)
      for (int64_t i = 0; i < width; ++i) mean[size_t(i)] += from.data()[r * width + i] / double(from.shape()[0]);
    if (name == "bigram_embedding.weight") {
      EXPECT_EQ(row(to, 2 * (V + 1) + 3), row(from, 2 * V + 3));      // the pair (2, 3)
      EXPECT_EQ(row(to, (V + 1) * (V + 1) + 4), row(from, V * V + 4));  // 4 first in a sequence
      EXPECT_NEAR(to.data()[(2 * (V + 1) + V) * width], mean[0], 1e-6);  // (2, end-of-text): new
    } else {
      EXPECT_EQ(row(to, 3), row(from, 3)) << name;
      for (int64_t i = 0; i < width; ++i) EXPECT_NEAR(to.data()[V * width + i], mean[size_t(i)], 1e-6) << name;
    }
  }
  EXPECT_EQ(grown_names, (std::vector<std::string>{"token_embedding.weight", "lm_head.weight", "lm_head.bias",
                                                   "bigram_embedding.weight", "value_embeddings.0.weight",
                                                   "mtp_head.weight", "mtp_head.bias"}));
}

// --include 'a/**/*.h' takes the headers at any depth below a/, a/ itself included.
TEST_F(CliTokenize, DoubleStarMatchesAnyDepth) {
  int expected = 0;
  for (const std::string sub : {"", "b/", "b/c/", "b/c/d/"})
    for (int i = 0; i < 6; ++i) {
      fs::create_directories(dir_.path / "tree" / "a" / sub);
      const std::string n = std::to_string(i);
      testing::spit(dir_.path / "tree" / ("a/" + sub + "h" + n + ".h"), "int x" + n + ";\n");
      testing::spit(dir_.path / "tree" / ("a/" + sub + "c" + n + ".c"), "int y;\n");
      ++expected;
    }
  fs::create_directories(dir_.path / "tree" / "z");
  testing::spit(dir_.path / "tree" / "z" / "other.h", "int z;\n");
  const Result r = folio("tokenize " + (dir_ / "tree") +
                         " --include 'a/**/*.h' --tokenizer char --val-fraction 0.5 --out " + (dir_ / "tok"));
  ASSERT_EQ(r.code, 0) << r.err;
  const Json m = Json::parse(testing::slurp(dir_.path / "tok" / "manifest.json"));
  const Json& splits = *m.find("splits");
  EXPECT_EQ(splits.find("train")->find("documents")->as_int() + splits.find("val")->find("documents")->as_int(), expected);
}

// Standard input with no document in it (empty, as the test's /dev/null is, or binary)
// is bad input saying so, not a crash, and leaves no copy of it behind.
TEST_F(CliTokenize, EmptyStandardInputIsAnErrorNotACrash) {
  const Result r = folio("tokenize - --tokenizer char --out " + (dir_ / "tok"));
  EXPECT_TRUE(r.exit.exited) << "killed by signal " << r.exit.signal;
  EXPECT_EQ(r.code, 2) << r.err;
  expect_contains(r.err, {"standard input has no text: it is empty"});
  EXPECT_FALSE(fs::exists(dir_.path / "tok")) << "--out did not exist before: not after either";
}

// Bad input exits 2 naming the option or file, and leaves --out as it was: absent if
// it was, an earlier token directory intact even with --overwrite. Some is known from
// the options (prepare), some only by reading the text or training on it (the run).
TEST_F(CliTokenize, BadInputExitsTwoAndLeavesTheOutputAsItWas) {
  testing::spit(dir_.path / "one.txt", "a");
  fs::create_directories(dir_.path / "empties");
  testing::spit(dir_.path / "empties" / "a.txt", "");
  testing::spit(dir_.path / "empties" / "b.txt", "");
  ASSERT_EQ(folio("tokenize " + text() + " --tokenizer char --out " + (dir_ / "old")).code, 0);
  const testing::Snapshot old = testing::snapshot(dir_.path / "old");
  const std::pair<std::string, std::vector<std::string>> cases[] = {
      {text() + " --shard-tokens 0", {"--shard-tokens must be in [1, "}},
      {text() + " --tokenizer " + (dir_ / "absent"), {"--tokenizer " + (dir_ / "absent"), ".model", "vocab.json", ".tiktoken"}},
      {text() + " --sample-mb 8796093022208", {"--sample-mb must be in [1, ", "got 8796093022208"}},  // 2^63 bytes
      {text() + " --vocab-size 100", {"--vocab-size 100 is too small for bpe", "at least 260"}},
      {text() + " --vocab-size 100000", {"--vocab-size 100000 is more than bpe can make of this text"}},
      {dir_ / "one.txt", {dir_ / "one.txt", "1 characters are too few to split"}},
      {dir_ / "empties", {dir_ / "empties", "no readable, non-empty text file"}},
  };
  for (const auto& [args, expected] : cases) {
    const Result r = folio("tokenize " + args + " --out " + (dir_ / "new"));
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    for (const std::string& e : expected) expect_contains(r.err, {e});
    EXPECT_FALSE(fs::exists(dir_.path / "new")) << args;
    const Result over = folio("tokenize " + args + " --overwrite --out " + (dir_ / "old"));
    EXPECT_EQ(over.code, 2) << args << "\n" << over.err;
    EXPECT_EQ(testing::diff(old, testing::snapshot(dir_.path / "old")), "") << args;
  }
}

// Bad standard input is named "standard input", never the copy folio keeps of it, and
// the copy goes with the failed run. (The test's children read /dev/null: a shell
// feeds this one a file.)
TEST_F(CliTokenize, BadStandardInputIsNamedSoAndLeavesNoCopy) {
  testing::spit(dir_.path / "one.txt", "a");
  const std::string err = dir_ / "stdin_err.txt";
  const int status = std::system((std::string("'") + FOLIO_BINARY + "' tokenize - --tokenizer char --out '" +
                                  (dir_ / "tok") + "' < '" + (dir_ / "one.txt") + "' 2> '" + err + "' > /dev/null")
                                     .c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
  const std::string message = testing::slurp(err);
  expect_contains(message, {"standard input: 1 characters are too few to split"});
  EXPECT_EQ(message.find(".stdin.txt"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(dir_.path / "tok")) << "no marker, no copy of standard input, no directory";
}


// A symbolic link that leads nowhere (a loop, or a target that is gone) is an
// unreadable file: skipped with a warning naming it and counted, never dropped without
// a word; given as the input itself it is refused for what it is.
TEST_F(CliTokenize, BrokenSymbolicLinksAreNamedNotDroppedSilently) {
  fs::create_directories(dir_.path / "tree");
  fs::copy_file(text(), dir_.path / "tree" / "a.txt");
  fs::copy_file(text(), dir_.path / "tree" / "b.txt");
  fs::create_symlink("loop.txt", dir_.path / "tree" / "loop.txt");
  fs::create_symlink(dir_ / "gone.txt", dir_.path / "tree" / "gone.txt");
  const Result r = folio("tokenize " + (dir_ / "tree") + " --tokenizer char --out " + (dir_ / "tok"));
  EXPECT_EQ(r.code, 0) << r.err;
  expect_contains(r.err, {dir_ / "tree/loop.txt", dir_ / "tree/gone.txt", "skipped"});
  const Json m = Json::parse(testing::slurp(dir_.path / "tok" / "manifest.json"));
  EXPECT_EQ(m.find("skipped_files")->as_int(), 2);
  const Result loop = folio("tokenize " + (dir_ / "tree/loop.txt") + " --tokenizer char --out " + (dir_ / "x"));
  EXPECT_EQ(loop.code, 2);
  expect_contains(loop.err, {dir_ / "tree/loop.txt", "symbolic link"});
  EXPECT_EQ(loop.err.find("no such file"), std::string::npos) << loop.err;
  EXPECT_FALSE(fs::exists(dir_.path / "x"));
}

// A path that is not UTF-8 (a Latin-1 folder name, which Linux allows) is text the
// manifest holds with U+FFFD for its stray byte: the run writes its manifest and
// trains, where the JSON writer refused the byte after all the work (exit 1).
TEST_F(CliTokenize, InputPathThatIsNotUtf8StillGivesAManifest) {
  const std::string latin1 = "caf\xE9";
  fs::create_directories(dir_.path / latin1);
  fs::copy_file(text(), dir_.path / latin1 / "a.txt");
  const Result r = folio("tokenize " + (dir_ / latin1) + " --tokenizer char --out " + (dir_ / "tok"));
  ASSERT_EQ(r.code, 0) << r.err;
  const Json m = Json::parse(testing::slurp(dir_.path / "tok" / "manifest.json"));
  expect_contains(m.find("inputs")->as_array().at(0).as_string(), {"caf\xEF\xBF\xBD"});
  const Result t = folio("train --data " + (dir_ / "tok") + run("r", 1));
  EXPECT_EQ(t.code, 0) << t.err;
  // folio train refuses such a --data path (a checkpoint records it): so does tokenize
  // its --out, before the work, rather than print a "train on it with" that fails.
  const Result out = folio("tokenize " + text() + " --tokenizer char --out " + (dir_ / latin1) + "_tok");
  EXPECT_EQ(out.code, 2) << out.err;
  expect_contains(out.err, {"--out", "not valid UTF-8"});
  EXPECT_FALSE(fs::exists(dir_.path / (latin1 + "_tok")));
}

// An --out inside the input directory is not input: tokenizing the folder again with
// --overwrite takes the same documents, not the old manifest.json (which it then
// deleted as it read it, failing with the old directory gone).
TEST_F(CliTokenize, OutputInsideTheInputIsNotADocument) {
  fs::create_directories(dir_.path / "corpus");
  fs::copy_file(text(), dir_.path / "corpus" / "a.txt");
  fs::copy_file(text(), dir_.path / "corpus" / "b.txt");
  const std::string args = "tokenize " + (dir_ / "corpus") + " --tokenizer char --out " + (dir_ / "corpus/tok");
  ASSERT_EQ(folio(args).code, 0);
  const std::string first = testing::slurp(dir_.path / "corpus" / "tok" / "manifest.json");
  const Result again = folio(args + " --overwrite");
  ASSERT_EQ(again.code, 0) << again.err;
  const std::string second = testing::slurp(dir_.path / "corpus" / "tok" / "manifest.json");
  const auto splits = [](const std::string& m) { return Json::parse(m).find("splits")->dump(); };
  EXPECT_EQ(splits(first), splits(second));
  const testing::Snapshot before = testing::snapshot(dir_.path / "corpus" / "tok");
  const Result itself = folio("tokenize " + (dir_ / "corpus/tok") + " --tokenizer char --overwrite --out " +
                              (dir_ / "corpus/tok"));
  EXPECT_EQ(itself.code, 2) << itself.err;
  expect_contains(itself.err, {"is --out itself"});
  EXPECT_EQ(testing::diff(before, testing::snapshot(dir_.path / "corpus" / "tok")), "");
}

// A run killed while it copies standard input leaves a directory folio train refuses
// as unfinished (not as a folder of text to tokenize), and the next run redoes it.
TEST_F(CliTokenize, KilledWhileReadingStandardInputLeavesAnUnfinishedDirectory) {
  const std::string fifo = dir_ / "in.fifo", out = dir_ / "tok";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int in = ::open(fifo.c_str(), O_RDONLY);
    const int null = ::open("/dev/null", O_WRONLY);
    if (in < 0 || null < 0) ::_exit(127);
    ::dup2(in, 0), ::dup2(null, 1), ::dup2(null, 2);
    ::execl(FOLIO_BINARY, FOLIO_BINARY, "tokenize", "-", "--tokenizer", "char", "--out", out.c_str(), (char*)nullptr);
    ::_exit(127);
  }
  const int writer = ::open(fifo.c_str(), O_WRONLY);  // waits for folio to open it
  ASSERT_GE(writer, 0);
  const std::string corpus = testing::slurp(dir_.path / "text.txt");
  ASSERT_EQ(::write(writer, corpus.data(), corpus.size()), ssize_t(corpus.size()));
  // Standard input stays open: folio is still copying it when it is killed.
  const auto copied = [&] {
    std::error_code ec;
    const auto size = fs::file_size(dir_.path / "tok" / ".stdin.txt", ec);
    return !ec && size == corpus.size();
  };
  for (int i = 0; i < 60000 && !copied(); ++i) ::usleep(1000);
  ASSERT_TRUE(copied()) << "folio never copied its input";
  ::kill(pid, SIGKILL);
  EXPECT_EQ(testing::wait_child(pid, 60).signal, SIGKILL);
  ::close(writer);
  const Result train = folio("train --data " + out + run("r", 1));
  EXPECT_EQ(train.code, 2) << train.err;
  expect_contains(train.err, {"folio tokenize did not finish writing it"});
  const Result again = folio("tokenize " + text() + " --tokenizer char --out " + out);
  EXPECT_EQ(again.code, 0) << again.err;
  EXPECT_FALSE(fs::exists(dir_.path / "tok" / ".stdin.txt"));
}

}  // namespace
}  // namespace folio
