#pragma once
// The model options (README, "Model options"): one row each. Everything that names an
// option reads this table: a checkpoint's config (io/config_json.cpp), folio train's
// flags (cli/train_options.cpp), folio info's options line, and the exporters (GGUF,
// io/gguf_model.cpp; HF's GPT-2, io/hf_export.cpp), which refuse what a row's answers
// refuse. A new option touches these files, and no others (docs/model-options.md):
//   nn/transformer.h       its GPTConfig field, whose default is the model without it
//   nn/model_options.cpp   its row: flag, key, help, kind, and how GGUF and HF carry it
//   nn/transformer.cpp     the forward that uses it (training, evaluation)
//   infer/decoder.cpp      the KV-cached decoder (all inference)
//   scripts/folio_numpy.py the independent reference
// (and an exporter, only where a row's answer says the format writes it somewhere new).
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
  bool whole = false;  // a count (a width): whole values only, an integer in JSON and Python
};

// One of a few names (a JSON string).
struct Choice {
  std::vector<std::string> names;
  std::function<std::string(const GPTConfig&)> get;
  std::function<bool(GPTConfig&, std::string_view)> set;  // false, and nothing set, for an unknown name
};

struct ModelOption;

// How one export format holds an option. Every row gives one for GGUF and one for HF's
// GPT-2, and Export has no default constructor: a row without both does not compile.
// The exporters refuse exactly what these answers refuse (option_refusals), and
// tests/test_option_walk.cpp exports every value of every row to llama.cpp and the
// numpy GPT-2: a value a format holds must compute the same model there.
class Export {
 public:
  // Why `c`'s value cannot be held, naming what the format lacks and the flags that
  // fix it; null where it can be.
  using Check = const char* (*)(const GPTConfig& c);
  // Every value is held: `how` says where (architecture, keys, tensors), or why writing
  // nothing gives the same model (an option that shapes training alone).
  static Export carried(const char* how) { return {how, nullptr, nullptr, nullptr}; }
  // Only the default is held: any other value is refused, the format `lacks` it, and the
  // fix is `fix` ("with --no-bias") or else the default ("without --bigram").
  static Export refused(const char* lacks, const char* fix = nullptr) { return {nullptr, lacks, fix, nullptr}; }
  // The values `check` finds nothing against are held, as `how` says.
  static Export carried_unless(const char* how, Check check) { return {how, nullptr, nullptr, check}; }

  // One line naming the value `c` has (flag_as_set), why the format cannot hold it and
  // the flag that fixes it; "" when it can.
  std::string refusal(const ModelOption& option, const GPTConfig& c) const;
  // Where the format writes the option; "" for one it never holds but at its default.
  const char* how() const { return how_ ? how_ : ""; }

 private:
  Export(const char* how, const char* lacks, const char* fix, Check check)
      : how_(how), lacks_(lacks), fix_(fix), check_(check) {}
  const char *how_, *lacks_, *fix_;
  Check check_;
};

struct ModelOption {
  const char* flag;  // folio train's flag without its dashes: "qk-norm"
  const char* key;   // the checkpoint config's JSON key: "qk_norm"
  const char* help;
  std::variant<Toggle, Number, Choice> value;
  Export gguf;  // llama.cpp's GGUF (io/gguf_model.cpp)
  Export hf;    // HF's GPT2LMHeadModel directory (io/hf_export.cpp)
};

const std::vector<ModelOption>& model_options();

// What `format` (&ModelOption::gguf or &ModelOption::hf) refuses of `c`: a line per
// option whose value it cannot hold, in the table's order.
std::vector<std::string> option_refusals(const GPTConfig& c, Export ModelOption::* format);

// Whether llama.cpp's llama graph computes `c` (its SwiGLU or RMSNorm asks for it):
// what decides GGUF's architecture, llama or qwen3 rather than gpt2 or gptneox.
bool gguf_llama_graph(const GPTConfig& c);

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

// The option's value in `c` as the flag that sets it: "--pos rope", "--bigram", and for
// a switch that is off, "without --gpt2-biases".
std::string flag_as_set(const ModelOption& option, const GPTConfig& c);

// The options of `c` as the flags that give them: choices and numbers always, switches
// only when on ("--pos rope --qk-norm --logit-softcap 0").
std::string options_as_flags(const GPTConfig& c);

// "learned or rope", or with quote = '"': "\"learned\" or \"rope\"".
std::string names_list(const Choice& choice, char quote = 0);

}  // namespace folio::nn
