// folio train --eval-task (cli/train_task_evals.h).
#include "cli/train_task_evals.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/report.h"
#include "cli/report_sections.h"
#include "cli/task_runs.h"
#include "train/distributed.h"
#include "train/progress.h"

namespace folio::cli {

void declare_eval_task_options(po::options_description& opts) {
  opts.add_options()("eval-task", po::value<std::vector<std::string>>()->composing(),
                     "score this task file (folio eval --task's formats) at evaluations, into a log.csv column named "
                     "after the file (acc_norm, or exact_match for a generative task); repeatable")
      ("eval-task-interval", with_default<int64_t>(0),
       "score the --eval-task files at the evaluations at multiples of this step (a multiple of --eval-interval; "
       "0: at every evaluation)")
      ("report", po::bool_switch(), "at the end, write the run's report card, OUT/report.md (folio report)");
}

namespace {

// The command as folio train read it: each option given on the command line (those of
// a --config file are its), in name order, so that the line is the same whichever front
// end (the binary, folio.train in Python) started the run.
std::string command_of(const po::variables_map& vm) {
  std::string line = "folio train";
  for (const auto& [name, value] : vm) {
    if (value.defaulted() || config_file_options().count(name)) continue;
    const boost::any& v = value.value();
    std::vector<std::string> words;
    if (const bool* b = boost::any_cast<bool>(&v)) {
      if (*b) line += " --" + name;
      continue;
    }
    if (const auto* s = boost::any_cast<std::string>(&v)) words = {*s};
    else if (const auto* list = boost::any_cast<std::vector<std::string>>(&v)) words = *list;
    else if (const auto* i = boost::any_cast<int64_t>(&v)) words = {std::to_string(*i)};
    else if (const auto* n = boost::any_cast<int>(&v)) words = {std::to_string(*n)};
    else if (const auto* d = boost::any_cast<double>(&v)) words = {shown(*d)};
    else if (const auto* f = boost::any_cast<float>(&v)) words = {shown(*f)};
    else words = {"?"};
    for (const std::string& w : words) line += " --" + name + " " + shell_quoted(w);
  }
  return line;
}

}  // namespace

void start_run(const po::variables_map& vm, const std::string& run) {
  if (!dist::is_root()) return;
  std::error_code ec;
  std::filesystem::create_directories(run, ec);  // the trainer's check said it can be made
  record_command(run, command_of(vm), !vm["resume"].as<bool>());
}

void finish_run(const po::variables_map& vm, const std::string& run) {
  if (!dist::is_root() || !vm["report"].as<bool>()) return;
  try {
    std::printf("wrote %s\n", write_report(*open_report(run, {})).c_str());
  } catch (const Error& e) {
    warn(cat("--report: ", e.what()));
  }
}

TaskEvals eval_task_option(const po::variables_map& vm, int64_t eval_interval) {
  TaskEvals evals;
  evals.interval = vm["eval-task-interval"].as<int64_t>();
  if (evals.interval < 0) throw UsageError(cat("--eval-task-interval must be >= 0, got ", evals.interval));
  if (!vm.count("eval-task")) {
    if (!vm["eval-task-interval"].defaulted()) throw UsageError("--eval-task-interval goes with --eval-task FILE");
    return evals;
  }
  if (evals.interval > 0 && eval_interval > 0 && evals.interval % eval_interval != 0)
    throw UsageError(cat("--eval-task-interval ", evals.interval, " must be a multiple of --eval-interval ",
                         eval_interval, ": tasks are scored at evaluations"));
  const std::vector<std::string> paths = vm["eval-task"].as<std::vector<std::string>>();
  const std::vector<std::string> own = log_columns();
  for (const std::string& path : paths) {
    const std::string name = std::filesystem::path(path).stem().string();
    try {
      read_task_file(path);  // every line checked now, before the run
    } catch (const Error& e) {
      throw UsageError(cat("--eval-task ", e.what()));
    }
    if (std::find(evals.names.begin(), evals.names.end(), name) != evals.names.end() ||
        std::find(own.begin(), own.end(), name) != own.end() || name.find(',') != std::string::npos)
      throw UsageError(cat("--eval-task ", path, ": its log.csv column would be '", name,
                           "', which another task or the log already has (or holds a comma): rename the file"));
    evals.names.push_back(name);
  }
  // Tokenized once the model and its tokenizer exist, before the run starts.
  auto runs = std::make_shared<std::vector<TaskRun>>();
  evals.prepare = [runs, paths](const nn::GPT& model, const Tokenizer& tokenizer) {
    runs->clear();
    for (const std::string& path : paths) runs->push_back(prepare_task(path, model, tokenizer, TaskOptions{}));
  };
  evals.score = [runs, prepare = evals.prepare](nn::GPT& model, const Tokenizer& tokenizer) {
    const TaskOptions opt;
    if (runs->empty()) prepare(model, tokenizer);
    std::vector<double> scores;
    for (const TaskRun& run : *runs) scores.push_back(run_task(run, model, tokenizer, opt).headline());
    return scores;
  };
  return evals;
}

}  // namespace folio::cli
