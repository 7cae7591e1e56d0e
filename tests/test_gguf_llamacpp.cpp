// The GGUF export proven in llama.cpp: for each architecture folio exports (gpt2 for
// learned positions, gptneox for rope, llama for RMSNorm + SwiGLU + rope, qwen3 for
// that with QK-norm) and each tokenizer kind (char, SentencePiece BPE),
// a tiny trained model is exported, llama.cpp (node-llama-cpp, installed by this test
// into the build tree) loads it and continues 5 prompts greedily for 64 tokens:
// the text must equal `folio generate --greedy`, the next-token probabilities folio's
// within 2e-3 at every step, and llama.cpp's own tokenization of each prompt folio's.
// Skipped (never failed) where node or npm is absent or the npm registry unreachable.
#include <cmath>

#include "io/checkpoint.h"
#include "io/json.h"
#include "llama_npm.h"
#include "support.h"

namespace folio {
namespace {

using namespace testing;

constexpr int kSteps = 64;
constexpr double kMaxProbabilityGap = 2e-3;
const char* kPrompts[] = {"ROMEO:", "First Citizen:\nWe are", "What is", "The king", "\n\n"};

struct Case {
  const char* name;
  const char* flags;  // folio train's model and tokenizer flags
  const char* arch;   // what the file must say
};
const Case kCases[] = {
    {"char_gpt2", "--pos learned --activation gelu", "gpt2"},
    {"char_gptneox", "--pos rope --activation gelu", "gptneox"},
    {"bpe_gpt2", "--pos learned --activation gelu --tokenizer bpe --vocab-size 400", "gpt2"},
    {"bpe_gptneox", "--pos rope --activation gelu --tokenizer bpe --vocab-size 400", "gptneox"},
    {"char_llama", "--pos rope --norm rms --activation swiglu --tie-weights", "llama"},
    {"bpe_llama", "--pos rope --norm rms --activation swiglu --tokenizer bpe --vocab-size 400", "llama"},
    {"char_qwen3", "--pos rope --norm rms --activation swiglu --qk-norm", "qwen3"},
    {"bpe_qwen3", "--pos rope --norm rms --activation swiglu --qk-norm --tokenizer bpe --vocab-size 400", "qwen3"},
};
// The cases also exported as f16 and q8_0, for those layouts in llama.cpp's own reader.
const size_t kRoundedCases[] = {3, 5};

TEST(GgufLlamaCpp, GreedyTextAndProbabilitiesMatchFolio) {
  std::string why;
  const std::string npm = llama_npm_dir(why);
  if (npm.empty()) GTEST_SKIP() << why;
  TempDir dir("gguf_llamacpp");
  write_small_corpus(dir.path / "text.txt", 30000);

  // The trainings are single-threaded and independent: side by side.
  std::vector<Child> training;
  for (const Case& c : kCases)
    training.push_back(spawn_folio(
        words(cat("train --data ", dir / "text.txt", " --out ", dir / c.name, " ", c.flags,
                  " --no-bias --n-layer 2 --n-head 2 --n-embd 32 --block-size 128 --batch-size 8 "
                  "--max-iters 150 --warmup-iters 10 --lr 3e-3 --eval-interval 150 --eval-iters 1 --threads 1 --quiet")),
        dir / (std::string(c.name) + ".out"), dir / (std::string(c.name) + ".err"), {}, dir.path));
  for (size_t m = 0; m < training.size(); ++m)
    ASSERT_EQ(wait_child(training[m].pid, 300).code, 0) << kCases[m].name << ": " << slurp(training[m].err_file);

  Json::Array jobs;
  std::vector<ModelCheckpoint> models;
  for (const Case& c : kCases) {
    const std::string run = dir / c.name;
    const Result exported = run_folio({"export", run, dir / (std::string(c.name) + ".gguf")}, dir.path);
    ASSERT_EQ(exported.code, 0) << c.name << ": " << exported.err;
    models.push_back(load_model(run));
    models.back().model->eval();
    Json::Array prompts;
    for (const char* text : kPrompts) {
      Json::Array ids;
      for (const int32_t id : models.back().tokenizer->encode(text)) ids.emplace_back(id);
      prompts.emplace_back(Json::Object{{"text", text}, {"ids", std::move(ids)}});
    }
    jobs.emplace_back(Json::Object{{"model", dir / (std::string(c.name) + ".gguf")}, {"prompts", std::move(prompts)}});
  }
  // f16 and q8_0 files of some models: the same prompts, compared with a tolerance for
  // their rounding (below).
  std::vector<std::pair<size_t, const char*>> rounded;  // (case, dtype) of the jobs after the f32 ones
  for (const size_t m : kRoundedCases)
    for (const char* dtype : {"f16", "q8_0"}) {
      const std::string file = dir / cat(kCases[m].name, "-", dtype, ".gguf");
      const Result exported = run_folio({"export", "--dtype", dtype, dir / kCases[m].name, file}, dir.path);
      ASSERT_EQ(exported.code, 0) << exported.err;
      Json copy = jobs.at(m);
      copy.as_object()[0].second = file;
      jobs.push_back(std::move(copy));
      rounded.emplace_back(m, dtype);
    }
  {
    std::ofstream(dir / "jobs.json") << Json(jobs).dump();
  }
  const std::string node = "NODE_PATH='" + npm + "/node_modules' node '" FOLIO_SOURCE_DIR "/tests/gguf_llamacpp.mjs' '" +
                           (dir / "jobs.json") + "' " + std::to_string(kSteps) + " >'" + (dir / "llama.json") +
                           "' 2>'" + (dir / "llama.err") + "'";
  ASSERT_EQ(std::system(node.c_str()), 0) << slurp(dir / "llama.err");
  const Json results = Json::parse(slurp(dir / "llama.json"));

  // The f32 files, then the rounded ones.
  for (size_t job = 0; job < std::size(kCases) + rounded.size(); ++job) {
    const bool exact = job < std::size(kCases);
    const size_t m = exact ? job : rounded[job - std::size(kCases)].first;
    const Case& c = kCases[m];
    const std::string dtype = exact ? "f32" : rounded[job - std::size(kCases)].second;
    // f16 rounds each weight by up to 2^-11 of itself, q8_0 by up to 1/254 of its block's
    // largest: the model itself changes, so its text may part from folio's at a near tie.
    const double tolerance = exact ? kMaxProbabilityGap : dtype == "f16" ? 1e-3 : 1e-2;
    SCOPED_TRACE(cat(c.name, " ", dtype));
    const Json& r = results.as_array().at(job);
    const nn::GPT& gpt = *models[m].model;
    const Tokenizer& tok = *models[m].tokenizer;
    const int64_t V = gpt.config().vocab_size;
    EXPECT_EQ(r.find("arch")->as_string(), c.arch);
    // A char vocabulary gains <unk>, <s> and </s> after the model's ids, all suppressed.
    const size_t extra = tok.kind() == std::string("char") ? 3 : 0;
    EXPECT_EQ(r.find("n_vocab")->as_int(), V + int64_t(extra));
    EXPECT_EQ(r.find("suppress")->as_array().size(), extra);
    for (size_t p = 0; p < std::size(kPrompts); ++p) {
      SCOPED_TRACE(cat("prompt ", json_quote(kPrompts[p])));
      const Json& run = r.find("runs")->as_array().at(p);
      const std::vector<int32_t> prompt = tok.encode(kPrompts[p]);
      std::vector<int32_t> llama_prompt, ids = prompt;
      for (const Json& id : run.find("tokenized")->as_array()) llama_prompt.push_back(int32_t(id.as_int()));
      EXPECT_EQ(llama_prompt, prompt) << "llama.cpp's tokenization of the prompt";
      for (const Json& id : run.find("ids")->as_array()) ids.push_back(int32_t(id.as_int()));
      ASSERT_EQ(ids.size(), prompt.size() + kSteps);

      // folio's probabilities along llama.cpp's continuation, from one forward pass.
      const int64_t T = int64_t(ids.size()) - 1;
      const Tensor logits = gpt.forward(std::span(ids.data(), size_t(T)), 1, T).logits;  // (1, T, V)
      double worst = 0.0;
      int parted = 0;  // steps where llama.cpp's choice is not folio's most likely token
      for (int s = 0; s < kSteps; ++s) {
        const int64_t t = int64_t(prompt.size()) - 1 + s;
        const std::vector<double> want = softmax(logits.data() + t * V, V);
        // node-llama-cpp reports the probabilities before its token bias: the suppressed
        // special tokens (zero rows, so logit 0) hold some mass, which llama.cpp's own
        // samplers remove (tokenizer.ggml.suppress_tokens). Compared over the model's
        // tokens, renormalised.
        const Json::Array& got = run.find("probs")->as_array().at(size_t(s)).as_array();
        ASSERT_EQ(int64_t(got.size()), V + int64_t(extra));
        double mass = 0.0;
        for (int64_t i = 0; i < V; ++i) mass += got[size_t(i)].as_double();
        for (int64_t i = 0; i < V; ++i)
          worst = std::max(worst, std::fabs(got[size_t(i)].as_double() / mass - want[size_t(i)]));
        // Greedy: llama.cpp's choice is folio's most likely token, unless the two lead
        // within the tolerance, which is reported rather than passed.
        const int32_t mine = int32_t(std::max_element(want.begin(), want.end()) - want.begin());
        const int32_t theirs = ids[size_t(t + 1)];
        parted += mine != theirs;
        if (mine != theirs && exact)
          ADD_FAILURE() << "step " << s << ": llama.cpp chose " << theirs << " (p " << want[size_t(theirs)]
                        << " in folio), folio " << mine << " (p " << want[size_t(mine)] << ")"
                        << (want[size_t(mine)] - want[size_t(theirs)] < kMaxProbabilityGap ? ": a near tie" : "");
      }
      EXPECT_LE(worst, tolerance) << "the largest next-token probability difference";
      std::printf("[gguf] %s %s prompt %zu: %d greedy tokens, %d not folio's choice, largest probability "
                  "difference %.2e\n", c.name, dtype.c_str(), p, kSteps, parted, worst);
      if (!exact) continue;

      // And the text folio generate writes.
      const Result generated = run_folio({"generate", "--checkpoint", dir / c.name, "--prompt", kPrompts[p], "--greedy",
                                          "--max-new-tokens", std::to_string(kSteps), "--threads", "1"},
                                         dir.path);
      ASSERT_EQ(generated.code, 0) << generated.err;
      const std::string text = tok.decode(std::span(ids.data() + prompt.size(), size_t(kSteps)));
      EXPECT_EQ(generated.out, kPrompts[p] + text + "\n");
    }
  }
}

}  // namespace
}  // namespace folio
