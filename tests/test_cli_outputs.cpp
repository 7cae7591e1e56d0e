// What the commands write where the user says: a file or directory already there is
// refused (exit 2, naming it and --overwrite) by every command, and left as it was;
// --overwrite replaces it; an output that cannot be written is exit 2 before any
// work. Then what those outputs hold: HF's directory only with a tokenizer that goes
// in it, the attention table's columns in line, serve's banner naming its weights.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/error.h"
#include "data/base64.h"
#include "support.h"

namespace folio {
namespace {

namespace fs = std::filesystem;
using testing::expect_contains;
using testing::Result;
using testing::slurp;
using testing::spit;

class CliOutputs : public testing::CliCorpusTest {
 protected:
  std::string p(const std::string& name) const { return dir_ / name; }
  // Runs `args`, which must be refused with exit 2 naming `path` and --overwrite,
  // with nothing under the test's directory created, changed or removed.
  void expect_refused(const std::string& args, const std::string& path) const {
    const auto before = testing::snapshot(dir_.path);
    const Result r = folio(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    expect_contains(r.err, {path, "--overwrite replaces"});
    EXPECT_EQ(testing::diff(before, testing::snapshot(dir_.path)), "") << args;
  }
};

// GPT-2's byte-level BPE, small: the 256 bytes, then merges that make tokens a table
// must make room for: "日" (3 bytes, two terminal columns) and "eeeeeeee" (8 letters).
std::string tiktoken_file() {
  std::string lines;
  int rank = 0;
  for (int b = 0; b < 256; ++b) lines += base64_encode(std::string(1, static_cast<char>(b))) + " " + std::to_string(rank++) + "\n";
  for (const std::string t : {"he", "the", " the", "\xE6\x97", "\xE6\x97\xA5", "ee", "eeee", "eeeeeeee"})
    lines += base64_encode(t) + " " + std::to_string(rank++) + "\n";
  return lines;
}

// GPT-2's shape, which export --format hf writes.
const std::string kGpt2Shape = " --activation gelu-tanh --gpt2-biases --tie-weights";

TEST_F(CliOutputs, EveryCommandRefusesToReplaceWhatIsThereUnlessOverwrite) {
  ASSERT_EQ(folio("train --data " + text() + run("run", 2) + " --activation gelu --no-bias --pos rope").code, 0);
  ASSERT_EQ(folio("train --data " + text() + run("other", 2)).code, 0);
  const std::string corpus = slurp(text());
  spit(dir_ / "mine.gguf", "mine");
  fs::create_directories(dir_ / "hf");
  spit(dir_ / "hf/config.json", "{\"mine\": true}");

  expect_refused("export " + p("run") + " " + p("mine.gguf"), p("mine.gguf"));
  expect_refused("export --format hf " + p("run") + " " + p("hf"), p("hf") + ": already holds config.json");
  expect_refused("attention --checkpoint " + p("run") + " --prompt 'To be' --out " + text(), "--out " + text());
  expect_refused("attention --checkpoint " + p("run") + " --prompt 'To be' --format svg --out " + text(), text());
  expect_refused("plot " + p("run") + " --out " + text(), "--out " + text());
  expect_refused("import " + p("other") + " --from " + text(), p("other") + ": already holds model.safetensors");
  // The default --out of plot is a path the user named too, by leaving it.
  spit(dir_ / "loss.svg", "mine");
  const auto before = testing::snapshot(dir_.path);
  const Result plot = testing::run_folio(testing::words("plot " + p("run")), dir_.path, 300, {}, dir_.path);
  EXPECT_EQ(plot.code, 2) << plot.err;
  expect_contains(plot.err, {"--out loss.svg: already exists", "--overwrite"});
  EXPECT_EQ(testing::diff(before, testing::snapshot(dir_.path)), "");
  EXPECT_EQ(slurp(text()), corpus);

  // --overwrite replaces each, atomically (no temp file is left beside it).
  const Result gguf = folio("export " + p("run") + " " + p("mine.gguf") + " --overwrite");
  ASSERT_EQ(gguf.code, 0) << gguf.err;
  EXPECT_EQ(slurp(dir_ / "mine.gguf").substr(0, 4), "GGUF");
  const Result att = folio("attention --checkpoint " + p("run") + " --prompt 'To be' --out " + p("att.txt"));
  ASSERT_EQ(att.code, 0) << att.err;
  const Result again = folio("attention --checkpoint " + p("run") + " --prompt 'be' --out " + p("att.txt") + " --overwrite");
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(slurp(dir_ / "att.txt").find("To"), std::string::npos);
  EXPECT_EQ(folio("plot " + p("run") + " --out " + p("loss.svg") + " --overwrite").code, 0);
  EXPECT_NE(slurp(dir_ / "loss.svg").find("<svg"), std::string::npos);
  // import --overwrite replaces the whole run: no best weights or state of the old
  // one are left to pair with the new weights.
  const Result gguf2 = folio("export " + p("run") + " " + p("run.gguf"));
  ASSERT_EQ(gguf2.code, 0) << gguf2.err;
  ASSERT_TRUE(fs::exists(dir_ / "other/best.safetensors"));
  const Result imp = folio("import " + p("other") + " --from " + p("run.gguf") + " --overwrite");
  ASSERT_EQ(imp.code, 0) << imp.err;
  EXPECT_TRUE(fs::exists(dir_ / "other/model.safetensors"));
  for (const char* stale : {"best.safetensors", "state.safetensors", "log.csv"})
    EXPECT_FALSE(fs::exists(dir_.path / "other" / stale)) << stale;
  for (const auto& e : fs::directory_iterator(dir_.path))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
}

// A writer killed before its rename (a long export SIGKILLed) leaves OUT.tmp.PID: the
// next write to OUT removes it, and never the temp file of a live process or another OUT.
TEST_F(CliOutputs, AWriteRemovesTheTempFilesOfDeadWritersOfItsFile) {
  ASSERT_EQ(folio("train --data " + text() + run("run", 2) + " --activation gelu --no-bias --pos rope").code, 0);
  const pid_t child = ::fork();  // a process that is gone: its pid names a dead writer
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  const std::string dead = p(cat("out.gguf.tmp.", child)), live = p(cat("out.gguf.tmp.", ::getpid())),
                    other = p(cat("other.gguf.tmp.", child));
  for (const std::string& f : {dead, live, other}) spit(f, "half a file");
  const Result r = folio("export " + p("run") + " " + p("out.gguf"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(other));
}

// An output in a directory that is not there, or cannot take files, is bad input
// found before the work: exit 2 naming it, as for every other command.
TEST_F(CliOutputs, AnOutputThatCannotBeWrittenIsExitTwo) {
  ASSERT_EQ(folio("train --data " + text() + run("run", 2) + " --activation gelu --no-bias --pos rope").code, 0);
  for (const std::string& out : {p("nope/m.gguf"), std::string("/proc/folio.gguf"), p("run")}) {
    const Result r = folio("export " + p("run") + " " + out);
    EXPECT_EQ(r.code, 2) << out << "\n" << r.err;
    expect_contains(r.err, {out});
  }
  spit(dir_ / "file", "x");
  for (const std::string& out : {std::string("/proc/folio-hf"), p("file"), p("file/hf")}) {
    const Result r = folio("export --format hf " + p("run") + " " + out);
    EXPECT_EQ(r.code, 2) << out << "\n" << r.err;
    expect_contains(r.err, {out});
  }
}

// An output path that is no regular file (a FIFO here, as /dev/null is a device, or a link)
// is refused, --overwrite or not: the output is renamed over what is there, which would
// replace the FIFO, or /dev/null for everyone on the machine, or the link, with a file.
TEST_F(CliOutputs, OverwriteNeverReplacesWhatIsNotAFile) {
  ASSERT_EQ(folio("train --data " + text() + run("run", 2) + " --activation gelu --no-bias --pos rope").code, 0);
  ASSERT_EQ(::mkfifo(p("fifo").c_str(), 0644), 0);
  fs::create_symlink(p("fifo"), p("link"));
  fs::create_directories(dir_ / "hf");
  ASSERT_EQ(::mkfifo(p("hf/config.json").c_str(), 0644), 0);
  for (const std::string& args :
       {"export " + p("run") + " " + p("fifo"), "export " + p("run") + " " + p("link"),
        "attention --checkpoint " + p("run") + " --prompt 'To be' --out " + p("fifo"),
        "plot " + p("run") + " --out " + p("link"),
        "export --format hf " + p("run") + " " + p("hf"), "export " + p("run") + " " + p("fifo") + " --overwrite",
        "attention --checkpoint " + p("run") + " --prompt 'To be' --out " + p("link") + " --overwrite",
        "export --format hf " + p("run") + " " + p("hf") + " --overwrite"}) {
    const auto before = testing::snapshot(dir_.path);
    const Result r = folio(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    const bool link = args.find(p("link")) != std::string::npos;
    expect_contains(r.err, {link ? " is a symbolic link" : " is a FIFO", ", not a regular file",
                            "give a regular file's path"});
    EXPECT_EQ(testing::diff(before, testing::snapshot(dir_.path)), "") << args;
  }
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(p("fifo"))) && fs::is_symlink(fs::symlink_status(p("link"))));
}

// "-", standard output to other tools, is refused as a path: it made a file named "-" in
// the working directory (the commands that print by default do so without the option).
TEST_F(CliOutputs, ADashIsNoOutputPath) {
  ASSERT_EQ(folio("train --data " + text() + run("run", 2)).code, 0);
  for (const std::string& args : {"plot " + p("run") + " --out -", "attention --checkpoint " + p("run") +
                                  " --prompt 'To be' --out -", "export " + p("run") + " - --overwrite"}) {
    const auto before = testing::snapshot(dir_.path);
    const Result r = folio(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    expect_contains(r.err, {"'-' is no path here"});
    EXPECT_EQ(testing::diff(before, testing::snapshot(dir_.path)), "") << args;
  }
}

// --overwrite replaces an earlier output, never the file the command reads: an export
// onto its own checkpoint, an HF export into its own run, an import onto the files it
// imports are each refused (exit 2, naming the input) with nothing changed.
TEST_F(CliOutputs, OverwriteNeverReplacesTheInput) {
  spit(dir_ / "tiny.tiktoken", tiktoken_file());
  ASSERT_EQ(folio("train --data " + text() + run("run", 2) + " --activation gelu --no-bias --pos rope").code, 0);
  ASSERT_EQ(folio("train --data " + text() + run("bpe", 2) + " --tokenizer " + p("tiny.tiktoken") + kGpt2Shape).code, 0);
  ASSERT_EQ(folio("export --format hf " + p("bpe") + " " + p("hf")).code, 0);
  fs::create_directories(dir_ / "g");
  ASSERT_EQ(folio("export " + p("run") + " " + p("g/model.safetensors")).code, 0);  // a GGUF, oddly named
  const auto refused = [&](const std::string& args, const std::string& input) {
    const auto before = testing::snapshot(dir_.path);
    const Result r = folio(args + " --overwrite");
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    expect_contains(r.err, {"would replace " + input, "which this command reads"});
    EXPECT_EQ(testing::diff(before, testing::snapshot(dir_.path)), "") << args;
  };
  refused("export " + p("run") + " " + p("run/model.safetensors"), p("run/model.safetensors"));
  refused("export " + p("run/best.safetensors") + " " + p("bpe/../run/best.safetensors"), p("run/best.safetensors"));
  refused("export --format hf " + p("bpe") + " " + p("bpe"), p("bpe/model.safetensors"));
  refused("import " + p("hf") + " --from-hf " + p("hf"), p("hf/model.safetensors"));
  refused("import " + p("g") + " --from " + p("g/model.safetensors"), p("g/model.safetensors"));
  EXPECT_EQ(folio("generate --checkpoint " + p("bpe") + " --max-new-tokens 3").code, 0);
}

// HF's directory with GPT-2's byte-level BPE: written, refused a second time,
// replaced with --overwrite, and imported back. Any other tokenizer is refused: the
// directory would hold weights nothing could tokenize for.
TEST_F(CliOutputs, HfExportHoldsItsTokenizerOrIsRefused) {
  spit(dir_ / "tiny.tiktoken", tiktoken_file());
  ASSERT_EQ(folio("train --data " + text() + run("bpe", 2) + " --tokenizer " + p("tiny.tiktoken") + kGpt2Shape).code, 0);
  const Result e = folio("export --format hf " + p("bpe") + " " + p("hf"));
  ASSERT_EQ(e.code, 0) << e.err;
  for (const char* f : {"config.json", "model.safetensors", "vocab.json", "merges.txt"})
    EXPECT_TRUE(fs::exists(dir_.path / "hf" / f)) << f;
  expect_refused("export --format hf " + p("bpe") + " " + p("hf"), p("hf") + ": already holds config.json, model");
  const Result over = folio("export --format hf " + p("bpe") + " " + p("hf") + " --overwrite");
  ASSERT_EQ(over.code, 0) << over.err;
  const Result back = folio("import " + p("back") + " --from-hf " + p("hf"));
  EXPECT_EQ(back.code, 0) << back.err;
  // The directory where a run goes: named as HF's, with the import that reads it.
  const Result gen = folio("generate --checkpoint " + p("hf") + " --max-new-tokens 2");
  EXPECT_EQ(gen.code, 2) << gen.err;
  expect_contains(gen.err, {p("hf") + "/model.safetensors", "folio import RUN --from-hf DIR"});

  ASSERT_EQ(folio("train --data " + text() + run("spm", 2) + " --tokenizer bpe --vocab-size 400" + kGpt2Shape).code, 0);
  ASSERT_EQ(folio("train --data " + text() + run("chars", 2) + kGpt2Shape).code, 0);
  for (const char* other : {"spm", "chars"}) {
    const auto before = testing::snapshot(dir_.path);
    const Result r = folio("export --format hf " + p(other) + " " + p("hf-other"));
    EXPECT_EQ(r.code, 2) << r.err;
    expect_contains(r.err, {"maps to no HF GPT2LMHeadModel", "the tokenizer, ", "vocab.json, merges.txt",
                            "folio export (GGUF)"});
    EXPECT_EQ(testing::diff(before, testing::snapshot(dir_.path)), "");
  }
}

// A chat model in GPT-2's shape, with GPT-2's kind of tokenizer, has nothing else HF's
// directory refuses: its chat tokens are a refusal like the others, exit 2 with
// nothing written, and not a failure after the checks.
TEST_F(CliOutputs, HfExportRefusesAChatModelAsBadInput) {
  spit(dir_ / "tiny.tiktoken", tiktoken_file());
  ASSERT_EQ(folio("train --data " + text() + run("bpe", 2) + " --tokenizer " + p("tiny.tiktoken") + kGpt2Shape).code, 0);
  const std::string turn = R"({"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"ho"}]})";
  spit(dir_ / "chat.jsonl", turn + "\n" + turn + "\n" + turn + "\n");
  const Result chat = folio("train --init-from " + p("bpe") + " --data " + p("chat.jsonl") + run("chat", 2, false));
  ASSERT_EQ(chat.code, 0) << chat.err;
  const auto before = testing::snapshot(dir_.path);
  const Result r = folio("export --format hf " + p("chat") + " " + p("hf"));
  EXPECT_EQ(r.code, 2) << r.err;
  expect_contains(r.err, {"maps to no HF GPT2LMHeadModel", "<|im_start|>"});
  EXPECT_EQ(testing::diff(before, testing::snapshot(dir_.path)), "");
}

