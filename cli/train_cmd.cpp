// folio train: learn a character-level GPT from a text file. Every option is one row
// of a table that declares it, gives its default, moves it into TrainOptions, and says
// what --resume does with it.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <type_traits>
#include <vector>

#include "cli/common.h"
#include "data/dataset.h"
#include "nn/model_options.h"
#include "train/adamw.h"
#include "train/distributed.h"
#include "train/trainer.h"

namespace folio::cli {
namespace {

namespace fs = std::filesystem;

// What --resume does with an option given on the command line.
enum class OnResume {
  fixed,     // part of the model or its optimizer: giving it is an error, the run's is kept
  override,  // saved with the run: replaces the saved value when given
  always,    // not saved (where to write, output, threads): always from the command line
};

struct Option {
  const char* flag;
  OnResume on_resume;
  std::function<void(po::options_description&, TrainOptions& defaults)> declare;
  std::function<void(const po::variable_value&, TrainOptions& o)> apply;  // may throw UsageError
  std::function<bool(TrainOptions a, TrainOptions b)> same;  // a and b agree on this option
  bool from_init = false;  // comes from the --init-from checkpoint: giving it too is an error
};

// An option a run started --init-from a checkpoint takes from that checkpoint.
Option from_checkpoint(Option o) {
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
Option field(const char* flag, OnResume r, At at, const char* help, Check check = Check::any) {
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
Option flag_switch(const char* flag, OnResume r, At at, bool on, const char* help) {
  return {flag, r, [=](po::options_description& d, TrainOptions&) { d.add_options()(flag, po::bool_switch(), help); },
          [=](const po::variable_value& v, TrainOptions& o) {
            if (v.as<bool>()) at(o) = on;
          },
          same_field(at)};
}

// An option whose text is parsed into the field: `parse(text) -> value`, `show(value) -> text`.
template <class At, class Parse, class Show>
Option parsed(const char* flag, OnResume r, At at, Parse parse, Show show, const char* help) {
  return {flag, r, [=](po::options_description& d, TrainOptions& defaults) {
            d.add_options()(flag, po::value<std::string>()->default_value(show(at(defaults))), help);
          },
          [=](const po::variable_value& v, TrainOptions& o) { at(o) = parse(v.as<std::string>()); }, same_field(at)};
}

// An option naming one value of an enum: `parse(text) -> optional`, `show(value) ->
// const char*`; any other text is an error that lists `names`.
template <class At, class Parse, class Show>
Option choice(const char* flag, OnResume r, At at, Parse parse, Show show, const char* names, const char* help) {
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
Option model_flag(const nn::ModelOption& m) {
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
                  float v = 0;
                  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
                  if (ec == std::errc() && end == s.data() + s.size() && v >= n.min && std::isfinite(v)) return v;
                  throw UsageError(cat("--", flag, " must be a number >= ", n.min, " (", n.note, "), got '", s, "'"));
                },
                [](float v) { return shown(v); }, m.help);
          },
          [&](const nn::Choice& choice) {
            return Option{flag, OnResume::fixed,
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

const std::vector<Option>& options() {
  static const std::vector<Option> table = [] {
    std::vector<Option> rows = {
      field("config", override, AT(train.recipe),
            "read options from this file (INI style: 'n-layer = 6'); the command line overrides it"),
      field("data", override, AT(train.data),
            "training text (UTF-8), or a token directory: folio tokenize's, llm.c's shards or nanoGPT's "
            "train.bin/val.bin"),
      from_checkpoint(field("tokenizer", fixed, AT(train.tokenizer),
                            "char (one token per character of the text), bpe or unigram (SentencePiece "
                            "subwords, trained on the training split), or a SentencePiece .model file")),
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
      field("grad-clip", override, AT(train.grad_clip), "clip the global gradient norm (0: off)"),
      field("eval-interval", override, AT(train.eval_interval), "evaluate and save every N steps", Check::positive),
      field("eval-iters", override, AT(train.eval_iters), "batches per evaluation", Check::positive),
      field("log-interval", override, AT(train.log_interval), "progress line every N steps (off a terminal)",
            Check::positive),
      parsed(
          "val-fraction", override, AT(train.train_fraction),
          [](const std::string& s) {
            double v = 0;
            const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
            if (ec != std::errc() || end != s.data() + s.size() || !(v > 0.0 && v < 1.0))
              throw UsageError(cat("--val-fraction must be a number in (0, 1), got '", s, "'"));
            return 1.0 - v;
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

TrainOptions defaults() {
  TrainOptions d;
  d.train.data = default_corpus_path();
  return d;
}

void declare(po::options_description& desc) {
  TrainOptions d = defaults();
  for (const Option& o : options()) o.declare(desc, d);
  add_threads(desc);
}

// A message of the library's checks in the words of the command line: the fields it
// names become the flags ("[config] n_embd 64 is not divisible by n_head 3" reads
// "--n-embd 64 is not divisible by --n-head 3"), and the first one says where its
// value came from when the person did not type it there.
std::string in_flags(std::string msg, const po::variables_map& vm, const TrainOptions& o) {
  if (msg.starts_with("[config] ")) msg.erase(0, 9);
  auto word = [&](size_t i) {
    return i < msg.size() && (std::isalnum((unsigned char)msg[i]) || msg[i] == '_' || msg[i] == '-');
  };
  size_t first_at = std::string::npos;
  std::string first;
  for (const Option& opt : options()) {
    if (opt.on_resume == always || std::string(opt.flag) == "data" || std::string(opt.flag) == "config") continue;
    std::string field = opt.flag;
    std::replace(field.begin(), field.end(), '-', '_');
    for (size_t at = msg.find(field); at != std::string::npos; at = msg.find(field, at + 1))
      if ((at == 0 || !word(at - 1)) && !word(at + field.size())) {
        msg.replace(at, field.size(), cat("--", opt.flag));
        if (at < first_at) first_at = at, first = opt.flag;
      }
  }
  if (first.empty()) return msg;
  const bool given = vm.count(first) && !vm[first].defaulted();
  if (o.resume && !given) return cat(msg, " (--", first, ": the value saved with the run in ", o.out_dir, ")");
  if (config_file_options().count(first)) return cat(msg, " (--", first, " from --config ", o.train.recipe, ")");
  if (!given) return cat(msg, " (--", first, ": the default)");
  return msg;
}

std::string three_digits(float v) {  // a learning rate in a message
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", double(v));
  return buf;
}

// --resume: the options given that differ from the run's, checked against what was
// saved. A fixed option (the model, the optimizer, the seed) may be repeated, not
// changed. A longer run keeps its cosine: the horizon was --max-iters, and is pinned
// to it unless --lr-decay-iters is given. Any other change of the learning rate at the
// step the run resumes from is said in one line.
// Returns a line to print about the schedule ("" for none).
std::string merge_resumed(const po::variables_map& vm, TrainOptions& o, const TrainState& saved_state) {
  auto given = [&](const char* flag) { return vm.count(flag) && !vm[flag].defaulted(); };
  TrainOptions saved = o;
  saved.train = saved_state.config;
  bool model_loaded = false;
  for (const Option& opt : options()) {
    if (opt.on_resume != fixed || !given(opt.flag)) continue;
    if (!model_loaded) saved.model = load_model(RunDir(o.out_dir).model_file()).model->config(), model_loaded = true;
    TrainOptions asked = saved;
    opt.apply(vm[opt.flag], asked);
    if (!opt.same(asked, saved))
      throw UsageError(cat("--", opt.flag, " cannot change when resuming: the model and optimizer of the run in ",
                           o.out_dir, " are fixed, and its value differs (folio info --checkpoint ", o.out_dir,
                           " shows the run's options)"));
  }
  o.train = saved.train;
  for (const Option& opt : options())
    if (opt.on_resume == override && given(opt.flag)) opt.apply(vm[opt.flag], o);
  TrainConfig& tc = o.train;
  const TrainConfig& before = saved.train;
  std::string note;
  const bool horizon_was_max_iters = before.lr_decay_iters == 0 && before.max_iters > 0;
  if (tc.max_iters != before.max_iters && horizon_was_max_iters && !given("lr-decay-iters")) {
    tc.lr_decay_iters = before.max_iters;
    if (tc.max_iters > before.max_iters)
      note = cat("the cosine keeps the run's horizon of ", before.max_iters, " steps (the lr stays at --min-lr ",
                 shown(tc.min_lr), " after it); --lr-decay-iters N stretches it to step N instead");
  }
  const int64_t step = saved_state.step;
  const double seconds = saved_state.train_seconds;
  const float was = schedule_of(before).at(step, seconds), now = schedule_of(tc).at(step, seconds);
  if (std::abs(now - was) > 1e-6f * std::max(std::abs(was), 1e-12f))
    warn(cat("the learning rate at step ", step, " changes from ", three_digits(was), " to ", three_digits(now),
             " with these options: the run does not continue its schedule exactly"));
  return note;
}

std::function<int()> prepare(const po::variables_map& vm) {
  apply_threads(vm);
  TrainOptions o = defaults();
  auto given = [&](const char* flag) { return vm.count(flag) && !vm[flag].defaulted(); };
  o.resume = vm["resume"].as<bool>();
  o.overwrite = vm["overwrite"].as<bool>();
  o.quiet = vm["quiet"].as<bool>();
  o.out_dir = vm["out"].as<std::string>();
  const RunDir run(o.out_dir);
  // Resuming: the model and the saved training options come from the run; the
  // options given on the command line override the training ones.
  if (o.resume && given("config"))
    throw UsageError("--config cannot be used with --resume: the run continues with the options it saved");
  if (o.resume && o.overwrite)
    throw UsageError("--resume continues the run in --out, --overwrite replaces it: give one of them");
  if (!o.resume && !o.overwrite && run.holds_run())
    throw UsageError(cat("--out ", o.out_dir, " already holds a run: continue it with --resume, replace it with "
                         "--overwrite, or give another --out"));
  TrainState saved_state;
  std::string schedule_note;
  if (o.resume) saved_state = saved_run(o.out_dir);
  try {
    if (o.resume) schedule_note = merge_resumed(vm, o, saved_state);
    for (const Option& opt : options())
      if (!o.resume || opt.on_resume == always) opt.apply(vm[opt.flag], o);
    // A time budget without a step count: the budget alone ends the run (and shapes the
    // cosine). A resumed run keeps its saved step limit unless --max-iters is given.
    if (!o.resume && given("max-time") && !given("max-iters") && o.train.max_time > 0) o.train.max_iters = 0;
    if (o.train.max_iters == 0 && o.train.max_time == 0)
      throw UsageError("--max-iters 0 (no step limit) needs a time budget: --max-time SECONDS");
    if (!o.train.init_from.empty() && !o.resume) {
      for (const Option& opt : options())
        if (opt.from_init && given(opt.flag))
          throw UsageError(cat("--", opt.flag, " comes from the --init-from checkpoint ", o.train.init_from,
                               " (of the model's options, only --dropout may change)"));
      o.dropout_given = given("dropout");
    }
    o.model.seed = o.train.seed;
    o.model.validate();
    o.train.validate();
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(in_flags(e.what(), vm, o));
  }
  check_dtype(o.train.dtype);  // a resumed bf16 run too
  // The run keeps its text's absolute path: --resume from another directory finds it.
  if (o.train.data.empty())
    throw UsageError("no --data given, and this folio has no bundled corpus (share/folio/tinyshakespeare.txt beside "
                     "its bin/ directory): give --data FILE");
  if (!o.resume || given("data")) o.train.data = fs::absolute(o.train.data).lexically_normal().string();
  else if (!fs::exists(o.train.data))
    throw UsageError(cat("the run's text ", o.train.data, " (its saved --data) cannot be found from here: give --data "
                         "PATH with --resume"));
  const TrainConfig& tc = o.train;
  const bool schedule_given = !o.resume || given("warmup-iters") || given("max-iters");  // else said before
  if (schedule_given && tc.max_iters > 0 && tc.warmup_iters >= tc.max_iters)
    warn(cat("--warmup-iters ", tc.warmup_iters, " is not shorter than the run (--max-iters ", tc.max_iters,
             "): the learning rate never reaches --lr"));
  // Built first: its checks of the text and the checkpoint come before anything else.
  auto trainer = std::make_shared<Trainer>(o);
  if (o.resume) {
    const bool steps_done = tc.max_iters > 0 && saved_state.step >= tc.max_iters;
    const bool time_done = tc.max_time > 0 && saved_state.train_seconds >= tc.max_time;
    if (steps_done || time_done)
      return [=] {
        std::printf("%s is at step %lld%s: nothing left to do (%s continues it)\n", o.out_dir.c_str(),
                    (long long)saved_state.step,
                    steps_done ? cat(" of --max-iters ", tc.max_iters).c_str()
                               : cat(", past --max-time ", shown(tc.max_time)).c_str(),
                    steps_done ? "a larger --max-iters" : "a larger --max-time");
        return 0;
      };
  }
  const bool dtype_auto = given("dtype") && vm["dtype"].as<std::string>() == "auto";
  return [trainer, o, step = saved_state.step, schedule_note, dtype_auto] {
    if (dtype_auto && !o.quiet && dist::is_root()) std::printf("%s\n", dtype_auto_line(o.train.dtype).c_str());
    if (o.resume && !o.quiet && dist::is_root()) {
      std::printf("resuming %s from step %lld (of %s) on %s\n", o.out_dir.c_str(), (long long)step,
                  o.train.max_iters ? cat(o.train.max_iters).c_str() : cat(shown(o.train.max_time), " s").c_str(),
                  o.train.data.c_str());
      if (!schedule_note.empty()) std::printf("%s\n", schedule_note.c_str());
      std::fflush(stdout);
    }
    trainer->run();
    // Stopped by a signal: the checkpoint is saved, and the shell sees 128 + the signal.
    return trainer->stop_signal() ? 128 + trainer->stop_signal() : 0;
  };
}

}  // namespace

const Command kTrain = {
    "train", "train a model on a text file (default: the bundled tiny Shakespeare) or a token directory",
    "Trains a GPT on --data and writes DIR/model.safetensors, DIR/best.safetensors,\n"
    "DIR/state.safetensors and DIR/log.csv into --out DIR; a DIR that holds a run is\n"
    "refused unless --overwrite. --resume continues the run in DIR where it stopped\n"
    "(with its saved options; options given on the command line override the training\n"
    "options, e.g. a larger --max-iters, which keeps the cosine's horizon; a change of\n"
    "the learning rate at that step is a warning). Ctrl-C or SIGTERM saves and exits\n"
    "130 or 143.\n"
    "--max-time SECONDS stops the run after the step where its training time (the\n"
    "steps, not the evaluations) reaches SECONDS; given without --max-iters, it is\n"
    "the only limit and the cosine decays over it.",
    declare, prepare};

}  // namespace folio::cli
