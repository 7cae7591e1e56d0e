#include "serve/scheduler.h"

#include <optional>
#include <random>

#include "autograd/parallel.h"
#include "nn/decoder.h"
#include "serve/stop_filter.h"

namespace folio::serve {

using Clock = std::chrono::steady_clock;

Job::Update Job::wait(std::chrono::milliseconds timeout, bool for_text) {
  std::unique_lock lock(mutex_);
  ready_.wait_for(lock, timeout, [&] { return (for_text && !pending_.empty()) || done_; });
  Update u;
  u.text.swap(pending_);
  u.done = done_;
  u.finish_reason = finish_reason_;
  u.error = error_;
  return u;
}

void Job::emit(const std::string& text) {
  if (text.empty()) return;
  {
    std::lock_guard lock(mutex_);
    pending_ += text;
  }
  ready_.notify_all();
}

void Job::finish(const std::string& reason, const std::string& error) {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
    finish_reason_ = reason;
    error_ = error;
  }
  ready_.notify_all();
}

// What a slot holds while it serves a job.
struct Scheduler::Slot {
  std::shared_ptr<Job> job;     // null: the slot is free
  std::deque<int32_t> window;   // the context the model sees: at most block_size ids
  Rng rng;
  std::optional<TokenStream> text;  // ids -> whole UTF-8 characters
  std::optional<StopFilter> stops;
  std::vector<std::pair<float, int32_t>> scratch;  // (V): sample_token's
  Clock::time_point started;
  bool fresh = true;  // the decoder holds nothing of the window: prefill it
};

Scheduler::Scheduler(const ModelCheckpoint& model, std::mutex& model_mutex, SchedulerOptions options)
    : model_(model), model_mutex_(model_mutex), options_(options) {
  if (options_.slots < 1) fail("serve", "slots must be >= 1, got ", options_.slots);
  for (int64_t s = 0; s < options_.slots; ++s) slots_.push_back(std::make_unique<Slot>());
  if (options_.batched) {
    threads_.emplace_back([this] { run_batched(); });
  } else {
    for (int64_t s = 0; s < options_.slots; ++s) threads_.emplace_back([this, s] { run_alone(s); });
  }
}

Scheduler::~Scheduler() { stop(std::chrono::milliseconds(0)); }

std::shared_ptr<Job> Scheduler::submit(CompletionRequest request) {
  auto job = std::make_shared<Job>(std::move(request));
  {
    std::lock_guard lock(mutex_);
    // Free slots take jobs at once; beyond them, `queue` may wait.
    if (!accepting_ || int64_t(queue_.size()) >= options_.queue + options_.slots - busy_) return nullptr;
    queue_.push_back(job);
  }
  work_.notify_all();
  return job;
}

SchedulerStats Scheduler::stats() {
  std::lock_guard lock(mutex_);
  return {options_.slots, busy_.load(), int64_t(queue_.size()), served_.load(), accepting_};
}

