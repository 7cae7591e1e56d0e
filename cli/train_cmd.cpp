// folio train: learn a character-level GPT from a text file.
#include <cstdio>

#include "cli/common.h"
#include "data/dataset.h"
#include "train/trainer.h"

namespace folio::cli {
namespace {

constexpr const char* kUsage = R"(usage: folio train [options]

Trains a GPT on --data and writes DIR/model.safetensors, DIR/best.safetensors,
DIR/state.safetensors and DIR/log.csv into --out DIR. --resume continues the
run in DIR exactly where it stopped (with its saved options; options given on
the command line override the training options, e.g. a larger --max-iters).)";

// Runs the setup (option checks, loading) with every failure as a usage error.
template <class F>
auto setup(F f) {
  try {
    return f();
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

}  // namespace

int train_main(int argc, char** argv) {
  const TrainConfig d;
  const nn::GPTConfig m;
  po::options_description opts("options");
  opts.add_options()("help,h", "show this help")
      ("data", with_default<std::string>(default_corpus_path()), "training text (UTF-8)")
      ("out", with_default<std::string>("out"), "output directory")
      ("resume", po::bool_switch(), "continue the run saved in --out")
      ("n-layer", with_default<int64_t>(m.n_layer), "transformer blocks")
      ("n-head", with_default<int64_t>(m.n_head), "attention heads per block")
      ("n-embd", with_default<int64_t>(m.n_embd), "embedding width (divisible by --n-head)")
      ("block-size", with_default<int64_t>(m.block_size), "context length in characters")
      ("dropout", with_default<float>(m.dropout), "dropout probability in [0, 1)")
      ("no-bias", po::bool_switch(), "no bias in the Linear layers")
      ("activation", with_default<std::string>("relu"), "feed-forward activation: relu or gelu")
      ("batch-size", with_default<int64_t>(d.batch_size), "sequences per step")
      ("max-iters", with_default<int64_t>(d.max_iters), "training steps")
      ("lr", with_default<float>(d.lr), "peak learning rate")
      ("min-lr", with_default<float>(d.min_lr), "learning rate at the end of the cosine decay")
      ("warmup-iters", with_default<int64_t>(d.warmup_iters), "linear warm-up steps")
      ("lr-decay-iters", with_default<int64_t>(d.lr_decay_iters), "step where the cosine reaches --min-lr (0: --max-iters)")
      ("weight-decay", with_default<float>(d.weight_decay), "AdamW weight decay (2-D weights only)")
      ("beta2", with_default<float>(d.beta2), "AdamW beta2")
      ("grad-clip", with_default<float>(d.grad_clip), "clip the global gradient norm (0: off)")
      ("eval-interval", with_default<int64_t>(d.eval_interval), "evaluate and save every N steps")
      ("eval-iters", with_default<int64_t>(d.eval_iters), "batches per evaluation")
      ("log-interval", with_default<int64_t>(d.log_interval), "progress line every N steps (off a terminal)")
      ("val-fraction", with_default<double>(1.0 - d.train_fraction), "last fraction of the text held out")
      ("seed", with_default<std::string>(std::to_string(d.seed)), "seed of initialisation, batches and dropout")
      ("threads", with_default<int>(0), "threads (0: all cores)")
      ("parallel", with_default<std::string>("data"),
       "how threads share a step: data (a batch shard each) or ops (inside every op)")
      ("quiet", po::bool_switch(), "no progress output");
  po::variables_map vm;
  if (!parse(argc, argv, kUsage, opts, vm)) return 0;

  TrainOptions o = setup([&] {
    TrainOptions o;
    o.out_dir = vm["out"].as<std::string>();
    o.resume = vm["resume"].as<bool>();
    o.quiet = vm["quiet"].as<bool>();
    apply_threads(vm);
    const std::string parallel = vm["parallel"].as<std::string>();
    if (parallel != "data" && parallel != "ops") throw UsageError(cat("--parallel must be data or ops, got '", parallel, "'"));
    o.data_parallel = parallel == "data";
    auto given = [&](const char* name) { return vm.count(name) && !vm[name].defaulted(); };
    TrainConfig& t = o.train;
    if (o.resume) {
      t = saved_run(o.out_dir).config;  // the saved options, overridden by the ones given
      for (const char* name : {"n-layer", "n-head", "n-embd", "block-size", "dropout", "no-bias", "activation", "seed"})
        if (given(name) && !(std::string(name) == "no-bias" && !vm[name].as<bool>()))
          throw UsageError(cat("--", name, " cannot change when resuming: the model in ", o.out_dir, " is fixed"));
    }
    for (const char* name : {"batch-size", "max-iters", "eval-interval", "eval-iters", "log-interval"})
      positive<int64_t>(vm, name);
    auto take = [&](const char* name, auto& field) {
      if (!o.resume || given(name)) field = vm[name].as<std::decay_t<decltype(field)>>();
    };
    take("data", t.data);
    take("batch-size", t.batch_size);
    take("max-iters", t.max_iters);
    take("lr", t.lr);
    take("min-lr", t.min_lr);
    take("warmup-iters", t.warmup_iters);
    take("lr-decay-iters", t.lr_decay_iters);
    take("weight-decay", t.weight_decay);
    take("beta2", t.beta2);
    take("grad-clip", t.grad_clip);
    take("eval-interval", t.eval_interval);
    take("eval-iters", t.eval_iters);
    take("log-interval", t.log_interval);
    if (!o.resume || given("seed")) t.seed = u64_option(vm, "seed");
    if (!o.resume || given("val-fraction")) t.train_fraction = 1.0 - vm["val-fraction"].as<double>();
    const double vf = vm["val-fraction"].as<double>();
    if (!(vf > 0.0 && vf < 1.0)) throw UsageError(cat("--val-fraction ", vf, " outside (0, 1)"));
    o.model.n_layer = positive<int64_t>(vm, "n-layer");
    o.model.n_head = positive<int64_t>(vm, "n-head");
    o.model.n_embd = positive<int64_t>(vm, "n-embd");
    o.model.block_size = positive<int64_t>(vm, "block-size");
    o.model.dropout = vm["dropout"].as<float>();
    o.model.bias = !vm["no-bias"].as<bool>();
    o.model.seed = t.seed;
    const std::string act = vm["activation"].as<std::string>();
    if (act != "gelu" && act != "relu") throw UsageError(cat("--activation must be gelu or relu, got '", act, "'"));
    o.model.activation = act == "gelu" ? nn::Activation::gelu : nn::Activation::relu;
    o.model.validate();
    t.validate();
    return o;
  });
  std::unique_ptr<Trainer> trainer = setup([&] { return std::make_unique<Trainer>(o); });
  trainer->run();
  return 0;
}

}  // namespace folio::cli
