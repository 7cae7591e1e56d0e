// The training options as JSON, in both directions, with every field checked: one
// key per row of train/settings.h.
#include "train/config_json.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <type_traits>

#include "base/error.h"
#include "data/vocab.h"
#include "nn/model_options.h"
#include "train/settings.h"

namespace folio {
namespace {

using namespace config_fields;

// A setting's value as the state file holds it (train/settings.h says which JSON kind).
Json setting_json(const TrainSetting& s, const TrainConfig& c) {
  return std::visit(nn::Overloaded{[&]<class T>(const Number<T>& n) {
                                     if constexpr (std::is_integral_v<T>) return Json(int64_t(c.*(n.at)));
                                     else return Json(double(c.*(n.at)));
                                   },
                                   [&](const Seed& n) { return Json(std::to_string(c.*(n.at))); },
                                   [&](const Text& t) { return Json(c.*(t.at)); },
                                   [&](const Choice& ch) { return Json(ch.get(c)); }},
                    s.value);
}

// Reads the setting's key from the object j, checked against the closure of its range
// (validate() then says what is sensible): the bounds keep a double -> float
// conversion defined.
void read_setting(const TrainSetting& s, const Json& j, TrainConfig& c, const std::string& where) {
  const char* key = s.key;
  if (!j.find(key) && s.absent == Absent::the_default) return;  // a run saved before the setting existed
  const Json& v = field(j, key, where);
  std::visit(nn::Overloaded{[&]<class T>(const Number<T>& n) {
                              const Range& r = n.range;
                              if constexpr (std::is_integral_v<T>) {
                                const int64_t lo = int64_t(r.lo) + (r.lo_open ? 1 : 0);
                                c.*(n.at) = int_field(j, key, lo, int64_t(r.hi), where);
                              } else {
                                const double hi = std::min(r.hi, double(std::numeric_limits<T>::max()));
                                c.*(n.at) = T(number_field(j, key, r.lo, hi, where));
                              }
                            },
                            [&](const Seed& n) {
                              if (!v.is_string() || !parse_u64(v.as_string(), c.*(n.at)))
                                config_fail(where, key, " must be a decimal string, got ", clip(v));
                            },
                            [&](const Text& t) {
                              if (!v.is_string()) config_fail(where, key, " must be a string, got ", clip(v));
                              c.*(t.at) = v.as_string();
                            },
                            [&](const Choice& ch) {
                              // One of the names a run saves: not the flag's own ("auto").
                              const bool saved = v.is_string() && std::ranges::count(ch.names, v.as_string()) > 0;
                              if (!saved || !ch.set(c, v.as_string()))
                                config_fail(where, key, " must be ", names_list(ch, '"'), ", got ", clip(v));
                            }},
             s.value);
}

}  // namespace

Json to_json(const TrainConfig& c) {
  Json::Object o;
  for (const TrainSetting& s : train_settings()) o.emplace_back(s.key, setting_json(s, c));
  return o;
}

TrainConfig train_config_from_json(const Json& j, const std::string& where) {
  if (!j.is_object()) fail("checkpoint", where, ": train config: expected a JSON object");
  TrainConfig c;
  for (const TrainSetting& s : train_settings()) read_setting(s, j, c, where);
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
      for (const TrainSetting& s : train_settings()) {
        const Text* text = std::get_if<Text>(&s.value);
        if (!text) continue;
        const std::string flag = cat("--", s.flag), *path = &(train.*(text->at));
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
