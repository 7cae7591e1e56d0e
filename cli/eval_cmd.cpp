// folio eval: the loss of a checkpoint on a text, per token and per byte, by default on
// the validation split of the data its run trained on.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "cli/common.h"
#include "data/dataset.h"
#include "io/checkpoint.h"
#include "io/json.h"

namespace folio::cli {
namespace {

void declare(po::options_description& opts) {
  add_checkpoint(opts);
  opts.add_options()("data", po::value<std::string>(),
                     "text to evaluate on (UTF-8; default: the data the checkpoint's run trained on)")
      ("split", with_default<std::string>("val"), "which part: val (the last --val-fraction), train or all")
      ("val-fraction", po::value<double>(), "fraction at the end of the text that is val (default: the run's, or 0.1)")
      ("batch-size", with_default<int64_t>(32), "windows per forward pass")
      ("json", po::bool_switch(), "print the result as one JSON object");
  add_dtype(opts);
  add_threads(opts);
}

// The run a checkpoint belongs to: DIR/state.safetensors for a run directory or a file
// inside one (DIR/best.safetensors), if there is one.
std::optional<TrainState> run_of(const ModelCheckpoint& ck) {
  const std::filesystem::path state = std::filesystem::path(ck.path).parent_path() / "state.safetensors";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(state, ec)) return std::nullopt;
  return load_state(state.string());
}

struct Text {
  std::vector<int32_t> tokens;
  std::string path, split;
  double val_fraction = 0;
};

// The tokens of the part of the text to evaluate, encoded with the checkpoint's tokenizer.
Text text_to_evaluate(const po::variables_map& vm, const ModelCheckpoint& ck) {
  Text t;
  t.split = vm["split"].as<std::string>();
  if (t.split != "val" && t.split != "train" && t.split != "all")
    throw UsageError(cat("--split must be val, train or all, got '", t.split, "'"));
  std::optional<TrainState> run;
  if (!vm.count("data") || !vm.count("val-fraction")) run = run_of(ck);
  if (vm.count("data")) t.path = vm["data"].as<std::string>();
  else if (run) t.path = run->config.data;
  else
    throw UsageError(cat("--data is needed: ", ck.path, " has no run beside it (no state.safetensors) to say what it "
                         "trained on"));
  // A run saves its train fraction; 1 - 0.9 is shown (and stored in JSON) as 0.1.
  t.val_fraction = vm.count("val-fraction") ? vm["val-fraction"].as<double>()
                   : run                    ? std::stod(shown(1.0 - run->config.train_fraction))
                                            : 0.1;
  if (!(t.val_fraction > 0.0 && t.val_fraction < 1.0))
    throw UsageError(cat("--val-fraction must be in (0, 1), got ", t.val_fraction));
  Corpus corpus;
  try {
    corpus = Corpus::load(t.path, t.split == "all" ? 1.0 : 1.0 - t.val_fraction, ck.tokenizer);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  t.tokens = std::move(t.split == "val" ? corpus.split.val : corpus.split.train);
  const int64_t T = ck.model->config().block_size;
  if (int64_t(t.tokens.size()) < T + 1)
    throw UsageError(cat(t.path, ": the ", t.split, " text has ", t.tokens.size(),
                         " tokens, needs at least block_size + 1 = ", T + 1));
  return t;
}

std::function<int()> prepare(const po::variables_map& vm) {
  apply_threads(vm);
  const int64_t batch = positive<int64_t>(vm, "batch-size");
  const bool json = vm["json"].as<bool>();
  const Precision dtype = dtype_option(vm["dtype"].as<std::string>());
  check_dtype(dtype);
  auto ck = std::make_shared<ModelCheckpoint>(load_model(checkpoint_option(vm)));
  ck->model->set_precision(dtype);
  auto text = std::make_shared<Text>(text_to_evaluate(vm, *ck));
  return [=] {
    const std::vector<int32_t>& tokens = text->tokens;
    const int64_t T = ck->model->config().block_size;
    const int64_t windows = (int64_t(tokens.size()) - 1) / T, predicted = windows * T;
    if (!json)
      std::printf("%s (step %lld) on %s, %s split%s: %lld windows of %lld tokens\n", ck->path.c_str(),
                  (long long)ck->step, text->path.c_str(), text->split.c_str(),
                  text->split == "all" ? "" : cat(" (val: the last ", shown(text->val_fraction), ")").c_str(),
                  (long long)windows, (long long)T);
    NoGradGuard no_grad;
    ck->model->eval();
    double total = 0;  // nats, summed over windows of mean losses
    std::vector<int32_t> x, y;
    for (int64_t w = 0; w < windows; w += batch) {
      const int64_t B = std::min(batch, windows - w);
      x.assign(tokens.begin() + w * T, tokens.begin() + (w + B) * T);
      y.assign(tokens.begin() + w * T + 1, tokens.begin() + (w + B) * T + 1);
      total += double(ck->model->forward(x, B, T, y).loss.item()) * double(B);
    }
    const double loss = total / double(windows);
    // The text evaluated is that of the predicted tokens, tokens[1, windows * T].
    int64_t bytes = 0, chars = 0;
    for (int64_t i = 1; i <= predicted; ++i) {
      const std::string b = ck->tokenizer->token_bytes(tokens[size_t(i)]);
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
                                    {"windows", windows},           {"tokens", predicted},
                                    {"bytes", bytes},               {"characters", chars},
                                    {"loss", loss},                 {"bits_per_byte", bpb},
                                    {"bits_per_char", bpc},         {"perplexity", std::exp(loss)}};
      std::printf("%s\n", out.dump().c_str());
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
    "  perplexity exp(loss), per token",
    declare, prepare};

}  // namespace folio::cli
