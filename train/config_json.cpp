// The training options as JSON, in both directions, with every field checked.
#include "train/config_json.h"

#include <cstdio>
#include <limits>

#include "base/error.h"
#include "data/vocab.h"

namespace folio {
namespace {

using namespace config_fields;

// The limits TrainConfig::validate() applies, so every config a run accepts (and
// saves) reads back. Float fields only need to be finite.
constexpr int64_t kMaxBatch = TrainConfig::kMaxBatch, kMaxIters = TrainConfig::kMaxIters;
constexpr double kMaxFloat = double(std::numeric_limits<float>::max());

}  // namespace

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
    config_fail(where, "seed must be a decimal string, got ", clip(seed));
  if (const Json* dtype = j.find("dtype")) {  // optional: runs saved before bf16 have none
    const auto p = dtype->is_string() ? parse_precision(dtype->as_string()) : std::nullopt;
    if (!p) config_fail(where, "dtype must be \"fp32\" or \"bf16\", got ", clip(*dtype));
    c.dtype = *p;
  }
  // Optional: runs saved before time budgets and Muon have none (no budget, AdamW).
  if (j.find("max_time")) c.max_time = number_field(j, "max_time", 0.0, TrainConfig::kMaxTime, where);
  if (const Json* opt = j.find("optimizer")) {
    const auto k = opt->is_string() ? parse_optimizer(opt->as_string()) : std::nullopt;
    if (!k) config_fail(where, "optimizer must be \"adamw\" or \"muon\", got ", clip(*opt));
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
      if (!v->is_string()) config_fail(where, key, " must be a string, got ", clip(*v));
      *text = v->as_string();
    }
  if (const Json* s = j.find("sampling")) {
    const auto v = s->is_string() ? parse_sampling(s->as_string()) : std::nullopt;
    if (!v) config_fail(where, "sampling must be \"random\" or \"epoch\", got ", clip(*s));
    c.sampling = *v;
  }
  // Optional: runs saved before them decay on a cosine, without an average.
  if (const Json* d = j.find("decay")) {
    const auto v = d->is_string() ? parse_decay(d->as_string()) : std::nullopt;
    if (!v) config_fail(where, "decay must be \"cosine\" or \"wsd\", got ", clip(*d));
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

// What a run will save must read back: the checkpoint readers' limits (io/json.h,
// io/config_json.cpp, this file) are checked when the run starts, not at its first save.
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
