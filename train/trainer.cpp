#include "train/trainer.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "autograd/error.h"

namespace folio {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::atomic<bool> g_interrupted{false};
void on_sigint(int) { g_interrupted = true; }

std::string state_file(const std::string& dir) { return (fs::path(dir) / "state.safetensors").string(); }

std::string duration_text(double s) {
  char buf[32];
  const int t = int(s + 0.5);
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%dh%02dm", t / 3600, t / 60 % 60);
  else std::snprintf(buf, sizeof buf, "%dm%02ds", t / 60, t % 60);
  return buf;
}

}  // namespace

TrainState saved_run(const std::string& out_dir) { return load_state(state_file(out_dir)); }

Trainer::Trainer(TrainOptions options) : opt_(std::move(options)) {
  opt_.train.validate();
  corpus_ = Corpus::load(opt_.train.data, opt_.train.train_fraction);
  const int64_t T = opt_.model.block_size;
  for (auto [name, tokens] : {std::pair{"train", &corpus_.split.train}, std::pair{"val", &corpus_.split.val}})
    if (int64_t(tokens->size()) < T + 1)
      fail("data", opt_.train.data, ": the ", name, " split has ", tokens->size(),
           " characters, needs at least block_size + 1 = ", T + 1);
  const AdamWConfig adam{.beta1 = 0.9f, .beta2 = opt_.train.beta2, .eps = 1e-8f,
                         .weight_decay = opt_.train.weight_decay};
  if (opt_.resume) {
    ModelCheckpoint ck = load_model(opt_.out_dir);
    if (ck.vocab.chars() != corpus_.vocab.chars())
      fail("train", opt_.train.data, ": its vocabulary differs from the checkpoint's in ", ck.path);
    model_ = std::move(ck.model);
    opt_.model = model_->config();
    optimizer_ = std::make_unique<AdamW>(model_->named_parameters(), adam);
    const TrainState st = load_state(state_file(opt_.out_dir));
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
    model_ = std::make_unique<nn::GPT>(opt_.model);
    optimizer_ = std::make_unique<AdamW>(model_->named_parameters(), adam);
    data_rng_.reseed(opt_.train.seed);
  }
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
  const bool best = !has_best_ || losses.val < best_val_;
  if (best) best_val_ = losses.val, has_best_ = true;
  // The state is written before the model, and resuming checks that their steps agree.
  const TrainState st{step_,       best_val_, data_rng_.state(), model_->dropout_rng().state(),
                      opt_.train,  optimizer_->steps_taken(), optimizer_->m(), optimizer_->v()};
  save_state(state_file(opt_.out_dir), st);
  save_model((fs::path(opt_.out_dir) / "model.safetensors").string(), *model_, corpus_.vocab, step_);
  if (best) save_model((fs::path(opt_.out_dir) / "best.safetensors").string(), *model_, corpus_.vocab, step_);
}

Trainer::Losses Trainer::run() {
  const TrainConfig& tc = opt_.train;
  std::error_code ec;
  fs::create_directories(opt_.out_dir, ec);
  if (ec || !fs::is_directory(opt_.out_dir))
    fail("train", opt_.out_dir, ": cannot create the output directory (", ec ? ec.message() : "not a directory", ")");
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

  g_interrupted = false;
  auto previous_handler = std::signal(SIGINT, on_sigint);
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
  Batch batch;
  const std::vector<Tensor> params = model_->parameters();
  model_->train();
  for (; step_ < tc.max_iters && !g_interrupted; ++step_) {
    if (step_ % tc.eval_interval == 0 && !(opt_.resume && step_ == first_step)) {
      last = evaluate();
      report(last);
      if (step_ > first_step) save(last);
    }
    const float lr = schedule.at(step_);
    sample_batch(corpus_.split.train, tc.batch_size, opt_.model.block_size, data_rng_, batch);
    const Tensor loss = model_->forward(batch.inputs, batch.B, batch.T, batch.targets).loss;
    const float loss_value = loss.item();
    if (!std::isfinite(loss_value))
      fail("train", "the loss became ", loss_value, " at step ", step_, "; the last good checkpoint in ", opt_.out_dir,
           " is kept");
    loss.backward();
    const float norm = clip_grad_norm(params, tc.grad_clip);
    if (!std::isfinite(norm)) {
      for (const auto& [name, p] : model_->named_parameters())
        for (int64_t i = 0; p.has_grad() && i < p.numel(); ++i)
          if (!std::isfinite(p.grad_data()[i]))
            fail("train", "the gradient of ", name, " became non-finite at step ", step_, "; the last good checkpoint in ",
                 opt_.out_dir, " is kept");
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
  std::signal(SIGINT, previous_handler);
  if (step_ > first_step || !opt_.resume) {
    last = evaluate();
    report(last);
    save(last);
  }
  if (!opt_.quiet) {
    if (g_interrupted) std::printf("interrupted at step %lld: checkpoint saved in %s\n", (long long)step_, opt_.out_dir.c_str());
    else std::printf("done in %s: checkpoint in %s\n", duration_text(elapsed()).c_str(), opt_.out_dir.c_str());
  }
  return last;
}

}  // namespace folio
