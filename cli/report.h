#pragma once
// A run's report card, RUN/report.md: what the run was (its commands, folio's version
// and commit, the machine, the data and tokenizer), what it cost (time, throughput),
// and what it reached (the loss and task curves as SVGs beside it, the final task
// scores, greedy samples). Self-contained markdown whose links are relative: the
// directory can be moved, browsed on a forge, or opened in a browser.
// folio report writes it; folio train --report writes it at the end of the run.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace folio::cli {

struct ReportOptions {
  std::vector<std::string> tasks;    // task files scored now on the final weights (cli/task_runs.h)
  std::vector<std::string> prompts;  // greedy samples after these (default: three from the data)
  int64_t sample_tokens = 80;
};
// The most --sample-tokens: each prompt's sample is written whole into report.md for a
// person to read, a forward pass a token; 4096 is fifty times the default and four
// times folio serve's default --max-tokens. Unbounded, a mistyped count (1e12) ran
// for days, writing nothing.
inline constexpr int64_t kMostSampleTokens = 4096;

// RUN/commands.txt: each folio command that trained the run, a line each (a resume
// adds its own), as the report's first section shows them. record_command adds `line`;
// `fresh`: the run started anew (--overwrite): the file starts over.
std::string commands_file(const std::string& run);
void record_command(const std::string& run, const std::string& line, bool fresh);

// A run read and checked for its report: an Error says what the run lacks (weights,
// state, log) or names a task file's bad line; nothing is written.
struct ReportRun;
std::shared_ptr<ReportRun> open_report(const std::string& run, const ReportOptions& options);
// The files write_report writes in RUN: report.md, report-loss.svg and a
// report-task-NAME.svg for each task the log scored; a command checks them
// (check_output) before writing any.
std::vector<std::string> report_files(const ReportRun& report);
// Writes RUN/report.md and its figures, RUN/report-*.svg; returns the report's path.
std::string write_report(ReportRun& report);

}  // namespace folio::cli
