#include "io/checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "base/error.h"
#include "io/safetensors.h"

namespace folio {
namespace {

constexpr const char* kFormat = "folio-gpt-1";

// Values read back must be finite: a checkpoint never holds diverged numbers, and a
// model or optimizer loaded with one would only produce NaN.
void check_finite(const Tensor& t, const std::string& name, const std::string& where, bool non_negative = false) {
  const float* d = t.data();
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(d[i]) || (non_negative && d[i] < 0.0f))
      fail("checkpoint", where, ": tensor ", name, ": value ", d[i], " at index ", i,
           non_negative ? " (must be finite and >= 0)" : " (must be finite)");
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

Json parse_meta(const SafetensorsFile& f, const char* key, const std::string& where) {
  const std::string text = f.meta(key);
  try {
    return Json::parse(text);
  } catch (const Error& e) {
    fail("checkpoint", where, ": __metadata__.", key, ": ", e.what());
  }
}

// What kind of folio file this is lives in "folio_format"; "format" is "pt", as
// Hugging Face's loaders require of a safetensors file. Files written before that
// change kept the kind in "format", and still load.
void check_format(const SafetensorsFile& f, const std::string& where, const char* kind) {
  auto value = [&](const char* key) -> const std::string* {
    for (const auto& [k, v] : f.metadata)
      if (k == key) return &v;
    return nullptr;
  };
  const std::string expected = std::string(kFormat) + kind;
  const std::string* ours = value("folio_format");
  const std::string* legacy = value("format");
  if (ours ? *ours != expected : !legacy || *legacy != expected)
    fail("checkpoint", where, ": __metadata__.folio_format: expected \"", expected, "\" (not a folio ", kind + 1,
         " file?)");
}

}  // namespace

std::string model_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return (std::filesystem::path(path) / "model.safetensors").string();
  return path;
}

void save_model(const std::string& file, const nn::GPT& model, const Tokenizer& tokenizer, int64_t step) {
  if (tokenizer.vocab_size() != model.config().vocab_size)
    fail("checkpoint", file, ": the tokenizer has ", tokenizer.vocab_size(), " tokens but the model's vocab_size is ",
         model.config().vocab_size);
  std::vector<NamedTensor> tensors;
  for (const auto& [name, t] : model.named_parameters()) tensors.push_back({name, t});
  Metadata metadata{{"format", "pt"},
                    {"folio_format", std::string(kFormat) + "-model"},
                    {"config", to_json(model.config()).dump()}};
  for (auto& entry : tokenizer.metadata()) metadata.push_back(std::move(entry));
  metadata.push_back({"step", std::to_string(step)});
  save_safetensors(file, tensors, metadata);
}

ModelCheckpoint load_model(const std::string& path) {
  ModelCheckpoint ck;
  ck.path = model_file(path);
  const std::string& where = ck.path;
  const SafetensorsFile f = load_safetensors(where);
  check_format(f, where, "-model");
  const nn::GPTConfig config = model_config_from_json(parse_meta(f, "config", where), where);
  ck.tokenizer = load_tokenizer(f.metadata, where);
  if (ck.tokenizer->vocab_size() != config.vocab_size)
    fail("checkpoint", where, ": the tokenizer (", ck.tokenizer->describe(), ") has ", ck.tokenizer->vocab_size(),
         " tokens but config.vocab_size is ", config.vocab_size);
  const Json step = parse_meta(f, "step", where);
  if (!step.is_int() || step.as_int() < 0) fail("checkpoint", where, ": __metadata__.step: expected an integer >= 0");
  ck.step = step.as_int();
  // The file's tensors must add up to the configured model before it is allocated:
  // a header cannot make folio build a model larger than the file that describes it.
  int64_t in_file = 0;
  for (const auto& t : f.tensors) in_file += t.tensor.numel();
  if (in_file != config.parameter_count())
    fail("checkpoint", where, ": tensors hold ", in_file, " values but the config needs ", config.parameter_count());
  ck.model = std::make_unique<nn::GPT>(config);
  const auto params = ck.model->named_parameters();
  for (const auto& t : f.tensors) {
    bool known = false;
    for (const auto& [name, p] : params) known = known || name == t.name;
    if (!known) fail("checkpoint", where, ": tensor ", json_quote(t.name), " is not a parameter of this config");
  }
  for (const auto& [name, p] : params) {
    const Tensor* t = f.find(name);
    if (!t) fail("checkpoint", where, ": tensor ", name, " is missing for this config");
    if (t->shape() != p.shape())
      fail("checkpoint", where, ": tensor ", name, ": shape ", t->shape(), " but the config needs ", p.shape());
    check_finite(*t, name, where);
    std::copy(t->data(), t->data() + t->numel(), p.data());
    p.mark_modified();
  }
  return ck;
}

