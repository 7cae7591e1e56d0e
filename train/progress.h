#pragma once
// What a training run tells the person watching it, and what it keeps for later:
//  - on a terminal, one line redrawn in place after every step (step, loss, lr,
//    tokens/s, elapsed, ETA, best val so far); elsewhere a line every log_interval;
//  - a line per evaluation, naming the loss plot;
//  - log.csv (a row per evaluation) and loss.svg (the curves), rewritten at every
//    evaluation so the picture is never behind the log.
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
    int64_t max_iters = 0, tokens_per_step = 0, log_interval = 50;
    std::string log_file, plot_file, run_name;  // empty log_file: keep no log (not rank 0)
  };
  // resume: append to the log and extend the plot with the evaluations before.
  Progress(Options options, bool resume);

  void step_done(int64_t step, float loss, float lr);           // after step `step` (0-based)
  void evaluated(int64_t step, float train, float val, float lr);  // logs, plots, prints
  void say(const std::string& line);                            // a line of its own
  double elapsed() const;                                       // seconds since the start
  float best_val() const { return best_val_; }

 private:
  Options o_;
  bool live_;  // a terminal: redraw one line
  bool bpc_column_ = true;  // log.csv has val_bpc (bits per character)
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
