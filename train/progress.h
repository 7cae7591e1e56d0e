#pragma once
// What a training run tells the person watching it, and what it keeps for later:
//  - on a terminal, one line redrawn in place after every step (step, loss, lr,
//    tokens/s, elapsed, ETA, best val so far); elsewhere a line every log_interval;
//  - a line per evaluation, naming the loss plot;
//  - log.csv (a row per evaluation) and loss.svg (the curves), rewritten at every
//    evaluation so the picture is never behind the log. Its elapsed_s is the wall time
//    of this process; train_s the training time of the whole run (train/config.h);
//    val_bpc and val_bpb the val loss in bits per character and per byte of text.
// A quiet run prints nothing but still keeps the log and the plot.
#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>

#include "viz/loss_plot.h"

namespace folio {

class Progress {
 public:
  struct Options {
    bool quiet = false;
    int64_t max_iters = 0, tokens_per_step = 0, log_interval = 50;  // max_iters 0: none
    double max_time = 0;  // a budget of training seconds; 0: none
    // Val tokens per byte and per character of val text: the val loss in bits per
    // byte and per character (data/dataset.h). 1 and 1 for a char model of ASCII text.
    double val_tokens_per_byte = 1, val_tokens_per_char = 1;
    std::string log_file, plot_file, run_name;  // empty log_file: keep no log (not rank 0)
  };
  // resume: append to the log and extend the plot with the evaluations before.
  Progress(Options options, bool resume);

  // After step `step` (0-based); train_seconds: the run's training time so far.
  void step_done(int64_t step, float loss, float lr, double train_seconds);
  void evaluated(int64_t step, float train, float val, float lr, double train_seconds);  // logs, plots, prints
  void say(const std::string& line);                            // a line of its own
  double elapsed() const;                                       // seconds since the start
  float best_val() const { return best_val_; }

 private:
  Options o_;
  bool live_;  // a terminal: redraw one line
  int columns_ = 9;  // of log.csv: a log begun before val_bpc (7), train_s (8) or val_bpb (9) goes on without
  std::ofstream log_;
  viz::LossCurve curve_;
  std::chrono::steady_clock::time_point start_, window_start_;
  int64_t window_steps_ = 0;
  double tokens_per_sec_ = 0;
  float best_val_;
};

// 73 s -> "1m13s", 2 h -> "2h00m".
std::string duration_text(double seconds);

}  // namespace folio
