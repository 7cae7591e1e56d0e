#include "train/trainer.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "autograd/error.h"
#include "autograd/parallel.h"

namespace folio {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::atomic<bool> g_interrupted{false};
void on_stop(int) { g_interrupted = true; }

std::string state_file(const std::string& dir) { return (fs::path(dir) / "state.safetensors").string(); }
std::string model_path(const std::string& dir) { return (fs::path(dir) / "model.safetensors").string(); }
std::string best_path(const std::string& dir) { return (fs::path(dir) / "best.safetensors").string(); }

// Crash safety. A save is three files, and a process can die between any two
// writes, so the files of one save are committed by ONE atomic rename:
//   1. the weights go to model.safetensors.pending (and best.safetensors.pending
//      when this evaluation is the best so far); nothing reads these names;
//   2. state.safetensors is replaced: THE COMMIT. From here on the save happened;
//   3. the pending files are renamed over best.safetensors and model.safetensors.
// Every prefix of this sequence leaves a usable directory: before 2, the previous
// checkpoint is whole (the pending files are junk, dropped on --resume); after 2,
// readers (generate, eval, info) still see the previous complete model until 3, and
// --resume first finishes step 3 (a pending file whose step equals the state's
// belongs to that commit) and so never sees a state and a model from different steps.
// Each file is itself written atomically (temp file, fsync, rename, fsync of the dir).
constexpr const char* kPending = ".pending";

[[noreturn]] void fail_io(const std::string& path, const char* what, int err) {
  fail("checkpoint", path, ": save: ", what, ": ", std::error_code(err, std::generic_category()).message());
}

void rename_file(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) fail_io(to, ("cannot rename " + from + " to it").c_str(), errno);
}

// True if it removed something.
bool remove_file(const std::string& path) {
  if (::unlink(path.c_str()) == 0) return true;
  if (errno != ENOENT) fail_io(path, "cannot remove", errno);
  return false;
}

void sync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail_io(dir, "cannot open the directory to fsync it", errno);
  const int r = ::fsync(fd), err = errno;
  ::close(fd);
  if (r != 0 && err != EINVAL) fail_io(dir, "cannot fsync the directory", err);
}

// Removes the temp files ("<name>.tmp.<pid>", see save_safetensors) that writers
// killed mid-save left in `dir`. Those of a live process are left alone.
void remove_dead_temp_files(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    bool ours = false;
    for (const char* base : {"model.safetensors", "best.safetensors", "state.safetensors",
                             "model.safetensors.pending", "best.safetensors.pending"})
      ours = ours || name.starts_with(std::string(base) + ".tmp.");
    if (!ours) continue;
    const std::string pid = name.substr(name.rfind('.') + 1);
    if (pid.empty() || pid.size() > 10 || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    const long long id = std::stoll(pid);
    if (id > 0 && id <= INT32_MAX && ::kill(pid_t(id), 0) != 0 && errno == ESRCH) ::unlink(e.path().c_str());
  }
}

// Before --resume reads the directory: finish a save that committed (its state is
// on disk) but was cut short before its weights were renamed into place, and drop
// the pending weights of a save that never committed.
void recover_run_dir(const std::string& dir, int64_t state_step) {
  remove_dead_temp_files(dir);
  bool renamed = false;
  for (const std::string& target : {best_path(dir), model_path(dir)}) {
    const std::string pending = target + kPending;
    if (!fs::exists(pending)) continue;
    int64_t step = -1;
    try {
      step = load_model(pending).step;
    } catch (const Error&) {
      // Unreadable: not a file this save protocol ever commits (each write is atomic).
    }
    if (step == state_step) rename_file(pending, target), renamed = true;
    else remove_file(pending);
  }
  if (renamed) sync_dir(dir);
}

std::string duration_text(double s) {
  char buf[32];
  const int t = int(s + 0.5);
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%dh%02dm", t / 3600, t / 60 % 60);
  else std::snprintf(buf, sizeof buf, "%dm%02ds", t / 60, t % 60);
  return buf;
}

