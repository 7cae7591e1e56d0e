// The trainer: its set-up (a new run, --init-from or --resume), then Trainer::run, the
// training loop, and its parts: the first lines, one step and its forward and backward
// over the ranks and threads, the evaluations that guard every save, the report at the end.
#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>  // SIGTERM
#include <limits>
#include <optional>
#include <utility>

#include "base/error.h"
#include "base/number_text.h"
#include "base/size_text.h"
#include "autograd/anomaly.h"
#include "autograd/parallel.h"
#include "autograd/pool.h"
#include "train/size_warmups.h"
#include "train/chat_data.h"
#include "train/config_json.h"
#include "train/distributed.h"
#include "train/init_from.h"
#include "train/progress.h"
#include "train/same_on_every_rank.h"
#include "train/save_check.h"
#include "train/stop_signals.h"

namespace folio {
Trainer::Trainer(TrainOptions options) : opt_(std::move(options)), run_dir_(opt_.out_dir) {
  opt_.train.threads = num_threads();  // saved with the run: a resume repeats them (train/config.h)
  opt_.train.validate();
  check_same_on_every_rank(options_to_share(opt_));  // before the first call between the ranks
  check_saveable(nullptr, opt_.train);
  run_dir_.check_usable();
  if (dist::is_root()) lock_ = run_dir_.lock();  // before a resume's recovery; a new directory's in run()
  if (opt_.train.batch_size < dist::size())
    fail("train", "--batch-size ", opt_.train.batch_size, " is smaller than the ", dist::size(),
         " ranks: every rank needs at least one sequence of each batch");
  if (const int64_t first = batch_size_at(0, opt_.train.batch_size, opt_.train.batch_warmup); first < dist::size())
    fail("train", "--batch-warmup ", opt_.train.batch_warmup, " starts with batches of ", first,
         " (an eighth of --batch-size ", opt_.train.batch_size, ", rounded up), fewer than the ", dist::size(),
         " ranks: every rank needs at least one sequence of each batch (--batch-size ", 8 * dist::size(), " or more)");
  std::vector<float> saved_average;  // (P,) a resumed run's average of the weights
  GuardState guards;                 // a resumed run's
  if (opt_.resume) {
    // Rank 0 brings the directory in line with its last commit; the others read it after.
    TrainState st;
    if (dist::is_root()) st = recover_run(run_dir_);
    dist::barrier();
    if (!dist::is_root()) st = load_state(run_dir_.state_file());
    ModelCheckpoint ck = load_model(run_dir_.model_file());
    data_ = open_training_data(opt_.train.data, opt_.train.train_fraction, ck.tokenizer, run_dir_.model_file());
    data_warning_ = check_resumed_data(data_, st.data_fingerprint, st.config.data, run_dir_.model_file());
    if (st.step != ck.step)
      fail("checkpoint", run_dir_.state_file(), ": step ", st.step, " but ", ck.path, " is at step ", ck.step);
    model_ = std::move(ck.model);
    opt_.model = model_->config();
    check_windows(data_, opt_.model.block_size);  // the checkpoint's block_size on --resume
    optimizer_ = std::make_unique<Optimizer>(model_->named_parameters(), opt_.train);
    optimizer_->load_state(st.optimizer, run_dir_.state_file());
    step_ = st.step;
    train_seconds_ = st.train_seconds;
    best_val_ = st.best_val_loss;
    has_best_ = true;
    if (dist::is_root()) {  // rank 0 writes the run
      // best.safetensors gone: the next evaluation is the best so far, and makes it again.
      if (std::string w = lost_best(run_dir_, best_val_); !w.empty())
        resume_warnings_.push_back(std::move(w)), best_val_ = std::numeric_limits<float>::infinity();
      if (std::string w = lost_log(run_dir_, step_); !w.empty()) resume_warnings_.push_back(std::move(w));
    }
    sampler_ = BatchSampler(opt_.train.sampling, opt_.train.seed);
    sampler_.restore({st.data_rng, st.data_epoch, st.data_position});
    model_->dropout_rng().set_state(st.dropout_rng);
    saved_average = std::move(st.ema_weights);
    guards = std::move(st.guards);
  } else {
    std::optional<ModelCheckpoint> init;
    if (!opt_.train.init_from.empty()) init = load_model(opt_.train.init_from);
    TokenizerSpec spec{opt_.train.tokenizer, opt_.train.vocab_size};
    PhaseLine phase(opt_.quiet || !dist::is_root());  // SentencePiece is silent for seconds
    spec.on_training = [&](double seconds, int64_t bytes, bool done) {
      phase.show(cat("training the ", spec.name, " tokenizer on ", size_text(double(bytes)), " of text"), seconds, done);
    };
    data_ = init ? open_training_data(opt_.train.data, opt_.train.train_fraction, init->tokenizer, opt_.train.init_from,
                                      /*may_grow=*/true)
                 : open_training_data(opt_.train.data, opt_.train.train_fraction, spec);
    std::unique_ptr<nn::GPT> init_model;
    if (init) {
      InitModel from = model_from(*init, opt_.model, opt_.dropout_given, data_.tokenizer->vocab_size());
      init_model = std::move(from.model), init_note_ = std::move(from.note);
      opt_.model = init_model->config();
    }
    opt_.model.vocab_size = data_.tokenizer->vocab_size();
    check_saveable(&opt_.model, opt_.train);
    check_windows(data_, opt_.model.block_size);
    model_ = init_model ? std::move(init_model) : std::make_unique<nn::GPT>(opt_.model);
    optimizer_ = std::make_unique<Optimizer>(model_->named_parameters(), opt_.train);
    sampler_ = BatchSampler(opt_.train.sampling, opt_.train.seed);
  }
  if (data_.chat) chat_batches_ = std::make_unique<ChatBatches>(data_.chat, opt_.model.block_size, opt_.train.sampling);
  model_->set_precision(opt_.train.dtype);  // the replicas follow it (DataParallel)
  guard_ = DivergenceGuard(opt_.train, std::move(guards));
  update_ratio_ = UpdateRatio(model_->named_parameters(), model_->flat_parameters());
  if (opt_.train.ema > 0) {
    average_ = std::make_unique<WeightAverage>(*model_, opt_.train.ema);
    if (opt_.resume) average_->restore(saved_average);
  }
  // Read by each rank from its own paths: a host's copy may differ.
  check_same_on_every_rank({{"the data's fingerprint", data_.fingerprint},
                            {"the model", to_json(model_->config()).dump()},
                            {"the checkpoint's step", std::to_string(step_)}});
  // Every rank starts from rank 0's weights (the same seed gives the same ones; this
  // makes it so whatever the ranks' libraries do).
  dist::broadcast(std::span(model_->flat_parameters().data(), size_t(model_->flat_parameters().numel())));
  const auto [b0, b1] = dist::share_of(opt_.train.batch_size);
  const int shards = int(std::min<int64_t>(num_threads(), b1 - b0));
  if (opt_.data_parallel && shards > 1) data_parallel_ = std::make_unique<DataParallel>(*model_, shards);
  dist::set_timeout(opt_.comm_timeout);
  if (dist::size() > 1 && opt_.overlap && dist::threads_may_call()) {
    std::vector<float*> shard_grads{model_->flat_parameters().grad_data()};
    for (int s = 1; data_parallel_ && s < data_parallel_->shards(); ++s) shard_grads.push_back(data_parallel_->shard_grad(s));
    buckets_ = std::make_unique<GradientBuckets>(model_->named_parameters(), std::move(shard_grads),
                                                 model_->flat_parameters().numel());
  }
}

Trainer::LossParts Trainer::forward_backward(const Batch& batch, bool last) {
  const auto [b0, b1] = dist::share_of(batch.B);
  const int64_t T = batch.T, n = (b1 - b0) * T;
  const std::span ids = std::span(batch.inputs).subspan(size_t(b0 * T), size_t(n));
  const std::span targets = std::span(batch.targets).subspan(size_t(b0 * T), size_t(n));
  // This rank's gradient is of the mean over its share of each micro-batch: weighted by
  // the share and averaged over the micro-batches, the ranks' gradients sum to the
  // gradient of the step's mean. Scaled once, after the last micro-batch's backward.
  const float share = batch_share(data_, batch, b0, b1);  // of the rows, or of the counted targets (chat)
  const float scale = share / float(opt_.train.grad_accum);
  GradientBuckets* buckets = last ? buckets_.get() : nullptr;
  if (buckets) buckets->begin(data_parallel_ ? data_parallel_->shards_used(b1 - b0) : 1, scale);
  float loss = 0, next_token = 0;
  if (data_parallel_) {
    loss = data_parallel_->forward_backward(ids, targets, b1 - b0, T, buckets);
    next_token = data_parallel_->next_token_loss();
  } else {
    Tensor l;
    {  // the logits go with the output, as soon as the graph holds what it needs
      const nn::GPT::Output out = model_->forward(ids, b1 - b0, T, targets);
      l = out.loss;
      next_token = out.next_token_loss.item();
    }
    loss = l.item();
    if (std::isfinite(loss) && buckets)
      l.backward([buckets](const TensorImpl& leaf) { buckets->leaf_ready(0, leaf); });
    else if (std::isfinite(loss))
      l.backward();
  }
  const double accum = double(opt_.train.grad_accum);
  const LossParts part{double(loss) * double(share) / accum, double(next_token) * double(share) / accum};
  if (!last) return part;
  if (buckets) {
    exposed_seconds_ += buckets->finish();
    return part;
  }
  if (scale == 1.0f && dist::size() == 1) return part;
  const Tensor& flat = model_->flat_parameters();
  const std::span grad(flat.grad_data(), size_t(flat.numel()));
  for (float& g : grad) g *= scale;
  dist::sum(grad);
  return part;
}

TrainState Trainer::state() const {
  TrainState s = shared_state();
  s.optimizer = s.optimizer.snapshot();
  return s;
}

TrainState Trainer::shared_state() const {
  const BatchSampler::State sampled = sampler_.state();
  return {step_,
          best_val_,
          sampled.rng,
          model_->dropout_rng().state(),
          opt_.train,
          optimizer_->shared_state(),
          train_seconds_,
          sampled.epoch,
          sampled.position,
          data_.fingerprint,
          average_ ? std::vector<float>(average_->weights().begin(), average_->weights().end()) : std::vector<float>{},
          guard_.state(),
          dist::size()};
}

void Trainer::save(const Losses& losses, TrainState st) {
  const bool first = !has_best_;
  const bool best = first || losses.val < best_val_;
  if (best) st.best_val_loss = losses.val;
  if (dist::is_root()) {  // the ranks hold the same state; rank 0 writes it
    const nn::GPT* best_weights = !best ? nullptr : average_ ? &average_->model() : model_.get();
    try {
      save_run(run_dir_, *model_, *data_.tokenizer, st, best_weights, first);
    } catch (const SaveNotCommitted& e) {  // a full disk: say what is still there (from the last save's figures)
      throw Error(cat(e.what(), "; ", kept(), saved_step_ < 0 ? "" : " (--resume continues from it)"));
    }
  }
  if (best) best_val_ = losses.val, has_best_ = true, best_step_ = step_;
  saved_val_ = losses.val;
}

void Trainer::check_ranks_agree() const {
  if (dist::size() == 1) return;
  const Tensor& flat = model_->flat_parameters();
  double checksum = 0;
  for (int64_t i = 0; i < flat.numel(); ++i) checksum += double(flat.data()[i]) * double(i % 7 + 1);
  if (!dist::same_everywhere(checksum))
    fail("mpi", "the ranks' weights differ at step ", step_, " (rank ", dist::rank(), "'s checksum ", checksum,
         "): they must stay identical; is every rank running the same folio on the same data?");
}

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
          .train_seconds = train_seconds_,
          .task_names = opt_.task_evals.names};
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
  if (data_.chat && !opt_.resume) progress.say(chat_batches_->describe(tc.batch_size));
  if (const Muon* muon = optimizer_->muon(); muon && !opt_.resume)
    progress.say(cat("optimizer: Muon on ", muon->matrices().size(), " hidden matrices (", muon->size(),
                     " weights), AdamW on the other ", optimizer_->adamw().size()));
}

