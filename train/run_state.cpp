#include "train/run_state.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "base/error.h"
#include "io/checkpoint.h"
#include "io/config_json.h"
#include "io/folio_format.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "train/config_json.h"
#include "train/optimizer.h"
#include "train/progress.h"

namespace folio {
namespace {

// The __metadata__ keys of the run itself; every other key is the optimizer's.
constexpr const char* kRunKeys[] = {"format",        "folio_format", "step",       "best_val_loss",
                                    "data_rng",      "dropout_rng",  "train_seconds", "data_epoch",
                                    "data_position", "data_fingerprint", "train_config", "guards",
                                    "ranks"};

bool run_key(const std::string& key) {
  for (const char* k : kRunKeys)
    if (key == k) return true;
  return false;
}

std::string float_text(float x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", double(x));  // 9 digits: reads back to the same float
  return buf;
}

Json rng_json(const Rng::State& s) {
  Json::Array a;
  for (uint64_t w : s) a.push_back(std::to_string(w));
  return a;
}

Rng::State rng_from_json(const Json& v, const char* key, const std::string& where) {
  Rng::State s{};
  if (!v.is_array() || v.as_array().size() != s.size()) fail("checkpoint", where, ": ", key, ": expected 5 words");
  for (size_t i = 0; i < s.size(); ++i) {
    const Json& w = v.as_array()[i];
    if (!w.is_string()) fail("checkpoint", where, ": ", key, ": expected decimal strings");
    const std::string& t = w.as_string();
    if (!parse_u64(t, s[i])) fail("checkpoint", where, ": ", key, ": bad word ", json_quote(t.substr(0, 40)));
  }
  return s;
}

// The guards' state as one JSON object: the window's figures are shortest exact doubles
// of floats, so they read back to the bit.
Json guards_json(const GuardState& g) {
  Json::Array losses, norms;
  for (float v : g.losses) losses.push_back(Json(double(v)));
  for (float v : g.norms) norms.push_back(Json(double(v)));
  return Json::Object{{"losses", std::move(losses)},  {"norms", std::move(norms)},
                      {"skipped", g.skipped},         {"skipped_in_a_row", g.skipped_in_a_row},
                      {"rollbacks", g.rollbacks},     {"lr_scale", double(g.lr_scale)},
                      {"furthest_step", g.furthest_step}};
}

GuardState guards_from_json(const Json& j, const std::string& file) {
  auto bad = [&](const char* key, const char* expected) {
    fail("checkpoint", file, ": __metadata__.guards.", key, ": expected ", expected);
  };
  if (!j.is_object()) fail("checkpoint", file, ": __metadata__.guards: expected a JSON object");
  GuardState g;
  auto count = [&](const char* key, int64_t lo) {
    const Json* v = j.find(key);
    if (!v || !v->is_int() || v->as_int() < lo) bad(key, lo < 0 ? "an integer >= -1" : "an integer >= 0");
    return v->as_int();
  };
  g.skipped = count("skipped", 0), g.skipped_in_a_row = count("skipped_in_a_row", 0);
  g.rollbacks = count("rollbacks", 0), g.furthest_step = count("furthest_step", -1);
  const Json* scale = j.find("lr_scale");
  if (!scale || !scale->is_number() || !(scale->as_double() > 0 && scale->as_double() <= 1)) bad("lr_scale", "a number in (0, 1]");
  g.lr_scale = float(scale->as_double());
  for (auto [key, to] : {std::pair{"losses", &g.losses}, std::pair{"norms", &g.norms}}) {
    const Json* w = j.find(key);
    if (!w || !w->is_array() || int64_t(w->as_array().size()) > TrainConfig::kMaxSpikeWindow)
      bad(key, "an array of at most 100000 numbers");
    for (const Json& v : w->as_array()) {
      if (!v.is_number() || !std::isfinite(v.as_double()) || std::abs(v.as_double()) > std::numeric_limits<float>::max())
        bad(key, "finite floats");
      to->push_back(float(v.as_double()));
    }
  }
  if (g.losses.size() != g.norms.size()) bad("norms", "as many as losses");
  return g;
}

}  // namespace

void save_state(const std::string& file, const TrainState& s) {
  std::vector<NamedTensor> tensors = s.optimizer.tensors;
  if (s.config.ema > 0) tensors.push_back({"ema.weights", flat_tensor(s.ema_weights)});
  Metadata metadata = folio_metadata("-state");
  metadata.push_back({"step", std::to_string(s.step)});
  metadata.insert(metadata.end(), s.optimizer.counters.begin(), s.optimizer.counters.end());
  metadata.insert(metadata.end(), {{"best_val_loss", float_text(s.best_val_loss)},
                                   {"data_rng", rng_json(s.data_rng).dump()},
                                   {"dropout_rng", rng_json(s.dropout_rng).dump()},
                                   {"train_seconds", Json(s.train_seconds).dump()},
                                   {"data_epoch", std::to_string(s.data_epoch)},
                                   {"data_position", std::to_string(s.data_position)},
                                   {"data_fingerprint", s.data_fingerprint},
                                   {"train_config", to_json(s.config).dump()},
                                   {"guards", guards_json(s.guards).dump()},
                                   {"ranks", std::to_string(s.ranks)}});
  save_safetensors(file, tensors, metadata);
}

namespace {

// Every field of the state that its header holds: all but the tensors.
TrainState settings_of(const SafetensorsMetadata& f, const std::string& file) {
  check_folio_format(f, file, "-state");
  TrainState s;
  const Json step = metadata_json(f, "step", file);
  if (!step.is_int() || step.as_int() < 0) fail("checkpoint", file, ": __metadata__.step: expected an integer >= 0");
  s.step = step.as_int();
  const Json best = metadata_json(f, "best_val_loss", file);
  if (!best.is_number() || !(std::abs(best.as_double()) <= double(std::numeric_limits<float>::max())))
    fail("checkpoint", file, ": __metadata__.best_val_loss: expected a finite float");
  s.best_val_loss = float(best.as_double());
  s.data_rng = rng_from_json(metadata_json(f, "data_rng", file), "data_rng", file);
  s.dropout_rng = rng_from_json(metadata_json(f, "dropout_rng", file), "dropout_rng", file);
  s.config = train_config_from_json(metadata_json(f, "train_config", file), file);
  for (const auto& entry : f.metadata)  // the optimizer's counters: every key not the run's
    if (!run_key(entry.first)) s.optimizer.counters.push_back(entry);
  // Absent from runs saved before time budgets: their training time is not known, 0;
  // before sampling epochs, divergence guards, the ranks: their defaults.
  for (const auto& [key, value] : f.metadata)
    if (key == "train_seconds") {
      const Json t = metadata_json(f, "train_seconds", file);
      if (!t.is_number() || !(t.as_double() >= 0.0 && t.as_double() <= TrainConfig::kMaxTime))
        fail("checkpoint", file, ": __metadata__.train_seconds: expected seconds in [0, ", TrainConfig::kMaxTime, "]");
      s.train_seconds = t.as_double();
    } else if (key == "data_epoch" || key == "data_position") {
      const Json v = metadata_json(f, key.c_str(), file);
      if (!v.is_int() || v.as_int() < 0) fail("checkpoint", file, ": __metadata__.", key, ": expected an integer >= 0");
      (key == "data_epoch" ? s.data_epoch : s.data_position) = v.as_int();
    } else if (key == "data_fingerprint") {
      s.data_fingerprint = value;
    } else if (key == "guards") {
      s.guards = guards_from_json(metadata_json(f, "guards", file), file);
    } else if (key == "ranks") {
      const Json v = metadata_json(f, "ranks", file);
      if (!v.is_int() || v.as_int() < 0) fail("checkpoint", file, ": __metadata__.ranks: expected an integer >= 0");
      s.ranks = v.as_int();
    }
  return s;
}

}  // namespace

TrainState load_state(const std::string& file) {
  const SafetensorsFile f = load_safetensors(file);
  TrainState s = settings_of(f, file);
  // The optimizer's state: every tensor but the average.
  for (const auto& t : f.tensors)
    if (t.name != "ema.weights") s.optimizer.tensors.push_back(t);
  Optimizer::check_state(s.config.optimizer, s.optimizer, file);
  if (s.config.ema > 0) {
    const Tensor* t = f.find("ema.weights");
    if (!t || t->ndim() != 1)
      fail("checkpoint", file, ": tensor ema.weights is missing or not 1-D (the run averages its weights: ema ",
           s.config.ema, ")");
    check_finite(*t, "ema.weights", file);
    s.ema_weights.assign(t->data(), t->data() + t->numel());
  }
  return s;
}

TrainState load_state_settings(const std::string& file) { return settings_of(load_safetensors_metadata(file), file); }

TrainState recover_run(const RunDir& run) {
  TrainState state = load_state(run.state_file());
  run.recover(state.step);
  return state;
}

void save_run(const RunDir& run, const nn::GPT& model, const Tokenizer& tokenizer, const TrainState& state,
              const nn::GPT* best, bool first) {
  run.save(model, tokenizer, state.step, best, first, [&](const std::string& file) { save_state(file, state); });
}

TrainState saved_run(const std::string& dir) { return load_state_settings(RunDir(dir).state_file()); }

std::string lost_log(const RunDir& run, int64_t step) {
  if (log_has_header(run.log_file())) return "";
  return cat(run.log_file(), std::filesystem::exists(run.log_file()) ? " is empty" : " is missing",
             ": a new one starts with the evaluations after step ", step, " (those before it are not in it)");
}

std::string lost_best(const RunDir& run, float best_val) {
  const std::string file = run.best_file();
  std::string why = "is missing";
  if (std::filesystem::exists(file)) try {
      load_checkpoint_header(file);
      return "";
    } catch (const Error& e) {
      why = cat("cannot be read (", e.what(), ")");
    }
  return cat(file, " ", why, ": the lowest val loss so far (", best_val, ") is held by no file, so the next "
             "evaluation's weights become best.safetensors, and the best from then on");
}

}  // namespace folio
