// The table of folio train's options: one row per flag, which declares it, gives its
// default, moves its value into TrainOptions and says what --resume does with it.
// cli/train_cmd.cpp reads the table; the model options' rows come from nn/model_options.h.
#pragma once
#include <functional>
#include <vector>

#include "cli/common.h"
#include "train/trainer.h"

namespace folio::cli {

// What --resume does with an option given on the command line.
enum class OnResume {
  fixed,     // part of the model or its optimizer: giving it is an error, the run's is kept
  override,  // saved with the run: replaces the saved value when given
  always,    // not saved (where to write, output): always from the command line
};

// One row: its flag, what --resume does with it, and how it is declared (with its
// default), applied to TrainOptions and compared between two of them.
struct TrainOption {
  const char* flag;
  OnResume on_resume;
  std::function<void(po::options_description&, TrainOptions& defaults)> declare;
  std::function<void(const po::variable_value&, TrainOptions& o)> apply;  // may throw UsageError
  std::function<bool(TrainOptions a, TrainOptions b)> same;  // a and b agree on this option
  bool from_init = false;  // comes from the --init-from checkpoint: giving it too is an error
};

// Every option of folio train, in --help's order.
const std::vector<TrainOption>& train_options();

// TrainOptions before any flag: the defaults, with the bundled corpus as --data.
TrainOptions train_defaults();

}  // namespace folio::cli
