// Every value of every model option through what computes folio's models outside
// folio: the independent numpy reference (scripts/folio_numpy.py), and both export
// formats as the rows of nn/model_options.cpp answer for them. From models each takes
// (the bases), each option is moved to each of its other values (tests/option_values.h),
// one at a time, so a row added later is walked too:
//   numpy  folio_numpy.py gives folio's loss on a sequence to 1e-4;
//   GGUF   folio export either exits 2 naming the option's flag and writes nothing, or
//          writes a file in which llama.cpp (node-llama-cpp, tests/gguf_llamacpp.mjs, one
//          process for all the files) continues two prompts greedily with folio's most
//          likely tokens (or one within 2e-3 of it: a near tie), its next-token
//          probabilities folio's within 2e-3 at every step;
//   HF     the same refusal, or a directory in which the numpy GPT-2 of
//          tests/hf_gpt2_reference.py, which reads only HF's layout, gives folio's loss
//          to 2e-5.
// The weights are drawn wide, not trained, so that the distributions are far from
// uniform and whatever a reader leaves out shows: a row that says a format carries a
// value it drops fails here. Skipped where node, npm or numpy are absent.
#include <cmath>

#include "data/base64.h"
#include "data/tokenizer.h"
#include "io/checkpoint.h"
#include "io/gguf_model.h"
#include "io/hf_gpt2.h"
#include "io/json.h"
#include "llama_npm.h"
#include "option_values.h"
#include "support.h"

