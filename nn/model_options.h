#pragma once
// The model options (README, "Model options"): one row each. Everything that names an
// option reads this table: a checkpoint's config (io/config_json.cpp), folio train's
// flags (cli/train_options.cpp) and folio info's options line. So a new option is its
// GPTConfig field, its row in model_options.cpp, and the model code that uses it (nn/, the KV-cached
// decoder, and the independent numpy reference, scripts/folio_numpy.py).
//
// A checkpoint saved before an option existed has no key for it and loads with the
// field's default, which must be "off": the model as it was before the option.
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "nn/transformer.h"

namespace folio::nn {

// A switch: off unless given (a JSON true or false).
struct Toggle {
  bool GPTConfig::* at;
};

// A finite number in [min, max] (a JSON number); GPTConfig::validate() may ask more of it.
struct Number {
  float GPTConfig::* at;
  float min;
  const char* note;  // what a value means, for errors: "0: off"
  float max = std::numeric_limits<float>::max();
};

// One of a few names (a JSON string).
struct Choice {
  std::vector<std::string> names;
  std::function<std::string(const GPTConfig&)> get;
  std::function<bool(GPTConfig&, std::string_view)> set;  // false, and nothing set, for an unknown name
};

struct ModelOption {
  const char* flag;  // folio train's flag without its dashes: "qk-norm"
  const char* key;   // the checkpoint config's JSON key: "qk_norm"
  const char* help;
  std::variant<Toggle, Number, Choice> value;
};

const std::vector<ModelOption>& model_options();

// std::visit(Overloaded{[](const Toggle&) {...}, ...}, option.value): a lambda per kind.
template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;  // clang before 17 deduces no aggregate's arguments

// The value as folio train's flag would spell it: "true"/"false", the number in its
// shortest exact form (as the command line shows defaults), or the choice's name.
std::string option_text(const ModelOption& option, const GPTConfig& c);

// The options of `c` as the flags that give them: choices and numbers always, switches
// only when on ("--pos rope --qk-norm --logit-softcap 0").
std::string options_as_flags(const GPTConfig& c);

// "learned or rope", or with quote = '"': "\"learned\" or \"rope\"".
std::string names_list(const Choice& choice, char quote = 0);

}  // namespace folio::nn
