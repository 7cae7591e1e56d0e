#include "train/gradient_buckets.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"
#include "train/distributed.h"

namespace folio {

GradientBuckets::GradientBuckets(const std::vector<std::pair<std::string, Tensor>>& params,
                                 std::vector<float*> shard_grads, int64_t numel, int64_t bucket_floats)
    : shard_grads_(std::move(shard_grads)), numel_(numel) {
  if (bucket_floats < 1) fail("allreduce", "bucket size must be positive, got ", bucket_floats, " floats");
  if (shard_grads_.empty()) fail("allreduce", "no shard gradients");
  for (const auto& [name, p] : params) {
    const int64_t at = p.impl()->grad_offset;
    if (!p.impl()->grad || p.impl()->grad->data != shard_grads_[0] || at < 0 || at + p.numel() > numel)
      fail("allreduce", "parameter ", name, " is not a view of the model's flat gradient");
    params_.push_back({at, at + p.numel(), -1});
  }
  std::sort(params_.begin(), params_.end(), [](const Param& a, const Param& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < params_.size(); ++i)
    if (params_[i].begin < params_[i - 1].end) fail("allreduce", "two parameters share gradient elements");
  // From the last parameter down: a bucket closes once it holds bucket_floats, and the
  // elements between parameters (none in an arena) travel with the bucket above them.
  for (size_t i = params_.size(); i-- > 0;) {
    if (buckets_.empty() || buckets_.back().end - buckets_.back().begin >= bucket_floats) {
      const int64_t end = buckets_.empty() ? numel : buckets_.back().begin;
      buckets_.push_back({end, end, 0});
    }
    Bucket& b = buckets_.back();
    b.begin = i == 0 ? 0 : params_[i].begin;
    ++b.params;
    params_[i].bucket = int(buckets_.size()) - 1;
  }
  if (buckets_.empty()) buckets_.push_back({0, numel, 0});
  reported_ = std::make_unique<std::atomic<int64_t>[]>(shard_grads_.size() * params_.size());
  waiting_ = std::make_unique<std::atomic<int>[]>(buckets_.size());
  ready_.assign(buckets_.size(), 0);
  thread_ = std::thread([this] { communicate(); });
}

GradientBuckets::~GradientBuckets() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void GradientBuckets::begin(int shards, float scale) {
  if (shards < 1 || size_t(shards) > shard_grads_.size())
    fail("allreduce", shards, " shards, expected 1 to ", shard_grads_.size());
  std::lock_guard lock(mutex_);
  shards_ = shards;
  scale_ = scale;
  for (size_t i = 0; i < shard_grads_.size() * params_.size(); ++i) reported_[i] = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) waiting_[b] = buckets_[b].params * shards;
  std::fill(ready_.begin(), ready_.end(), 0);
  started_ = summed_ = 0;
  finishing_ = false;
}

void GradientBuckets::leaf_ready(int shard, const TensorImpl& leaf) {
  if (shard < 0 || shard >= shards_ || !leaf.grad || leaf.grad->data != shard_grads_[size_t(shard)]) return;
  const int64_t begin = leaf.grad_offset, end = begin + leaf.shape.numel();
  // The parameters the leaf overlaps (a module may see adjacent ones as one view).
  auto it = std::upper_bound(params_.begin(), params_.end(), begin, [](int64_t at, const Param& p) { return at < p.end; });
  for (; it != params_.end() && it->begin < end; ++it) {
    const int64_t n = std::min(end, it->end) - std::max(begin, it->begin);
    const size_t p = size_t(it - params_.begin());
    const int64_t done = reported_[size_t(shard) * params_.size() + p] += n;
    if (done > it->end - it->begin)
      fail("allreduce", "the gradient of elements ", it->begin, "..", it->end, " was reported final twice");
    if (done == it->end - it->begin && --waiting_[size_t(it->bucket)] == 0) complete(it->bucket);
  }
}

void GradientBuckets::complete(int b) {
  const Bucket& bucket = buckets_[size_t(b)];
  float* total = shard_grads_[0];
  const float scale = scale_;
  for (int s = 1; s < shards_; ++s) {
    float* g = shard_grads_[size_t(s)];
#pragma omp simd
    for (int64_t i = bucket.begin; i < bucket.end; ++i) {
      total[i] += g[i];
      g[i] = 0.0f;
    }
  }
  if (scale != 1.0f)
#pragma omp simd
    for (int64_t i = bucket.begin; i < bucket.end; ++i) total[i] *= scale;
  {
    std::lock_guard lock(mutex_);
    ready_[size_t(b)] = 1;
  }
  wake_.notify_one();
}

double GradientBuckets::finish() {
  const auto start = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mutex_);
    ready_early_ += std::count(ready_.begin(), ready_.end(), 1);
    finishing_ = true;
  }
  // Buckets some shard's backward never reported (a parameter no op used): their
  // gradients are final now.
  for (int b = 0; b < count(); ++b) {
    bool done;
    {
      std::lock_guard lock(mutex_);
      done = ready_[size_t(b)];
    }
    if (!done) complete(b);
  }
  std::unique_lock lock(mutex_);
  drained_.wait(lock, [&] { return summed_ == count() || error_; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void GradientBuckets::communicate() {
  bool in_flight = false;
  int in_flight_up_to = 0;  // buckets [summed_, in_flight_up_to) are travelling
  for (;;) {
    int from, to;
    {
      std::unique_lock lock(mutex_);
      if (!in_flight) wake_.wait(lock, [&] { return stop_ || (started_ < count() && ready_[size_t(started_)]); });
      if (stop_) return;
      from = started_;
      while (started_ < count() && ready_[size_t(started_)]) ++started_;
      to = started_;
    }
    try {
      for (int b = from; b < to; ++b) {
        const Bucket& bucket = buckets_[size_t(b)];
        dist::start_sum(std::span(shard_grads_[0] + bucket.begin, size_t(bucket.end - bucket.begin)));
      }
      if (to > from) in_flight = true, in_flight_up_to = to;
      if (in_flight && dist::poll_sums()) {
        in_flight = false;
        std::lock_guard lock(mutex_);
        summed_ = in_flight_up_to;
      }
    } catch (...) {
      std::lock_guard lock(mutex_);
      error_ = std::current_exception();
      in_flight = false;
    }
    if (!in_flight) {
      drained_.notify_all();
    } else {
      // Each poll lets MPI move the next pieces (Open MPI has no progress thread of its
      // own over TCP); a short sleep leaves the core to the backward pass.
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

}  // namespace folio
