// The table of training settings (train/settings.h) that TrainConfig's defaults and
// checks, a run's state file, folio train's flags and folio info read. The loops
// check every row, one added later too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "nn/model_options.h"
#include "tests/support.h"
#include "tests/table_names.h"
#include "train/config_json.h"
#include "train/settings.h"

namespace folio {
namespace {

using nn::Overloaded;

// The defaults, with the one field a state file cannot do without.
TrainConfig base() {
  TrainConfig c;
  c.data = "corpus.txt";
  return c;
}

// A value of the setting's other than its default, which validate() accepts with the
// other settings at theirs.
TrainConfig with_other_value(const TrainSetting& s, TrainConfig c) {
  std::visit(Overloaded{[&]<class T>(const Number<T>& n) {
                          const Range& r = n.range;
                          if constexpr (std::is_integral_v<T>) c.*(n.at) = n.initial + 1;
                          else if (!r.hi_is_limit) {  // the middle, or (a default there) a quarter in
                            const T mid = T((r.lo + r.hi) / 2);
                            c.*(n.at) = mid != n.initial ? mid : T((r.lo + mid) / 2);
                          }
                          else c.*(n.at) = n.initial > 0 ? n.initial / 2 : T(0.5);
                        },
                        [&](const Seed& n) { c.*(n.at) = n.initial + 1; },
                        [&](const Text& t) { c.*(t.at) += "x"; },
                        [&](const Choice& ch) {
                          for (const std::string& name : ch.names)
                            if (name != ch.initial) return void(ch.set(c, name));
                        }},
             s.value);
  EXPECT_NE(to_json(c).dump(), to_json(base()).dump()) << s.key << " has no value but its default";
  return c;
}

// Unique names; the JSON key is the flag with '_' for '-' (but for two older ones); a
// choice's names all parse and its default is one of them.
TEST(TrainOptionsTable, NamesAreUniqueAndSpelledAlike) {
  testing::expect_names_spelled_alike<Choice>(train_settings(), TrainConfig{},
                                              {{"config", "recipe"}, {"val-fraction", "train_fraction"}});
  for (const TrainSetting& s : train_settings())
    if (const auto* ch = std::get_if<Choice>(&s.value)) {  // braces: EXPECT_NE is an if-else of its own
      EXPECT_NE(std::ranges::find(ch->names, ch->initial), ch->names.end()) << s.flag;
    }
  EXPECT_NO_THROW(base().validate());
}

// Each setting off its default survives the state file and moves nothing else. Without
// its key, a state file reads the default (a run saved before the setting existed) or,
// for the settings every run has saved, is refused by the key's name.
TEST(TrainOptionsTable, EachSettingRoundTripsThroughTheStateFile) {
  for (const TrainSetting& s : train_settings()) {
    SCOPED_TRACE(s.key);
    const TrainConfig changed = with_other_value(s, base());
    EXPECT_NO_THROW(changed.validate());
    const Json saved = to_json(changed);
    ASSERT_NE(saved.find(s.key), nullptr);
    EXPECT_EQ(to_json(train_config_from_json(saved, "state")).dump(), saved.dump());

    Json::Object without = to_json(base()).as_object();
    std::erase_if(without, [&](const auto& kv) { return kv.first == s.key; });
    if (s.absent == Absent::the_default)
      EXPECT_EQ(to_json(train_config_from_json(Json(without), "state")).dump(), to_json(base()).dump());
    else
      testing::expect_error([&] { train_config_from_json(Json(without), "state"); }, {"state", s.key, "missing"});
  }
}

// A value of the wrong kind, a number outside its range or an unknown name (the flag's
// own "auto" too) is refused, naming the file and the key.
TEST(TrainOptionsTable, ABadValueInTheStateFileIsRefusedByName) {
  for (const TrainSetting& s : train_settings()) {
    std::vector<Json> bad{Json(Json::Array{})};
    if (const Range* r = range_of(s)) {
      bad.push_back(Json(r->lo - 1));
      if (!r->hi_is_limit || std::isfinite(r->hi)) bad.push_back(Json(r->hi + 1));
    }
    if (const auto* ch = std::get_if<Choice>(&s.value)) {
      bad.push_back(Json("no-such-name"));
      for (const std::string& name : ch->flag_only) bad.push_back(Json(name));
    }
    for (const Json& value : bad) {
      Json::Object o = to_json(base()).as_object();
      for (auto& [k, v] : o)
        if (k == s.key) v = value;
      SCOPED_TRACE(cat(s.key, " = ", value.dump()));
      testing::expect_error([&] { train_config_from_json(Json(o), "state.safetensors"); },
                            {"state.safetensors", s.key});
    }
  }
}

// validate() refuses a number below its range, above its bound or limit, or (a real
// without a bound) not finite, naming the setting; the range and the table's note agree.
TEST(TrainOptionsTable, ValidateRefusesANumberOutsideItsRange) {
  for (const TrainSetting& s : train_settings())
    std::visit(Overloaded{[&]<class T>(const Number<T>& n) {
                            const Range& r = n.range;
                            std::vector<T> outside{T(r.lo_open ? r.lo : r.lo - 1)};
                            if (std::isfinite(r.hi)) outside.push_back(T(r.hi_open ? r.hi : r.hi + 1));
                            if constexpr (std::is_floating_point_v<T>)
                              outside.push_back(std::numeric_limits<T>::quiet_NaN());
                            for (T v : outside) {
                              TrainConfig c = base();
                              c.*(n.at) = v;
                              SCOPED_TRACE(cat(s.key, " = ", v));
                              testing::expect_error([&] { c.validate(); }, {"[config] ", s.key});
                            }
                          },
                          [](const auto&) {}},
               s.value);
}

// folio train has a flag for every setting: its own, or (--threads) every command's.
TEST(TrainOptionsTable, EverySettingHasItsFlag) {
  const testing::TempDir dir("train_settings_flags");
  const testing::Result help = testing::run_folio({"train", "--help"}, dir.path);
  ASSERT_EQ(help.code, 0) << help.err;
  for (const TrainSetting& s : train_settings())
    EXPECT_NE(help.out.find(cat("  --", s.flag, " ")), std::string::npos) << s.flag;
}

}  // namespace
}  // namespace folio