// A SwiGLU model is refused for its activation, the option its user gave, and not for
// a --ffn-hidden they never gave; a width they did give is GPT-2's n_inner.
TEST_F(CliOutputs, HfRefusalsNameTheOptionsTheUserSet) {
  ASSERT_EQ(folio("train --data " + text() + run("swiglu", 2) + kGpt2Shape + " --activation swiglu").code, 0);
  const Result r = folio("export --format hf " + p("swiglu") + " " + p("hf"));
  EXPECT_EQ(r.code, 2) << r.err;
  expect_contains(r.err, {"--activation swiglu"});
  EXPECT_EQ(r.err.find("--ffn-hidden"), std::string::npos) << r.err;
  spit(dir_ / "tiny.tiktoken", tiktoken_file());  // GPT-2's kind of tokenizer, which HF's directory holds
  ASSERT_EQ(folio("train --data " + text() + run("wide", 2) + " --tokenizer " + p("tiny.tiktoken") + kGpt2Shape +
                  " --ffn-hidden 64")
                .code,
            0);
  const Result w = folio("export --format hf " + p("wide") + " " + p("hf"));
  EXPECT_EQ(w.code, 0) << w.err;
  expect_contains(slurp(p("hf") + "/config.json"), {"\"n_inner\":64"});
}

