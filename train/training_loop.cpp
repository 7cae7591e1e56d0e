// Trainer::run, the training loop, and its parts: the progress it opens and the
// lines it starts with, one step, the evaluations that guard every save, the report
// at the end. The trainer's set-up and its step's arithmetic are in trainer.cpp.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>  // SIGTERM

#include "base/error.h"
#include "train/size_warmups.h"
#include "train/distributed.h"
#include "train/progress.h"
#include "train/stop_signals.h"
#include "train/trainer.h"

namespace folio {
namespace {

// ", 1 byte a token" (a char model on ASCII), ", 3.84 bytes a token".
std::string bytes_a_token(int64_t bytes, int64_t tokens) {
  const double b = double(std::lround(100.0 * double(bytes) / double(tokens))) / 100.0;
  return cat(", ", b, b == 1.0 ? " byte a token" : " bytes a token");
}

// The peak memory of the process, and on several ranks, of each rank with the time its
// steps waited for the gradient all-reduce (the part of it not hidden behind the
// backward pass) and its mean step time (printed by rank 0).
void report_ranks(Progress& progress, int64_t steps, double wait_seconds, double step_seconds) {
  const size_t n = size_t(dist::size()), r = size_t(dist::rank());
  std::vector<double> wait_ms(n, 0.0), step_ms(n, 0.0), peak_mib(n, 0.0);
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  wait_ms[r] = 1e3 * wait_seconds / double(std::max<int64_t>(steps, 1));
  step_ms[r] = 1e3 * step_seconds / double(std::max<int64_t>(steps, 1));
  peak_mib[r] = double(usage.ru_maxrss) / 1024.0;  // Linux: KiB
  dist::sum(wait_ms);
  dist::sum(step_ms);
  dist::sum(peak_mib);
  if (dist::size() == 1) return progress.say(cat("peak memory ", std::lround(peak_mib[0]), " MiB"));
  auto ms = [](double v) { return std::lround(v * 1000) / 1000.0; };
  for (size_t i = 0; i < n; ++i)
    progress.say(cat("rank ", i, ": all-reduce ", ms(wait_ms[i]), " ms/step not hidden, step ", ms(step_ms[i]),
                     " ms, peak memory ", std::lround(peak_mib[i]), " MiB"));
}

}  // namespace

Progress::Options Trainer::progress_options() const {
  const TrainConfig& tc = opt_.train;
  const bool root = dist::is_root();
  return {.quiet = opt_.quiet || !root,
          .max_iters = tc.max_iters,
          .log_interval = tc.log_interval,
          .max_time = tc.max_time,
          .val_tokens_per_byte = data_.val_tokens_per_byte(),
          .val_tokens_per_char = data_.val_tokens_per_char(),
          .log_file = root ? run_dir_.log_file() : "",
          .plot_file = root ? run_dir_.plot_file() : "",
          .run_name = opt_.out_dir,
          .resume_step = step_,
          .eval_interval = tc.eval_interval,
          .train_seconds = train_seconds_};
}

void Trainer::announce(Progress& progress) const {
  const TrainConfig& tc = opt_.train;
  if (!opt_.resume)
    progress.say(cat("model: ", model_->num_parameters(), " parameters",
                     tc.init_from.empty() ? "" : cat(" from ", tc.init_from), ", tokenizer ",
                     data_.tokenizer->describe(), ", training on ", tc.data, " (",
                     data_.is_token_dir() ? cat(data_.kind, " token directory, ") : "", data_.train.size(),
                     " train / ", data_.val.size(), " val tokens",
                     data_.train_bytes ? bytes_a_token(data_.train_bytes, int64_t(data_.train.size())) : "",
                     tc.sampling == Sampling::epoch ? ", epoch sampling" : "", ")",
                     dist::size() > 1 ? cat(", ", dist::size(), " ranks") : ""));
  if (!init_note_.empty()) progress.say(init_note_);
  if (const Muon* muon = optimizer_->muon(); muon && !opt_.resume)
    progress.say(cat("optimizer: Muon on ", muon->matrices().size(), " hidden matrices (", muon->size(),
                     " weights), AdamW on the other ", optimizer_->adamw().size()));
}

std::string Trainer::kept() const {
  return saved_step_ < 0 ? cat("no checkpoint was saved in ", opt_.out_dir)
                         : cat("the checkpoint of step ", saved_step_, " (the last whose evaluation was finite) is kept in ",
                               opt_.out_dir, ", and best.safetensors there has the lowest validation loss");
}

void Trainer::evaluate_and_save(Progress& progress, const Schedule& schedule, bool save_it) {
  last_ = evaluate();
  progress.evaluated(step_, last_.train, last_.val, schedule.at(step_, train_seconds_), train_seconds_);
  if (!std::isfinite(last_.train) || !std::isfinite(last_.val))
    fail("train", "the evaluation loss became ", std::isfinite(last_.train) ? last_.val : last_.train, " at step ",
         step_, " (training diverged); ", kept());
  const float* w = model_->flat_parameters().data();
  for (int64_t i = 0, n = model_->flat_parameters().numel(); i < n; ++i)
    if (!std::isfinite(w[i])) fail("train", "a weight became ", w[i], " at step ", step_, "; ", kept());
  check_ranks_agree();
  if (save_it) save(last_), saved_step_ = step_;
}

void Trainer::train_step(Progress& progress, const Schedule& schedule, const std::vector<Tensor>& params,
                         Batch& batch) {
  const TrainConfig& tc = opt_.train;
  const auto step_start = std::chrono::steady_clock::now();
  const float lr = schedule.at(step_, train_seconds_);
  LossParts part;  // this rank's part of the step's losses
  const int64_t B = batch_size_at(step_, tc.batch_size, tc.batch_warmup);
  const auto [b0, b1] = dist::share_of(B);
  const int64_t T = window_length(step_, opt_.model.block_size, tc.seq_warmup);
  for (int64_t k = 0; k < tc.grad_accum; ++k) {
    // Every rank draws the same windows and reads its own rows of them.
    const auto draw_start = std::chrono::steady_clock::now();
    sampler_.next(data_.train, B, T, batch, b0, b1);
    draw_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - draw_start).count();
    const LossParts micro = forward_backward(batch, k + 1 == tc.grad_accum);
    part.loss += micro.loss, part.next_token += micro.next_token;
  }
  double parts[2] = {part.loss, part.next_token};
  dist::sum(std::span(parts, 2));
  const float loss = float(parts[0]);
  if (!std::isfinite(loss)) fail("train", "the loss became ", loss, " at step ", step_, " (training diverged); ", kept());
  if (!std::isfinite(clip_grad_norm(params, tc.grad_clip)))
    for (const auto& [name, p] : model_->named_parameters())
      for (int64_t i = 0; p.has_grad() && i < p.numel(); ++i)
        if (!std::isfinite(p.grad_data()[i]))
          fail("train", "the gradient of ", name, " became non-finite at step ", step_, " (training diverged); ",
               kept());
  optimizer_->step(lr, step_);
  if (average_) average_->update(*model_, step_);
  model_->zero_grad();
  train_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();
  if (tc.max_time > 0 && dist::size() > 1) dist::broadcast(std::span(&train_seconds_, 1));
  progress.step_done(step_, float(parts[1]), lr, train_seconds_, tc.grad_accum * B * T);
}

