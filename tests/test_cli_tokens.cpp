// The folio binary with subword tokenizers: train, generate, eval, info, tokens and
// fine-tuning (--init-from) end to end, on text that is not English prose.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "data/chat_template.h"
#include "data/dataset.h"
#include "data/vocab.h"
#include "io/checkpoint.h"
#include "io/json.h"
#include "tests/support.h"

namespace folio {
namespace {

namespace fs = std::filesystem;
using testing::expect_contains;
using testing::Result;

// The ids Debian's SentencePiece gives `text` with the .model file `model`: spm_encode
// for one line (it reads line by line), python3-sentencepiece (the same library) for
// text with newlines.
std::vector<int32_t> spm_ids(const testing::TempDir& dir, const std::string& model, const std::string& text) {
  testing::spit(dir.path / "spm_in.txt", text);
  const std::string in = "'" + (dir / "spm_in.txt") + "'", out = "'" + (dir / "spm_out.txt") + "'";
  const std::string cmd =
      text.find('\n') == std::string::npos
          ? "spm_encode --model '" + model + "' --output_format=id <" + in + " >" + out
          : "/usr/bin/python3 -c \"import sys, sentencepiece as s; "
            "print(*s.SentencePieceProcessor(model_file=sys.argv[1]).encode(open(sys.argv[2], encoding='utf-8').read()))\" '" +
                model + "' " + in + " >" + out;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::vector<int32_t> ids;
  std::istringstream words(testing::slurp(dir.path / "spm_out.txt"));
  for (int32_t id; words >> id;) ids.push_back(id);
  return ids;
}

class CliTokens : public ::testing::Test {
 protected:
  void SetUp() override {
    // Code: folio's own sources, with their indentation, braces and comments.
    std::string code;
    for (const char* f : {"data/char_tokenizer.cpp", "data/dataset.cpp", "io/json.cpp", "io/safetensors.cpp", "autograd/tensor.cpp"})
      code += read_file(std::string(FOLIO_SOURCE_DIR) + "/" + f);
    testing::spit(code_file(), code);
    testing::write_small_corpus(dir_.path / "shakespeare.txt", 30000);
  }
  Result folio(const std::string& args) const { return testing::run_folio(testing::words(args), dir_.path); }
  std::string code_file() const { return dir_ / "code.txt"; }
  // A short run into `out`; a small model unless it starts --init-from one.
  std::string small_model(const std::string& out, int iters) const {
    return " --n-layer 1 --n-head 2 --n-embd 32 --block-size 32" + short_run(out, iters);
  }
  std::string short_run(const std::string& out, int iters, int eval_iters = 4) const {
    return " --out " + (dir_ / out) + " --batch-size 8 --eval-interval 20 --warmup-iters 5 --lr 3e-3 --quiet"
           " --threads 2 --eval-iters " + std::to_string(eval_iters) + " --max-iters " + std::to_string(iters);
  }
  testing::TempDir dir_{"cli_tokens"};
};

TEST_F(CliTokens, BpeOnCodeEndToEnd) {
  const Result t = folio("train --tokenizer bpe --vocab-size 1024 --data " + code_file() + small_model("bpe", 40));
  ASSERT_EQ(t.code, 0) << t.err;
  const Result i = folio("info --checkpoint " + (dir_ / "bpe"));
  ASSERT_EQ(i.code, 0) << i.err;
  expect_contains(i.out, {"tokenizer    spm (SentencePiece), 1024 pieces, byte fallback, fingerprint ",
                          "--tokenizer bpe --vocab-size 1024"});

  const Result g = folio("generate --checkpoint " + (dir_ / "bpe") + " --prompt 'int main' --max-new-tokens 80");
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_EQ(g.out.substr(0, 8), "int main");
  EXPECT_NO_THROW(decode_utf8(g.out)) << "generate wrote broken UTF-8";

  // eval defaults to the run's own data and split, and says so; --json for scripts.
  const Result e = folio("eval --checkpoint " + (dir_ / "bpe") + " --json");
  ASSERT_EQ(e.code, 0) << e.err;
  const Json j = Json::parse(e.out);
  EXPECT_EQ(j.find("data")->as_string(), fs::absolute(code_file()).string());
  EXPECT_EQ(j.find("split")->as_string(), "val");
  const double loss = j.find("loss")->as_double(), tokens = double(j.find("tokens")->as_int()),
               bytes = double(j.find("bytes")->as_int());
  EXPECT_GT(bytes, 2.0 * tokens);  // subwords: several bytes a token
  EXPECT_NEAR(j.find("bits_per_byte")->as_double(), loss * tokens / bytes / std::log(2.0), 1e-9);
  EXPECT_LT(loss, std::log(1024.0));  // it learned something in 40 steps

  // The pieces, with whitespace made visible, and ids that decode to the text.
  const Result p = folio("tokens --checkpoint " + (dir_ / "bpe") + " --text '    return x;' --format pieces");
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_NE(p.out.find("\xE2\x90\xA3"), std::string::npos) << p.out;
  const Result table = folio("tokens --checkpoint " + (dir_ / "bpe") + " --text 'a\tb'");
  expect_contains(table.out, {"position      id  offset  bytes  piece", "\\t"});

  // A different tokenizer on --resume is refused; the same one passes.
  const Result r = folio("train --resume --tokenizer unigram" + small_model("bpe", 60));
  EXPECT_EQ(r.code, 2);
  expect_contains(r.err, {"--tokenizer"});
}

// Fine-tuning: a model trained on Shakespeare, started on other text, begins at its
// own loss on that text (not at ln V, where a fresh model begins).
TEST_F(CliTokens, InitFromStartsFromTheTrainedModel) {
  const Result t = folio("train --data " + (dir_ / "shakespeare.txt") + small_model("base", 200));
  ASSERT_EQ(t.code, 0) << t.err;
  // More Shakespeare it never saw: the next 20,000 characters of the corpus, less the
  // few letters the first 30,000 lack (a char vocabulary cannot encode them).
  const std::string seen = read_file(dir_ / "shakespeare.txt");
  std::string rest;
  for (char c : read_file(default_corpus_path()).substr(30000, 20000))
    if (seen.find(c) != std::string::npos) rest += c;
  testing::spit(dir_.path / "more.txt", rest);
  const Result base_on_more =
      folio("eval --checkpoint " + (dir_ / "base") + " --data " + (dir_ / "more.txt") + " --json");
  ASSERT_EQ(base_on_more.code, 0) << base_on_more.err;
  const double expected = Json::parse(base_on_more.out).find("loss")->as_double();

  const Result f = folio("train --init-from " + (dir_ / "base") + " --data " + (dir_ / "more.txt") +
                         short_run("tuned", 20, 40));
  ASSERT_EQ(f.code, 0) << f.err << f.out;
  std::ifstream log(dir_.path / "tuned" / "log.csv");
  std::string header, first;
  std::getline(log, header);
  std::getline(log, first);  // the evaluation at step 0, before any update
  const double val0 = std::stod(first.substr(first.find(',', first.find(',') + 1) + 1));
  EXPECT_LT(val0, std::log(65.0) - 1.0);
  EXPECT_NEAR(val0, expected, 0.15) << first;
  expect_contains(folio("info --checkpoint " + (dir_ / "tuned")).out, {"started from --init-from"});

  // The model's options come from the checkpoint; text it cannot encode is named.
  const Result shape = folio("train --init-from " + (dir_ / "base") + " --n-layer 3 --data " + (dir_ / "more.txt") +
                             short_run("x", 5));
  EXPECT_EQ(shape.code, 2);
  expect_contains(shape.err, {"--n-layer comes from the --init-from checkpoint"});
  testing::spit(dir_.path / "snow.txt", std::string(1000, 'a') + "\xE2\x98\x83 and \xE2\x98\x83" + std::string(2000, 'b'));
  const Result snow = folio("train --init-from " + (dir_ / "base") + " --data " + (dir_ / "snow.txt") +
                            short_run("y", 5));
  EXPECT_EQ(snow.code, 2);
  expect_contains(snow.err, {"snow.txt", "U+2603", "at position 1000", "2 characters of the text are not"});
  EXPECT_FALSE(fs::exists(dir_.path / "y" / "model.safetensors"));
}

// A subword run resumes exactly: 20 + 20 steps write the weights 40 straight steps write
// (the tokenizer comes back from the checkpoint, not from a new training).
TEST_F(CliTokens, BpeRunResumesExactly) {
  // One cosine over 40 steps for both (the first half stops at 20 but decays over 40).
  const std::string bpe = " --tokenizer bpe --vocab-size 400 --lr-decay-iters 40 --data " + (dir_ / "shakespeare.txt");
  ASSERT_EQ(folio("train" + bpe + small_model("straight", 40)).code, 0);
  ASSERT_EQ(folio("train" + bpe + small_model("split", 20)).code, 0);
  const Result r = folio("train --resume --max-iters 40 --quiet --threads 2 --out " + (dir_ / "split"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(testing::slurp(dir_.path / "split" / "model.safetensors") ==
              testing::slurp(dir_.path / "straight" / "model.safetensors"));
}

// A chat fine-tune of a BPE run exports a .model that gives its ids, the chat tokens'
// too: spm_encode of text gives the ids folio gives it, and of a conversation rendered
// as text (as HF's Jinja template renders it) the ids the model trains and serves on.
TEST_F(CliTokens, ChatFineTuneExportsItsSentencePieceModel) {
  if (std::system("command -v spm_encode >/dev/null && /usr/bin/python3 -c 'import sentencepiece' 2>/dev/null") != 0)
    GTEST_SKIP() << "no spm_encode or python3-sentencepiece (scripts/setup.sh installs them)";
  ASSERT_EQ(folio("train --tokenizer bpe --vocab-size 400 --data " + (dir_ / "shakespeare.txt") + small_model("base", 4)).code, 0);
  std::string conversations;
  for (int i = 0; i < 20; ++i)
    conversations += cat(R"({"messages": [{"role": "user", "content": "Count to )", i,
                         R"("}, {"role": "assistant", "content": "Done: )", i, R"("}]})", "\n");
  testing::spit(dir_.path / "chat.jsonl", conversations);
  const Result tune = folio("train --init-from " + (dir_ / "base") + " --data " + (dir_ / "chat.jsonl") + short_run("chat", 2, 1));
  ASSERT_EQ(tune.code, 0) << tune.err;
  const Result x = folio("info --checkpoint " + (dir_ / "chat") + " --export-tokenizer " + (dir_ / "chat.model"));
  ASSERT_EQ(x.code, 0) << x.err;