// folio info --export-tokenizer writes a SentencePiece .model; every other kind is
// refused (exit 2, nothing written) with what is true of that kind, and a pointer that
// works where there is one: the commands it names are run here.
TEST_F(CliOutputs, ExportTokenizerSaysWhatEachKindHasInsteadOfAFile) {
  spit(dir_ / "tiny.tiktoken", tiktoken_file());
  std::string cjk;  // 300 characters, more than folio info lists
  for (char32_t c = 0x4E00; c < 0x4E00 + 300; ++c)
    cjk += {char(0xE0 | (c >> 12)), char(0x80 | ((c >> 6) & 0x3F)), char(0x80 | (c & 0x3F))};
  std::string cjk_text;
  for (int i = 0; i < 10; ++i) cjk_text += cjk;
  spit(dir_ / "cjk.txt", cjk_text);
  fs::create_directories(dir_.path / "nano");  // nanoGPT's raw uint16 ids, no tokenizer
  std::string ids;
  for (int i = 0; i < 3000; ++i) ids += {char(i % 251), '\0'};
  spit(dir_ / "nano/train.bin", ids);
  spit(dir_ / "nano/val.bin", ids.substr(0, 600));
  ASSERT_EQ(folio("train --data " + text() + run("chars", 2)).code, 0);
  ASSERT_EQ(folio("train --data " + p("cjk.txt") + run("cjk", 2)).code, 0);
  ASSERT_EQ(folio("train --data " + p("nano") + " --vocab-size 300" + run("ids", 2)).code, 0);
  ASSERT_EQ(folio("train --data " + text() + run("gpt2", 2) + " --tokenizer " + p("tiny.tiktoken") + kGpt2Shape).code, 0);
  ASSERT_EQ(folio("train --data " + text() + run("other", 2) + " --tokenizer " + p("tiny.tiktoken")).code, 0);

  const auto refused = [&](const std::string& run, std::initializer_list<std::string> fragments) {
    const auto before = testing::snapshot(dir_.path);
    const Result r = folio("info --checkpoint " + p(run) + " --export-tokenizer " + p("x.model"));
    EXPECT_EQ(r.code, 2) << r.err;
    expect_contains(r.err, {"--export-tokenizer: " + p(run) + "/model.safetensors holds the tokenizer "});
    expect_contains(r.err, fragments);
    EXPECT_EQ(testing::diff(before, testing::snapshot(dir_.path)), "") << run;
  };
  refused("chars", {"holds the tokenizer char, ", "no file format of its own (folio info lists its characters)"});
  expect_contains(folio("info --checkpoint " + p("chars")).out, {"\nvocabulary   "});
  refused("cjk", {"holds the tokenizer char, 300 characters", "its ids are the characters of the text it was trained on",
                  "folio tokens --checkpoint " + p("cjk") + " --text T"});
  EXPECT_EQ(folio("info --checkpoint " + p("cjk")).out.find("vocabulary   "), std::string::npos) << "too many to list";
  EXPECT_EQ(folio("tokens --checkpoint " + p("cjk") + " --text \xE4\xB8\x80 --format ids").out, "0\n");
  refused("ids", {"holds the tokenizer ids, 300 token ids", "it holds only the vocabulary size of token files made elsewhere"});
  for (const char* run : {"gpt2", "other"}) {
    refused(run, {"holds the tokenizer bytebpe (GPT-2's pattern), ", "GPT-2's byte-level BPE, whose vocabulary and merges the "
                  "checkpoint carries; --export-tokenizer writes a SentencePiece .model, which cannot hold them"});
    EXPECT_EQ(folio("info --checkpoint " + p(run) + " --export-tokenizer " + p("x.model")).err.find("lists its"),
              std::string::npos);
  }
  refused("gpt2", {"folio export --format hf " + p("gpt2") + " DIR writes them as DIR/vocab.json and DIR/merges.txt"});
  const Result hf = folio("export --format hf " + p("gpt2") + " " + p("hf"));
  EXPECT_EQ(hf.code, 0) << hf.err;
  EXPECT_TRUE(fs::exists(dir_.path / "hf/vocab.json") && fs::exists(dir_.path / "hf/merges.txt"));
  refused("other", {"folio export --format hf writes them (vocab.json, merges.txt) only with a model HF's GPT-2 "
                    "holds, which this one is not (folio export --format hf " + p("other") + " DIR says why)",
                    "the files the tokenizer came from (vocab.json and merges.txt, or a .tiktoken) are them"});
  const Result why = folio("export --format hf " + p("other") + " " + p("hf-other"));
  EXPECT_EQ(why.code, 2) << why.err;
  expect_contains(why.err, {"maps to no HF GPT2LMHeadModel"});
}

