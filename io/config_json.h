#pragma once
// The model's options as JSON, in both directions: what a checkpoint records
// (io/checkpoint.h) and reads back, every field checked against the reader's limits.
// Also what any options' JSON reader uses (the training options' is
// train/config_json.h): ConfigError, the field readers of config_fields, parse_u64.
#include <cstdint>
#include <string>

#include "base/error.h"
#include "io/json.h"
#include "nn/transformer.h"

namespace folio {

Json to_json(const nn::GPTConfig& c);
// A config field the readers below refuse. what() names the file, as every Error
// does: "[checkpoint] <where>: config: <detail>"; detail() is the complaint alone, for
// a caller checking its own options against the readers' limits (the trainer).
class ConfigError : public Error {
 public:
  ConfigError(const std::string& where, std::string detail);
  const std::string& detail() const { return detail_; }

 private:
  std::string detail_;
};
// `where` names the file for error messages; a bad field is a ConfigError.
nn::GPTConfig model_config_from_json(const Json& j, const std::string& where);

// Reading the fields of an options object j; each bad field is a ConfigError.
namespace config_fields {
inline constexpr int64_t kMaxVocab = 1 << 21;  // the largest vocab_size a file may give
std::string clip(const Json& v);  // a value from a file, shown in a message: its JSON text, cut short
template <class... Parts>
[[noreturn]] void config_fail(const std::string& where, const Parts&... parts) {
  throw ConfigError(where, cat(parts...));
}
const Json& field(const Json& j, const char* key, const std::string& where);  // present
int64_t int_field(const Json& j, const char* key, int64_t lo, int64_t hi, const std::string& where);
double number_field(const Json& j, const char* key, double lo, double hi, const std::string& where);
}  // namespace config_fields

// A decimal uint64 in the one form std::to_string writes (seeds and RNG words are
// saved as such strings: JSON numbers lose bits past 2^53).
bool parse_u64(const std::string& text, uint64_t& out);

}  // namespace folio