void Trainer::train_step(Progress& progress, const Schedule& schedule, const std::vector<Tensor>& params,
                         Batch& batch) {
  const TrainConfig& tc = opt_.train;
  const auto step_start = std::chrono::steady_clock::now();
  const bool first_time = guard_.begin(step_);
  const float lr = schedule.at(step_, train_seconds_) * guard_.lr_scale();
  LossParts part;  // this rank's part of the step's losses
  const int64_t B = batch_size_at(step_, tc.batch_size, tc.batch_warmup);
  const auto [b0, b1] = dist::share_of(B);
  const int64_t T = window_length(step_, opt_.model.block_size, tc.seq_warmup);
  const Fault* armed = arm_op_fault(opt_.faults, step_, first_time);
  const BatchSampler::State drawn_from = sampler_.state();
  for (const Fault& f : opt_.faults)
    if (f.kind == FaultKind::bad_batch && f.step == step_ && first_time) bad_batch_ = drawn_from;
  const bool bad_batch_drawn = bad_batch_ && bad_batch_->same(drawn_from);
  int64_t positions = 0;  // the step's B x T, summed over its micro-batches (a chat batch's T varies)
  for (int64_t k = 0; k < tc.grad_accum; ++k) {
    // Every rank draws the same windows and reads its own rows of them.
    const auto draw_start = std::chrono::steady_clock::now();
    if (data_.chat)  // every row: a share weighs by the whole batch's counted targets; T is its longest row's
      chat_batches_->next(sampler_, B, T, batch);
    else
      sampler_.next(data_.train, B, T, batch, b0, b1);
    positions += B * batch.T;
    draw_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - draw_start).count();
    const LossParts micro = forward_backward(batch, k + 1 == tc.grad_accum);
    part.loss += micro.loss, part.next_token += micro.next_token;
  }
  disarm_op_fault(armed);
  if (opt_.detect_anomaly && anomaly_stops()) return;
  double parts[2] = {part.loss, part.next_token};
  dist::sum(std::span(parts, 2));
  float loss = float(parts[0]);
  const Tensor& flat = model_->flat_parameters();
  if (!opt_.faults.empty())  // the window's mean is a loop over it: not on every step of every run
    inject_faults(opt_.faults, step_, first_time, bad_batch_drawn, guard_.mean_loss(), loss,
                  {flat.grad_data(), size_t(flat.numel())});
  // The guards: every rank has the same loss (summed) and gradient, so the same verdict.
  const float norm = std::isfinite(loss) ? clip_grad_norm(params, tc.grad_clip) : 0.0f;
  std::string why = guard_.verdict(loss, norm);
  if (!std::isfinite(norm)) why += cat(" (first in the gradient of ", first_non_finite(model_->named_parameters()), ")");
  if (why.empty()) {
    guard_.accepted(loss, norm, tc.grad_clip > 0 && norm > tc.grad_clip);
    const bool logged = (step_ + 1) % tc.eval_interval == 0 || step_ + 1 == tc.max_iters;  // its row is next
    if (logged) update_ratio_.before(flat);
    optimizer_->step(lr, step_);
    if (logged) last_update_ = update_ratio_.after(flat);
    if (average_) average_->update(*model_, step_);
  }
  model_->zero_grad();
  pool::end_step();  // what only an evaluation or a save asked for goes (autograd/pool.h)
  train_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();
  if (tc.max_time > 0 && dist::size() > 1) dist::broadcast(std::span(&train_seconds_, 1));
  if (!why.empty()) return diverged(progress, why, true);
  const GuardState& g = guard_.state();
  progress.step_done(step_, float(parts[1]), lr, train_seconds_, positions,
                     {.grad_norm = norm, .skipped = g.skipped, .rollbacks = g.rollbacks});
  ++step_;
}

