#include "serve/scheduler.h"

#include <unistd.h>

#include <cmath>
#include <random>
#include <system_error>

#include "infer/decoder.h"
#include "infer/generator.h"

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

// What a slot holds while it serves a job; its sequence (context, sampling, text and
// stop strings) is a stream of the generator that decodes it.
struct Scheduler::Slot {
  std::shared_ptr<Job> job;  // null: the slot is free
  Rng rng;
  Clock::time_point started;
};

Scheduler::Scheduler(const ModelCheckpoint& model, SchedulerOptions options) : model_(model), options_(options) {
  if (options_.slots < 1) fail("serve", "slots must be >= 1, got ", options_.slots);
  // Every slot's KV cache is allocated and zeroed as the decoding thread starts: slots
  // the machine's memory cannot hold would meet the OOM killer there, after the server
  // said it was up, rather than this error now.
  const int64_t per_slot = infer::Decoder::cache_bytes_per_stream(model_.model->config());
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  const int64_t memory = pages > 0 && page > 0 ? int64_t(pages) * page : 0;
  if (memory > 0 && options_.slots > memory / per_slot)
    fail("serve", "--slots ", options_.slots, ": each slot's KV cache takes ", per_slot >> 10, " KiB, so ",
         options_.slots, " would take ", std::round(double(per_slot) * double(options_.slots) / double(1 << 30)),
         " GiB, more than this machine's ", memory >> 30, " GiB of memory: at most ", memory / per_slot, " slots");
  for (int64_t s = 0; s < options_.slots; ++s) slots_.push_back(std::make_unique<Slot>());
  try {
    if (options_.batched) {
      threads_.emplace_back([this] { run_batched(); });
    } else {
      // One copy of the stored weights for every slot's decoder.
      matrices_ = infer::Generator::store(*model_.model, options_.weights);
      for (int64_t s = 0; s < options_.slots; ++s) threads_.emplace_back([this, s] { run_alone(s); });
    }
  } catch (const std::system_error& e) {  // the threads the system allows, fewer than asked
    stop(std::chrono::milliseconds(0));  // joins those started: a joinable thread destroyed would abort
    fail("serve", "cannot start ", options_.batched ? 1 : options_.slots, " decoding threads: ", e.what(),
         options_.batched ? "" : " (fewer --slots)");
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

bool Scheduler::admit(Slot& slot, infer::Generator& generator, int64_t stream) {
  if (queue_.empty()) return false;
  slot.job = std::move(queue_.front());
  queue_.pop_front();
  const CompletionRequest& r = slot.job->request_;
  slot.rng.reseed(r.has_seed ? r.seed : std::random_device{}() * 0x9E3779B97F4A7C15ull + served_);
  slot.started = Clock::now();
  slot.job->started_ = true;
  ++busy_;
  try {  // the model sees the prompt's last block_size tokens, as folio generate's
    generator.start(stream, r.prompt, r.sample, slot.rng, model_.tokenizer.get(), r.stop, r.end_token);
  } catch (const std::exception& e) {
    release(slot, "error", e.what());
  }
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

void Scheduler::advance(Slot& slot, infer::Generator& generator, int64_t stream, std::span<const float> logits) {
  Job& job = *slot.job;
  const infer::Generator::Token token = generator.sample(stream, logits);
  const int64_t n = ++job.generated_;
  job.emit(token.text);
  if (token.stopped) return release(slot, "stop");
  const bool timed_out = std::chrono::duration<double>(Clock::now() - slot.started).count() > options_.max_seconds;
  if (n >= job.request_.sample.max_new_tokens || timed_out || cut_) {
    const infer::Generator::Token rest = generator.finish(stream);  // the text held back, maybe a stop
    job.emit(rest.text);
    return release(slot, rest.stopped ? "stop" : "length");
  }
}

void Scheduler::run_batched() {
  // One thread decodes every slot: an OpenMP team per step (prefill's products) stalls
  // whenever one of its threads is descheduled, which on a loaded machine cost whole
  // seconds a request (measured).
  infer::decode_on_one_thread();
  infer::Generator generator(*model_.model, options_.slots, true, options_.weights);
  const int64_t V = model_.model->config().vocab_size;
  std::vector<int64_t> streams;  // (B): the slots in this step
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      for (int64_t s = 0; s < options_.slots; ++s)
        if (!slots_[size_t(s)]->job && !admit(*slots_[size_t(s)], generator, s)) break;
      if (busy_ == 0) {
        if (stopping_) return;
        work_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        continue;
      }
    }
    streams.clear();
    for (int64_t s = 0; s < options_.slots; ++s) {
      Slot& slot = *slots_[size_t(s)];
      if (!slot.job) continue;
      if (slot.job->cancelled_) {
        release(slot, "cancelled");
        continue;
      }
      try {  // a prefill alone, so that a failure ends its own job only
        const int64_t one[] = {s};
        if (generator.needs_prefill(s)) advance(slot, generator, s, generator.logits(one));
        if (slot.job && !generator.needs_prefill(s)) streams.push_back(s);
      } catch (const std::exception& e) {
        release(slot, "error", e.what());
      }
    }
    if (streams.empty()) continue;
    std::span<const float> rows;  // (B, V)
    try {
      rows = generator.logits(streams);
    } catch (const std::exception& e) {
      for (int64_t s : streams) release(*slots_[size_t(s)], "error", e.what());
      continue;
    }
    for (size_t b = 0; b < streams.size(); ++b) {
      Slot& slot = *slots_[size_t(streams[b])];
      try {
        advance(slot, generator, streams[b], rows.subspan(b * V, V));
      } catch (const std::exception& e) {
        release(slot, "error", e.what());
      }
    }
  }
}

void Scheduler::run_alone(int64_t s) {
  infer::decode_on_one_thread();  // the slots' threads are the parallelism
  infer::Generator generator(*model_.model, 1, matrices_);
  Slot& slot = *slots_[size_t(s)];
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      work_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (!admit(slot, generator, 0)) {
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
        const int64_t one[] = {0};
        advance(slot, generator, 0, generator.logits(one));
      } catch (const std::exception& e) {
        release(slot, "error", e.what());
      }
    }
  }
}

}  // namespace folio::serve
