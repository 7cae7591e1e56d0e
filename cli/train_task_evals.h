#pragma once
// folio train --eval-task FILE (repeatable) --eval-task-interval N: the options, read
// into the TaskEvals the trainer calls at its evaluations (train/task_evals.h), which
// score through cli/task_runs.h.
#include "cli/common.h"
#include "train/task_evals.h"

namespace folio::cli {

void declare_eval_task_options(po::options_description& options);
// The task files, read and checked now (a bad line is exit 2 with its line), and the
// interval, which must be a multiple of `eval_interval`. None given: no tasks.
TaskEvals eval_task_option(const po::variables_map& vm, int64_t eval_interval);

}  // namespace folio::cli
