// The evaluations that guard every save: the train and val losses on the same batches
// each time, split as the step splits them (DataParallel::evaluate); the verdict on
// them; the task evals; the save, and what the memory pool may let go after it.
#include "autograd/pool.h"
#include "train/chat_data.h"
#include "train/distributed.h"
#include "train/save_check.h"
#include "train/trainer.h"

namespace folio {

Trainer::Losses Trainer::evaluate() {
  NoGradGuard no_grad;
  const nn::GPT& model = average_ ? average_->model() : *model_;
  model_->eval();
  Rng rng(opt_.train.seed ^ 0xe7a1);  // the same batches at every evaluation
  Batch batch;
  double totals[2] = {0, 0};  // train, val: this rank's share-weighted sums
  const TokenSequence* splits[2] = {&data_.train, &data_.val};
  const auto [b0, b1] = dist::share_of(opt_.train.batch_size);
  for (int s = 0; s < 2; ++s)
    for (int64_t i = 0; i < opt_.train.eval_iters; ++i) {
      if (data_.chat)
        chat_batches_->evaluation(s ? data_.chat->val : data_.chat->train, opt_.train.batch_size, rng, batch);
      else
        sample_batch(*splits[s], opt_.train.batch_size, opt_.model.block_size, rng, batch, s ? "val" : "train", b0, b1);
      const int64_t T = batch.T, n = (b1 - b0) * T;
      const std::span ids = std::span(batch.inputs).subspan(size_t(b0 * T), size_t(n));
      const std::span targets = std::span(batch.targets).subspan(size_t(b0 * T), size_t(n));
      // Split as the step splits it, in the step's buffers (DataParallel::evaluate).
      const float loss = data_parallel_ ? data_parallel_->evaluate(ids, targets, b1 - b0, T, average_ ? &model : nullptr)
                                        : model.forward(ids, b1 - b0, T, targets).loss.item();
      totals[s] += double(loss) * double(batch_share(data_, batch, b0, b1));
    }
  dist::sum(std::span(totals, 2));
  model_->train();
  return {float(totals[0] / double(opt_.train.eval_iters)), float(totals[1] / double(opt_.train.eval_iters))};
}

bool Trainer::evaluate_and_save(Progress& progress, const Schedule& schedule) {
  progress.evaluating(step_, 2 * opt_.train.eval_iters);
  last_ = evaluate();
  TrainState st = shared_state();  // what the save writes: it must read back
  const std::string why = unsound_evaluation(last_.train, last_.val, opt_.model.vocab_size, *model_, st);
  if (!why.empty()) return diverged(progress, why, false), false;
  Health health = guard_.take_health();
  health.update_ratio = std::exchange(last_update_, Health().update_ratio);
  if (dist::is_root() && opt_.task_evals.due(step_))  // the ranks hold the same weights
    progress.set_task_scores(opt_.task_evals.score(*model_, *data_.tokenizer));
  progress.evaluated(step_, last_.train, last_.val, schedule.at(step_, train_seconds_) * guard_.lr_scale(),
                     train_seconds_, health);
  check_ranks_agree();
  save(last_, std::move(st));
  saved_step_ = step_, start_.reset();
  pool::keep_step_sizes();  // the copies the save wrote go, not to stay beside the steps
  return true;
}

}  // namespace folio
