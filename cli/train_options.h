// The table of folio train's options: one row per flag, which declares it, gives its
// default, moves its value into TrainOptions and says what --resume does with it.
// cli/train_cmd.cpp reads the table; the rows of the training settings come from
// train/settings.h, the model options' from nn/model_options.h.
#pragma once
#include <functional>
#include <vector>

#include "cli/common.h"
#include "train/settings.h"
#include "train/trainer.h"

namespace folio::cli {

// One row: its flag, what --resume does with it, and how it is declared (with its
// default), applied to TrainOptions and compared between two of them.
struct TrainOption {
  const char* flag;
  OnResume on_resume;
  std::function<void(po::options_description&, TrainOptions& defaults)> declare;
  // May throw UsageError, or (a training setting out of its range) a folio::Error naming its key.
  std::function<void(const po::variable_value&, TrainOptions& o)> apply;
  std::function<bool(TrainOptions a, TrainOptions b)> same;  // a and b agree on this option
  bool from_init = false;  // comes from the --init-from checkpoint: giving it too is an error
};

// Every option of folio train, in --help's order.
const std::vector<TrainOption>& train_options();

// The training settings listed on one of folio info's lines, as the flags that give
// them: "--optimizer adamw --lr 0.001 ...".
std::string settings_as_flags(const TrainConfig& c, Line line);

// TrainOptions before any flag: the defaults, with the bundled corpus as --data.
TrainOptions train_defaults();

}  // namespace folio::cli
