// The rows of the training settings (train/settings.h), and the checks they drive.
#include "train/settings.h"

#include <cmath>
#include <type_traits>

#include "autograd/kernels/matmul.h"
#include "base/error.h"
#include "base/parse_name.h"
#include "io/config_json.h"
#include "nn/model_options.h"

namespace folio {

Range Range::limit(double max) const {
  Range r = *this;
  r.hi = max, r.hi_is_limit = true;
  return r;
}

Range Range::noting(const char* text) const {
  Range r = *this;
  r.note = text;
  return r;
}

Range Range::in(const char* unit_name) const {
  Range r = *this;
  r.unit = unit_name;
  return r;
}

Range Range::and_also(void (*check)(const TrainConfig&)) const {
  Range r = *this;
  r.also = check;
  return r;
}

bool Range::holds(double v) const {
  return (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
}

Range positive() { return {.lo = 0, .lo_open = true}; }
Range at_least(double lo) { return {.lo = lo}; }
Range interval(char open, double lo, double hi, char close) {
  return {.lo = lo, .hi = hi, .lo_open = open == '(', .hi_open = close == ')', .hi_is_limit = false};
}

namespace {

using enum OnResume;
using enum Absent;
constexpr int64_t kMaxBatch = TrainConfig::kMaxBatch, kMaxIters = TrainConfig::kMaxIters;

// A Choice over an enum field: its names are its values' to_string, in the order given.
template <class E>
Choice choice(E TrainConfig::* at, E initial, std::vector<E> values) {
  std::vector<std::string> names;
  for (E v : values) names.emplace_back(to_string(v));
  return {std::move(names), to_string(initial), [=](const TrainConfig& c) { return std::string(to_string(c.*at)); },
          [=](TrainConfig& c, std::string_view text) {
            const std::optional<E> v = parse_name<E>(text, values);
            if (v) c.*at = *v;
            return v.has_value();
          }};
}

// --dtype auto: bf16 where this CPU multiplies it natively, else fp32 (what the run saves).
Choice dtype_choice() {
  Choice c = choice(&TrainConfig::dtype, Precision::fp32, {Precision::fp32, Precision::bf16});
  c.set = [set = c.set](TrainConfig& t, std::string_view text) {
    if (text != "auto") return set(t, text);
    t.dtype = kernels::bf16_native() ? Precision::bf16 : Precision::fp32;
    return true;
  };
  c.flag_only = {"auto"};
  return c;
}

bool muon_only(const TrainConfig& c) { return c.optimizer == OptimizerKind::muon; }
bool wsd_only(const TrainConfig& c) { return c.decay == Decay::wsd; }
bool ema_on(const TrainConfig& c) { return c.ema > 0; }
bool guarded(const TrainConfig& c) { return c.on_divergence != OnDivergence::off; }
bool rolls_back(const TrainConfig& c) { return c.on_divergence == OnDivergence::rollback; }

}  // namespace

// In folio info's order: its training, optimizer and evaluation lines, each in the
// order of its rows. --help lists them in this order too.
const std::vector<TrainSetting>& train_settings() {
  static const std::vector<TrainSetting> table = {
      {"config", "recipe", "read options from this file (INI style: 'n-layer = 6'); the command line overrides it",
       Text{&TrainConfig::recipe, ""}, override, Line::none},
      {"init-from", "init_from",
       "start from this checkpoint's weights, tokenizer and model options (fine-tuning on --data; fresh optimizer "
       "and schedule; only --dropout may change)",
       Text{&TrainConfig::init_from, ""}, fixed, Line::none},
      // How the run's tokenizer was made (data/tokenizer.h: TokenizerSpec).
      {"tokenizer", "tokenizer",
       "char (the default here, one token per character of the text; folio tokenize's default is bpe), bpe or "
       "unigram (SentencePiece subwords, trained on the training split), or a SentencePiece .model file",
       Text{&TrainConfig::tokenizer, "char"}, fixed, Line::none, the_default, FlagKind::from_init},
      {"vocab-size", "vocab_size",
       "pieces of a bpe or unigram tokenizer (0: 1024); for token files without a manifest (llm.c, nanoGPT), their "
       "ids' vocabulary",
       Count{&TrainConfig::vocab_size, 0, at_least(0).limit(config_fields::kMaxVocab)}, fixed, Line::none,
       the_default, FlagKind::from_init},
      {"data", "data",
       "training text (UTF-8), a token directory (folio tokenize's, llm.c's shards or nanoGPT's "
       "train.bin/val.bin), or conversations to fine-tune a chat model on (FILE.jsonl, OpenAI's {\"messages\"}: "
       "docs/chat.md)",
       Text{&TrainConfig::data, ""}, override, Line::training, refused},
      {"val-fraction", "train_fraction", "last fraction of the text held out",
       Real64{&TrainConfig::train_fraction, 0.9, interval('(', 0, 1, ')'), true}, override, Line::training, refused},
      {"batch-size", "batch_size", "sequences per micro-batch (a step takes --grad-accum of them)",
       Count{&TrainConfig::batch_size, 12, positive().limit(kMaxBatch)}, override, Line::training, refused},
      {"grad-accum", "grad_accum",
       "micro-batches per optimizer step: the gradient of grad-accum x batch-size sequences, in the memory of one "
       "micro-batch, exchanged between ranks once per step",
       Count{&TrainConfig::grad_accum, 1, positive().limit(kMaxBatch)}, override, Line::training},
      {"max-iters", "max_iters",
       "training steps (0: no step limit, for a run on --max-time; --max-time without --max-iters means 0)",
       Count{&TrainConfig::max_iters, 2000, at_least(0).limit(kMaxIters).noting("0: no step limit")}, override,
       Line::training, refused},
      {"max-time", "max_time",
       "budget of training seconds (evaluations not counted; 0: none); the run stops after the step that reaches "
       "it, and with no step limit the cosine decays over it",
       Real64{&TrainConfig::max_time, 0.0,
              interval('[', 0, TrainConfig::kMaxTime, ']')
                  .in("seconds")
                  .noting("0: no limit")
                  .and_also([](const TrainConfig& c) {
                    if (c.max_iters == 0 && c.max_time == 0.0)
                      fail("config", "max_iters 0 (no step limit) needs a time budget: max_time > 0");
                  })},
       override, Line::training},
      {"seed", "seed", "seed of initialisation, batches and dropout", Seed{&TrainConfig::seed, 1337}, fixed,
       Line::training, refused},
      {"dtype", "dtype",
       "matrix products: fp32, bf16 (bf16 operands, fp32 sums; needs AVX512-BF16), or auto (bf16 where the CPU has "
       "AVX512-BF16, else fp32; the run saves which, and its first line says it)",
       dtype_choice(), override, Line::training},
      // The order of training windows (data/batch_sampler.h).
      {"sampling", "sampling",
       "order of the training windows: random (each starts anywhere, with replacement) or epoch (a shuffled pass "
       "over non-overlapping windows, each once a pass)",
       choice(&TrainConfig::sampling, Sampling::random, {Sampling::random, Sampling::epoch}), fixed, Line::training},
      {"seq-warmup", "seq_warmup",
       "steps over which the training windows grow from 8 tokens (an eighth of --block-size, if longer) to "
       "--block-size (0: the whole context from the start; random sampling only)",
       Count{&TrainConfig::seq_warmup, 0, at_least(0).limit(kMaxIters).and_also([](const TrainConfig& c) {
               if (c.seq_warmup > 0 && c.sampling == Sampling::epoch)
                 fail("config", "seq_warmup ", c.seq_warmup,
                      " needs sampling random (epoch cuts the text into windows of one length)");
             })},
       override, Line::training},
      {"batch-warmup", "batch_warmup",
       "steps over which the batch grows from an eighth of --batch-size to --batch-size (0: the whole batch from "
       "the start)",
       Count{&TrainConfig::batch_warmup, 0, at_least(0).limit(kMaxIters)}, override, Line::training},
      {"optimizer", "optimizer",
       "adamw, or muon: Muon on the hidden matrices (attention, feed-forward), AdamW on the rest",
       choice(&TrainConfig::optimizer, OptimizerKind::adamw, {OptimizerKind::adamw, OptimizerKind::muon}), fixed,
       Line::optimizer},
      {"lr", "lr", "peak learning rate", Real{&TrainConfig::lr, 1e-3f, positive()}, override, Line::optimizer,
       refused},
      {"min-lr", "min_lr", "learning rate at the end of the cosine decay",
       Real{&TrainConfig::min_lr, 1e-4f, at_least(0).and_also([](const TrainConfig& c) {
              if (!(c.min_lr <= c.lr)) fail("config", "min_lr ", c.min_lr, " outside [0, lr = ", c.lr, "]");
            })},
       override, Line::optimizer, refused},
      {"warmup-iters", "warmup_iters",
       "linear warm-up steps (when not given: 100, or a tenth of --max-iters if that is fewer, rounded down)",
       Count{&TrainConfig::warmup_iters, TrainConfig::kWarmupIters, at_least(0).limit(kMaxIters)}, override,
       Line::optimizer, refused},
      {"lr-decay-iters", "lr_decay_iters",
       "step where the decay reaches --min-lr (0: --max-iters; with no step limit, at --max-time)",
       Count{&TrainConfig::lr_decay_iters, 0, at_least(0).limit(kMaxIters).noting("0: max_iters")}, override,
       Line::optimizer, refused},
      {"weight-decay", "weight_decay", "AdamW weight decay (2-D weights only)",
       Real{&TrainConfig::weight_decay, 0.1f, at_least(0)}, override, Line::optimizer, refused},
      {"beta2", "beta2", "AdamW beta2", Real{&TrainConfig::beta2, 0.99f, interval('(', 0, 1, ')')}, override,
       Line::optimizer, refused},
      {"grad-clip", "grad_clip", "clip the global gradient norm (0: off)",
       Real{&TrainConfig::grad_clip, 1.0f, at_least(0).noting("0: off")}, override, Line::optimizer, refused},
      // Muon's rate follows the schedule scaled to muon_lr (muon_lr * lr(step) / lr).
      {"muon-lr", "muon_lr", "Muon's peak learning rate (follows the schedule of --lr)",
       Real{&TrainConfig::muon_lr, 0.02f, positive()}, override, {Line::optimizer, muon_only}},
      {"muon-weight-decay", "muon_weight_decay", "Muon's decoupled weight decay",
       Real{&TrainConfig::muon_weight_decay, 0.0f, at_least(0)}, override, {Line::optimizer, muon_only}},
      {"muon-momentum-warmup", "muon_momentum_warmup",
       "steps over which Muon's momentum rises linearly from 0.85 to 0.95 (0: 0.95 from the start)",
       Count{&TrainConfig::muon_momentum_warmup, 0, at_least(0).limit(kMaxIters)}, override,
       {Line::optimizer, muon_only}},
      {"decay", "decay",
       "how the learning rate falls after the warm-up: cosine, or wsd (held at --lr, then a straight line to "
       "--min-lr over the last --cooldown of the run)",
       choice(&TrainConfig::decay, Decay::cosine, {Decay::cosine, Decay::wsd}), override, Line::optimizer},
      {"cooldown", "cooldown", "--decay wsd: the fraction of the run its straight line takes",
       Real{&TrainConfig::cooldown, 0.2f, interval('(', 0, 1, ']')}, override, {Line::optimizer, wsd_only}},
      {"ema", "ema",
       "evaluate and keep as best.safetensors an exponential moving average of the weights with this decay per "
       "step (e.g. 0.99; 0: off)",
       Real{&TrainConfig::ema, 0.0f, interval('[', 0, 1, ')').noting("0: off")}, fixed, {Line::optimizer, ema_on}},
      {"eval-interval", "eval_interval", "evaluate and save every N steps",
       Count{&TrainConfig::eval_interval, 250, positive().limit(kMaxIters)}, override, Line::evaluation, refused},
      {"eval-iters", "eval_iters", "batches per evaluation",
       Count{&TrainConfig::eval_iters, 50, positive().limit(kMaxIters)}, override, Line::evaluation, refused},
      {"log-interval", "log_interval", "progress line every N steps (off a terminal)",
       Count{&TrainConfig::log_interval, 50, positive().limit(kMaxIters)}, override, Line::evaluation, refused},
      // The divergence guards (train/divergence_guard.h). Runs saved before them read the
      // defaults: the guards act only on a step that diverges, which ended such runs.
      {"on-divergence", "on_divergence",
       "what a step whose loss or gradient norm is not finite or spikes does: skip (its update is dropped), "
       "rollback (to the last good checkpoint, at --rollback-lr-factor times the learning rate), stop (exit 3, "
       "saving nothing new) or off (no guards: a non-finite value ends the run with an error)",
       choice(&TrainConfig::on_divergence, OnDivergence::rollback,
              {OnDivergence::skip, OnDivergence::rollback, OnDivergence::stop, OnDivergence::off}),
       override, Line::evaluation},
      {"spike-threshold", "spike_threshold",
       "a step whose loss is this many standard deviations above the mean of the last --spike-window steps "
       "diverges (0: only a non-finite loss does)",
       Real{&TrainConfig::spike_threshold, 6.0f, at_least(0).noting("0: no spike test")}, override,
       {Line::evaluation, guarded}},
      // Off by default: a healthy run's gradient norm has heavy tails (docs/training.md).
      {"grad-spike-threshold", "grad_spike_threshold",
       "the same for the gradient norm (0: only a non-finite norm diverges; the clip bounds what a large one does)",
       Real{&TrainConfig::grad_spike_threshold, 0.0f, at_least(0).noting("0: no spike test")}, override,
       {Line::evaluation, guarded}},
      {"spike-window", "spike_window",
       "the accepted steps a step is compared with; the spike tests start once 10 of them (or all, if fewer) have "
       "passed",
       Count{&TrainConfig::spike_window, 100, interval('[', 2, TrainConfig::kMaxSpikeWindow, ']')}, override,
       {Line::evaluation, guarded}},
      {"rollback-lr-factor", "rollback_lr_factor",
       "each rollback multiplies the learning rate by this, for the rest of the run (resumes too)",
       Real{&TrainConfig::rollback_lr_factor, 0.5f, interval('(', 0, 1, ']')}, override,
       {Line::evaluation, rolls_back}},
      {"max-rollbacks", "max_rollbacks", "rollbacks a run may make: the next divergence stops it (exit 3)",
       Count{&TrainConfig::max_rollbacks, 3, at_least(0).limit(kMaxIters)}, override, {Line::evaluation, rolls_back}},
      // Recorded by the trainer, and kept by --resume unless --threads is given
      // (cli/train_cmd.cpp); runs saved before it existed resume on the process's.
      {"threads", "threads", "the threads the run's steps ran on",
       Count{&TrainConfig::threads, 0, interval('[', 0, TrainConfig::kMaxThreads, ']')}, override, Line::none,
       the_default, FlagKind::every_command},
  };
  return table;
}

namespace {

// Below the range: "must be positive" or "must be >= 0"; above it: "exceeds the limit
// of" or "outside [0, 1)".
template <class T>
void check_number(const char* key, const Range& r, T v) {
  const std::string note = r.note ? cat(" (", r.note, ")") : "";
  bool low = r.lo_open ? double(v) > r.lo : double(v) >= r.lo;  // false for NaN
  if constexpr (std::is_floating_point_v<T>) low = low && !(r.hi_is_limit && std::isinf(v));  // finite, if no bound
  if (!low)
    fail("config", key, " must be ", r.lo_open && r.lo == 0 ? std::string("positive") : cat(">= ", r.lo), note,
         ", got ", v);
  if (r.holds(double(v))) return;
  if (!r.hi_is_limit) fail("config", key, " ", v, " outside ", range_text(r), r.unit ? cat(" ", r.unit) : "", note);
  if constexpr (std::is_integral_v<T>) fail("config", key, " ", v, " exceeds the limit of ", int64_t(r.hi));
  else fail("config", key, " ", v, " exceeds the limit of ", r.hi);
}

}  // namespace

void check_range(const TrainSetting& s, const TrainConfig& c) {
  std::visit(nn::Overloaded{[&]<class T>(const Number<T>& n) { check_number(s.key, n.range, c.*(n.at)); },
                            [](const auto&) {}},  // seeds, texts and choices hold any value they can
             s.value);
}

const Range* range_of(const TrainSetting& s) {
  return std::visit(nn::Overloaded{[]<class T>(const Number<T>& n) { return &n.range; },
                                   [](const auto&) -> const Range* { return nullptr; }},
                    s.value);
}

std::string range_text(const Range& r) {
  return cat(r.lo_open ? "(" : "[", r.lo, ", ", r.hi, r.hi_open ? ")" : "]");
}

void reset(const TrainSetting& s, TrainConfig& c) {
  std::visit(nn::Overloaded{[&]<class T>(const Number<T>& n) { c.*(n.at) = n.initial; },
                            [&](const Seed& n) { c.*(n.at) = n.initial; },
                            [&](const Text& t) { c.*(t.at) = t.initial; },
                            [&](const Choice& ch) { ch.set(c, ch.initial); }},
             s.value);
}

std::string names_list(const Choice& choice, char quote, bool with_flag_only) {
  std::vector<std::string> names = choice.names;
  if (with_flag_only) names.insert(names.end(), choice.flag_only.begin(), choice.flag_only.end());
  std::string list;
  const std::string q = quote ? std::string(1, quote) : "";
  for (size_t i = 0; i < names.size(); ++i)
    list += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + q + names[i] + q;
  return list;
}

}  // namespace folio