// What a run will save must read back: the checkpoint reader's limits (json.h,
// checkpoint.cpp) are checked when the run starts, not at its first save.
void check_saveable(const nn::GPTConfig* model, const TrainConfig& train) {
  auto round_trip = [&](const Json& j, auto read) {
    Json parsed;
    try {
      parsed = Json::parse(j.dump());
    } catch (const Error&) {  // the one free-text field is the corpus path
      std::string shown;
      for (const unsigned char c : train.data) {
        char buf[8];
        std::snprintf(buf, sizeof buf, c < 0x20 || c >= 0x7f ? "\\x%02x" : "%c", c);
        shown += buf;
      }
      fail("config", "--data ", shown, ": the path is not valid UTF-8, so a checkpoint could not record it");
    }
    try {
      read(parsed);
    } catch (const Error& e) {
      const std::string what = e.what();
      const size_t at = what.find("config: ");
      fail("config", at == std::string::npos ? what : what.substr(at + 8), " (the limits of a checkpoint)");
    }
  };
  round_trip(to_json(train), [](const Json& j) { train_config_from_json(j, "options"); });
  if (model) round_trip(to_json(*model), [](const Json& j) { model_config_from_json(j, "options"); });
}

// Fails (before anything is written) if `dir` cannot become a directory: it, or its
// nearest existing ancestor, is not a directory.
void check_output_dir(const std::string& dir) {
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec);
  if (ec) fail("train", dir, ": cannot use as the output directory (", ec.message(), ")");
  for (; !p.empty(); p = p.parent_path()) {
    const fs::file_status st = fs::status(p, ec);
    if (fs::exists(st)) {
      if (!fs::is_directory(st))
        fail("train", dir, ": cannot create the output directory (", p.string(), " is not a directory)");
      return;
    }
    if (p == p.parent_path()) return;
  }
}

}  // namespace

TrainState saved_run(const std::string& out_dir) { return load_state(state_file(out_dir)); }

Trainer::Trainer(TrainOptions options) : opt_(std::move(options)) {
  opt_.train.validate();
  check_saveable(nullptr, opt_.train);
  check_output_dir(opt_.out_dir);
  corpus_ = Corpus::load(opt_.train.data, opt_.train.train_fraction);
  const int64_t T = opt_.model.block_size;
  for (auto [name, tokens] : {std::pair{"train", &corpus_.split.train}, std::pair{"val", &corpus_.split.val}})
    if (int64_t(tokens->size()) < T + 1)
      fail("data", opt_.train.data, ": the ", name, " split has ", tokens->size(),
           " characters, needs at least block_size + 1 = ", T + 1);
  const AdamWConfig adam{.beta1 = 0.9f, .beta2 = opt_.train.beta2, .eps = 1e-8f,
                         .weight_decay = opt_.train.weight_decay};
  if (opt_.resume) {
    // The state is the commit record of the last save: read it first, then bring the
    // weights files in line with it (see recover_run_dir).
    const TrainState st = load_state(state_file(opt_.out_dir));
    recover_run_dir(opt_.out_dir, st.step);
    ModelCheckpoint ck = load_model(opt_.out_dir);
    if (ck.vocab.chars() != corpus_.vocab.chars())
      fail("train", opt_.train.data, ": its vocabulary differs from the checkpoint's in ", ck.path);
    model_ = std::move(ck.model);
    opt_.model = model_->config();
    optimizer_ = std::make_unique<AdamW>(model_->named_parameters(), adam);
    restore_optimizer(st, *optimizer_, state_file(opt_.out_dir));
    if (st.step != ck.step)
      fail("checkpoint", state_file(opt_.out_dir), ": step ", st.step, " but ", ck.path, " is at step ", ck.step);
    step_ = st.step;
    best_val_ = st.best_val_loss;
    has_best_ = true;
    data_rng_.set_state(st.data_rng);
    model_->dropout_rng().set_state(st.dropout_rng);
  } else {
    opt_.model.vocab_size = corpus_.vocab.size();
    check_saveable(&opt_.model, opt_.train);
    model_ = std::make_unique<nn::GPT>(opt_.model);
    optimizer_ = std::make_unique<AdamW>(model_->named_parameters(), adam);
    data_rng_.reseed(opt_.train.seed);
  }
  model_->set_precision(opt_.train.dtype);  // the replicas follow it (DataParallel)
  const int shards = int(std::min<int64_t>(num_threads(), opt_.train.batch_size));
  if (opt_.data_parallel && shards > 1) data_parallel_ = std::make_unique<DataParallel>(*model_, shards);
}