namespace folio {
namespace {

using namespace testing;
using nn::GPTConfig;

constexpr int kSteps = 16;
constexpr double kMaxProbabilityGap = 2e-3, kMaxHfLossGap = 2e-5, kMaxNumpyLossGap = 1e-4;
const char* kPrompts[] = {"ROMEO:", "the king\n"};

// A character tokenizer of the bundled corpus's first 30,000 bytes (llama.cpp's loader
// wants the letters a vocabulary of a few sentences may lack).
std::unique_ptr<Tokenizer> chars() {
  return make_tokenizer({}, slurp(FOLIO_SOURCE_DIR "/data/tinyshakespeare.txt").substr(0, 30000));
}

// Two blocks (as the U-net skips need), head size 16 (even, as rope needs).
GPTConfig tiny(int64_t vocab) {
  GPTConfig c;
  c.vocab_size = vocab, c.block_size = 32, c.n_layer = 2, c.n_head = 2, c.n_embd = 32;
  return c;
}

// The models each format takes, which the walk starts from: llama.cpp's graphs, and
// HF's GPT-2.
std::vector<std::pair<std::string, GPTConfig>> gguf_bases(int64_t vocab) {
  GPTConfig gpt2 = tiny(vocab);
  gpt2.activation = nn::Activation::gelu_tanh, gpt2.bias = false;
  GPTConfig neox = gpt2, llama = gpt2;
  neox.pos = nn::Positions::rope;
  llama.pos = nn::Positions::rope, llama.norm = nn::Norm::rms, llama.activation = nn::Activation::swiglu;
  return {{"gpt2", gpt2}, {"gptneox", neox}, {"llama", llama}};
}
// GPT-2's kind of tokenizer, which HF's directory holds (vocab.json, merges.txt): a
// byte-level BPE of the 256 bytes alone, from a .tiktoken file in `dir`.
std::unique_ptr<Tokenizer> bytes(const TempDir& dir) {
  std::string ranks;
  for (int b = 0; b < 256; ++b) ranks += base64_encode(std::string(1, static_cast<char>(b))) + " " + std::to_string(b) + "\n";
  spit(dir / "bytes.tiktoken", ranks);
  return make_tokenizer({dir / "bytes.tiktoken"}, "");
}

std::vector<std::pair<std::string, GPTConfig>> hf_bases(int64_t vocab) {
  GPTConfig c = tiny(vocab);
  c.activation = nn::Activation::gelu_tanh, c.gpt2_biases = true;
  return {{"gpt2", c}};
}

struct Walked {
  std::string name;  // "llama-qk-norm-true": where on the walk
  GPTConfig config;
  std::string flag;  // the option as set ("--qk-norm"), which a refusal must name; "" for a base
  const nn::ModelOption* option = nullptr;  // the option moved; null for a base
};

// Each base, then each option's other values on it. A value the base cannot hold at all
// (--gpt2-biases without the Linears' biases) is taken with the biases on.
std::vector<Walked> walk(const std::vector<std::pair<std::string, GPTConfig>>& bases) {
  std::vector<Walked> out;
  for (const auto& [base, c] : bases) {
    out.push_back({base, c, ""});
    for (const nn::ModelOption& o : nn::model_options())
      for (GPTConfig v : other_values(o, c)) {
        try {
          v.validate();
        } catch (const Error&) {
          v.bias = true;
        }
        out.push_back({cat(base, "-", o.flag, "-", option_text(o, v)), v, flag_as_set(o, v), &o});
      }
  }
  return out;
}

// The model with every weight drawn from N(0, 0.2), the norms' around 1.
std::unique_ptr<nn::GPT> wide_model(const GPTConfig& c) {
  auto model = std::make_unique<nn::GPT>(c);
  Rng rng(c.seed);
  for (const auto& [name, p] : model->named_parameters()) {
    const bool norm = name.find("ln") != std::string::npos && name.ends_with(".weight");
    for (int64_t i = 0; i < p.numel(); ++i) p.data()[i] = (norm ? 1.0f : 0.0f) + (norm ? 0.1f : 0.2f) * rng.normal();
  }
  model->eval();
  return model;
}

struct Exported {
  Walked at;
  std::unique_ptr<nn::GPT> model;
  std::string out;  // the file or directory written
};

// Saves each walked model and runs folio export on it: a refusal must exit 2, name the
// option and write nothing; the rest must export. Returns those that did.
std::vector<Exported> export_all(const std::vector<Walked>& walked, const Tokenizer& tok, const TempDir& dir,
                                 bool hf) {
  std::vector<Exported> done;
  for (const Walked& w : walked) {
    SCOPED_TRACE(w.name);
    auto model = wide_model(w.config);
    const fs::path run = dir.path / w.name;
    fs::create_directories(run);
    save_model((run / "model.safetensors").string(), *model, tok, 0);
    const std::string out = dir / (w.name + (hf ? "-hf" : ".gguf"));
    const Result r = run_folio(hf ? Args{"export", "--format", "hf", run.string(), out} : Args{"export", run.string(), out},
                               dir.path);
    const bool refused = !(hf ? hf_refusals(w.config) : gguf_refusals(w.config, tok)).empty();
    if (refused) {
      EXPECT_EQ(r.code, 2) << r.err;
      EXPECT_NE(r.err.find(w.flag), std::string::npos) << "the refusal does not name " << w.flag << ": " << r.err;
      EXPECT_FALSE(fs::exists(out));
      EXPECT_FALSE(w.flag.empty()) << "a base is refused: " << r.err;
    } else {
      EXPECT_EQ(r.code, 0) << r.err;
      if (r.code == 0) done.push_back({w, std::move(model), out});
    }
  }
  return done;
}

// T + 1 ids of the text: one window of the tiny model and its targets.
std::vector<int32_t> window_ids(const Tokenizer& tok) {
  std::vector<int32_t> ids = tok.encode("ROMEO: what says the king? First Citizen:\nWe are all resolved.\n");
  ids.resize(size_t(tiny(0).block_size + 1));
  return ids;
}

// folio's loss on one window, the mean next-token cross-entropy (in evaluation: no
// multi-token term).
double folio_loss(const nn::GPT& model, const std::vector<int32_t>& ids) {
  const int64_t T = int64_t(ids.size()) - 1;
  return model.forward(std::span(ids.data(), size_t(T)), 1, T, std::span(ids.data() + 1, size_t(T)))
      .next_token_loss.item();
}

// The loss a python script prints last ("loss X ..."), or NaN (and a failure) when it fails.
double python_loss(const std::string& command, const TempDir& dir) {
  const std::string out = dir / "python.txt";
  if (std::system((command + " >'" + out + "' 2>&1").c_str()) != 0) {
    ADD_FAILURE() << command << ":\n" << slurp(out);
    return NAN;
  }
  const std::string text = slurp(out);
  return std::stod(text.substr(text.rfind("loss ") + 5));
}

bool have_numpy() { return std::system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") == 0; }

TEST(OptionWalk, EveryOptionValueGivesTheNumpyReferencesLoss) {
  if (!have_numpy()) GTEST_SKIP() << "no numpy";
  TempDir dir("option_walk_numpy");
  const auto tok = chars();
  const std::vector<int32_t> ids = window_ids(*tok);
  std::string text;
  for (const int32_t id : ids) text += std::to_string(id) + " ";
  spit(dir / "ids.txt", text);
  for (const Walked& w : walk({{"default", tiny(tok->vocab_size())}})) {
    SCOPED_TRACE(w.name);
    const auto model = wide_model(w.config);
    const fs::path run = dir.path / w.name;
    fs::create_directories(run);
    save_model((run / "model.safetensors").string(), *model, *tok, 0);
    const double ours = folio_loss(*model, ids);
    const double theirs = python_loss("/usr/bin/python3 '" FOLIO_SOURCE_DIR "/scripts/folio_numpy.py' --checkpoint '" +
                                          run.string() + "' --ids '" + (dir / "ids.txt") + "'",
                                      dir);
    EXPECT_NEAR(ours, theirs, kMaxNumpyLossGap);
    std::printf("[numpy] %s: folio %.6f, folio_numpy.py %.6f\n", w.name.c_str(), ours, theirs);
  }
}

// What the walks below check through folio export, llama.cpp and numpy, here on the
// configs alone, where neither is installed: each refusal of a value names its flag,
// and a value that exports has an answer that says where the format writes it.
TEST(OptionWalk, EveryRefusalOfAnOptionValueNamesItsFlag) {
  const auto tok = chars();
  size_t refused = 0;
  for (const bool hf : {false, true})
    for (const Walked& w : walk(hf ? hf_bases(tok->vocab_size()) : gguf_bases(tok->vocab_size()))) {
      const std::vector<std::string> why = hf ? hf_refusals(w.config) : gguf_refusals(w.config, *tok);
      if (w.flag.empty()) {
        EXPECT_TRUE(why.empty()) << w.name << ": " << why.at(0);
      }
      if (why.empty() && w.option) {
        EXPECT_STRNE((hf ? w.option->hf : w.option->gguf).how(), "") << w.name << " exports, and its row says not where";
      }
      if (why.empty()) continue;
      ++refused;
      std::string all;
      for (const std::string& line : why) all += line + "\n";
      EXPECT_NE(all.find(w.flag), std::string::npos) << w.name << ": the refusal does not name " << w.flag << ":\n" << all;
    }
  EXPECT_GE(refused, 20u);
}

TEST(OptionWalk, EveryOptionValueExportsToHfAndMatchesNumpyGpt2OrIsRefused) {
  if (!have_numpy()) GTEST_SKIP() << "no numpy";
  TempDir dir("option_walk_hf");
  const auto tok = bytes(dir);
  const std::vector<Exported> done = export_all(walk(hf_bases(tok->vocab_size())), *tok, dir, true);
  EXPECT_GE(done.size(), 6u);  // the base and the options that change nothing GPT-2 computes
  const std::vector<int32_t> ids = window_ids(*tok);
  std::string list;
  for (const int32_t id : ids) list += (list.empty() ? "" : ",") + std::to_string(id);
  for (const Exported& e : done) {
    SCOPED_TRACE(e.at.name);
    const double ours = folio_loss(*e.model, ids);
    const double theirs =
        python_loss("/usr/bin/python3 '" FOLIO_SOURCE_DIR "/tests/hf_gpt2_reference.py' loss-ids '" + e.out + "' " + list, dir);
    EXPECT_NEAR(ours, theirs, kMaxHfLossGap);
    std::printf("[hf] %s: folio %.6f, numpy GPT-2 %.6f\n", e.at.name.c_str(), ours, theirs);
  }
}

TEST(OptionWalk, EveryOptionValueExportsToGgufAndMatchesLlamaCppOrIsRefused) {
  std::string why;
  const std::string npm = llama_npm_dir(why);
  if (npm.empty()) GTEST_SKIP() << why;
  TempDir dir("option_walk_gguf");
  const auto tok = chars();
  const std::vector<Exported> done = export_all(walk(gguf_bases(tok->vocab_size())), *tok, dir, false);
  EXPECT_GE(done.size(), 20u);
  Json::Array jobs;
  for (const Exported& e : done) {
    Json::Array prompts;
    for (const char* text : kPrompts) {
      Json::Array ids;
      for (const int32_t id : tok->encode(text)) ids.emplace_back(id);
      prompts.emplace_back(Json::Object{{"text", text}, {"ids", std::move(ids)}});
    }
    jobs.emplace_back(Json::Object{{"model", e.out}, {"prompts", std::move(prompts)}});
  }
  spit(dir / "jobs.json", Json(jobs).dump());
  const std::string node = "NODE_PATH='" + npm + "/node_modules' node '" FOLIO_SOURCE_DIR "/tests/gguf_llamacpp.mjs' '" +
                           (dir / "jobs.json") + "' " + std::to_string(kSteps) + " >'" + (dir / "llama.json") +
                           "' 2>'" + (dir / "llama.err") + "'";
  ASSERT_EQ(std::system(node.c_str()), 0) << slurp(dir / "llama.err");
  const Json results = Json::parse(slurp(dir / "llama.json"));
  ASSERT_EQ(results.as_array().size(), done.size());
  for (size_t m = 0; m < done.size(); ++m) {
    SCOPED_TRACE(done[m].at.name);
    const Json& r = results.as_array()[m];
    const int64_t V = done[m].at.config.vocab_size;
    double worst = 0.0;
    for (size_t p = 0; p < std::size(kPrompts); ++p) {
      const Json& run = r.find("runs")->as_array().at(p);
      const std::vector<int32_t> prompt = tok->encode(kPrompts[p]);
      std::vector<int32_t> ids = prompt, llama_prompt;
      for (const Json& id : run.find("tokenized")->as_array()) llama_prompt.push_back(int32_t(id.as_int()));
      EXPECT_EQ(llama_prompt, prompt) << "llama.cpp's tokenization of the prompt";
      for (const Json& id : run.find("ids")->as_array()) ids.push_back(int32_t(id.as_int()));
      ASSERT_EQ(ids.size(), prompt.size() + kSteps);
      const int64_t T = int64_t(ids.size()) - 1;
      const Tensor logits = done[m].model->forward(std::span(ids.data(), size_t(T)), 1, T).logits;  // (1, T, V)
      for (int s = 0; s < kSteps; ++s) {
        const int64_t t = int64_t(prompt.size()) - 1 + s;
        const std::vector<double> want = softmax(logits.data() + t * V, V);
        // Over the model's tokens, renormalised: the suppressed special tokens hold some
        // mass before llama.cpp's samplers remove it (as in test_gguf_llamacpp.cpp).
        const Json::Array& got = run.find("probs")->as_array().at(size_t(s)).as_array();
        double mass = 0.0;
        for (int64_t i = 0; i < V; ++i) mass += got[size_t(i)].as_double();
        for (int64_t i = 0; i < V; ++i)
          worst = std::max(worst, std::fabs(got[size_t(i)].as_double() / mass - want[size_t(i)]));
        // Greedy: llama.cpp's choice is folio's most likely token, or one within the
        // tolerance of it (a near tie, which random weights give now and then).
        const size_t mine = size_t(std::max_element(want.begin(), want.end()) - want.begin());
        const size_t theirs = size_t(ids[size_t(t + 1)]);
        EXPECT_LT(want[mine] - want[theirs], kMaxProbabilityGap)
            << "step " << s << ": llama.cpp chose " << theirs << " (p " << want[theirs] << " in folio), folio " << mine
            << " (p " << want[mine] << ")";
      }
    }
    EXPECT_LE(worst, kMaxProbabilityGap) << "the largest next-token probability difference";
    std::printf("[gguf] %s (%s): largest probability difference %.2e\n", done[m].at.name.c_str(),
                r.find("arch")->as_string().c_str(), worst);
  }
}

}  // namespace
}  // namespace folio
