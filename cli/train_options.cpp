// The rows of folio train's options (cli/train_options.h): its own, the model's and
// the training settings'.
#include "cli/train_options.h"

#include <cmath>
#include <string>
#include <type_traits>
#include <variant>

#include "data/dataset.h"
#include "nn/model_options.h"

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

// An option naming one of a table row's choices (nn::Choice, or a training setting's
// Choice), read and written in `part` of the options; any other text is an error that
// lists `names`.
template <class Part, class TableChoice>
TrainOption table_choice(const char* flag, OnResume r, Part TrainOptions::* part, const TableChoice& choice,
                         const std::string& names, const char* help) {
  return {flag, r,
          [=](po::options_description& d, TrainOptions& defaults) {
            d.add_options()(flag, po::value<std::string>()->default_value(choice.get(defaults.*part)), help);
          },
          [=](const po::variable_value& v, TrainOptions& o) {
            const std::string& text = v.as<std::string>();
            if (!choice.set(o.*part, text)) throw UsageError(cat("--", flag, " must be ", names, ", got '", text, "'"));
          },
          [=](TrainOptions a, TrainOptions b) { return choice.get(a.*part) == choice.get(b.*part); }};
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

// A two-valued option written as one of two words: `yes` sets the field, `no` clears it.
template <class At>
TrainOption two_words(const char* flag, OnResume r, At at, const char* yes, const char* no, const char* help) {
  return parsed(
      flag, r, at,
      [=](const std::string& s) {
        if (s != yes && s != no) throw UsageError(cat("--", flag, " must be ", yes, " or ", no, ", got '", s, "'"));
        return s == yes;
      },
      [=](bool on) { return std::string(on ? yes : no); }, help);
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
                  if (v && *v >= n.min && *v <= n.max && std::isfinite(*v) && (!n.whole || *v == std::floor(*v)))
                    return *v;
                  const std::string range = n.max < std::numeric_limits<float>::max()
                                                ? cat("in [", n.min, ", ", n.max, "]")
                                                : cat(">= ", n.min);
                  throw UsageError(cat("--", flag, " must be a ", n.whole ? "whole number " : "number ", range, " (",
                                       n.note, "), got '", s, "'"));
                },
                [](float v) { return shown(v); }, m.help);
          },
          [&](const nn::Choice& choice) {
            return table_choice(flag, OnResume::fixed, &TrainOptions::model, choice, nn::names_list(choice), m.help);
          }},
      m.value);
}

// folio train's flag for one of the training settings (train/settings.h). Applying it
// checks the value against the setting's range at once (a folio::Error, said in flags
// by cli/train_cmd.cpp); what it asks of other settings waits for TrainConfig::validate().
TrainOption setting_flag(const TrainSetting& s) {
  const char* flag = s.flag;
  TrainOption o = std::visit(
      nn::Overloaded{
          [&]<class T>(const Number<T>& n) {
            auto at = [m = n.at](TrainOptions& o) -> T& { return o.train.*m; };
            if (!n.flag_gives_rest) return field(flag, s.on_resume, at, s.help);
            return parsed(
                flag, s.on_resume, at,
                [flag, range = n.range](const std::string& text) {
                  const auto v = whole_number<T>(text);  // the range is symmetric: (0, 1)
                  if (!v || !range.holds(double(1 - *v)))
                    throw UsageError(cat("--", flag, " must be a number in ", range_text(range), ", got '", text, "'"));
                  return T(1 - *v);
                },
                [](T v) { return shown(1 - v); }, s.help);
          },
          [&](const Seed& n) {
            return parsed(
                flag, s.on_resume, [m = n.at](TrainOptions& o) -> uint64_t& { return o.train.*m; },
                [flag](const std::string& text) { return u64_option(text, flag); },
                [](uint64_t v) { return std::to_string(v); }, s.help);
          },
          [&](const Text& t) {
            return field(flag, s.on_resume, [m = t.at](TrainOptions& o) -> std::string& { return o.train.*m; }, s.help);
          },
          [&](const Choice& choice) {
            return table_choice(flag, s.on_resume, &TrainOptions::train, choice, names_list(choice, 0, true), s.help);
          }},
      s.value);
  o.from_init = s.flag_kind == FlagKind::from_init;
  o.apply = [apply = o.apply, &s](const po::variable_value& v, TrainOptions& options) {
    apply(v, options);
    check_range(s, options.train);
  };
  return o;
}

#define AT(member) [](TrainOptions& o) -> auto& { return o.member; }
using enum OnResume;

}  // namespace