Trainer::Losses Trainer::evaluate() {
  NoGradGuard no_grad;
  model_->eval();
  Rng rng(opt_.train.seed ^ 0xe7a1);  // the same batches at every evaluation
  Batch batch;
  Losses out;
  for (auto [split, sink] : {std::pair{&corpus_.split.train, &out.train}, std::pair{&corpus_.split.val, &out.val}}) {
    double total = 0;
    for (int64_t i = 0; i < opt_.train.eval_iters; ++i) {
      sample_batch(*split, opt_.train.batch_size, opt_.model.block_size, rng, batch);
      total += model_->forward(batch.inputs, batch.B, batch.T, batch.targets).loss.item();
    }
    *sink = float(total / double(opt_.train.eval_iters));
  }
  model_->train();
  return out;
}

void Trainer::save(const Losses& losses) {
  const std::string& dir = opt_.out_dir;
  // The first save of a fresh run: a state left in --out by an earlier run must not
  // pair with this run's pending weights should this save be cut short.
  if (!has_best_ && remove_file(state_file(dir))) sync_dir(dir);
  const bool best = !has_best_ || losses.val < best_val_;
  if (best) best_val_ = losses.val, has_best_ = true;
  const TrainState st{step_,       best_val_, data_rng_.state(), model_->dropout_rng().state(),
                      opt_.train,  optimizer_->steps_taken(), optimizer_->m(), optimizer_->v()};
  save_model(model_path(dir) + kPending, *model_, corpus_.vocab, step_);
  if (best) save_model(best_path(dir) + kPending, *model_, corpus_.vocab, step_);
  save_state(state_file(dir), st);  // the commit
  if (best) rename_file(best_path(dir) + kPending, best_path(dir));
  rename_file(model_path(dir) + kPending, model_path(dir));
  sync_dir(dir);
}

