#pragma once
// folio eval --task FILE: a checkpoint's accuracy on a multiple-choice task file
// (io/task_file.h), scored by lm-eval's rule (infer/task_eval.h). eval_cmd.cpp declares
// these options beside its own and hands the run here when --task is given.
#include "cli/common.h"

namespace folio::cli {

void declare_task_options(po::options_description& options);
// The run of `folio eval --task`; every check (options, the task file's lines, their
// tokens against the model's window) is done here, before it.
std::function<int()> prepare_task_eval(const po::variables_map& vm);

}  // namespace folio::cli