// In --help's order: where the run writes, the training settings (what it starts from,
// its data, how it trains), the model, and how its threads work.
const std::vector<TrainOption>& train_options() {
  static const std::vector<TrainOption> table = [] {
    std::vector<TrainOption> rows = {
      field("out", always, AT(out_dir), "output directory"),
      flag_switch("resume", always, AT(resume), true, "continue the run saved in --out"),
      flag_switch("overwrite", always, AT(overwrite), true,
                  "replace the run already in --out (without it, folio train refuses to)"),
    };
    const std::vector<TrainOption> model = {
      from_checkpoint(field("n-layer", fixed, AT(model.n_layer), "transformer blocks", Check::positive)),
      from_checkpoint(field("n-head", fixed, AT(model.n_head), "attention heads per block", Check::positive)),
      from_checkpoint(field("n-embd", fixed, AT(model.n_embd), "embedding width (divisible by --n-head)", Check::positive)),
      from_checkpoint(field("block-size", fixed, AT(model.block_size), "context length in tokens", Check::positive)),
      field("dropout", fixed, AT(model.dropout), "dropout probability in [0, 1)"),
      from_checkpoint(flag_switch("no-bias", fixed, AT(model.bias), false, "no bias in the Linear layers")),
      from_checkpoint(choice("activation", fixed, AT(model.activation), nn::parse_activation,
             [](nn::Activation a) { return nn::to_string(a); }, "relu, gelu, relu2, swiglu or gelu-tanh",
             "feed-forward activation: relu, gelu, relu2 (relu squared), swiglu (llama's gated SiLU) or gelu-tanh "
             "(GPT-2's tanh approximation)")),
    };
    for (const TrainSetting& s : train_settings())
      if (s.flag_kind != FlagKind::every_command) rows.push_back(setting_flag(s));  // --threads: every command's
    rows.insert(rows.end(), model.begin(), model.end());
    // The model options (nn/model_options.h), each part of the model.
    for (const nn::ModelOption& option : nn::model_options()) rows.push_back(from_checkpoint(model_flag(option)));
    rows.insert(rows.end(), {
      two_words("parallel", always, AT(data_parallel), "data", "ops",
                "how threads share a step: data (a batch shard each) or ops (inside every op)"),
      two_words("overlap", always, AT(overlap), "on", "off",
                "on several ranks: send the gradients in buckets while the backward pass runs (on), or all of them "
                "after it (off); the weights are the same"),
      field("comm-timeout", always, AT(comm_timeout),
            "on several ranks: seconds one rank may wait for the others in one exchange before it ends the job "
            "(a dead host or a cut network; 0: wait for ever)",
            Check::non_negative),
      flag_switch("quiet", always, AT(quiet), true, "no progress output"),
      parsed(
          "fault-inject", always, AT(faults),
          [](const std::string& s) {
            try {
              return parse_faults(s);
            } catch (const Error& e) {
              const std::string msg = e.what();  // "[config] fault_inject '...': expected ..."
              throw UsageError(cat("--fault-inject", msg.substr(msg.find(' ', msg.find("fault_inject")))));
            }
          },
          faults_text,
          "for tests of the divergence guards only: faults the run suffers on purpose, e.g. nan-grad@30 (a NaN in a "
          "gradient at step 30), inf-loss@40, spike@50 (a loss 10x the recent mean), nan-forward:gelu@60 (a NaN in "
          "the first gelu's output), nan-backward:gelu@70 (in its input's gradient); comma-separated"),
      flag_switch("detect-anomaly", always, AT(detect_anomaly), true,
                  "slow, for debugging: check every op's output and gradient, and stop (exit 3) at the first op that "
                  "produces a NaN or an infinity, naming it, its module and its shape"),
    });
    return rows;
  }();
  return table;
}
#undef AT

// A setting's value as its flag would spell it.
std::string setting_text(const TrainSetting& s, const TrainConfig& c) {
  return std::visit(nn::Overloaded{[&]<class T>(const Number<T>& n) {
                                     return shown(n.flag_gives_rest ? 1 - c.*(n.at) : c.*(n.at));
                                   },
                                   [&](const Seed& n) { return std::to_string(c.*(n.at)); },
                                   [&](const Text& t) { return shown(c.*(t.at)); },
                                   [&](const Choice& ch) { return ch.get(c); }},
                    s.value);
}

std::string settings_as_flags(const TrainConfig& c, Line line) {
  std::string flags;
  for (const TrainSetting& s : train_settings())
    if (s.listed.line == line && (!s.listed.when || s.listed.when(c)))
      flags += cat(flags.empty() ? "--" : " --", s.flag, " ", setting_text(s, c));
  return flags;
}

TrainOptions train_defaults() {
  TrainOptions d;
  d.train.data = default_corpus_path();
  return d;
}

}  // namespace folio::cli
