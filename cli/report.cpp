// A run's report card (cli/report.h).
#include "cli/report.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/atomic_file.h"
#include "cli/common.h"
#include "cli/report_sections.h"
#include "cli/task_runs.h"
#include "folio/version.h"
#include "infer/exact_match.h"
#include "io/checkpoint.h"
#include "io/run_dir.h"
#include "train/progress.h"
#include "train/run_state.h"
#include "train/task_evals.h"
#include "viz/loss_plot.h"

namespace folio::cli {

namespace fs = std::filesystem;

std::string commands_file(const std::string& run) { return (fs::path(run) / "commands.txt").string(); }

void record_command(const std::string& run, const std::string& line, bool fresh) {
  std::ofstream(commands_file(run), fresh ? std::ios::trunc : std::ios::app) << line << '\n';
}

struct ReportRun {
  std::string run;
  ReportOptions options;
  TrainState state;
  ModelCheckpoint ck;
  viz::LossCurve curve;
  // log.csv's task columns (train/task_evals.h) that hold a score, each with its curve
  // and the figure it gets, RUN/report-task-NAME.svg
  struct TaskCurve {
    std::string task, file;
    viz::LossCurve scores;
  };
  std::vector<TaskCurve> task_curves;
  std::vector<TaskRun> runs;              // the tasks scored now, on the final weights
};

std::shared_ptr<ReportRun> open_report(const std::string& run, const ReportOptions& options) {
  auto r = std::make_shared<ReportRun>();
  r->run = run, r->options = options;
  const RunDir dir(run);
  // Each file missing is named; weights alone (what folio import writes) are a model
  // but not a run, and the way to one is said: "not a run directory with a saved
  // checkpoint" left the reader looking at the checkpoint it has.
  std::vector<std::string> missing;
  for (const std::string& need : {dir.model_file(), dir.log_file(), dir.state_file()})
    if (!fs::is_regular_file(need)) missing.push_back(fs::path(need).filename().string());
  if (!missing.empty()) {
    std::string names;
    for (size_t i = 0; i < missing.size(); ++i)
      names += cat(i == 0 ? "" : i + 1 == missing.size() ? " or " : ", ", missing[i]);
    throw Error(cat(run, " has no ", names, ": a report reads a run's weights, log and state, as folio train --out ",
                    "writes them",
                    fs::is_regular_file(dir.model_file())
                        ? cat("; weights alone (a model folio import wrote) are trained into a run first: folio train "
                              "--init-from ", run, " --data TEXT --out RUN")
                        : ""));
  }
  r->state = load_state(dir.state_file());
  r->ck = load_model(dir.model_file());
  r->curve = viz::read_loss_log(dir.log_file(), run_name(run));
  std::ifstream log(dir.log_file());
  std::string header;
  std::getline(log, header);
  // The figures are known here, before anything is written, so that the command can
  // refuse to replace the ones a user has (report_files).
  for (const std::string& task : task_columns_of(header, log_columns())) {
    viz::LossCurve scores = viz::read_loss_log(dir.log_file(), r->curve.name, task);
    if (std::none_of(scores.points.begin(), scores.points.end(),
                     [](const viz::LossPoint& p) { return std::isfinite(p.column); }))
      continue;
    r->task_curves.push_back({task, "report-task-" + file_safe(task) + ".svg", std::move(scores)});
  }
  // The prompts a user gave are theirs to fix: refused here, before anything is written
  // (the default ones come from the run's own text).
  for (const std::string& prompt : options.prompts) {
    try {
      prompt_tokens(*r->ck.tokenizer, prompt);
    } catch (const Error& e) {  // "the prompt: ...", "the prompt has no tokens": named as the option
      const std::string_view what = e.what(), own = "the prompt";
      throw Error(cat("--prompt ", shown(prompt), what.starts_with(own) ? what.substr(own.size()) : ": " + std::string(what)));
    }
  }
  for (const std::string& path : options.tasks) {
    try {
      r->runs.push_back(prepare_task(path, *r->ck.model, *r->ck.tokenizer, TaskOptions{}));
    } catch (const Error& e) {
      throw Error(cat("--task ", e.what()));
    }
  }
  return r;
}

std::vector<std::string> report_files(const ReportRun& report) {
  std::vector<std::string> files = {"report.md", "report-loss.svg"};
  for (const ReportRun::TaskCurve& t : report.task_curves) files.push_back(t.file);
  return files;
}

std::string write_report(ReportRun& report) {
  const std::string& run = report.run;
  const ReportOptions& options = report.options;
  const TrainState& state = report.state;
  ModelCheckpoint& ck = report.ck;
  const viz::LossCurve& curve = report.curve;
  const std::vector<TaskRun>& runs = report.runs;
  const TaskOptions task_options;

  const TrainConfig& tc = state.config;
  const nn::GPTConfig& mc = ck.model->config();
  std::ostringstream md;
  std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  md << "# Report: " << run_name(run) << "\n\n"
     << "Written by folio " << FOLIO_VERSION << " (commit " << folio_commit() << ") on " << date
     << ", from the run's own files. Figures are in this directory: the links are relative.\n\n";

  md << "## Commands\n\n";
  std::ifstream commands(commands_file(run));
  std::string all((std::istreambuf_iterator<char>(commands)), std::istreambuf_iterator<char>());
  md << (all.empty() ? std::string("Not recorded (the run was trained by a folio that kept no commands.txt).\n\n")
                     : fenced(all, "sh"));

  md << "## Machine\n\n" << machine_table(tc) << "\n";

  const int64_t tokens_a_step = tc.batch_size * tc.grad_accum * mc.block_size;
  const double tokens_seen = double(state.step) * double(tokens_a_step);
  const viz::LossPoint* last = curve.points.empty() ? nullptr : &curve.points.back();
  md << "## Model and data\n\n"
     << table({{"model", cat(ck.model->num_parameters(), " parameters: ", mc.n_layer, " layers, ", mc.n_head,
                             " heads, n_embd ", mc.n_embd, ", block_size ", mc.block_size, ", vocab ", mc.vocab_size)},
               {"data", tc.data},
               {"tokenizer", ck.tokenizer->describe()},
               {"tokens trained on", cat(fixed_text(tokens_seen / 1e6, 2), " M (", state.step, " steps of ",
                                         tokens_a_step, " tokens; fewer during a batch or sequence warm-up)")},
               {"val loss", last ? cat(fixed_text(last->val, 4), " at step ", last->step, " (best ",
                                       fixed_text(state.best_val_loss, 4), ")")
                                 : "no evaluation"},
               {"val bits per byte", last && std::isfinite(last->val_bpb) ? fixed_text(last->val_bpb, 4)
                                                                         : "not known (token files or conversations: no bytes)"}})
     << "\n";

  md << "## Time and throughput\n\n"
     << table({{"training time", cat(fixed_text(state.train_seconds, 1), " s (the steps only)")},
               {"wall time", last ? cat(fixed_text(last->elapsed_s, 1), " s (with evaluations and saves)") : "-"},
               {"throughput", state.train_seconds > 0 ? cat(fixed_text(tokens_seen / state.train_seconds, 0),
                                                            " tokens/s over the run")
                                                      : "-"}})
     << "\n";

  md << "## Curves\n\n";
  write_file_atomic((fs::path(run) / "report-loss.svg").string(), viz::loss_plot_svg({curve}));
  md << "![train and val loss](report-loss.svg)\n\n";
  std::vector<std::pair<std::string, std::string>> finals;  // (task, "value at step N")
  for (const auto& [task, file, scores] : report.task_curves) {
    const auto at = std::find_if(scores.points.rbegin(), scores.points.rend(),
                                 [](const viz::LossPoint& p) { return std::isfinite(p.column); });
    write_file_atomic((fs::path(run) / file).string(),
                      viz::loss_plot_svg({scores}, viz::PlotAxis::step, viz::PlotValue::column, task));
    md << "![" << task << " during training](" << file << ")\n\n";
    finals.push_back({task, cat(fixed_text(at->column, 4), " at step ", at->step)});
  }

  md << "## Task scores\n\n";
  if (finals.empty() && runs.empty()) md << "None: the run logged no --eval-task, and none was given to the report.\n\n";
  if (!finals.empty()) md << "As logged during training (acc_norm, or exact_match for a generative task):\n\n" << table(finals) << "\n";
  if (!runs.empty()) {
    md << "Scored on the final weights (step " << ck.step << "):\n\n| task | format | n | metric | score |\n|---|---|---|---|---|\n";
    for (const TaskRun& r : runs) {
      const TaskResult s = run_task(r, *ck.model, *ck.tokenizer, task_options);
      md << "| " << cell(s.name) << " | " << s.format << " | " << s.n << " | " << (s.generative ? "exact_match" : "acc_norm")
         << " | " << metric_text(s.generative ? s.exact_match : s.acc_norm) << " |\n";
    }
    md << "\n";
  }

  md << "## Samples\n\nGreedy, at most " << options.sample_tokens << " tokens after each prompt"
     << (ck.tokenizer->chat_tokens() ? " (a chat model: each prompt is a user's message, and its reply)" : "")
     << ":\n\n";
  md << samples_text(*ck.model, *ck.tokenizer, options.prompts.empty() ? default_prompts(tc.data) : options.prompts,
                     options.sample_tokens);

  const std::string path = (fs::path(run) / "report.md").string();
  write_file_atomic(path, md.str());
  return path;
}

}  // namespace folio::cli
