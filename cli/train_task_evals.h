#pragma once
// folio train --eval-task FILE (repeatable) --eval-task-interval N: the options, read
// into the TaskEvals the trainer calls at its evaluations (train/task_evals.h), which
// score through cli/task_runs.h. And what a run does when it ends: it adds its command
// to RUN/commands.txt, and with --report writes RUN/report.md (cli/report.h).
#include "cli/common.h"
#include "train/task_evals.h"

namespace folio::cli {

void declare_eval_task_options(po::options_description& options);  // and --report
// The task files, read and checked now (a bad line is exit 2 with its line), and the
// interval, which must be a multiple of `eval_interval`. None given: no tasks.
TaskEvals eval_task_option(const po::variables_map& vm, int64_t eval_interval);
// As a run starts, on rank 0: its command into RUN/commands.txt (made if missing).
void start_run(const po::variables_map& vm, const std::string& run);
// As it ends, on rank 0, when --report was given: the report (a failure to write it is
// a warning: the run is saved).
void finish_run(const po::variables_map& vm, const std::string& run);

}  // namespace folio::cli
