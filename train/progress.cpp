#include "train/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "autograd/error.h"
#include "io/atomic_file.h"

namespace folio {

using Clock = std::chrono::steady_clock;

std::string duration_text(double s) {
  char buf[32];
  const int t = int(s + 0.5);
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%dh%02dm", t / 3600, t / 60 % 60);
  else std::snprintf(buf, sizeof buf, "%dm%02ds", t / 60, t % 60);
  return buf;
}

Progress::Progress(Options options, bool resume)
    : o_(std::move(options)),
      live_(!o_.quiet && isatty(fileno(stdout))),
      start_(Clock::now()),
      window_start_(start_),
      best_val_(std::numeric_limits<float>::infinity()) {
  curve_.name = o_.run_name;
  if (o_.log_file.empty()) return;
  if (resume && std::filesystem::exists(o_.log_file)) {
    try {  // the evaluations before the resume, so the plot shows the whole run
      curve_ = viz::read_loss_log(o_.log_file, o_.run_name);
      for (const viz::LossPoint& p : curve_.points) best_val_ = std::min(best_val_, float(p.val));
    } catch (const Error&) {
      curve_.points.clear();  // a damaged log only costs the plot its history
    }
  }
  if (resume) {  // a log begun before a column existed goes on without it
    std::ifstream in(o_.log_file);
    std::string header;
    if (std::getline(in, header))
      columns_ = header.find(",val_bpb") != std::string::npos   ? 9
                 : header.find(",train_s") != std::string::npos ? 8
                 : header.find(",val_bpc") != std::string::npos ? 7
                                                                 : 6;
  }
  log_.open(o_.log_file, resume ? std::ios::app : std::ios::trunc);
  if (!log_) fail("train", o_.log_file, ": cannot open for writing");
  if (!resume) log_ << "step,train_loss,val_loss,lr,tokens_per_sec,elapsed_s,val_bpc,train_s,val_bpb\n" << std::flush;
}

double Progress::elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

void Progress::step_done(int64_t step, float loss, float lr, double train_seconds) {
  ++window_steps_;
  const double window = std::chrono::duration<double>(Clock::now() - window_start_).count();
  if (window > 0) tokens_per_sec_ = double(window_steps_ * o_.tokens_per_step) / window;
  const bool log_now = (step + 1) % o_.log_interval == 0;
  if (log_now) window_start_ = Clock::now(), window_steps_ = 0;
  if (o_.quiet || !(live_ || log_now)) return;
  // Whichever limit comes first: the steps left at this speed, the budget left.
  double eta = o_.max_iters && tokens_per_sec_ > 0
                   ? double((o_.max_iters - step - 1) * o_.tokens_per_step) / tokens_per_sec_
                   : 0;
  if (const double left = o_.max_time - train_seconds; o_.max_time > 0 && !(o_.max_iters && eta < left))
    eta = std::max(0.0, left);
  char of[32] = "";  // "/2000", or nothing on a time budget alone
  if (o_.max_iters) std::snprintf(of, sizeof of, "/%lld", (long long)o_.max_iters);
  char best[32] = "";
  if (std::isfinite(best_val_)) std::snprintf(best, sizeof best, "best val %.4f", best_val_);
  if (live_)
    std::printf("\r\033[Kstep %lld%s  loss %.4f  lr %.2e  %.0f tok/s  %s elapsed  ETA %s  %s", (long long)step + 1, of,
                loss, lr, tokens_per_sec_, duration_text(elapsed()).c_str(), duration_text(eta).c_str(), best);
  else
    std::printf("step %lld%s: loss %.4f, lr %.2e, %.0f tok/s, %s elapsed, ETA %s%s%s\n", (long long)step + 1, of, loss,
                lr, tokens_per_sec_, duration_text(elapsed()).c_str(), duration_text(eta).c_str(), *best ? ", " : "",
                best);
  std::fflush(stdout);
}

void Progress::evaluated(int64_t step, float train, float val, float lr, double train_seconds) {
  if (std::isfinite(val)) best_val_ = std::min(best_val_, val);
  const double bits_per_byte = val * o_.val_tokens_per_byte / std::log(2.0);
  if (log_.is_open()) {
    const double t = elapsed();
    log_ << step << ',' << train << ',' << val << ',' << lr << ',' << tokens_per_sec_ << ',' << t;
    if (columns_ >= 7) log_ << ',' << val * o_.val_tokens_per_char / std::log(2.0);
    if (columns_ >= 8) log_ << ',' << train_seconds;
    if (columns_ >= 9) log_ << ',' << bits_per_byte;
    log_ << '\n' << std::flush;
    curve_.points.push_back({step, train, val, t});
    write_file_atomic(o_.plot_file, viz::loss_plot_svg({curve_}));
  }
  if (o_.quiet) return;
  std::printf("%sstep %lld: train loss %.4f, val loss %.4f (%.3f bits/byte)%s%s\n", live_ ? "\r\033[K" : "",
              (long long)step, train, val, bits_per_byte, o_.plot_file.empty() ? "" : "  ",
              o_.plot_file.empty() ? "" : o_.plot_file.c_str());
  std::fflush(stdout);
}

void Progress::say(const std::string& line) {
  if (o_.quiet) return;
  std::printf("%s%s\n", live_ ? "\r\033[K" : "", line.c_str());
  std::fflush(stdout);
}

}  // namespace folio
