// folio eval (loss of a checkpoint on a text) and folio info (what a checkpoint holds).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "cli/common.h"
#include "data/dataset.h"
#include "io/checkpoint.h"

namespace folio::cli {
namespace {

void declare_eval(po::options_description& opts) {
  add_checkpoint(opts);
  opts.add_options()("data", with_default<std::string>(default_corpus_path()), "text to evaluate on (UTF-8)")
      ("split", with_default<std::string>("val"), "which part: val (the last --val-fraction), train or all")
      ("val-fraction", with_default<double>(0.1), "fraction at the end of the text that is val")
      ("batch-size", with_default<int64_t>(32), "windows per forward pass");
  add_dtype(opts);
  add_threads(opts);
}

std::function<int()> prepare_eval(const po::variables_map& vm) {
  apply_threads(vm);
  const int64_t batch = positive<int64_t>(vm, "batch-size");
  const std::string split = vm["split"].as<std::string>();
  const double vf = vm["val-fraction"].as<double>();
  if (split != "val" && split != "train" && split != "all")
    throw UsageError(cat("--split must be val, train or all, got '", split, "'"));
  if (!(vf > 0.0 && vf < 1.0)) throw UsageError(cat("--val-fraction ", vf, " outside (0, 1)"));
  const Precision dtype = dtype_option(vm["dtype"].as<std::string>());
  check_dtype(dtype);
  auto ck = std::make_shared<ModelCheckpoint>(load_model(vm["checkpoint"].as<std::string>()));
  ck->model->set_precision(dtype);
  const std::string path = vm["data"].as<std::string>();
  const std::string text = read_file(path);
  const std::vector<char32_t> chars = decode_utf8(text, path);
  std::vector<int32_t> tokens;
  try {
    tokens = ck->vocab.encode(chars);
  } catch (const Error& e) {
    throw UsageError(cat(path, ": ", e.what()));
  }
  const Split parts = split_tokens(tokens, 1.0 - vf);
  if (split != "all") tokens = split == "val" ? parts.val : parts.train;
  const int64_t T = ck->model->config().block_size;
  if (int64_t(tokens.size()) < T + 1)
    throw UsageError(cat(path, ": the ", split, " text has ", tokens.size(),
                         " characters, needs at least block_size + 1 = ", T + 1));
  return [=] {
    NoGradGuard no_grad;
    ck->model->eval();
    const int64_t windows = (int64_t(tokens.size()) - 1) / T;
    double total = 0;
    std::vector<int32_t> x, y;
    for (int64_t w = 0; w < windows; w += batch) {
      const int64_t B = std::min(batch, windows - w);
      x.assign(tokens.begin() + w * T, tokens.begin() + (w + B) * T);
      y.assign(tokens.begin() + w * T + 1, tokens.begin() + (w + B) * T + 1);
      total += double(ck->model->forward(x, B, T, y).loss.item()) * double(B);
    }
    const double loss = total / double(windows);
    std::printf("loss %.6f  bits/char %.4f  perplexity %.3f  (%lld windows of %lld characters)\n", loss,
                loss / std::log(2.0), std::exp(loss), (long long)windows, (long long)T);
    return 0;
  };
}

void declare_info(po::options_description& opts) { add_checkpoint(opts); }

void print_info(const ModelCheckpoint& ck, const std::optional<TrainState>& state) {
  const nn::GPTConfig& c = ck.model->config();
  std::printf("checkpoint   %s\n", ck.path.c_str());
  std::printf("model        %lld layers, %lld heads, n_embd %lld, block_size %lld, dropout %s, bias %s, %s\n",
              (long long)c.n_layer, (long long)c.n_head, (long long)c.n_embd, (long long)c.block_size,
              shown(c.dropout).c_str(), c.bias ? "on" : "off", nn::to_string(c.activation));
  // The model options as the flags that give them (switches only when on).
  std::printf("options      --pos %s%s%s --logit-softcap %s%s\n", nn::to_string(c.pos), c.qk_norm ? " --qk-norm" : "",
              c.zero_init_proj ? " --zero-init-proj" : "", shown(c.logit_softcap).c_str(),
              c.tie_weights ? " --tie-weights" : "");
  std::printf("parameters   %lld\n", (long long)ck.model->num_parameters());
  std::printf("vocabulary   %d characters: %s\n", ck.vocab.size(), json_quote(ck.vocab.to_utf8()).c_str());
  std::printf("step         %lld\n", (long long)ck.step);
  if (!state) return;
  const TrainConfig& t = state->config;
  std::printf("best val     %.4f\n", state->best_val_loss);
  if (!t.recipe.empty()) std::printf("recipe       --config %s\n", shown(t.recipe).c_str());
  std::printf("training     --data %s --val-fraction %s --batch-size %lld --max-iters %lld --max-time %s --seed %llu "
              "--dtype %s\n",
              shown(t.data).c_str(), shown(1.0 - t.train_fraction).c_str(), (long long)t.batch_size,
              (long long)t.max_iters, shown(t.max_time).c_str(), (unsigned long long)t.seed, to_string(t.dtype));
  if (state->train_seconds > 0)  // runs saved before it was kept have none
    std::printf("trained for  %.1f s of training steps\n", state->train_seconds);
  std::printf("optimizer    --optimizer %s --lr %s --min-lr %s --warmup-iters %lld --lr-decay-iters %lld "
              "--weight-decay %s --beta2 %s --grad-clip %s",
              to_string(t.optimizer), shown(t.lr).c_str(), shown(t.min_lr).c_str(), (long long)t.warmup_iters,
              (long long)t.lr_decay_iters, shown(t.weight_decay).c_str(), shown(t.beta2).c_str(),
              shown(t.grad_clip).c_str());
  if (t.optimizer == OptimizerKind::muon)
    std::printf(" --muon-lr %s --muon-weight-decay %s", shown(t.muon_lr).c_str(), shown(t.muon_weight_decay).c_str());
  std::printf("\n");
  std::printf("evaluation   --eval-interval %lld --eval-iters %lld --log-interval %lld\n", (long long)t.eval_interval,
              (long long)t.eval_iters, (long long)t.log_interval);
}

std::function<int()> prepare_info(const po::variables_map& vm) {
  const std::string path = vm["checkpoint"].as<std::string>();
  auto ck = std::make_shared<ModelCheckpoint>(load_model(path));
  std::optional<TrainState> state;
  const std::filesystem::path state_path = std::filesystem::path(ck->path).parent_path() / "state.safetensors";
  if (std::filesystem::is_directory(path) && std::filesystem::exists(state_path)) state = load_state(state_path.string());
  return [=] {
    print_info(*ck, state);
    return 0;
  };
}

}  // namespace

const Command kEval = {
    "eval", "loss of a checkpoint on a text file",
    "Mean cross-entropy of a checkpoint on a text file, in nats, bits per character and\n"
    "perplexity, over every non-overlapping window of block_size characters of the\n"
    "chosen part of the text.",
    declare_eval, prepare_eval};

const Command kInfo = {"info", "config, parameter count and training state of a checkpoint",
                       "Prints the model config, parameter count, vocabulary and training state of a\n"
                       "checkpoint (a run directory, or a .safetensors file).",
                       declare_info, prepare_info};

}  // namespace folio::cli
