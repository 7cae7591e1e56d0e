// folio report --checkpoint RUN: writes RUN/report.md (cli/report.h).
#include <cstdio>
#include <filesystem>

#include "cli/common.h"
#include "cli/report.h"

namespace folio::cli {
namespace {

void declare(po::options_description& opts) {
  opts.add_options()("checkpoint", po::value<std::string>()->required(), "the run directory to report on")
      ("task", po::value<std::vector<std::string>>()->composing(),
       "also score this task file on the final weights (folio eval --task's formats; repeatable)")
      ("prompt", po::value<std::vector<std::string>>()->composing(),
       "a prompt for the greedy samples (repeatable; default: three line starts of the run's text)")
      ("sample-tokens", with_default<int64_t>(80),
       cat("tokens written greedily after each prompt (1 to ", kMostSampleTokens, ")").c_str());
  add_overwrite(opts);
  add_threads(opts);
}

std::function<int()> prepare(const po::variables_map& vm) {
  apply_threads(vm);
  const std::string run = vm["checkpoint"].as<std::string>();
  if (!std::filesystem::is_directory(run))
    throw UsageError(cat("--checkpoint ", run, ": expected a run directory (what folio train --out wrote)"));
  ReportOptions options;
  if (vm.count("task")) options.tasks = vm["task"].as<std::vector<std::string>>();
  if (vm.count("prompt"))
    for (const std::string& p : vm["prompt"].as<std::vector<std::string>>()) options.prompts.push_back(unescaped(p));
  options.sample_tokens = positive<int64_t>(vm, "sample-tokens", kMostSampleTokens);
  // The checks the report makes of the run and the task files come before it writes.
  std::shared_ptr<ReportRun> opened;
  try {
    opened = open_report(run, options);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  // Every file the report writes, not report.md alone: the figures beside it are the
  // user's too (an earlier report's, edited or kept), and were once replaced without
  // --overwrite while report.md was refused.
  // All of them at once, each one there named, before the check that the directory
  // takes new files (which leaves its trace in the directory).
  check_output(vm, "report " + run, run, report_files(*opened));
  return [opened] {
    std::printf("wrote %s\n", write_report(*opened).c_str());
    return 0;
  };
}

}  // namespace

const Command kReport = {
    "report", "write a run's report card, RUN/report.md",
    "Writes RUN/report.md: the commands that trained the run, folio's version and\n"
    "commit, the machine (CPU, AVX2/AVX-512/AMX, threads, dtype), the model and data\n"
    "(tokenizer, tokens, bits per byte), time and throughput, the loss and task curves\n"
    "(RUN/report-*.svg beside it), the final task scores, and greedy samples. Links are\n"
    "relative. Without --overwrite, any of these files already there is refused and\n"
    "nothing is written. folio train --report writes it at the end of a run. See\n"
    "docs/evals.md.",
    declare, prepare};

}  // namespace folio::cli
