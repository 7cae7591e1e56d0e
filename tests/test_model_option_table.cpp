// The table of model options (nn/model_options.h) that the checkpoint's config, folio
// train's flags and folio info read. The loops check every row, one added later too;
// the last test also pins today's info line (as a prefix, which a new row extends).
// How the exporters answer each row: test_option_walk.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "io/config_json.h"
#include "nn/model_options.h"
#include "tests/option_values.h"
#include "tests/support.h"
#include "tests/table_names.h"

namespace folio::nn {
namespace {

// Head size 4: even, as rope needs; 7 tokens, as the bigram table allows; 2 blocks, as
// the U-net skips need.
GPTConfig small() {
  GPTConfig c;
  c.vocab_size = 7, c.block_size = 6, c.n_layer = 2, c.n_head = 2, c.n_embd = 8;
  return c;
}

// The config with `option` moved off its value (tests/option_values.h), every other
// field as it was.
GPTConfig with_other_value(const ModelOption& option, GPTConfig c) {
  const std::string before = option_text(option, c);
  c = folio::testing::other_values(option, c).at(0);
  EXPECT_NE(option_text(option, c), before) << option.key << " has no value but its default";
  return c;
}

std::map<std::string, std::string> texts(const GPTConfig& c) {
  std::map<std::string, std::string> out;
  for (const ModelOption& o : model_options()) out[o.key] = option_text(o, c);
  return out;
}

// Unique names; the JSON key is the flag with '_' for '-'; a choice's names all parse.
TEST(ModelOptionTable, NamesAreUniqueAndSpelledAlike) {
  folio::testing::expect_names_spelled_alike<Choice>(model_options(), small());
}

// Each option off its default survives a checkpoint's config, and moves nothing else;
// without its key, a config loads the default, which is the model before the option.
TEST(ModelOptionTable, EachOptionRoundTripsThroughTheCheckpointConfig) {
  const GPTConfig base = small();
  for (const ModelOption& option : model_options()) {
    SCOPED_TRACE(option.key);
    const GPTConfig changed = with_other_value(option, base);
    const Json saved = to_json(changed);
    ASSERT_NE(saved.find(option.key), nullptr);
    EXPECT_EQ(texts(model_config_from_json(saved, "file")), texts(changed));
    EXPECT_EQ(to_json(model_config_from_json(saved, "file")).dump(), saved.dump());

    Json::Object without = to_json(base).as_object();
    std::erase_if(without, [&](const auto& kv) { return kv.first == option.key; });
    EXPECT_EQ(texts(model_config_from_json(Json(without), "file")), texts(base));
  }
}

// A value of the wrong kind, a number outside its range or an unknown name is refused,
// naming the file and the key.
TEST(ModelOptionTable, ABadValueIsRefusedByName) {
  for (const ModelOption& option : model_options()) {
    std::vector<Json> bad{Json(Json::Array{})};
    if (const auto* n = std::get_if<Number>(&option.value)) {
      bad.push_back(Json(double(n->min) - 1.0));
      if (n->max < std::numeric_limits<float>::max()) bad.push_back(Json(double(n->max) + 0.5));
    }
    if (std::holds_alternative<Choice>(option.value)) bad.push_back(Json("no-such-name"));
    for (const Json& value : bad) {
      Json::Object o = to_json(small()).as_object();
      for (auto& [k, v] : o)
        if (k == option.key) v = value;
      try {
        model_config_from_json(Json(o), "file.safetensors");
        ADD_FAILURE() << option.key << " = " << value.dump() << " was accepted";
      } catch (const ConfigError& e) {
        testing::expect_contains(e.what(), {"file.safetensors", std::string(option.key)});
      }
    }
  }
}

// folio info's line: every option that is not a switch, with its value, and each
// switch that is on, in the table's order.
TEST(ModelOptionTable, FlagsShowEveryValueAndTheSwitchesThatAreOn) {
  const GPTConfig base = small();
  for (const ModelOption& option : model_options()) {
    SCOPED_TRACE(option.key);
    const std::string flags = options_as_flags(with_other_value(option, base));
    const bool is_switch = std::holds_alternative<Toggle>(option.value);
    EXPECT_NE(flags.find(cat("--", option.flag, is_switch ? "" : " ")), std::string::npos) << flags;
    EXPECT_EQ(options_as_flags(base).find(cat("--", option.flag, " ")) != std::string::npos ||
                  options_as_flags(base).ends_with(cat("--", option.flag)),
              !is_switch)
        << options_as_flags(base);
  }
  // Today's rows, as a prefix: a row added at the end adds to the line, as it should.
  EXPECT_TRUE(options_as_flags(base).starts_with("--pos learned --norm layer --logit-softcap 0 --drop-path 0 "
                                                 "--dropout-at all --mtp 0 --ffn-hidden 0"))
      << options_as_flags(base);
  GPTConfig on = base;
  on.pos = Positions::rope, on.norm = Norm::rms, on.qk_norm = true, on.logit_softcap = 30.0f, on.bigram = true;
  on.drop_path = 0.1f, on.dropout_at = DropoutAt::attention, on.unet_skips = true, on.mtp = 0.25f;
  on.ffn_hidden = 40.0f;
  EXPECT_TRUE(options_as_flags(on).starts_with("--pos rope --norm rms --qk-norm --logit-softcap 30 --bigram --drop-path 0.1 "
                                               "--dropout-at attention --unet-skips --mtp 0.25 --ffn-hidden 40"))
      << options_as_flags(on);
}

// What a row's range cannot say: rope needs an even head size, and the soft cap's
// inverse must be finite.
TEST(ModelOptionTable, ConfigRefusesWhatItCannotBuild) {
  GPTConfig c = small();
  c.pos = Positions::rope;
  c.n_embd = 6, c.n_head = 2;  // head size 3
  folio::testing::expect_error([&] { c.validate(); }, {"pos rope", "head size", "3", "must be even"});
  c = small();
  c.logit_softcap = -1.0f;
  folio::testing::expect_error([&] { c.validate(); }, {"logit_softcap", "-1"});
  c.logit_softcap = INFINITY;
  folio::testing::expect_error([&] { c.validate(); }, {"logit_softcap", "inf"});
  c.logit_softcap = 1e-39f;  // 1 / cap overflows
  folio::testing::expect_error([&] { c.validate(); }, {"logit_softcap", "inverse"});
  EXPECT_EQ(parse_positions("Rope"), std::nullopt);
  EXPECT_EQ(parse_activation("relu2"), Activation::relu2);
  EXPECT_STREQ(to_string(Activation::relu2), "relu2");
  EXPECT_EQ(parse_activation("gelu-tanh"), Activation::gelu_tanh);
  EXPECT_STREQ(to_string(Activation::gelu_tanh), "gelu-tanh");
}

}  // namespace
}  // namespace folio::nn