void save_state(const std::string& file, const TrainState& s) {
  auto flat = [](const std::vector<float>& v) { return Tensor::from({int64_t(v.size())}, v); };
  std::vector<NamedTensor> tensors{{"adamw.m", flat(s.adamw_m)}, {"adamw.v", flat(s.adamw_v)}};
  if (s.config.optimizer == OptimizerKind::muon) tensors.push_back({"muon.momentum", flat(s.muon_momentum)});
  if (s.config.ema > 0) tensors.push_back({"ema.weights", flat(s.ema_weights)});
  save_safetensors(file, tensors,
                   {{"format", "pt"},
                    {"folio_format", std::string(kFormat) + "-state"},
                    {"step", std::to_string(s.step)},
                    {"adamw_steps", std::to_string(s.adamw_steps)},
                    {"best_val_loss", float_text(s.best_val_loss)},
                    {"data_rng", rng_json(s.data_rng).dump()},
                    {"dropout_rng", rng_json(s.dropout_rng).dump()},
                    {"train_seconds", Json(s.train_seconds).dump()},
                    {"data_epoch", std::to_string(s.data_epoch)},
                    {"data_position", std::to_string(s.data_position)},
                    {"data_fingerprint", s.data_fingerprint},
                    {"train_config", to_json(s.config).dump()}});
}

TrainState load_state(const std::string& file) {
  const SafetensorsFile f = load_safetensors(file);
  check_format(f, file, "-state");
  TrainState s;
  const Json step = parse_meta(f, "step", file), adam_steps = parse_meta(f, "adamw_steps", file);
  if (!step.is_int() || step.as_int() < 0) fail("checkpoint", file, ": __metadata__.step: expected an integer >= 0");
  if (!adam_steps.is_int() || adam_steps.as_int() < 0)
    fail("checkpoint", file, ": __metadata__.adamw_steps: expected an integer >= 0");
  s.step = step.as_int();
  s.adamw_steps = adam_steps.as_int();
  const Json best = parse_meta(f, "best_val_loss", file);
  if (!best.is_number() || !(std::abs(best.as_double()) <= double(std::numeric_limits<float>::max())))
    fail("checkpoint", file, ": __metadata__.best_val_loss: expected a finite float");
  s.best_val_loss = float(best.as_double());
  s.data_rng = rng_from_json(parse_meta(f, "data_rng", file), "data_rng", file);
  s.dropout_rng = rng_from_json(parse_meta(f, "dropout_rng", file), "dropout_rng", file);
  s.config = train_config_from_json(parse_meta(f, "train_config", file), file);
  for (auto [name, moments] : {std::pair{"adamw.m", &s.adamw_m}, std::pair{"adamw.v", &s.adamw_v}}) {
    const Tensor* t = f.find(name);
    if (!t || t->ndim() != 1) fail("checkpoint", file, ": tensor ", name, " is missing or not 1-D");
    check_finite(*t, name, file, moments == &s.adamw_v);  // second moments are squares: >= 0
    moments->assign(t->data(), t->data() + t->numel());
  }
  if (s.adamw_m.size() != s.adamw_v.size())
    fail("checkpoint", file, ": tensors adamw.m and adamw.v differ in size");
  if (s.config.optimizer == OptimizerKind::muon) {
    const Tensor* t = f.find("muon.momentum");
    if (!t || t->ndim() != 1)
      fail("checkpoint", file, ": tensor muon.momentum is missing or not 1-D (the run's optimizer is muon)");
    check_finite(*t, "muon.momentum", file);
    s.muon_momentum.assign(t->data(), t->data() + t->numel());
  }
  if (s.config.ema > 0) {
    const Tensor* t = f.find("ema.weights");
    if (!t || t->ndim() != 1)
      fail("checkpoint", file, ": tensor ema.weights is missing or not 1-D (the run averages its weights: ema ",
           s.config.ema, ")");
    check_finite(*t, "ema.weights", file);
    s.ema_weights.assign(t->data(), t->data() + t->numel());
  }
  // Absent from runs saved before time budgets: their training time is not known, 0.
  for (const auto& [key, value] : f.metadata)
    if (key == "train_seconds") {
      const Json t = parse_meta(f, "train_seconds", file);
      if (!t.is_number() || !(t.as_double() >= 0.0 && t.as_double() <= TrainConfig::kMaxTime))
        fail("checkpoint", file, ": __metadata__.train_seconds: expected seconds in [0, ", TrainConfig::kMaxTime, "]");
      s.train_seconds = t.as_double();
    } else if (key == "data_epoch" || key == "data_position") {
      const Json v = parse_meta(f, key.c_str(), file);
      if (!v.is_int() || v.as_int() < 0) fail("checkpoint", file, ": __metadata__.", key, ": expected an integer >= 0");
      (key == "data_epoch" ? s.data_epoch : s.data_position) = v.as_int();
    } else if (key == "data_fingerprint") {
      s.data_fingerprint = value;
    }
  return s;
}

void restore_optimizer(const TrainState& s, Optimizer& optimizer, const std::string& file) {
  AdamW& adamw = optimizer.adamw();
  if (s.adamw_m.size() != adamw.m().size())
    fail("checkpoint", file, ": tensor adamw.m has ", s.adamw_m.size(), " values but the model has ",
         adamw.m().size(), " parameters", optimizer.muon() ? " for AdamW beside Muon" : "");
  adamw.m() = s.adamw_m;
  adamw.v() = s.adamw_v;
  adamw.set_steps_taken(s.adamw_steps);
  if (Muon* muon = optimizer.muon()) {
    if (s.muon_momentum.size() != muon->momentum().size())
      fail("checkpoint", file, ": tensor muon.momentum has ", s.muon_momentum.size(), " values but the model's ",
           "hidden matrices have ", muon->momentum().size());
    muon->momentum() = s.muon_momentum;
  }
}

}  // namespace folio
