#pragma once
// What a training run tells the person watching it, and what it keeps for later:
//  - on a terminal, one line redrawn in place after every step (step, loss, lr,
//    tokens/s, elapsed, ETA, best val so far), cut to the terminal's width by dropping
//    the least important fields; elsewhere a line every log_interval. tokens/s (and
//    log.csv's tokens_per_sec) is of the steps' time since the last line: the
//    evaluations and saves between steps are not in it;
//  - a line per evaluation, naming the loss plot;
//  - log.csv (a row per evaluation) and loss.svg (the curves), rewritten at every
//    evaluation so the picture is never behind the log. Its elapsed_s is the wall time
//    of the whole run (the processes of its resumes added up), train_s its training
//    time (train/config.h), val_bpc and val_bpb the val loss in bits per character and
//    per byte of text. A resumed log first drops the rows past the checkpoint it
//    resumes from: a process killed between its log row and its save left them.
// A quiet run prints nothing but still keeps the log and the plot; notice() lines go
// to stderr, quiet or not.
#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "base/scoped_value.h"
#include "train/param_groups.h"
#include "viz/loss_plot.h"

namespace folio {

// The seconds left: the steps left at the mean time of a step, and the evaluations
// left at the mean time of an evaluation (with its save), each averaged over the whole
// process so that an evaluation neither makes the estimate jump nor is forgotten.
// The first step (warm-up: allocations, primitive creation) is left out.
class EtaEstimate {
 public:
  // After each step, on a monotonic clock; `evaluated`: an evaluation ran before it.
  void step_done(double now_seconds, bool evaluated);
  double seconds_left(int64_t steps_left, int64_t evals_left) const;  // 0 until a step is timed
 private:
  bool started_ = false;
  double last_ = 0, step_sum_ = 0, eval_sum_ = 0;
  int64_t steps_ = 0, evals_ = 0;
};

// The fields of a progress line, joined by two spaces, leaving out the least important
// (the largest `rank`) until the line is shorter than `width` (a line as wide as the
// terminal wraps on some terminals). Fields keep their order.
struct Field {
  std::string text;
  int rank = 0;  // 0: always shown
};
std::string fit_fields(const std::vector<Field>& fields, size_t width);

// The width of the terminal on `fd`, or 0 when it is not one (or does not say).
int terminal_columns(int fd);

// Who else hears of a run's steps and evaluations, besides the terminal and log.csv:
// the Python module's on_step and on_eval. Each gets its figures as (name, value)
// pairs: a step's step (1-based, as the progress line counts), loss, lr,
// tokens_per_sec and train_s; an evaluation's the columns of its log.csv row. Set for
// the runs on the calling thread (the thread that calls Trainer::run), so that two
// runs on two threads each hear their own.
struct ProgressHooks {
  using Figures = std::vector<std::pair<const char*, double>>;
  std::function<void(const Figures&)> on_step, on_eval;
};
// Installs `hooks` for this thread until the returned guard goes (the ones before
// come back).
class ScopedProgressHooks : ScopedValue<ProgressHooks> {
 public:
  explicit ScopedProgressHooks(ProgressHooks hooks);
};

// The run's health since the last evaluation (train/divergence_guard.h): the accepted
// steps' mean global gradient norm (before the clip) and the fraction the clip scaled
// (NaN: no step since), the run's dropped updates and rollbacks so far, and the last
// step's update/weight ratio per parameter group (train/update_ratio.h; NaN: that step
// made no update). log.csv has a column for each; the progress line shows the norm,
// and the counts once not 0.
struct Health {
  static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  double grad_norm = kNaN;
  double clipped = kNaN;
  int64_t skipped = 0, rollbacks = 0;
  UpdateRatios update_ratio = {kNaN, kNaN, kNaN, kNaN, kNaN};
};

class Progress {
 public:
  struct Options {
    bool quiet = false;
    int64_t max_iters = 0, log_interval = 50;  // max_iters 0: none
    double max_time = 0;  // a budget of training seconds; 0: none
    // Val tokens per byte and per character of val text: the val loss in bits per
    // byte and per character (data/dataset.h). 1 and 1 for a char model of ASCII text.
    double val_tokens_per_byte = 1, val_tokens_per_char = 1;
    std::string log_file, plot_file, run_name;  // empty log_file: keep no log (not rank 0)
    int64_t resume_step = 0;  // resuming: the checkpoint's step
    int64_t eval_interval = 0;  // evaluations at every multiple, and at the end (for the ETA)
    double train_seconds = 0;   // the run's training time when this process starts (resuming: the checkpoint's)
    // Task columns after the run's own (train/task_evals.h); a resumed log gains the
    // ones it lacks ("nan" in its earlier rows) and keeps those of tasks not given now.
    std::vector<std::string> task_names;
  };
  // resume: append to the log (cut back to resume_step) and extend the plot with the
  // evaluations before.
  Progress(Options options, bool resume);

