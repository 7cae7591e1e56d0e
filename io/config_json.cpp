// The model's options as JSON, in both directions, with every field checked; the
// field readers every options reader shares.
#include "io/config_json.h"

#include <charconv>
#include <cmath>
#include <variant>

#include "nn/model_options.h"

namespace folio {
namespace {

using namespace config_fields;

// Limits for values read from a file: generous, but they keep a hostile header
// from asking for absurd allocations.
constexpr int64_t kMaxBlock = 1 << 16, kMaxLayers = 256, kMaxEmbd = 1 << 14;

// A model option's value as a checkpoint's config holds it: a switch as true or
// false, a number as a number, a choice as its name.
Json option_json(const nn::ModelOption& option, const nn::GPTConfig& c) {
  return std::visit(nn::Overloaded{[&](const nn::Toggle& t) { return Json(c.*(t.at)); },
                                   [&](const nn::Number& n) {
                                     return n.whole ? Json(int64_t(c.*(n.at))) : Json(double(c.*(n.at)));
                                   },
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
                              if (!v.is_bool()) config_fail(where, key, " must be true or false, got ", clip(v));
                              c.*(t.at) = v.as_bool();
                            },
                            [&](const nn::Number& n) {
                              c.*(n.at) = float(number_field(j, key, n.min, n.max, where));
                              if (n.whole && c.*(n.at) != std::floor(c.*(n.at)))
                                config_fail(where, key, " must be a whole number, got ", clip(v));
                            },
                            [&](const nn::Choice& ch) {
                              if (!v.is_string() || !ch.set(c, v.as_string()))
                                config_fail(where, key, " must be ", names_list(ch, '"'), ", got ", clip(v));
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

namespace config_fields {

// A value from a file, shown in a message: its JSON text, cut short.
std::string clip(const Json& v) {
  std::string t = v.dump();
  if (t.size() > 40) {
    size_t n = 40;
    while (n > 0 && (static_cast<unsigned char>(t[n]) & 0xc0) == 0x80) --n;  // on a UTF-8 boundary
    t = t.substr(0, n) + "...";
  }
  return t;
}

const Json& field(const Json& j, const char* key, const std::string& where) {
  const Json* v = j.find(key);
  if (!v) config_fail(where, "missing field \"", key, "\"");
  return *v;
}

int64_t int_field(const Json& j, const char* key, int64_t lo, int64_t hi, const std::string& where) {
  const Json& v = field(j, key, where);
  // 2.5 is no integer, not out of range: said as it is.
  if (!v.is_int()) config_fail(where, key, " = ", clip(v), " is not an integer (in [", lo, ", ", hi, "])");
  if (v.as_int() < lo || v.as_int() > hi) config_fail(where, key, " = ", clip(v), " outside [", lo, ", ", hi, "]");
  return v.as_int();
}

double number_field(const Json& j, const char* key, double lo, double hi, const std::string& where) {
  const Json& v = field(j, key, where);
  if (!v.is_number() || !(v.as_double() >= lo && v.as_double() <= hi))
    config_fail(where, key, " = ", clip(v), " outside [", lo, ", ", hi, "]");
  return v.as_double();
}

}  // namespace config_fields

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
  if (!activation)
    config_fail(where, "activation must be \"gelu\", \"relu\", \"relu2\", \"swiglu\" or \"gelu-tanh\", got ", clip(act));
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

}  // namespace folio
