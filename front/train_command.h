#pragma once
// folio train as a function of its arguments, for the front ends other than the folio
// binary (the Python module's folio.train): the command's own option table, checks and
// run, reached without the command line's parsing library. cli/train_command.cpp
// implements it on the command's own code; a front end compiles that file with the
// command's (python/CMakeLists.txt lists them).
#include <functional>
#include <string>
#include <vector>

namespace folio::front {

// One of folio train's options: its name as typed after "--", and whether it takes a
// value (a switch, such as no-bias, takes none).
struct TrainFlag {
  std::string name;
  bool takes_value;
  bool repeatable;  // each occurrence adds a value (--eval-task A --eval-task B)
};

// Every option of folio train, in --help's order.
std::vector<TrainFlag> train_flags();

// The option a typo or two away from `name` (dashes or underscores: n_layr, n-layr),
// or "" when none is that near: folio train's own "did you mean".
std::string nearest_train_flag(const std::string& name);

// folio train with these arguments (the words after `folio train`): the options read
// and checked, and what the run needs loaded, as the command does before it starts.
// Returns the run, whose result is the command's exit status (0, 3 when the guards
// stopped it, 128 + the signal that stopped it after saving). Bad arguments throw
// folio::Error with the command's message, and nothing is written.
std::function<int()> prepare_train(const std::vector<std::string>& args);

}  // namespace folio::front
