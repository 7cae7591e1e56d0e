#pragma once
// The model's and the run's options as JSON, in both directions: what a checkpoint
// records (io/checkpoint.h) and reads back, every field checked against the reader's
// limits (config_json.cpp); check_saveable() applies them when a run starts.
#include <cstdint>
#include <string>

#include "base/error.h"
#include "io/json.h"
#include "nn/transformer.h"
#include "train/config.h"

namespace folio {

Json to_json(const nn::GPTConfig& c);
Json to_json(const TrainConfig& c);
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
TrainConfig train_config_from_json(const Json& j, const std::string& where);

// Fails when a run with these options could not save them in a checkpoint that reads
// back (the reader's limits, a path that is not UTF-8): checked before a run starts.
// `model` may be null (its shape is not known yet on --resume).
void check_saveable(const nn::GPTConfig* model, const TrainConfig& train);

// A decimal uint64 in the one form std::to_string writes (seeds and RNG words are
// saved as such strings: JSON numbers lose bits past 2^53).
bool parse_u64(const std::string& text, uint64_t& out);

}  // namespace folio
