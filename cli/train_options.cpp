// The rows of folio train's options (cli/train_options.h).
#include "cli/train_options.h"

#include <cmath>
#include <string>
#include <type_traits>
#include <variant>

#include "data/dataset.h"
#include "nn/model_options.h"
#include "train/adamw.h"

namespace folio::cli {
namespace {

// An option a run started --init-from a checkpoint takes from that checkpoint.
TrainOption from_checkpoint(TrainOption o) {
  o.from_init = true;
  return o;
}

// same() of an option stored in the field `at` picks out.
template <class At>
auto same_field(At at) {
  return [=](TrainOptions a, TrainOptions b) { return at(a) == at(b); };
}

// A value check: nothing, > 0, or >= 0.
enum class Check { any, positive, non_negative };

// An option stored as is in the field `at` picks out of TrainOptions.
template <class At>
TrainOption field(const char* flag, OnResume r, At at, const char* help, Check check = Check::any) {
  using T = std::remove_reference_t<decltype(at(std::declval<TrainOptions&>()))>;
  return {flag, r, [=](po::options_description& d, TrainOptions& defaults) {
            d.add_options()(flag, with_default<T>(at(defaults)), help);
          },
          [=](const po::variable_value& v, TrainOptions& o) {
            const T x = v.as<T>();
            if constexpr (std::is_arithmetic_v<T>)
              if (check == Check::positive && !(x > 0)) throw UsageError(cat("--", flag, " must be positive, got ", x));
            if constexpr (std::is_arithmetic_v<T>)
              if (check == Check::non_negative && !(x >= 0))
                throw UsageError(cat("--", flag, " must be >= 0, got ", x));
            at(o) = x;
          },
          same_field(at)};
}

// A switch (no value) that sets `at` to `on` when given.
template <class At>
TrainOption flag_switch(const char* flag, OnResume r, At at, bool on, const char* help) {
  return {flag, r, [=](po::options_description& d, TrainOptions&) { d.add_options()(flag, po::bool_switch(), help); },
          [=](const po::variable_value& v, TrainOptions& o) {
            if (v.as<bool>()) at(o) = on;
          },
          same_field(at)};
}

// An option whose text is parsed into the field: `parse(text) -> value`, `show(value) -> text`.
template <class At, class Parse, class Show>
TrainOption parsed(const char* flag, OnResume r, At at, Parse parse, Show show, const char* help) {
  return {flag, r, [=](po::options_description& d, TrainOptions& defaults) {
            d.add_options()(flag, po::value<std::string>()->default_value(show(at(defaults))), help);
          },
          [=](const po::variable_value& v, TrainOptions& o) { at(o) = parse(v.as<std::string>()); }, same_field(at)};
}

// An option naming one value of an enum: `parse(text) -> optional`, `show(value) ->
// const char*`; any other text is an error that lists `names`.
template <class At, class Parse, class Show>
TrainOption choice(const char* flag, OnResume r, At at, Parse parse, Show show, const char* names, const char* help) {
  return parsed(
      flag, r, at,
      [=](const std::string& s) {
        const auto value = parse(s);
        if (!value) throw UsageError(cat("--", flag, " must be ", names, ", got '", s, "'"));
        return *value;
      },
      [=](auto value) { return std::string(show(value)); }, help);
}

// folio train's flag for one of the model options (nn/model_options.h).
TrainOption model_flag(const nn::ModelOption& m) {
  const char* flag = m.flag;
  return std::visit(
      nn::Overloaded{
          [&](const nn::Toggle& t) {
            return flag_switch(flag, OnResume::fixed, [at = t.at](TrainOptions& o) -> bool& { return o.model.*at; },
                               true, m.help);
          },
          [&](const nn::Number& n) {
            return parsed(
                flag, OnResume::fixed, [at = n.at](TrainOptions& o) -> float& { return o.model.*at; },
                [=](const std::string& s) {
                  const auto v = whole_number<float>(s);
                  if (v && *v >= n.min && *v <= n.max && std::isfinite(*v)) return *v;
                  const std::string range = n.max < std::numeric_limits<float>::max()
                                                ? cat("in [", n.min, ", ", n.max, "]")
                                                : cat(">= ", n.min);
                  throw UsageError(cat("--", flag, " must be a number ", range, " (", n.note, "), got '", s, "'"));
                },
                [](float v) { return shown(v); }, m.help);
          },
          [&](const nn::Choice& choice) {
            return TrainOption{flag, OnResume::fixed,
                          [=, help = m.help](po::options_description& d, TrainOptions& defaults) {
                            d.add_options()(flag, po::value<std::string>()->default_value(choice.get(defaults.model)),
                                            help);
                          },
                          [=](const po::variable_value& v, TrainOptions& o) {
                            const std::string& s = v.as<std::string>();
                            if (!choice.set(o.model, s))
                              throw UsageError(cat("--", flag, " must be ", nn::names_list(choice), ", got '", s, "'"));
                          },
                          [=](TrainOptions a, TrainOptions b) { return choice.get(a.model) == choice.get(b.model); }};
          }},
      m.value);
}

#define AT(member) [](TrainOptions& o) -> auto& { return o.member; }
using enum OnResume;

}  // namespace

const std::vector<TrainOption>& train_options() {
  static const std::vector<TrainOption> table = [] {
    std::vector<TrainOption> rows = {
      field("config", override, AT(train.recipe),
            "read options from this file (INI style: 'n-layer = 6'); the command line overrides it"),
      field("data", override, AT(train.data),
            "training text (UTF-8), or a token directory: folio tokenize's, llm.c's shards or nanoGPT's "
            "train.bin/val.bin"),
      from_checkpoint(field("tokenizer", fixed, AT(train.tokenizer),
                            "char (the default here, one token per character of the text; folio tokenize's "
                            "default is bpe), bpe or unigram (SentencePiece subwords, trained on the training "
                            "split), or a SentencePiece .model file")),
      from_checkpoint(field("vocab-size", fixed, AT(train.vocab_size),
                            "pieces of a bpe or unigram tokenizer (0: 1024); for token files without a "
                            "manifest (llm.c, nanoGPT), their ids' vocabulary",
                            Check::non_negative)),
      choice("sampling", fixed, AT(train.sampling), parse_sampling, [](Sampling s) { return to_string(s); },
             "random or epoch",
             "order of the training windows: random (each starts anywhere, with replacement) or epoch (a "
             "shuffled pass over non-overlapping windows, each once a pass)"),
      field("init-from", fixed, AT(train.init_from),
            "start from this checkpoint's weights, tokenizer and model options (fine-tuning on --data; "
            "fresh optimizer and schedule; only --dropout may change)"),
      field("out", always, AT(out_dir), "output directory"),
      flag_switch("resume", always, AT(resume), true, "continue the run saved in --out"),
      flag_switch("overwrite", always, AT(overwrite), true,
                  "replace the run already in --out (without it, folio train refuses to)"),
      from_checkpoint(field("n-layer", fixed, AT(model.n_layer), "transformer blocks", Check::positive)),
      from_checkpoint(field("n-head", fixed, AT(model.n_head), "attention heads per block", Check::positive)),
      from_checkpoint(field("n-embd", fixed, AT(model.n_embd), "embedding width (divisible by --n-head)", Check::positive)),
      from_checkpoint(field("block-size", fixed, AT(model.block_size), "context length in tokens", Check::positive)),
      field("dropout", fixed, AT(model.dropout), "dropout probability in [0, 1)"),
      from_checkpoint(flag_switch("no-bias", fixed, AT(model.bias), false, "no bias in the Linear layers")),
      from_checkpoint(choice("activation", fixed, AT(model.activation), nn::parse_activation,
             [](nn::Activation a) { return nn::to_string(a); }, "relu, gelu or relu2",
             "feed-forward activation: relu, gelu or relu2 (relu squared)")),
    };
    // The model options (nn/model_options.h), each part of the model.
    for (const nn::ModelOption& option : nn::model_options()) rows.push_back(from_checkpoint(model_flag(option)));
    rows.insert(rows.end(), {
      field("batch-size", override, AT(train.batch_size),
            "sequences per micro-batch (a step takes --grad-accum of them)", Check::positive),
      field("seq-warmup", override, AT(train.seq_warmup),
            "steps over which the training windows grow from 8 tokens (an eighth of --block-size, if longer) to "
            "--block-size (0: the whole context from the start; random sampling only)",
            Check::non_negative),
      field("batch-warmup", override, AT(train.batch_warmup),
            "steps over which the batch grows from an eighth of --batch-size to --batch-size (0: the whole batch "
            "from the start)",
            Check::non_negative),
      field("grad-accum", override, AT(train.grad_accum),
            "micro-batches per optimizer step: the gradient of grad-accum x batch-size sequences, in the memory "
            "of one micro-batch, exchanged between ranks once per step",
            Check::positive),
      field("max-iters", override, AT(train.max_iters),
            "training steps (0: no step limit, for a run on --max-time; --max-time without --max-iters means 0)",
            Check::non_negative),
      field("max-time", override, AT(train.max_time),
            "budget of training seconds (evaluations not counted; 0: none); the run stops after the step that "
            "reaches it, and with no step limit the cosine decays over it",
            Check::non_negative),
      field("lr", override, AT(train.lr), "peak learning rate"),
      field("min-lr", override, AT(train.min_lr), "learning rate at the end of the cosine decay"),
      field("warmup-iters", override, AT(train.warmup_iters), "linear warm-up steps"),
      field("lr-decay-iters", override, AT(train.lr_decay_iters),
            "step where the decay reaches --min-lr (0: --max-iters; with no step limit, at --max-time)"),
      choice("decay", override, AT(train.decay), parse_decay, [](Decay d) { return to_string(d); }, "cosine or wsd",
             "how the learning rate falls after the warm-up: cosine, or wsd (held at --lr, then a straight line to "
             "--min-lr over the last --cooldown of the run)"),
      field("cooldown", override, AT(train.cooldown), "--decay wsd: the fraction of the run its straight line takes",
            Check::positive),
      field("ema", fixed, AT(train.ema),
            "evaluate and keep as best.safetensors an exponential moving average of the weights with this decay "
            "per step (e.g. 0.99; 0: off)",
            Check::non_negative),
      field("weight-decay", override, AT(train.weight_decay), "AdamW weight decay (2-D weights only)"),
      field("beta2", override, AT(train.beta2), "AdamW beta2"),
      choice("optimizer", fixed, AT(train.optimizer), parse_optimizer,
             [](OptimizerKind k) { return to_string(k); }, "adamw or muon",
             "adamw, or muon: Muon on the hidden matrices (attention, feed-forward), AdamW on the rest"),
      field("muon-lr", override, AT(train.muon_lr), "Muon's peak learning rate (follows the schedule of --lr)",
            Check::positive),
      field("muon-weight-decay", override, AT(train.muon_weight_decay), "Muon's decoupled weight decay",
            Check::non_negative),
      field("muon-momentum-warmup", override, AT(train.muon_momentum_warmup),
            "steps over which Muon's momentum rises linearly from 0.85 to 0.95 (0: 0.95 from the start)",
            Check::non_negative),
      field("grad-clip", override, AT(train.grad_clip), "clip the global gradient norm (0: off)"),
      field("eval-interval", override, AT(train.eval_interval), "evaluate and save every N steps", Check::positive),
      field("eval-iters", override, AT(train.eval_iters), "batches per evaluation", Check::positive),
      field("log-interval", override, AT(train.log_interval), "progress line every N steps (off a terminal)",
            Check::positive),
      parsed(
          "val-fraction", override, AT(train.train_fraction),
          [](const std::string& s) {
            const auto v = whole_number<double>(s);
            if (!v || !(*v > 0.0 && *v < 1.0))
              throw UsageError(cat("--val-fraction must be a number in (0, 1), got '", s, "'"));
            return 1.0 - *v;
          },
          [](double train_fraction) { return shown(1.0 - train_fraction); }, "last fraction of the text held out"),
      parsed(
          "seed", fixed, AT(train.seed), [](const std::string& s) { return u64_option(s, "seed"); },
          [](uint64_t seed) { return std::to_string(seed); }, "seed of initialisation, batches and dropout"),
      parsed(
          "parallel", always, AT(data_parallel),
          [](const std::string& s) {
            if (s != "data" && s != "ops") throw UsageError(cat("--parallel must be data or ops, got '", s, "'"));
            return s == "data";
          },
          [](bool data) { return std::string(data ? "data" : "ops"); },
          "how threads share a step: data (a batch shard each) or ops (inside every op)"),
      parsed(
          "overlap", always, AT(overlap),
          [](const std::string& s) {
            if (s != "on" && s != "off") throw UsageError(cat("--overlap must be on or off, got '", s, "'"));
            return s == "on";
          },
          [](bool on) { return std::string(on ? "on" : "off"); },
          "on several ranks: send the gradients in buckets while the backward pass runs (on), or all of them "
          "after it (off); the weights are the same"),
      field("comm-timeout", always, AT(comm_timeout),
            "on several ranks: seconds one rank may wait for the others in one exchange before it ends the job "
            "(a dead host or a cut network; 0: wait for ever)",
            Check::non_negative),
      parsed("dtype", override, AT(train.dtype), dtype_option, [](Precision p) { return std::string(to_string(p)); },
             "matrix products: fp32, bf16 (bf16 operands, fp32 sums; needs AVX512-BF16), or auto (bf16 where the "
             "CPU has AVX512-BF16, else fp32; the run saves which, and its first line says it)"),
      flag_switch("quiet", always, AT(quiet), true, "no progress output"),
    });
    return rows;
  }();
  return table;
}
#undef AT

TrainOptions train_defaults() {
  TrainOptions d;
  d.train.data = default_corpus_path();
  return d;
}

}  // namespace folio::cli
