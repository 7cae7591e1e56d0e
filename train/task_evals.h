#pragma once
// Task files scored while a run trains (folio train --eval-task FILE): at the
// evaluations whose step is a multiple of the interval, each task's figure (acc_norm
// for multiple choice, exact_match for a generative task) goes into log.csv as a column
// named after the file's stem, after the run's own columns. Rank 0 scores and writes
// (the ranks hold the same weights); other evaluations leave the cells "nan".
// The scoring is the CLI's (cli/task_runs.h), handed in as a function: train/ cannot
// reach infer/, where the rules live.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "nn/transformer.h"

namespace folio {

struct TaskEvals {
  std::vector<std::string> names;  // log.csv columns, one per task, in order
  int64_t interval = 0;            // score at evaluations at multiples of it (0: every evaluation)
  // Tokenizes every item for the run's model and tokenizer, before the run starts: an
  // item they cannot take (a character the vocabulary lacks, a choice longer than the
  // window) throws then, with nothing written, not at the first evaluation.
  std::function<void(const nn::GPT& model, const Tokenizer& tokenizer)> prepare;
  // The figure of each task (names' order) for the model as it is now.
  std::function<std::vector<double>(nn::GPT& model, const Tokenizer& tokenizer)> score;

  bool due(int64_t step) const { return !names.empty() && (interval <= 0 || step % interval == 0); }
};

// The task columns a resumed log's header holds after the run's own `base` columns
// (empty for a log without any, or one whose own columns are not all there).
std::vector<std::string> task_columns_of(const std::string& header, const std::vector<std::string>& base);

// The cells of a row for `columns`: each task's score by name, NaN where a column has
// no task of this run or the tasks were not scored at this evaluation.
std::vector<double> task_cells(const std::vector<std::string>& columns, const std::vector<std::string>& names,
                               const std::vector<double>& scores);

}  // namespace folio
