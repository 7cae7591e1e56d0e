#pragma once
// A task file scored on a model: read and tokenized first (every bad line refused
// before anything runs), then scored by multiple choice (infer/task_eval.h) or by
// exact match of greedy text (infer/exact_match.h). folio eval --task and the
// training's --eval-task both score through here.
#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "infer/exact_match.h"
#include "infer/task_eval.h"
#include "io/task_file.h"
#include "nn/transformer.h"

namespace folio::cli {

struct TaskOptions {
  int64_t limit = 0;       // items to score (0: all)
  int64_t batch = 32;      // multiple choice: choices per forward pass; generative: prompts side by side
  int64_t max_new_tokens = 256;
  std::vector<std::string> stops = {"\n\n", "Question:"};
  bool log_samples = false;
};

// An item with its choices' tokens, checked against the model's window.
struct TokenizedItem {
  const ChoiceItem* item;
  std::vector<ChoiceTokens> choices;  // one per choice
  bool cut = false;                    // some choice's context was cut to fit
};

struct TaskRun {
  TaskFile task;
  std::string name;                          // the file's stem: a log.csv column, a JSON "task"
  std::vector<TokenizedItem> items;          // multiple choice
  std::vector<std::vector<int32_t>> prompts;  // generative: each item's prompt tokens
  int64_t cut = 0;  // multiple choice: items cut to fit the window
};

// Reads and tokenizes the task file; an Error names "<path>:<line>: " and what is wrong.
TaskRun prepare_task(const std::string& path, const nn::GPT& model, const Tokenizer& tokenizer,
                     const TaskOptions& opt);

struct TaskResult {
  std::string name, path, format;
  bool generative = false;
  int64_t n = 0, cut = 0;
  Metric acc, acc_norm;  // multiple choice
  Metric exact_match;    // generative
  double items_per_s = 0;
  std::string samples;  // with opt.log_samples: one JSON line per item
  // The figure a run logs for the task: acc_norm, or exact_match.
  double headline() const { return generative ? exact_match.mean : acc_norm.mean; }
};

// Scores the task with `model`, in eval mode (dropout off) while it runs; its mode is
// restored after.
TaskResult run_task(const TaskRun& run, nn::GPT& model, const Tokenizer& tokenizer, const TaskOptions& opt);

}  // namespace folio::cli