Trainer::Losses Trainer::run() {
  const TrainConfig& tc = opt_.train;
  std::error_code ec;
  fs::create_directories(opt_.out_dir, ec);
  if (ec || !fs::is_directory(opt_.out_dir))
    fail("train", opt_.out_dir, ": cannot create the output directory (", ec ? ec.message() : "not a directory", ")");
  if (!opt_.resume) remove_dead_temp_files(opt_.out_dir);
  const std::string log_path = (fs::path(opt_.out_dir) / "log.csv").string();
  std::ofstream log(log_path, opt_.resume ? std::ios::app : std::ios::trunc);
  if (!log) fail("train", log_path, ": cannot open for writing");
  if (!opt_.resume) log << "step,train_loss,val_loss,lr,tokens_per_sec,elapsed_s\n" << std::flush;

  const Schedule schedule{tc.lr, tc.min_lr, tc.warmup_iters, tc.lr_decay_iters ? tc.lr_decay_iters : tc.max_iters};
  const bool live = !opt_.quiet && isatty(fileno(stdout));
  const int64_t tokens_per_step = tc.batch_size * opt_.model.block_size;
  const auto start = Clock::now();
  auto window_start = start;
  int64_t window_steps = 0;
  double tokens_per_sec = 0;
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };

  // Ctrl-C and SIGTERM (kill, a container or job scheduler stopping the run) both end
  // the step, save and exit 0; the previous handlers come back when the loop ends.
  g_interrupted = false;
  struct StopSignals {  // also restored when a failure ends the run early
    void (*on_int)(int) = std::signal(SIGINT, on_stop);
    void (*on_term)(int) = std::signal(SIGTERM, on_stop);
    bool active = true;
    void restore() {
      if (!active) return;
      std::signal(SIGINT, on_int);
      std::signal(SIGTERM, on_term);
      active = false;
    }
    ~StopSignals() { restore(); }
  } stop_signals;
  auto report = [&](const Losses& l) {
    log << step_ << ',' << l.train << ',' << l.val << ',' << schedule.at(step_) << ',' << tokens_per_sec << ','
        << elapsed() << '\n' << std::flush;
    if (!opt_.quiet)
      std::printf("%sstep %lld: train loss %.4f, val loss %.4f\n", live ? "\r\033[K" : "", (long long)step_, l.train,
                  l.val);
  };

  if (!opt_.quiet && !opt_.resume)
    std::printf("model: %lld parameters, vocab %lld, training on %s (%zu train / %zu val characters)\n",
                (long long)model_->num_parameters(), (long long)opt_.model.vocab_size, tc.data.c_str(),
                corpus_.split.train.size(), corpus_.split.val.size());
  const int64_t first_step = step_;
  Losses last{};
  // The step of the checkpoint on disk for this run (-1: none yet), for messages.
  int64_t saved_step = opt_.resume ? first_step : -1;
  auto kept = [&] {
    return saved_step < 0 ? cat("no checkpoint was saved in ", opt_.out_dir)
                          : cat("the checkpoint of step ", saved_step, " (the last whose evaluation was finite) is kept in ",
                                opt_.out_dir, ", and best.safetensors there has the lowest validation loss");
  };
  // Evaluates, logs, and saves when asked; a non-finite loss stops the run before
  // anything is saved, so a checkpoint never holds diverged weights.
  auto evaluate_and_save = [&](bool save_it) {
    last = evaluate();
    report(last);
    if (!std::isfinite(last.train) || !std::isfinite(last.val))
      fail("train", "the evaluation loss became ", std::isfinite(last.train) ? last.val : last.train, " at step ",
           step_, " (training diverged); ", kept());
    const float* w = model_->flat_parameters().data();
    for (int64_t i = 0, n = model_->flat_parameters().numel(); i < n; ++i)
      if (!std::isfinite(w[i])) fail("train", "a weight became ", w[i], " at step ", step_, "; ", kept());
    if (save_it) save(last), saved_step = step_;
  };
  Batch batch;
  const std::vector<Tensor> params = model_->parameters();
  model_->train();
  for (; step_ < tc.max_iters && !g_interrupted; ++step_) {
    if (step_ % tc.eval_interval == 0 && !(opt_.resume && step_ == first_step))
      evaluate_and_save(step_ > first_step);
    const float lr = schedule.at(step_);
    sample_batch(corpus_.split.train, tc.batch_size, opt_.model.block_size, data_rng_, batch);
    float loss_value;
    if (data_parallel_) {
      loss_value = data_parallel_->forward_backward(batch.inputs, batch.targets, batch.B, batch.T);
    } else {
      const Tensor loss = model_->forward(batch.inputs, batch.B, batch.T, batch.targets).loss;
      loss_value = loss.item();
      if (std::isfinite(loss_value)) loss.backward();
    }
    if (!std::isfinite(loss_value))
      fail("train", "the loss became ", loss_value, " at step ", step_, " (training diverged); ", kept());
    const float norm = clip_grad_norm(params, tc.grad_clip);
    if (!std::isfinite(norm)) {
      for (const auto& [name, p] : model_->named_parameters())
        for (int64_t i = 0; p.has_grad() && i < p.numel(); ++i)
          if (!std::isfinite(p.grad_data()[i]))
            fail("train", "the gradient of ", name, " became non-finite at step ", step_, " (training diverged); ",
                 kept());
    }
    optimizer_->step(lr);
    model_->zero_grad();

    ++window_steps;
    const double window = std::chrono::duration<double>(Clock::now() - window_start).count();
    if (window > 0) tokens_per_sec = double(window_steps * tokens_per_step) / window;
    const bool log_now = (step_ + 1) % tc.log_interval == 0;
    if (live || log_now) {
      const double eta = tokens_per_sec > 0 ? double((tc.max_iters - step_ - 1) * tokens_per_step) / tokens_per_sec : 0;
      if (live)
        std::printf("\r\033[Kstep %lld/%lld  loss %.4f  lr %.2e  %.0f tok/s  %s elapsed  ETA %s", (long long)step_ + 1,
                    (long long)tc.max_iters, loss_value, lr, tokens_per_sec, duration_text(elapsed()).c_str(),
                    duration_text(eta).c_str());
      else if (!opt_.quiet)
        std::printf("step %lld/%lld: loss %.4f, lr %.2e, %.0f tok/s, %s elapsed, ETA %s\n", (long long)step_ + 1,
                    (long long)tc.max_iters, loss_value, lr, tokens_per_sec, duration_text(elapsed()).c_str(),
                    duration_text(eta).c_str());
      std::fflush(stdout);
    }
    if (log_now) window_start = Clock::now(), window_steps = 0;
  }
  stop_signals.restore();
  if (step_ > first_step || !opt_.resume) evaluate_and_save(true);
  if (!opt_.quiet) {
    if (g_interrupted) std::printf("interrupted at step %lld: checkpoint saved in %s\n", (long long)step_, opt_.out_dir.c_str());
    else std::printf("done in %s: checkpoint in %s\n", duration_text(elapsed()).c_str(), opt_.out_dir.c_str());
  }
  return last;
}

}  // namespace folio