void Trainer::report_end(Progress& progress, bool interrupted, int64_t first_step, double run_start_seconds) {
  if (interrupted) {
    if (dist::is_root())
      progress.notice(cat("interrupted by ", signal_name(stop_signal_), " at step ", step_, ": checkpoint saved in ",
                          opt_.out_dir, " (continue it with --resume)"));
  } else {
    progress.say(cat("done in ", duration_text(progress.elapsed()), ": checkpoint in ", opt_.out_dir));
  }
  const double steps_seconds = train_seconds_ - run_start_seconds;
  report_ranks(progress, step_ - first_step, dist::seconds_in_sum() + exposed_seconds_, steps_seconds);
  if (step_ > first_step)
    progress.say(cat("drawing batches: ", std::lround(1e6 * draw_seconds_ / double(step_ - first_step)), " us a step, ",
                     std::lround(1e4 * draw_seconds_ / std::max(steps_seconds, 1e-9)) / 100.0, "% of the steps' time"));
}

Trainer::Losses Trainer::run() {
  const TrainConfig& tc = opt_.train;
  const PipeSignal pipe_signal;
  if (dist::is_root()) run_dir_.create(!opt_.resume);
  Progress progress(progress_options(), opt_.resume);
  announce(progress);
  const Schedule schedule = schedule_of(tc);
  const std::vector<Tensor> params = model_->parameters();
  const int64_t first_step = step_;
  const double run_start_seconds = train_seconds_;
  saved_step_ = opt_.resume ? first_step : -1;
  draw_seconds_ = 0;
  Batch batch;
  model_->train();
  bool interrupted = false;
  {
    StopSignals stop_signals;  // until the loop ends: a second Ctrl-C during the last save kills
    // The ranks stop together: a signal seen by any of them ends the run for all, and
    // rank 0's clock (sent to the others every step) says when the budget is spent.
    auto more = [&] {
      return (tc.max_iters == 0 || step_ < tc.max_iters) && (tc.max_time == 0 || train_seconds_ < tc.max_time);
    };
    for (; more() && !(interrupted = dist::any(stop_requested())); ++step_) {
      // An evaluation guards every save: a non-finite loss or weight stops the run
      // first, so a checkpoint never holds diverged weights.
      if (step_ % tc.eval_interval == 0 && !(opt_.resume && step_ == first_step))
        evaluate_and_save(progress, schedule, step_ > first_step);
      train_step(progress, schedule, params, batch);
    }
  }
  // Any rank's signal stopped them all; one that saw none reports SIGTERM's code.
  if (interrupted) stop_signal_ = stop_signal_received() ? stop_signal_received() : SIGTERM;
  if (step_ > first_step || !opt_.resume) evaluate_and_save(progress, schedule, true);
  report_end(progress, interrupted, first_step, run_start_seconds);
  return last_;
}

}  // namespace folio