void Scheduler::stop(std::chrono::milliseconds grace) {
  {
    std::lock_guard lock(mutex_);
    if (threads_.empty()) return;
    accepting_ = false;
    for (auto& job : queue_) job->finish("error", "the server is stopping");
    queue_.clear();
  }
  const auto deadline = Clock::now() + grace;
  while (busy_ > 0 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  cut_ = true;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

bool Scheduler::admit(Slot& slot) {
  if (queue_.empty()) return false;
  slot.job = std::move(queue_.front());
  queue_.pop_front();
  const CompletionRequest& r = slot.job->request_;
  const int64_t block = model_.model->config().block_size;
  const auto& p = r.prompt;  // the model sees the last block_size tokens, as folio generate's
  slot.window.assign(int64_t(p.size()) > block ? p.end() - block : p.begin(), p.end());
  slot.rng.reseed(r.has_seed ? r.seed : std::random_device{}() * 0x9E3779B97F4A7C15ull + served_);
  slot.text.emplace(*model_.tokenizer);
  slot.stops.emplace(r.stop);
  slot.started = Clock::now();
  slot.fresh = true;
  slot.job->started_ = true;
  ++busy_;
  return true;
}

void Scheduler::release(Slot& slot, const std::string& reason, const std::string& error) {
  // The slot is counted free before the client hears the end: a client that sends its
  // next request at once finds it free.
  const std::shared_ptr<Job> job = std::move(slot.job);
  ++served_;
  --busy_;
  job->finish(reason, error);
}

std::span<const float> Scheduler::prefill(Slot& slot, nn::Decoder& decoder, int64_t stream) {
  const std::vector<int32_t> ids(slot.window.begin(), slot.window.end());
  std::lock_guard lock(model_mutex_);
  slot.fresh = false;
  return decoder.restart(ids, stream);
}

void Scheduler::advance(Slot& slot, std::span<const float> logits) {
  Job& job = *slot.job;
  const SampleOptions& opt = job.request_.sample;
  const int32_t id = sample_token(logits, opt, slot.rng, slot.scratch);
  const int64_t n = ++job.generated_;
  job.emit(slot.stops->push(slot.text->push(id)));
  if (slot.stops->matched()) return release(slot, "stop");
  const bool timed_out = std::chrono::duration<double>(Clock::now() - slot.started).count() > options_.max_seconds;
  if (n >= opt.max_new_tokens || timed_out || cut_) {
    job.emit(slot.stops->push(slot.text->finish()));
    if (slot.stops->matched()) return release(slot, "stop");
    job.emit(slot.stops->flush());
    return release(slot, "length");
  }
  // As folio generate: past block_size, learned positions drop the older half and
  // recompute; rotary ones roll the cache a token at a time.
  const int64_t block = model_.model->config().block_size;
  slot.window.push_back(id);
  if (int64_t(slot.window.size()) > block) {
    if (model_.model->config().pos == nn::Positions::rope) {
      slot.window.pop_front();
    } else {
      slot.window.erase(slot.window.begin(), slot.window.begin() + std::max<int64_t>(block / 2, 1));
      slot.fresh = true;
    }
  }
}

void Scheduler::run_batched() {
  // One thread decodes every slot: an OpenMP team per step (prefill's products) stalls
  // whenever one of its threads is descheduled, which on a loaded machine cost whole
  // seconds a request (measured). The thread count is this thread's own.
  set_num_threads(1);
  nn::Decoder decoder(*model_.model, options_.slots);
  const int64_t V = model_.model->config().vocab_size;
  std::vector<int64_t> streams;  // (B): the slots in this step
  std::vector<int32_t> ids;      // (B): their last tokens
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      for (auto& slot : slots_)
        if (!slot->job && !admit(*slot)) break;
      if (busy_ == 0) {
        if (stopping_) return;
        work_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        continue;
      }
    }
    streams.clear(), ids.clear();
    for (int64_t s = 0; s < options_.slots; ++s) {
      Slot& slot = *slots_[size_t(s)];
      if (!slot.job) continue;
      if (slot.job->cancelled_) {
        release(slot, "cancelled");
        continue;
      }
      try {
        if (slot.fresh) advance(slot, prefill(slot, decoder, s));
        if (slot.job && !slot.fresh) streams.push_back(s), ids.push_back(slot.window.back());
      } catch (const std::exception& e) {
        release(slot, "error", e.what());
      }
    }
    if (streams.empty()) continue;
    std::span<const float> rows;  // (B, V)
    try {
      rows = decoder.step_batch(streams, ids);
    } catch (const std::exception& e) {
      for (int64_t s : streams) release(*slots_[size_t(s)], "error", e.what());
      continue;
    }
    for (size_t b = 0; b < streams.size(); ++b) {
      Slot& slot = *slots_[size_t(streams[b])];
      try {
        advance(slot, rows.subspan(b * V, V));
      } catch (const std::exception& e) {
        release(slot, "error", e.what());
      }
    }
  }
}

void Scheduler::run_alone(int64_t s) {
  set_num_threads(1);  // the slots' threads are the parallelism
  nn::Decoder decoder(*model_.model);
  Slot& slot = *slots_[size_t(s)];
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      work_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (!admit(slot)) {
        if (stopping_) return;
        continue;
      }
    }
    while (slot.job) {
      if (slot.job->cancelled_) {
        release(slot, "cancelled");
        break;
      }
      try {
        advance(slot, slot.fresh ? prefill(slot, decoder, 0) : decoder.step(slot.window.back()));
      } catch (const std::exception& e) {
        release(slot, "error", e.what());
      }
    }
  }
}

}  // namespace folio::serve
