#pragma once
// The gradient all-reduce of a step on several ranks, overlapped with the backward pass
// (the reducer of PyTorch's DistributedDataParallel, or Horovod's fusion buffer). The
// flat gradient is cut into buckets of a few MB in reverse order of the parameters,
// the order in which backward finishes them. As soon as every shard's backward has
// written the last contribution to each parameter of a bucket, the bucket's shards are
// added into the model's gradient, scaled, and sent (MPI_Iallreduce) while the pass
// computes the rest; finish() waits for all of them before the optimizer.
//
// The numbers are those of the whole-buffer sum after backward, bit for bit: each
// element sees the same additions in the same order (shard 0 + shard 1 + ..., as
// DataParallel adds them; the scale; then the ranks' sum, which for two ranks is one
// addition whatever the algorithm).
//
// One thread of its own starts the buckets in order (every rank must start the same
// collectives in the same order) and drives MPI's progress while backward computes.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "autograd/tensor.h"

namespace folio {

class GradientBuckets {
 public:
  static constexpr int64_t kDefaultBucketFloats = int64_t(1) << 20;  // 4 MB

  // params: the model's named parameters (views of one flat gradient of `numel`
  // floats); shard_grads: the flat gradient of every shard (shard 0's is the model's,
  // and receives the sums).
  GradientBuckets(const std::vector<std::pair<std::string, Tensor>>& params, std::vector<float*> shard_grads,
                  int64_t numel, int64_t bucket_floats = kDefaultBucketFloats);
  ~GradientBuckets();
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // Before the backward pass of a step's last micro-batch: shards 0 .. shards-1 will
  // report their leaves; every bucket is multiplied by `scale` before it is sent.
  void begin(int shards, float scale);
  // From shard `shard`'s backward, on any thread: no op left adds into `leaf`'s gradient.
  void leaf_ready(int shard, const TensorImpl& leaf);
  // After the backward pass: sends the buckets no leaf completed, waits for every
  // bucket, and returns the seconds it waited (the communication backward did not hide).
  double finish();

  int count() const { return int(buckets_.size()); }
  // Buckets the backward pass completed (ready to send before finish() was called),
  // summed over the steps so far.
  int64_t ready_during_backward() const { return ready_early_; }

 private:
  struct Param {
    int64_t begin, end;  // its elements in the flat gradient
    int bucket;
  };
  struct Bucket {
    int64_t begin, end;  // elements [begin, end) of the flat gradient
    int params;
  };
  void complete(int b);  // adds the shards into shard 0, scales, marks the bucket ready
  void communicate();    // the thread's loop

  std::vector<Param> params_;    // by offset
  std::vector<Bucket> buckets_;  // bucket 0 holds the last parameters
  std::vector<float*> shard_grads_;  // (shards) pointers, each to a flat gradient of (numel_) floats
  int64_t numel_;
  int shards_ = 1;
  float scale_ = 1.0f;
  std::unique_ptr<std::atomic<int64_t>[]> reported_;  // (shard, param): elements whose gradient is final
  std::unique_ptr<std::atomic<int>[]> waiting_;       // (bucket): parameter x shard reports still to come

  std::mutex mutex_;
  std::condition_variable wake_;    // the thread: a bucket is ready, or stop
  std::condition_variable drained_;  // finish(): every bucket has been summed
  std::vector<char> ready_;         // (bucket): complete, may be sent
  int started_ = 0, summed_ = 0;    // buckets of this step started, and finished, in order
  bool stop_ = false, finishing_ = false;
  int64_t ready_early_ = 0;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace folio
