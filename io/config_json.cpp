// The model's and the run's options as JSON, in both directions: what checkpoints
// record (io/checkpoint.cpp) and read back, with every field checked.
#include "io/config_json.h"

#include <charconv>
#include <cstdio>
#include <limits>
#include <variant>

#include "data/vocab.h"
#include "nn/model_options.h"

namespace folio {
namespace {

// Limits for values read from a file: generous, but they keep a hostile header
// from asking for absurd allocations.
constexpr int64_t kMaxVocab = 1 << 21, kMaxBlock = 1 << 16, kMaxLayers = 256, kMaxEmbd = 1 << 14;
// Training options: the limits TrainConfig::validate() applies, so every config a run
// accepts (and saves) reads back. Float fields only need to be finite.
constexpr int64_t kMaxBatch = TrainConfig::kMaxBatch, kMaxIters = TrainConfig::kMaxIters;
constexpr double kMaxFloat = double(std::numeric_limits<float>::max());

// A value from a file, shown in a message: its JSON text, cut short.
std::string clip_json(const Json& v) {
  std::string t = v.dump();
  if (t.size() > 40) {
    size_t n = 40;
    while (n > 0 && (static_cast<unsigned char>(t[n]) & 0xc0) == 0x80) --n;  // on a UTF-8 boundary
    t = t.substr(0, n) + "...";
  }
  return t;
}

template <class... Parts>
[[noreturn]] void config_fail(const std::string& where, const Parts&... parts) {
  throw ConfigError(where, cat(parts...));
}

const Json& field(const Json& j, const char* key, const std::string& where) {
  const Json* v = j.find(key);
  if (!v) config_fail(where, "missing field \"", key, "\"");
  return *v;
}

int64_t int_field(const Json& j, const char* key, int64_t lo, int64_t hi, const std::string& where) {
  const Json& v = field(j, key, where);
  if (!v.is_int() || v.as_int() < lo || v.as_int() > hi)
    config_fail(where, key, " = ", clip_json(v), " outside [", lo, ", ", hi, "]");
  return v.as_int();
}

double number_field(const Json& j, const char* key, double lo, double hi, const std::string& where) {
  const Json& v = field(j, key, where);
  if (!v.is_number() || !(v.as_double() >= lo && v.as_double() <= hi))
    config_fail(where, key, " = ", clip_json(v), " outside [", lo, ", ", hi, "]");
  return v.as_double();
}

// A model option's value as a checkpoint's config holds it: a switch as true or
// false, a number as a number, a choice as its name.
Json option_json(const nn::ModelOption& option, const nn::GPTConfig& c) {
  return std::visit(nn::Overloaded{[&](const nn::Toggle& t) { return Json(c.*(t.at)); },
                                   [&](const nn::Number& n) { return Json(double(c.*(n.at))); },
                                   [&](const nn::Choice& ch) { return Json(ch.get(c)); }},
                    option.value);
}

// Reads the option's key from the config object j, when it is there.
void read_option(const nn::ModelOption& option, const Json& j, nn::GPTConfig& c, const std::string& where) {
  const char* key = option.key;
  const Json* found = j.find(key);
  if (!found) return;  // a model saved before the option existed: its default
  const Json& v = *found;
  std::visit(nn::Overloaded{[&](const nn::Toggle& t) {
                              if (!v.is_bool()) config_fail(where, key, " must be true or false, got ", clip_json(v));
                              c.*(t.at) = v.as_bool();
                            },
                            [&](const nn::Number& n) {
                              c.*(n.at) = float(number_field(j, key, n.min, n.max, where));
                            },
                            [&](const nn::Choice& ch) {
                              if (!v.is_string() || !ch.set(c, v.as_string()))
                                config_fail(where, key, " must be ", names_list(ch, '"'), ", got ", clip_json(v));
                            }},
             option.value);
}

}  // namespace

// A decimal uint64 in the one form std::to_string writes: digits only (no sign, no
// spaces, no trailing text, no leading zero), no overflow. std::stoull alone would
// take " -1" or "12abc"; "0337" would read back as a number written differently.
bool parse_u64(const std::string& t, uint64_t& out) {
  if (t.empty() || t.size() > 20 || t.find_first_not_of("0123456789") != std::string::npos) return false;
  if (t.size() > 1 && t[0] == '0') return false;
  const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
  return ec == std::errc() && p == t.data() + t.size();
}

ConfigError::ConfigError(const std::string& where, std::string detail)
    : Error(cat("[checkpoint] ", where, ": config: ", detail)), detail_(std::move(detail)) {}


Json to_json(const nn::GPTConfig& c) {
  Json::Object o{{"vocab_size", c.vocab_size},
                 {"block_size", c.block_size},
                 {"n_layer", c.n_layer},
                 {"n_head", c.n_head},
                 {"n_embd", c.n_embd},
                 {"dropout", double(c.dropout)},
                 {"bias", c.bias},
                 {"activation", nn::to_string(c.activation)},
                 {"seed", std::to_string(c.seed)}};
  for (const nn::ModelOption& option : nn::model_options()) o.emplace_back(option.key, option_json(option, c));
  return o;
}

nn::GPTConfig model_config_from_json(const Json& j, const std::string& where) {
  if (!j.is_object()) config_fail(where, "expected a JSON object");
  nn::GPTConfig c;
  c.vocab_size = int_field(j, "vocab_size", 1, kMaxVocab, where);
  c.block_size = int_field(j, "block_size", 1, kMaxBlock, where);
  c.n_layer = int_field(j, "n_layer", 1, kMaxLayers, where);
  c.n_head = int_field(j, "n_head", 1, kMaxEmbd, where);
  c.n_embd = int_field(j, "n_embd", 1, kMaxEmbd, where);
  c.dropout = float(number_field(j, "dropout", 0.0, 0.999, where));
  const Json& bias = field(j, "bias", where);
  if (!bias.is_bool()) config_fail(where, "bias must be true or false");
  c.bias = bias.as_bool();
  const Json& act = field(j, "activation", where);
  const auto activation = act.is_string() ? nn::parse_activation(act.as_string()) : std::nullopt;
  if (!activation) config_fail(where, "activation must be \"gelu\", \"relu\" or \"relu2\", got ", clip_json(act));
  c.activation = *activation;
  if (c.n_embd % c.n_head) config_fail(where, "n_embd ", c.n_embd, " not divisible by n_head ", c.n_head);
  // The model options are optional: a model saved before one existed has no key for
  // it, and is the model its default describes.
  for (const nn::ModelOption& option : nn::model_options()) read_option(option, j, c, where);
  // What one field cannot say alone (rope's even head size, a cap's finite inverse).
  try {
    c.validate();
  } catch (const Error& e) {
    std::string what = e.what();
    if (what.starts_with("[config] ")) what.erase(0, 9);
    config_fail(where, what);
  }
  return c;
}

Json to_json(const TrainConfig& c) {
  return Json::Object{{"data", c.data},
                      {"train_fraction", c.train_fraction},
                      {"batch_size", c.batch_size},
                      {"grad_accum", c.grad_accum},
                      {"max_iters", c.max_iters},
                      {"warmup_iters", c.warmup_iters},
                      {"lr_decay_iters", c.lr_decay_iters},
                      {"eval_interval", c.eval_interval},
                      {"eval_iters", c.eval_iters},
                      {"log_interval", c.log_interval},
                      {"lr", double(c.lr)},
                      {"min_lr", double(c.min_lr)},
                      {"weight_decay", double(c.weight_decay)},
                      {"beta2", double(c.beta2)},
                      {"grad_clip", double(c.grad_clip)},
                      {"seed", std::to_string(c.seed)},
                      {"recipe", c.recipe},
                      {"dtype", to_string(c.dtype)},
                      {"max_time", c.max_time},
                      {"optimizer", to_string(c.optimizer)},
                      {"muon_lr", double(c.muon_lr)},
                      {"muon_weight_decay", double(c.muon_weight_decay)},
                      {"muon_momentum_warmup", c.muon_momentum_warmup},
                      {"seq_warmup", c.seq_warmup},
                      {"batch_warmup", c.batch_warmup},
                      {"tokenizer", c.tokenizer},
                      {"vocab_size", c.vocab_size},
                      {"init_from", c.init_from},
                      {"sampling", to_string(c.sampling)},
                      {"decay", to_string(c.decay)},
                      {"cooldown", double(c.cooldown)},
                      {"ema", double(c.ema)},
                      {"threads", c.threads}};
}

TrainConfig train_config_from_json(const Json& j, const std::string& where) {
  if (!j.is_object()) fail("checkpoint", where, ": train config: expected a JSON object");
  TrainConfig c;
  const Json& data = field(j, "data", where);
  if (!data.is_string()) config_fail(where, "data must be a string");
  c.data = data.as_string();
  if (const Json* recipe = j.find("recipe")) {  // absent in runs saved before --config existed
    if (!recipe->is_string()) config_fail(where, "recipe must be a string");
    c.recipe = recipe->as_string();
  }
  constexpr int64_t big = kMaxIters;
  c.train_fraction = number_field(j, "train_fraction", 0.0, 1.0, where);
  c.batch_size = int_field(j, "batch_size", 1, kMaxBatch, where);
  if (j.find("grad_accum")) c.grad_accum = int_field(j, "grad_accum", 1, kMaxBatch, where);  // 1 in older runs
  c.max_iters = int_field(j, "max_iters", 0, big, where);  // 0 with a max_time
  c.warmup_iters = int_field(j, "warmup_iters", 0, big, where);
  c.lr_decay_iters = int_field(j, "lr_decay_iters", 0, big, where);
  c.eval_interval = int_field(j, "eval_interval", 1, big, where);
  c.eval_iters = int_field(j, "eval_iters", 1, big, where);
  c.log_interval = int_field(j, "log_interval", 1, big, where);
  // Any finite float (validate() below says what is sensible): the bounds keep the
  // double -> float conversion defined.
  c.lr = float(number_field(j, "lr", 0.0, kMaxFloat, where));
  c.min_lr = float(number_field(j, "min_lr", 0.0, kMaxFloat, where));
  c.weight_decay = float(number_field(j, "weight_decay", 0.0, kMaxFloat, where));
  c.beta2 = float(number_field(j, "beta2", 0.0, 1.0, where));
  c.grad_clip = float(number_field(j, "grad_clip", 0.0, kMaxFloat, where));
  const Json& seed = field(j, "seed", where);
  if (!seed.is_string() || !parse_u64(seed.as_string(), c.seed))
    config_fail(where, "seed must be a decimal string, got ", clip_json(seed));
  if (const Json* dtype = j.find("dtype")) {  // optional: runs saved before bf16 have none
    const auto p = dtype->is_string() ? parse_precision(dtype->as_string()) : std::nullopt;
    if (!p) config_fail(where, "dtype must be \"fp32\" or \"bf16\", got ", clip_json(*dtype));
    c.dtype = *p;
  }
  // Optional: runs saved before time budgets and Muon have none (no budget, AdamW).
  if (j.find("max_time")) c.max_time = number_field(j, "max_time", 0.0, TrainConfig::kMaxTime, where);
  if (const Json* opt = j.find("optimizer")) {
    const auto k = opt->is_string() ? parse_optimizer(opt->as_string()) : std::nullopt;
    if (!k) config_fail(where, "optimizer must be \"adamw\" or \"muon\", got ", clip_json(*opt));
    c.optimizer = *k;
  }
  if (j.find("muon_lr")) c.muon_lr = float(number_field(j, "muon_lr", 0.0, kMaxFloat, where));
  if (j.find("muon_weight_decay"))
    c.muon_weight_decay = float(number_field(j, "muon_weight_decay", 0.0, kMaxFloat, where));
  if (j.find("muon_momentum_warmup"))  // 0 in runs saved before it existed
    c.muon_momentum_warmup = int_field(j, "muon_momentum_warmup", 0, big, where);
  if (j.find("seq_warmup"))  // 0 in runs saved before it existed
    c.seq_warmup = int_field(j, "seq_warmup", 0, big, where);
  if (j.find("batch_warmup"))  // 0 in runs saved before it existed
    c.batch_warmup = int_field(j, "batch_warmup", 0, big, where);
  if (j.find("threads"))  // 0 in runs saved before it existed: the resuming process's threads
    c.threads = int_field(j, "threads", 0, TrainConfig::kMaxThreads, where);
  // Optional: runs saved before tokenizers have none (characters, from scratch).
  for (auto [key, text] : {std::pair{"tokenizer", &c.tokenizer}, std::pair{"init_from", &c.init_from}})
    if (const Json* v = j.find(key)) {
      if (!v->is_string()) config_fail(where, key, " must be a string, got ", clip_json(*v));
      *text = v->as_string();
    }
  if (const Json* s = j.find("sampling")) {
    const auto v = s->is_string() ? parse_sampling(s->as_string()) : std::nullopt;
    if (!v) config_fail(where, "sampling must be \"random\" or \"epoch\", got ", clip_json(*s));
    c.sampling = *v;
  }
  // Optional: runs saved before them decay on a cosine, without an average.
  if (const Json* d = j.find("decay")) {
    const auto v = d->is_string() ? parse_decay(d->as_string()) : std::nullopt;
    if (!v) config_fail(where, "decay must be \"cosine\" or \"wsd\", got ", clip_json(*d));
    c.decay = *v;
  }
  if (j.find("cooldown")) c.cooldown = float(number_field(j, "cooldown", 0.0, 1.0, where));
  if (j.find("ema")) c.ema = float(number_field(j, "ema", 0.0, 1.0, where));
  if (j.find("vocab_size")) c.vocab_size = int_field(j, "vocab_size", 0, kMaxVocab, where);
  try {
    c.validate();
  } catch (const Error& e) {
    fail("checkpoint", where, ": ", e.what());
  }
  return c;
}

// What a run will save must read back: the checkpoint reader's limits (json.h,
// this file) are checked when the run starts, not at its first save.
void check_saveable(const nn::GPTConfig* model, const TrainConfig& train) {
  auto round_trip = [&](const Json& j, auto read) {
    Json parsed;
    try {
      parsed = Json::parse(j.dump());
    } catch (const Error&) {  // the free-text fields are paths
      for (auto [flag, path] : {std::pair{"--data", &train.data}, std::pair{"--tokenizer", &train.tokenizer},
                                std::pair{"--init-from", &train.init_from}, std::pair{"--config", &train.recipe}}) {
        std::string shown;
        bool bad = false;
        for (const unsigned char c : *path) {
          char buf[8];
          std::snprintf(buf, sizeof buf, c < 0x20 || c >= 0x7f ? "\\x%02x" : "%c", c);
          shown += buf;
          bad |= c >= 0x80;
        }
        try {
          if (bad) decode_utf8(*path, flag);
        } catch (const Error&) {
          fail("config", flag, " ", shown, ": the path is not valid UTF-8, so a checkpoint could not record it");
        }
      }
      throw;
    }
    try {
      read(parsed);
    } catch (const ConfigError& e) {  // its detail names the field, not the (pretend) file
      fail("config", e.detail(), " (the limits of a checkpoint)");
    }
  };
  round_trip(to_json(train), [](const Json& j) { train_config_from_json(j, "options"); });
  if (model) model->validate();  // what the model cannot be, said as the model says it, before the file's limits
  if (model) round_trip(to_json(*model), [](const Json& j) { model_config_from_json(j, "options"); });
}

}  // namespace folio