// The display width of a table line: a code point a column, "日" two.
size_t columns(const std::string& line) {
  size_t n = 0;
  for (const unsigned char c : line) n += (c & 0xC0) != 0x80;
  for (size_t at = line.find("\xE6\x97\xA5"); at != std::string::npos; at = line.find("\xE6\x97\xA5", at + 1)) ++n;
  return n;
}

// The columns at which the words of a line (runs of anything but spaces) end.
std::vector<size_t> word_ends(const std::string& line) {
  std::vector<size_t> ends;
  std::string word;
  size_t col = 0;
  for (size_t i = 0; i <= line.size(); ++i) {
    if (i == line.size() || line[i] == ' ') {
      if (!word.empty()) ends.push_back(col);
      word.clear();
      col += i < line.size();
      continue;
    }
    word += line[i];
    if ((static_cast<unsigned char>(line[i]) & 0xC0) != 0x80) col += 1;
    if (word.size() >= 3 && word.compare(word.size() - 3, 3, "\xE6\x97\xA5") == 0) col += 1;
  }
  return ends;
}

// Tokens longer than a weight ("eeeeeeee"), wider than their code points ("日") and
// byte tokens ("<0xC3>"): each key's weights end where its label does.
TEST_F(CliOutputs, AttentionTableColumnsLineUpWhateverTheLabels) {
  spit(dir_ / "tiny.tiktoken", tiktoken_file());
  ASSERT_EQ(folio("train --data " + text() + run("bpe", 2) + " --tokenizer " + p("tiny.tiktoken") + kGpt2Shape).code, 0);
  const Result r = folio("attention --checkpoint " + p("bpe") + " --prompt 'the 日 eeeeeeee \xC3\xA9 x' --layer 0 --head 0");
  ASSERT_EQ(r.code, 0) << r.err;
  expect_contains(r.out, {"\xE6\x97\xA5", "eeeeeeee", "<0xC3>"});
  std::vector<std::string> lines;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_GT(lines.size(), 3u) << r.out;
  const std::vector<size_t> keys = word_ends(lines[1]);  // the header: a label a key
  for (size_t i = 2; i < lines.size(); ++i) {
    EXPECT_EQ(columns(lines[i]), columns(lines[1])) << r.out;
    std::vector<size_t> row = word_ends(lines[i]);
    ASSERT_EQ(row.size(), keys.size() + 1) << lines[i];
    row.erase(row.begin());  // the query's label
    EXPECT_EQ(row, keys) << r.out;
  }
}

// serve's first line says how it stores the weights it serves.
TEST_F(CliOutputs, ServeBannerNamesItsWeights) {
  ASSERT_EQ(folio("train --data " + text() + run("run", 2)).code, 0);
  for (const char* weights : {"int8", "f32"}) {
    const std::string out = p(cat("serve-", weights, ".out"));
    const testing::Child c = testing::spawn_folio(
        testing::words(cat("serve --checkpoint ", p("run"), " --port 0 --quiet --threads 1 --weights ", weights)), out,
        p("serve.err"));
    std::string banner;
    for (int i = 0; i < 2000 && banner.find("on http://") == std::string::npos; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      banner = slurp(out);
    }
    ::kill(c.pid, SIGTERM);
    EXPECT_FALSE(testing::wait_child(c.pid, 30).timed_out);
    expect_contains(banner, {cat(", ", weights, " weights, ")});
  }
}

}  // namespace
}  // namespace folio