  const ModelCheckpoint ck = load_model(dir_ / "chat");
  const Tokenizer& t = *ck.tokenizer;
  const ChatTokens ct = *t.chat_tokens();
  for (const std::string text : {"ROMEO: But soft, what light", "  f(x) { return 0; }  ", "caf\xC3\xA9 \xE6\x97\xA5 \xF0\x9F\x8E\x89"})
    EXPECT_EQ(spm_ids(dir_, dir_ / "chat.model", text), t.encode(text)) << text;
  std::vector<int32_t> line{ct.start};  // a line with the markers: each its id, the text between cut alone
  for (const int32_t id : t.encode("user hi")) line.push_back(id);
  line.push_back(ct.end);
  EXPECT_EQ(spm_ids(dir_, dir_ / "chat.model", "<|im_start|>user hi<|im_end|>"), line);
  const std::vector<ChatMessage> m{{"system", "Be brief."}, {"user", "What light through yonder window breaks?"},
                                   {"assistant", "It is the east."}, {"user", "And Juliet?"}};
  std::string rendered;
  for (const ChatMessage& message : m) rendered += cat(kImStart, message.role, "\n", message.content, kImEnd, "\n");
  EXPECT_EQ(spm_ids(dir_, dir_ / "chat.model", rendered + kImStart + "assistant\n"), render_chat(t, m, true).ids);
}