void Trainer::report_end(Progress& progress, bool interrupted, int64_t first_step, double run_start_seconds) {
  if (!stop_reason_.empty()) {
    if (dist::is_root()) progress.notice(stop_reason_);
  } else if (interrupted) {
    if (dist::is_root())
      progress.notice(cat("interrupted by ", signal_name(stop_signal_), " at step ", step_, ": checkpoint saved in ",
                          opt_.out_dir, " (continue it with --resume)"));
  } else {
    progress.say(cat("done in ", duration_text(progress.elapsed()), ": checkpoint in ", opt_.out_dir));
  }
  if (chat_batches_) progress.say(chat_batches_->summary());
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
  if (dist::is_root() && !lock_) lock_ = run_dir_.lock();
  Progress progress(progress_options(), opt_.resume);
  const anomaly::Detecting detecting(opt_.detect_anomaly);
  announce(progress);
  const Schedule schedule = schedule_of(tc);
  const std::vector<Tensor> params = model_->parameters();
  const int64_t first_step = step_;
  const double run_start_seconds = train_seconds_;
  saved_step_ = opt_.resume ? first_step : -1;
  no_eval_at_ = opt_.resume ? first_step : -1;
  if (!opt_.resume && tc.on_divergence == OnDivergence::rollback) keep_start();
  draw_seconds_ = 0;
  Batch batch;
  model_->train();
  bool interrupted = false;
  bool stopped_at_save = false;  // a stop heard during an evaluation: its save is the last
  auto more = [&] {
    return (tc.max_iters == 0 || step_ < tc.max_iters) && (tc.max_time == 0 || train_seconds_ < tc.max_time);
  };
  for (bool again = true; again;) {
    {
      StopSignals stop_signals;  // until the loop ends: a second Ctrl-C during the last save kills
      // The ranks stop together: a signal seen by any of them ends the run for all, and
      // rank 0's clock (sent to the others every step) says when the budget is spent.
      while (more() && stop_reason_.empty() && !(interrupted = dist::any(stop_requested()))) {
        // An evaluation guards every save: a non-finite loss or weight diverges first,
        // so a checkpoint never holds diverged weights.
        if (step_ % tc.eval_interval == 0 && step_ != no_eval_at_) {
          if (!evaluate_and_save(progress, schedule)) continue;
          // Heard while it evaluated (which can take long): the checkpoint just saved
          // is the run's last, not one more step and another evaluation.
          if ((stopped_at_save = interrupted = dist::any(stop_requested()))) break;
        }
        train_step(progress, schedule, params, batch);  // the step after, or one rolled back to
      }
    }
    // Any rank's signal stopped them all; one that saw none reports SIGTERM's code.
    if (interrupted) stop_signal_ = stop_signal_received() ? stop_signal_received() : SIGTERM;
    // The last evaluation guards the last save: rolled back from it, the run trains on.
    again = stop_reason_.empty() && !stopped_at_save && (step_ > first_step || !opt_.resume) &&
            !evaluate_and_save(progress, schedule) && stop_reason_.empty() && !interrupted;
  }
  report_end(progress, interrupted, first_step, run_start_seconds);
  lock_.reset();  // written: another trainer may take the run (this one, done, stays readable)
  return last_;
}

}  // namespace folio
