#pragma once
// The slots that decode completions, and the bounded queue in front of them.
//
// What it holds:
//   Job         one admitted request and what flows back to its HTTP thread: text
//               as it is generated, then the end (finish reason, token counts)
//   Scheduler   `slots` slots and a queue of at most `queue` waiting jobs. Batched
//               (the default): one thread admits queued jobs into free slots and
//               steps every active slot together, one product per weight matrix per
//               step, on one infer::Generator with a stream per slot (continuous
//               batching). Unbatched: a thread per slot, each with its own generator,
//               a token at a time (the baseline the load benchmark compares with),
//               the weights stored once for all of them.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "infer/generator.h"
#include "io/checkpoint.h"
#include "serve/api.h"

namespace folio::serve {

class Job {
 public:
  explicit Job(CompletionRequest request) : request_(std::move(request)) {}
  struct Update {
    std::string text;           // generated since the last wait
    bool done = false;
    std::string finish_reason;  // once done: "stop", "length", or "error"
    std::string error;          // finish_reason "error": why (the server is stopping)
  };
  // Waits up to `timeout` for new text or the end (with for_text false: the end only).
  Update wait(std::chrono::milliseconds timeout, bool for_text = true);
  // The client has gone: the slot is freed at its next token.
  void cancel() { cancelled_ = true; }
  bool started() const { return started_; }  // it has had a slot
  int64_t prompt_tokens() const { return int64_t(request_.prompt.size()); }
  int64_t completion_tokens() const { return generated_; }

 private:
  friend class Scheduler;
  void emit(const std::string& text);
  void finish(const std::string& reason, const std::string& error = "");
  const CompletionRequest request_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::string pending_;  // generated, not yet taken by wait()
  bool done_ = false;
  std::string finish_reason_, error_;
  std::atomic<bool> cancelled_{false}, started_{false};
  std::atomic<int64_t> generated_{0};
};

struct SchedulerOptions {
  int64_t slots = 4;
  int64_t queue = 64;   // waiting jobs beyond the slots; more are refused (503)
  bool batched = true;  // false: a thread per slot (the baseline)
  double max_seconds = 60;  // a job's wall time once in a slot
  infer::Weights weights = infer::Weights::f32;  // how the decoder stores the matrices
};

struct SchedulerStats {
  int64_t slots = 0, busy = 0, queued = 0, served = 0;
  bool accepting = true;
};

class Scheduler {
 public:
  // The model must outlive the scheduler.
  Scheduler(const ModelCheckpoint& model, SchedulerOptions options);
  ~Scheduler();  // stops with no grace
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a job; nullptr when the queue is full or the server is stopping.
  std::shared_ptr<Job> submit(CompletionRequest request);
  SchedulerStats stats();
  // Refuses new jobs, fails the queued ones, lets running ones go on for up to
  // `grace`, then cuts them (finish_reason "length") and joins the threads.
  void stop(std::chrono::milliseconds grace);

 private:
  struct Slot;
  void run_batched();
  void run_alone(int64_t slot);
  // Takes a queued job into `slot`, whose sequence is the generator's `stream` (under
  // mutex_); false when none.
  bool admit(Slot& slot, infer::Generator& generator, int64_t stream);
  // Samples the slot's next token from its logits (V) and passes on its text; frees
  // the slot when the job ends.
  void advance(Slot& slot, infer::Generator& generator, int64_t stream, std::span<const float> logits);
  void release(Slot& slot, const std::string& reason, const std::string& error = "");

  const ModelCheckpoint& model_;
  const SchedulerOptions options_;
  std::shared_ptr<const infer::DecoderMatrices> matrices_;  // unbatched: the slots' decoders share them
  std::mutex mutex_;
  std::condition_variable work_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::atomic<int64_t> busy_{0}, served_{0};
  bool accepting_ = true, stopping_ = false;
  std::atomic<bool> cut_{false};  // the grace is over: end every running job now
  std::vector<std::thread> threads_;
};

}  // namespace folio::serve
