// folio eval: the loss of a checkpoint on a text, per token and per byte, by default on
// the validation split of the data its run trained on.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "autograd/parallel.h"
#include "cli/chat_eval.h"
#include "cli/common.h"
#include "cli/task_eval_cmd.h"
#include "data/dataset.h"
#include "io/checkpoint.h"
#include "io/conversation_file.h"
#include "io/json.h"
#include "infer/decoder.h"
#include "train/run_state.h"

namespace folio::cli {
namespace {

void declare(po::options_description& opts) {
  add_checkpoint(opts);
  opts.add_options()("data", po::value<std::string>(),
                     "text or token directory to evaluate on (default: the data the checkpoint's run trained on)")
      ("split", with_default<std::string>("val"),
       "which part: val (a text's last --val-fraction, a token directory's val shards), train or all (a text)")
      ("max-windows", with_default<int64_t>(0), "evaluate at most this many windows from the start (0: all)")
      ("val-fraction", po::value<double>(), "fraction at the end of the text that is val (default: the run's, or 0.1)")
      ("batch-size", with_default<int64_t>(32), "windows per forward pass (with --task: choices)")
      ("json", po::bool_switch(), "print the result as one JSON object");
  declare_task_options(opts);
  add_dtype(opts);
  add_weights(opts);
  add_threads(opts);
}

// The run a checkpoint belongs to: DIR/state.safetensors for a run directory or a file
// inside one (DIR/best.safetensors), if there is one. Only --resume needs the state: an
// unreadable one is a warning, and `unreadable` says why (the weights are evaluated).
std::optional<TrainState> run_of(const ModelCheckpoint& ck, std::string& unreadable) {
  const std::filesystem::path state = std::filesystem::path(ck.path).parent_path() / "state.safetensors";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(state, ec)) return std::nullopt;
  try {
    return load_state(state.string());
  } catch (const Error& e) {
    unreadable = cat(state.string(), " cannot be read (", e.what(), ")");
    return std::nullopt;
  }
}

struct Text {
  TrainingData data;
  TokenSequence tokens;
  std::string path, split;
  double val_fraction = 0;
  bool conversations = false;  // a .jsonl of conversations: cli/chat_eval.h reads it
};

// The tokens of the part of the text to evaluate, encoded with the checkpoint's tokenizer.
Text text_to_evaluate(const po::variables_map& vm, const ModelCheckpoint& ck) {
  Text t;
  t.split = vm["split"].as<std::string>();
  if (t.split != "val" && t.split != "train" && t.split != "all")
    throw UsageError(cat("--split must be val, train or all, got '", t.split, "'"));
  std::optional<TrainState> run;
  std::string unreadable;
  if (!vm.count("data") || !vm.count("val-fraction")) run = run_of(ck, unreadable);
  if (vm.count("data")) t.path = vm["data"].as<std::string>();
  else if (run) t.path = run->config.data;
  else if (!unreadable.empty())
    throw UsageError(cat("--data is needed: ", unreadable, ", so it cannot say what ", ck.path, " trained on"));
  else
    throw UsageError(cat("--data is needed: ", ck.path, " has no run beside it (no state.safetensors) to say what it "
                         "trained on"));
  if (!unreadable.empty())
    warn(cat(unreadable, ": the run's --val-fraction is not known, so 0.1 is used (--val-fraction chooses; only "
             "--resume needs that file)"));
  // A run saves its train fraction; 1 - 0.9 is shown (and stored in JSON) as 0.1.
  t.val_fraction = vm.count("val-fraction") ? vm["val-fraction"].as<double>()
                   : run                    ? std::stod(shown(1.0 - run->config.train_fraction))
                                            : 0.1;
  if (!(t.val_fraction > 0.0 && t.val_fraction < 1.0))
    throw UsageError(cat("--val-fraction must be in (0, 1), got ", t.val_fraction));
  if ((t.conversations = is_conversation_file(t.path))) return t;
  if (t.split == "all" && std::filesystem::is_directory(t.path))
    throw UsageError(cat("--split all reads a text file; ", t.path, " is a token directory, whose splits are its "
                         "shards: give --split val or train"));
  try {
    t.data = TrainingData::open(t.path, t.split == "all" ? 1.0 : 1.0 - t.val_fraction, ck.tokenizer);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  if (t.data.invalid_utf8_bytes)
    warn(invalid_utf8_warning(t.path, t.data.invalid_utf8_bytes));
  t.tokens = t.split == "val" ? t.data.val : t.data.train;
  const int64_t T = ck.model->config().block_size;
  if (t.tokens.size() < T + 1)
    throw UsageError(cat(t.path, ": the ", t.split, " text has ", t.tokens.size(),
                         " tokens, needs at least block_size + 1 = ", T + 1));
  return t;
}

// The mean cross-entropy (nats) of targets (T) under logits (T, V), summed in double.
double mean_cross_entropy(std::span<const float> logits, std::span<const int32_t> targets) {
  const size_t T = targets.size(), V = logits.size() / T;
  double total = 0;
  for (size_t t = 0; t < T; ++t) {
    const float* row = logits.data() + t * V;
    const double mx = *std::max_element(row, row + V);
    double sum = 0;
    for (size_t v = 0; v < V; ++v) sum += std::exp(double(row[v]) - mx);
    total += mx + std::log(sum) - double(row[size_t(targets[t])]);
  }
  return total / double(T);
}

std::function<int()> prepare(const po::variables_map& vm) {
  if (vm.count("task")) return prepare_task_eval(vm);
  for (const char* name : {"limit", "log-samples", "max-new-tokens", "stop"})
    if (vm.count(name) && !vm[name].defaulted()) throw UsageError(cat("--", name, " goes with --task"));
  apply_threads(vm);
  const int64_t batch = positive<int64_t>(vm, "batch-size");
  const int64_t max_windows = non_negative<int64_t>(vm, "max-windows");
  const bool json = vm["json"].as<bool>();
  const Precision dtype = dtype_option(vm);
  const nn::Weights weights = weights_option(vm, dtype);
  auto ck = std::make_shared<ModelCheckpoint>(load_model(checkpoint_option(vm)));
  ck->model->set_precision(dtype);
  auto text = std::make_shared<Text>(text_to_evaluate(vm, *ck));
  if (text->conversations) return prepare_chat_eval(vm, ck, text->path, text->val_fraction);
  return [=] {
    const TokenSequence& tokens = text->tokens;
    const int64_t T = ck->model->config().block_size;
    const int64_t all_windows = (tokens.size() - 1) / T;
    const int64_t windows = max_windows > 0 ? std::min(max_windows, all_windows) : all_windows, predicted = windows * T;
    if (!json)
      std::printf("%s (step %lld) on %s, %s split%s: %lld windows of %lld tokens%s\n", ck->path.c_str(),
                  (long long)ck->step, text->path.c_str(), text->split.c_str(),
                  text->split == "all"           ? ""
                  : text->data.is_token_dir() ? " (its shards)"
                                              : cat(" (val: the last ", shown(text->val_fraction), ")").c_str(),
                  (long long)windows, (long long)T,
                  weights == nn::Weights::f32 ? "" : cat(", ", nn::to_string(weights), " weights").c_str());
    NoGradGuard no_grad;
    ck->model->eval();
    // Weights stored small are read by the decoder, as generate and serve read them: a
    // window is a prompt, whose every position's logits its prefill gives.
    std::unique_ptr<infer::Decoder> decoder;
    if (weights != nn::Weights::f32) {
      decoder = std::make_unique<infer::Decoder>(*ck->model, 1, weights);
      decoder->set_threads(num_threads());  // every --threads, as the fp32 forward uses them
    }
    double total = 0;  // nats, summed over windows of mean losses
    std::vector<int32_t> x, y;  // (B, T) each
    for (int64_t w = 0; w < windows; w += batch) {
      const int64_t B = std::min(batch, windows - w);
      x.resize(size_t(B * T)), y.resize(size_t(B * T));
      tokens.read(w * T, B * T, x.data());
      tokens.read(w * T + 1, B * T, y.data());
      if (!decoder) {
        total += double(ck->model->forward(x, B, T, y).loss.item()) * double(B);
        continue;
      }
      for (int64_t b = 0; b < B; ++b) {
        const std::span<const int32_t> window(x.data() + b * T, size_t(T)), targets(y.data() + b * T, size_t(T));
        total += mean_cross_entropy(decoder->restart(window, 0, true), targets);  // logits (T, V)
      }
    }
    const double loss = total / double(windows);
    // The text evaluated is that of the predicted tokens, tokens[1, windows * T]. Ids
    // from files without a tokenizer have no known text: no bits per byte.
    const bool has_text = std::string(ck->tokenizer->kind()) != "ids";
    int64_t bytes = 0, chars = 0;
    for (int64_t i = 1; i <= predicted && has_text; ++i) {
      const std::string b = ck->tokenizer->token_bytes(tokens[i]);
      bytes += int64_t(b.size());
      for (unsigned char c : b) chars += (c & 0xC0) != 0x80;
    }
    const double nats = loss * double(predicted);
    const double bpb = nats / std::log(2.0) / double(std::max<int64_t>(bytes, 1));
    const double bpc = nats / std::log(2.0) / double(std::max<int64_t>(chars, 1));
    if (json) {
      const Json out = Json::Object{{"checkpoint", ck->path},       {"step", ck->step},
                                    {"data", text->path},           {"split", text->split},
                                    {"val_fraction", text->val_fraction}, {"block_size", T},
                                    {"weights", nn::to_string(weights)},
                                    {"windows", windows},           {"tokens", predicted},
                                    {"bytes", bytes},               {"characters", chars},
                                    {"loss", loss},                 {"bits_per_byte", has_text ? Json(bpb) : Json()},
                                    {"bits_per_char", has_text ? Json(bpc) : Json()}, {"perplexity", std::exp(loss)}};
      std::printf("%s\n", out.dump().c_str());
    } else if (!has_text) {
      std::printf("loss %.6f  perplexity %.3f  (%lld tokens; ids without a tokenizer: no bits/byte)\n", loss,
                  std::exp(loss), (long long)predicted);
    } else {
      std::printf("loss %.6f  bits/byte %.4f  bits/char %.4f  perplexity %.3f  (%lld tokens, %lld bytes)\n", loss, bpb,
                  bpc, std::exp(loss), (long long)predicted, (long long)bytes);
    }
    return 0;
  };
}

}  // namespace

const Command kEval = {
    "eval", "loss of a checkpoint on a text, per token and per byte",
    "The loss of a checkpoint on a text, over every non-overlapping window of\n"
    "block_size tokens of the chosen part (the tokens predicted are all but the\n"
    "first). By default the text is the data the checkpoint's run trained on, split\n"
    "as that run split it. Reported:\n"
    "  loss       mean cross-entropy per predicted token, in nats\n"
    "  bits/byte  total nats / ln 2 / UTF-8 bytes of the predicted tokens' text: a\n"
    "             figure that compares models with different tokenizers on one text\n"
    "  bits/char  the same per character of that text\n"
    "  perplexity exp(loss), per token\n"
    "With --task FILE (repeatable), instead: the accuracy on task files: multiple\n"
    "choice (acc, and acc_norm over the choices' characters, lm-eval's rule) or\n"
    "generative (exact_match of greedy text); docs/evals.md.",
    declare, prepare};

}  // namespace folio::cli