  // After step `step` (0-based), which trained on `tokens` tokens; train_seconds: the
  // run's training time so far, the clock of tokens/s: evaluations and saves between
  // steps are not throughput.
  // `health`: the last step's gradient norm, and the run's counts.
  void step_done(int64_t step, float loss, float lr, double train_seconds, int64_t tokens, const Health& health = {});
  // Before an evaluation of `batches` batches: the first of a process that has made no
  // step yet (step 0's, which on a large vocabulary takes a while) says so on stderr
  // (not when quiet).
  void evaluating(int64_t step, int64_t batches);
  // Logs, plots, prints; `health` since the last evaluation.
  void evaluated(int64_t step, float train, float val, float lr, double train_seconds, const Health& health = {});
  // The tasks' scores (task_names' order) for the next evaluation's row; without, its
  // task cells are "nan".
  void set_task_scores(std::vector<double> scores) { task_scores_ = std::move(scores); }
  // The run went back to the checkpoint of `step` (a rollback): the log's last row of that
  // step once more, with the learning rate, time and counts of now (nothing printed; no
  // row if the log has none of that step).
  void repeat_row(int64_t step, float lr, double train_seconds, const Health& health);
  void say(const std::string& line);                            // a line of its own
  void notice(const std::string& line);                         // one on stderr, even when quiet
  double elapsed() const;                                       // seconds since this process started
  float best_val() const { return best_val_; }
  double tokens_per_sec() const { return tokens_per_sec_; }  // over the steps since the last progress line

 private:
  // One row of log.csv (and the on_eval hook's figures, and the plot's point).
  void log_row(int64_t step, float train, float val, float lr, double train_seconds, const Health& health,
               double bits_per_char, double bits_per_byte);

  Options o_;
  bool say_evaluating_ = true;  // until this process's first step or evaluation: evaluating() speaks
  double elapsed_before_ = 0;  // wall seconds of the run's earlier processes (its log's last row)
  EtaEstimate eta_;
  bool evaluated_since_step_ = false;
  bool live_;  // a terminal: redraw one line
  // Of log.csv's columns (log_columns()), how many this log has: a log begun before
  // val_bpc, train_s, val_bpb, the health or the update-ratio columns goes on without.
  size_t columns_;
  std::vector<std::string> task_columns_;  // the log's columns after its own: task figures
  std::vector<double> task_scores_;        // for the next row (set_task_scores)
  std::ofstream log_;
  viz::LossCurve curve_;
  std::chrono::steady_clock::time_point start_;
  double window_start_;        // training seconds at the last progress line
  int64_t window_tokens_ = 0;  // trained on since then
  double tokens_per_sec_ = 0;
  float best_val_;
};

// log.csv's columns, in order: "step", "train_loss", ..., "rollbacks",
// "update_ratio_embeddings", ... (the names of an evaluation's figures; one list for the
// file and the Python on_eval hook).
std::vector<std::string> log_columns();
// Whether the log.csv at `log_file` has its header, the first line: a resumed run goes
// on with such a log, and starts a new one, header first, where it is missing or empty.
bool log_has_header(const std::string& log_file);

// A line for a phase that prints nothing of its own while it runs (a tokenizer's
// training, before the run's first line): at its start, then with the seconds so far,
// redrawn in place every second on a terminal and a line every 10 s elsewhere, and at
// its end with the time it took. Quiet: nothing.
class PhaseLine {
 public:
  explicit PhaseLine(bool quiet);
  // `what`: "training the bpe tokenizer on 1.0 MB of text"; `seconds` since it began.
  void show(const std::string& what, double seconds, bool done);

 private:
  bool quiet_, live_;
  double shown_at_ = -1;  // the seconds of the last line shown; -1: none yet
};

// 73 s -> "1m13s", 2 h -> "2h00m".
std::string duration_text(double seconds);

// ", 1 byte a token" (a char model on ASCII), ", 3.84 bytes a token": for the first line.
std::string bytes_a_token(int64_t bytes, int64_t tokens);
// The end of a run: the peak memory of the process, and on several ranks, each rank's
// with the time its steps waited for the gradient all-reduce (the part not hidden
// behind the backward pass) and its mean step time.
void report_ranks(Progress& progress, int64_t steps, double wait_seconds, double step_seconds);

}  // namespace folio
