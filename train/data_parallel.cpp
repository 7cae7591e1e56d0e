#include "train/data_parallel.h"

#include <omp.h>

#include <exception>

#include "base/error.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"

namespace folio {

DataParallel::DataParallel(nn::GPT& model, int shards)
    : model_(model), losses_(size_t(std::max(shards, 1))), next_token_losses_(losses_.size()),
      counts_(losses_.size()), shares_(losses_.size()) {
  if (shards < 1) fail("data_parallel", "shards must be positive, got ", shards);
  for (int s = 1; s < shards; ++s)
    replicas_.push_back(
        std::make_unique<nn::GPT>(model.config(), nn::Arena::sharing(model.flat_parameters())));
}

float* DataParallel::shard_grad(int s) const {
  return (s == 0 ? model_ : *replicas_.at(size_t(s - 1))).flat_parameters().grad_data();
}

void DataParallel::check(std::span<const int32_t> ids, std::span<const int32_t> targets, int64_t B, int64_t T) const {
  if (B < 1 || T < 1 || int64_t(ids.size()) != B * T || targets.size() != ids.size())
    fail("data_parallel", ids.size(), " ids and ", targets.size(), " targets for a batch of B ", B, " x T ", T);
}

DataParallel::Shard DataParallel::shard(std::span<const int32_t> ids, std::span<const int32_t> targets, int64_t B,
                                         int64_t T, int s, int n) {
  const int64_t b0 = B * s / n, b1 = B * (s + 1) / n;
  return {b0, b1, ids.subspan(size_t(b0 * T), size_t((b1 - b0) * T)), targets.subspan(size_t(b0 * T), size_t((b1 - b0) * T))};
}

void DataParallel::count_shares(std::span<const int32_t> ids, std::span<const int32_t> targets, int64_t B, int64_t T,
                                int n) {
  int64_t counted = 0;  // the targets the loss counts (not kNoTarget), counts_[s] of them shard s's
  for (int s = 0; s < n; ++s) {
    counts_[size_t(s)] = 0;
    for (int32_t t : shard(ids, targets, B, T, s, n).targets) counts_[size_t(s)] += t != kNoTarget;
    counted += counts_[size_t(s)];
  }
  for (int s = 0; s < n; ++s) {
    const Shard sh = shard(ids, targets, B, T, s, n);
    shares_[size_t(s)] = counted == B * T ? float(sh.b1 - sh.b0) / float(B)
                         : counted        ? float(counts_[size_t(s)]) / float(counted)
                                          : 0.0f;
  }
}

void DataParallel::follow_model(int n) {
  for (int s = 1; s < n; ++s) {
    nn::GPT& r = *replicas_[size_t(s - 1)];
    r.train(model_.training());
    r.set_precision(model_.precision());
  }
}

template <class Body>
void DataParallel::each_shard(int n, Body body) {
  std::exception_ptr error;
#pragma omp parallel num_threads(n)
  {
    // Kernels called from here run on this thread alone (oneDNN included: it plans
    // for omp_get_max_threads()); the setting ends with the parallel region.
    omp_set_num_threads(1);
    // A runtime that gives fewer threads (a nested call) still covers every shard.
    for (int s = omp_get_thread_num(); s < n; s += omp_get_num_threads()) {
      try {
        body(s);
      } catch (...) {
#pragma omp critical(folio_data_parallel_error)
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

float DataParallel::evaluate(std::span<const int32_t> ids, std::span<const int32_t> targets, int64_t B, int64_t T,
                             const nn::GPT* weights) {
  check(ids, targets, B, T);
  const int n = shards_used(B);
  count_shares(ids, targets, B, T, n);
  const auto loss_of = [&](const nn::GPT& m, int s) {
    NoGradGuard no_grad;  // this thread's: each shard's thread sets its own
    const Shard sh = shard(ids, targets, B, T, s, n);
    losses_[size_t(s)] = m.forward(sh.ids, sh.b1 - sh.b0, T, sh.targets).loss.item() * shares_[size_t(s)];
  };
  if (weights) {
    for (int s = 0; s < n; ++s) loss_of(*weights, s);
  } else {
    follow_model(n);
    each_shard(n, [&](int s) { loss_of(s == 0 ? model_ : *replicas_[size_t(s - 1)], s); });
  }
  float loss = losses_[0];
  for (int s = 1; s < n; ++s) loss += losses_[size_t(s)];
  return loss;
}

float DataParallel::forward_backward(std::span<const int32_t> ids, std::span<const int32_t> targets, int64_t B,
                                     int64_t T, GradientBuckets* buckets) {
  check(ids, targets, B, T);
  const int n = shards_used(B);
  follow_model(n);
  for (int s = 1; s < n; ++s) replicas_[size_t(s - 1)]->dropout_rng().reseed(model_.dropout_rng().next_u64());
  count_shares(ids, targets, B, T, n);
  each_shard(n, [&](int s) {
    nn::GPT& m = s == 0 ? model_ : *replicas_[size_t(s - 1)];
    const Shard sh = shard(ids, targets, B, T, s, n);
    Tensor loss;
    {  // the logits go with the forward's output, as soon as the graph holds what it needs
      const nn::GPT::Output out = m.forward(sh.ids, sh.b1 - sh.b0, T, sh.targets);
      loss = scale(out.loss, shares_[size_t(s)]);
      next_token_losses_[size_t(s)] = out.next_token_loss.item() * shares_[size_t(s)];
    }
    losses_[size_t(s)] = loss.item();
    if (buckets)
      loss.backward([buckets, s](const TensorImpl& leaf) { buckets->leaf_ready(s, leaf); });
    else
      loss.backward();
  });

  // Sum the replicas' gradients into the model's and leave theirs at zero for the
  // next step: each model's gradients are one flat buffer (its arena's).
  const int64_t numel = model_.flat_parameters().numel();
  float* total = model_.flat_parameters().grad_data();
  float loss = losses_[0];
  for (int s = 1; s < n; ++s) loss += losses_[size_t(s)];
  next_token_loss_ = next_token_losses_[0];
  for (int s = 1; s < n; ++s) next_token_loss_ += next_token_losses_[size_t(s)];
  if (buckets) return loss;
  for (int s = 1; s < n; ++s) {
    float* g = replicas_[size_t(s - 1)]->flat_parameters().grad_data();
#pragma omp parallel for simd if (numel >= kParallelGrain)
    for (int64_t i = 0; i < numel; ++i) {
      total[i] += g[i];
      g[i] = 0.0f;
    }
  }
  return loss;
}

}  // namespace folio
