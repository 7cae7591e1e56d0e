// The chat template proven in llama.cpp: a char model and a SentencePiece one, each
// fine-tuned on conversations and exported to GGUF, are loaded by node-llama-cpp, whose
// Jinja engine renders several conversations from the file's own
// tokenizer.chat_template. The tokens must be those folio's template feeds the model
// (data/chat_template.h: render_chat), and llama.cpp's greedy reply, up to its
// end-of-generation token, folio's (a Generator ending at <|im_end|>).
// Skipped (never failed) where node or npm is absent or the npm registry unreachable.
#include "base/rng.h"
#include "data/chat_template.h"
#include "infer/generator.h"
#include "io/checkpoint.h"
#include "io/json.h"
#include "llama_npm.h"
#include "support.h"

namespace folio {
namespace {

using namespace testing;

constexpr int kSteps = 20;

const std::vector<std::vector<ChatMessage>> kConversations = {
    {{"user", "Copy: ab"}},
    {{"system", "Answer briefly."}, {"user", "Reverse: lamp"}},
    {{"user", "What is 2 + 3?"}, {"assistant", "5"}, {"user", "Spell: cat"}},
    {{"user", "First item of: fig, oak"}, {"assistant", "fig"}, {"user", "Last item of: fig, oak"}},
};
// Every conversation and its reply fit in the models' context of 128 (learned positions:
// llama.cpp asserts past them).

TEST(GgufLlamaCpp, ChatTemplateRendersFolioTokensAndReply) {
  std::string why;
  const std::string npm = llama_npm_dir(why);
  if (npm.empty()) GTEST_SKIP() << why;
  TempDir dir("gguf_chat");
  {
    std::string chats;  // conversations in the tasks' words
    const char* lines[] = {"Copy: ab", "Reverse: lamp", "What is 2 + 3?", "Spell: cat", "First item of: fig, oak"};
    const char* answers[] = {"ab", "pmal", "5", "c-a-t", "fig"};
    for (int i = 0; i < 200; ++i)
      chats += cat(R"({"messages": [{"role": "user", "content": ")", lines[i % 5],
                   R"("}, {"role": "assistant", "content": ")", answers[i % 5], "\"}]}\n");
    spit(dir.path / "chat.jsonl", chats);
  }
  const std::string corpus = write_small_corpus(dir.path / "text.txt", 20000);
  spit(dir.path / "text.txt", slurp(corpus) + "\nWhat is 2 + 3? 5. Spell: cat, c-a-t. First item of: fig, oak. 0123456789\n");
  for (const char* kind : {"char", "bpe"}) {
    SCOPED_TRACE(kind);
    const std::string base = dir / cat(kind, "-base"), chat = dir / cat(kind, "-chat"), gguf = dir / cat(kind, ".gguf");
    const std::string model = cat(" --pos learned --activation gelu --no-bias --n-layer 1 --n-head 2 --n-embd 32 "
                                  "--block-size 128 --batch-size 8 --warmup-iters 5 --lr 3e-3 --eval-iters 1 "
                                  "--threads 1 --quiet --tokenizer ", kind, std::string(kind) == "bpe" ? " --vocab-size 400" : "");
    Result r = run_folio(words(cat("train --data ", dir / "text.txt", " --out ", base, model, " --max-iters 60 --eval-interval 60")),
                         dir.path);
    ASSERT_EQ(r.code, 0) << r.err;
    r = run_folio(words(cat("train --init-from ", base, " --data ", dir / "chat.jsonl", " --out ", chat,
                            " --batch-size 8 --lr 3e-3 --warmup-iters 5 --eval-iters 1 --threads 1 --quiet "
                            "--max-iters 120 --eval-interval 120")),
                  dir.path);
    ASSERT_EQ(r.code, 0) << r.err;
    r = run_folio({"export", chat, gguf}, dir.path);
    ASSERT_EQ(r.code, 0) << r.err;

    const ModelCheckpoint ck = load_model(chat);
    ck.model->eval();
    Json::Array conversations;
    for (const auto& c : kConversations) {
      Json::Array messages;
      for (const ChatMessage& m : c) messages.emplace_back(Json::Object{{"role", m.role}, {"content", m.content}});
      conversations.emplace_back(std::move(messages));
    }
    std::ofstream(dir / "job.json") << Json(Json::Object{{"model", gguf}, {"conversations", conversations}}).dump();
    const std::string node = "NODE_PATH='" + npm + "/node_modules' node '" FOLIO_SOURCE_DIR
                             "/tests/gguf_chat_llamacpp.mjs' '" + (dir / "job.json") + "' " + std::to_string(kSteps) +
                             " >'" + (dir / "llama.json") + "' 2>'" + (dir / "llama.err") + "'";
    ASSERT_EQ(std::system(node.c_str()), 0) << slurp(dir / "llama.err");
    const Json out = Json::parse(slurp(dir / "llama.json"));
    EXPECT_EQ(out.find("template")->as_string(), kChatMlJinja);
    EXPECT_EQ(out.find("eot")->as_int(), ck.tokenizer->chat_tokens()->end);
    size_t replied = 0;  // tokens of replies: the comparison holds something
    for (size_t i = 0; i < kConversations.size(); ++i) {
      SCOPED_TRACE(cat("conversation ", i));
      const Json& run = out.find("runs")->as_array().at(i);
      const std::vector<int32_t> ours = render_chat(*ck.tokenizer, kConversations[i], true).ids;
      ASSERT_LE(ours.size() + kSteps, 128u);
      std::vector<int32_t> rendered, reply;
      for (const Json& id : run.find("rendered")->as_array()) rendered.push_back(int32_t(id.as_int()));
      for (const Json& id : run.find("reply")->as_array()) reply.push_back(int32_t(id.as_int()));
      EXPECT_EQ(rendered, ours) << "llama.cpp's rendering of the GGUF's template";
      // folio's greedy reply, up to <|im_end|>, which llama.cpp ends at without handing it out.
      SampleOptions so;
      so.greedy = true;
      Rng rng(1);
      infer::Generator g(*ck.model);
      g.start(0, ours, so, rng, nullptr, {}, ck.tokenizer->chat_tokens()->end);
      std::vector<int32_t> folio_reply;
      for (int s = 0; s < kSteps; ++s) {
        const infer::Generator::Token t = g.next();
        if (t.stopped) break;
        folio_reply.push_back(t.id);
      }
      EXPECT_EQ(reply, folio_reply) << "llama.cpp's greedy reply";
      replied += folio_reply.size();
    }
    EXPECT_GT(replied, 0u);
  }
}

}  // namespace
}  // namespace folio