// A chat run's info points at --export-tokenizer only where there is a file to write:
// a chat model of a BPE run has one, a chat model of a char run none.
TEST_F(CliTokens, InfoOfAChatRunPointsAtItsFileOnlyWhenThereIsOne) {
  std::string conversations;
  for (int i = 0; i < 20; ++i) conversations += R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]})" "\n";
  testing::spit(dir_.path / "chat.jsonl", conversations);
  for (const char* tokenizer : {"bpe --vocab-size 400", "char"}) {
    const std::string base = cat("base-", tokenizer[0]), chat = cat("chat-", tokenizer[0]);
    ASSERT_EQ(folio(cat("train --tokenizer ", tokenizer, " --data ", dir_ / "shakespeare.txt", small_model(base, 2))).code, 0);
    const Result tune = folio("train --init-from " + (dir_ / base) + " --data " + (dir_ / "chat.jsonl") + short_run(chat, 2, 1));
    ASSERT_EQ(tune.code, 0) << tune.err;
    const Result info = folio("info --checkpoint " + (dir_ / chat));
    ASSERT_EQ(info.code, 0) << info.err;
    const bool file = info.out.find("folio info --export-tokenizer writes it as a file") != std::string::npos;
    EXPECT_EQ(file, tokenizer[0] == 'b') << info.out;
    const Result x = folio("info --checkpoint " + (dir_ / chat) + " --export-tokenizer " + (dir_ / (chat + ".model")));
    EXPECT_EQ(x.code, file ? 0 : 2) << x.err;
  }
}

// A checkpoint file outside any run has no data of its own: eval asks for --data.
TEST_F(CliTokens, EvalOfALoneCheckpointNeedsData) {
  ASSERT_EQ(folio("train --data " + (dir_ / "shakespeare.txt") + " --val-fraction 0.3" + small_model("r", 5)).code, 0);
  const Result e = folio("eval --checkpoint " + (dir_ / "r"));
  ASSERT_EQ(e.code, 0) << e.err;
  expect_contains(e.out, {"shakespeare.txt, val split (val: the last 0.3)", "bits/byte", "bits/char"});
  fs::copy_file(dir_.path / "r" / "best.safetensors", dir_.path / "lone.safetensors");
  const Result lone = folio("eval --checkpoint " + (dir_ / "lone.safetensors"));
  EXPECT_EQ(lone.code, 2);
  expect_contains(lone.err, {"--data is needed", "lone.safetensors"});
  const Result chars = folio("info --checkpoint " + (dir_ / "r") + " --export-tokenizer " + (dir_ / "x.model"));
  EXPECT_EQ(chars.code, 2);
  expect_contains(chars.err, {"--export-tokenizer", "char"});
  EXPECT_FALSE(fs::exists(dir_.path / "x.model"));
}

}  // namespace
}  // namespace folio
