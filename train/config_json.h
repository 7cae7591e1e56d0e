#pragma once
// The training options as JSON, in both directions: what a run's state file records
// (train/run_state.h) and reads back, every field checked against the reader's limits;
// check_saveable() applies those limits, and the model config's (io/config_json.h),
// when a run starts.
#include <string>

#include "io/config_json.h"
#include "io/json.h"
#include "nn/transformer.h"
#include "train/config.h"

namespace folio {

Json to_json(const TrainConfig& c);
// `where` names the file for error messages; a bad field is a ConfigError.
TrainConfig train_config_from_json(const Json& j, const std::string& where);

// Fails when a run with these options could not save them in a checkpoint that reads
// back (the reader's limits, a path that is not UTF-8): checked before a run starts.
// `model` may be null (its shape is not known yet on --resume).
void check_saveable(const nn::GPTConfig* model, const TrainConfig& train);

}  // namespace folio
