#include "train/progress.h"

#include <sys/ioctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <utility>

#include "base/atomic_file.h"
#include "base/error.h"
#include "train/distributed.h"
#include "train/task_evals.h"

namespace folio {

using Clock = std::chrono::steady_clock;

namespace {

std::string fixed3(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}
std::string fixed(float v, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, double(v));
  return buf;
}
std::string scientific(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2e", double(v));
  return buf;
}
}  // namespace

std::string duration_text(double s) {
  char buf[32];
  const int t = int(s + 0.5);
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%dh%02dm", t / 3600, t / 60 % 60);
  else std::snprintf(buf, sizeof buf, "%dm%02ds", t / 60, t % 60);
  return buf;
}

void EtaEstimate::step_done(double now, bool evaluated) {
  if (started_) {
    const double gap = now - last_;
    // A gap with an evaluation: the evaluation's cost is what it adds to a step.
    if (evaluated && steps_ > 0) eval_sum_ += std::max(0.0, gap - step_sum_ / double(steps_)), ++evals_;
    else if (!evaluated) step_sum_ += gap, ++steps_;
  }
  started_ = true;
  last_ = now;
}

double EtaEstimate::seconds_left(int64_t steps_left, int64_t evals_left) const {
  if (steps_ == 0) return 0.0;
  const double per_eval = evals_ ? eval_sum_ / double(evals_) : 0.0;
  return step_sum_ / double(steps_) * double(steps_left) + per_eval * double(evals_left);
}

std::string fit_fields(const std::vector<Field>& fields, size_t width) {
  int keep_rank = 0;
  for (const Field& f : fields) keep_rank = std::max(keep_rank, f.rank);
  for (;; --keep_rank) {
    std::string line;
    for (const Field& f : fields)
      if (f.rank <= keep_rank && !f.text.empty()) line += (line.empty() ? "" : "  ") + f.text;
    if (line.size() < width || keep_rank == 0) return line.substr(0, std::max<size_t>(width, 1) - 1);
  }
}

int terminal_columns(int fd) {
  winsize ws{};
  return ::ioctl(fd, TIOCGWINSZ, &ws) == 0 ? int(ws.ws_col) : 0;
}

namespace {

// Drops the rows of `log_file` past `step`, and returns the wall seconds of its last
// remaining row (0 with none). A damaged row is kept: the plot says what is wrong.
double cut_log_to(const std::string& log_file, int64_t step) {
  std::ifstream in(log_file);
  std::string header, line, kept;
  if (!std::getline(in, header)) return 0;
  bool cut = false;
  double elapsed = 0;
  while (std::getline(in, line)) {
    std::istringstream row(line);
    int64_t row_step = 0;
    std::string cell;
    if (row >> row_step && row_step > step) {
      cut = true;
      continue;
    }
    for (int column = 0; std::getline(row, cell, ','); ++column)  // the row after its step
      if (column == 5) elapsed = std::strtod(cell.c_str(), nullptr);  // elapsed_s
    kept += line + '\n';
  }
  in.close();
  if (cut) write_file_atomic(log_file, header + '\n' + kept);
  return elapsed;
}

// The task columns of the log: a new log's are the tasks'; a resumed log keeps its own
// and gains the tasks it lacks, its rows so far padded with "nan" (rewritten whole).
std::vector<std::string> resumed_task_columns(const std::string& log_file, const std::vector<std::string>& base,
                                              const std::vector<std::string>& tasks, bool resume) {
  std::ifstream in(log_file);
  std::string header;
  if (!resume || !std::getline(in, header)) return tasks;
  std::vector<std::string> have = task_columns_of(header, base);
  const size_t before = have.size();
  for (const std::string& t : tasks)
    if (std::find(have.begin(), have.end(), t) == have.end()) have.push_back(t);
  if (have.size() == before) return have;
  if (!header.empty() && header.back() == '\r') header.pop_back();
  std::string text = header, line;
  for (size_t i = before; i < have.size(); ++i) text += "," + have[i];
  text += '\n';
  while (std::getline(in, line)) {
    text += line;
    for (size_t i = before; i < have.size(); ++i) text += ",nan";
    text += '\n';
  }
  in.close();
  write_file_atomic(log_file, text);
  return have;
}

}  // namespace

Progress::Progress(Options options, bool resume)
    : o_(std::move(options)),
      live_(!o_.quiet && isatty(fileno(stdout))),
      start_(Clock::now()),
      window_start_(o_.train_seconds),
      best_val_(std::numeric_limits<float>::infinity()) {
  curve_.name = o_.run_name;
  if (o_.log_file.empty()) return;
  // A resumed run whose log.csv is gone or empty starts a new one, header first: its
  // rows went on without one, into a file that folio plot and report refuse.
  const bool continues = resume && log_has_header(o_.log_file);  // the log of the run resumed, to go on with
  if (continues) {
    elapsed_before_ = cut_log_to(o_.log_file, o_.resume_step);
    try {  // the evaluations before the resume, so the plot shows the whole run
      curve_ = viz::read_loss_log(o_.log_file, o_.run_name);
      for (const viz::LossPoint& p : curve_.points) best_val_ = std::min(best_val_, float(p.val));
    } catch (const Error&) {
      curve_.points.clear();  // a damaged log only costs the plot its history
    }
  }
  const std::vector<std::string> columns = log_columns();
  columns_ = columns.size();
  if (continues) {  // a log begun before a column existed goes on without it: its header's first columns are ours
    std::ifstream in(o_.log_file);
    std::string header, name;
    if (std::getline(in, header)) {
      std::istringstream names(header);
      for (columns_ = 0; std::getline(names, name, ',') && columns_ < columns.size() && name == columns[columns_];)
        ++columns_;
    }
  }
  if (columns_ == columns.size()) task_columns_ = resumed_task_columns(o_.log_file, columns, o_.task_names, continues);
  log_.open(o_.log_file, continues ? std::ios::app : std::ios::trunc);
  if (!log_) fail("train", o_.log_file, ": cannot open for writing");
  if (!continues) {
    for (size_t i = 0; i < columns.size(); ++i) log_ << (i ? "," : "") << columns[i];
    for (const std::string& name : task_columns_) log_ << ',' << name;
    log_ << '\n' << std::flush;
  }
}

double Progress::elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

namespace {

// An evaluation's row: log.csv's columns, in order, with their values. log_columns(),
// each row of the file and the on_eval hook's figures all come from here.
struct EvalRow {
  int64_t step = 0;
  float train = 0, val = 0, lr = 0;
  double tokens_per_sec = 0, elapsed = 0, bits_per_char = 0, train_seconds = 0, bits_per_byte = 0;
  Health health;
};
ProgressHooks::Figures figures(const EvalRow& r) {
  const Health& h = r.health;
  ProgressHooks::Figures f = {{"step", double(r.step)}, {"train_loss", r.train}, {"val_loss", r.val}, {"lr", r.lr},
                              {"tokens_per_sec", r.tokens_per_sec}, {"elapsed_s", r.elapsed},
                              {"val_bpc", r.bits_per_char}, {"train_s", r.train_seconds},
                              {"val_bpb", r.bits_per_byte}, {"grad_norm", h.grad_norm}, {"clipped", h.clipped},
                              {"skipped", double(h.skipped)}, {"rollbacks", double(h.rollbacks)}};
  for (int g = 0; g < kParamGroups; ++g) f.push_back({column_name(ParamGroup(g)), h.update_ratio[size_t(g)]});
  return f;
}

// A cell of log.csv: a count as an integer (step 1000000, not 1e+06), anything else
// with 6 significant digits.
void write_cell(std::ostream& out, double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) out << int64_t(v);
  else out << v;
}

}  // namespace

bool log_has_header(const std::string& log_file) {
  std::ifstream in(log_file);
  std::string header;
  return std::getline(in, header) && !header.empty();
}

std::vector<std::string> log_columns() {
  std::vector<std::string> names;
  for (const auto& [name, value] : figures({})) names.push_back(name);
  return names;
}

namespace {
thread_local ProgressHooks t_hooks;  // this thread's runs' listeners (ScopedProgressHooks)
}  // namespace

ScopedProgressHooks::ScopedProgressHooks(ProgressHooks hooks) : ScopedValue(t_hooks, std::move(hooks)) {}

void Progress::step_done(int64_t step, float loss, float lr, double train_seconds, int64_t tokens,
                         const Health& health) {
  window_tokens_ += tokens;
  const double window = train_seconds - window_start_;
  if (window > 0) tokens_per_sec_ = double(window_tokens_) / window;
  if (t_hooks.on_step)
    t_hooks.on_step({{"step", double(step + 1)}, {"loss", loss}, {"lr", lr}, {"tokens_per_sec", tokens_per_sec_},
                     {"train_s", train_seconds}});
  eta_.step_done(elapsed(), evaluated_since_step_);
  evaluated_since_step_ = false, say_evaluating_ = false;
  const bool log_now = (step + 1) % o_.log_interval == 0;
  if (log_now) window_start_ = train_seconds, window_tokens_ = 0;
  if (o_.quiet || !(live_ || log_now)) return;
  // Whichever limit comes first: the steps left at this speed, the budget left.
  // Evaluations before the steps left (at multiples of eval_interval), and the last one.
  const int64_t every = o_.eval_interval, evals_left = every ? (o_.max_iters - 1) / every - step / every + 1 : 0;
  double eta = o_.max_iters ? eta_.seconds_left(o_.max_iters - step - 1, std::max<int64_t>(evals_left, 0)) : 0;
  if (const double left = o_.max_time - train_seconds; o_.max_time > 0 && !(o_.max_iters && eta < left))
    eta = std::max(0.0, left);
  char of[32] = "";  // "/2000", or nothing on a time budget alone
  if (o_.max_iters) std::snprintf(of, sizeof of, "/%lld", (long long)o_.max_iters);
  char best[32] = "";
  if (std::isfinite(best_val_)) std::snprintf(best, sizeof best, "best val %.4f", best_val_);
  // The guards' counts once they are not 0: a run that skips or rolls back says so.
  const std::string norm = std::isnan(health.grad_norm) ? "" : cat("gnorm ", fixed(float(health.grad_norm), 2));
  const std::string counts = cat(health.skipped ? cat("skipped ", health.skipped) : "",
                                 health.skipped && health.rollbacks ? ", " : "",
                                 health.rollbacks ? cat("rolled back ", health.rollbacks) : "");
  if (live_) {
    // Most important first: where the run is, how it learns, when it ends.
    const int columns = terminal_columns(fileno(stdout));
    const std::string line =
        fit_fields({{cat("step ", step + 1, of), 0},
                    {cat("loss ", fixed(loss, 4)), 1},
                    {cat("lr ", scientific(lr)), 6},
                    {cat(std::lround(tokens_per_sec_), " tok/s"), 4},
                    {duration_text(elapsed()) + " elapsed", 5},
                    {"ETA " + duration_text(eta), 2},
                    {best, 3},
                    {norm, 7},
                    {counts, 1}},
                   size_t(columns > 0 ? columns : 80));
    std::printf("\r\033[K%s", line.c_str());
  } else {
    std::printf("step %lld%s: loss %.4f, lr %.2e, %.0f tok/s, %s elapsed, ETA %s%s%s%s%s%s%s\n", (long long)step + 1, of,
                loss, lr, tokens_per_sec_, duration_text(elapsed()).c_str(), duration_text(eta).c_str(),
                *best ? ", " : "", best, norm.empty() ? "" : ", ", norm.c_str(), counts.empty() ? "" : ", ",
                counts.c_str());
  }
  std::fflush(stdout);
}

void Progress::evaluating(int64_t step, int64_t batches) {
  if (o_.quiet || !std::exchange(say_evaluating_, false)) return;
  if (live_) std::printf("\r\033[K"), std::fflush(stdout);
  std::fprintf(stderr, "evaluating step %lld on %lld batches (train and val)...\n", (long long)step,
               (long long)batches);
  std::fflush(stderr);
}

void Progress::log_row(int64_t step, float train, float val, float lr, double train_seconds, const Health& health,
                       double bits_per_char, double bits_per_byte) {
  const double t = elapsed_before_ + elapsed();
  const ProgressHooks::Figures row = figures({step, train, val, lr, tokens_per_sec_, t, bits_per_char, train_seconds,
                                              bits_per_byte, health});
  if (t_hooks.on_eval) t_hooks.on_eval(row);
  const std::vector<double> tasks = task_cells(task_columns_, o_.task_names, std::exchange(task_scores_, {}));
  if (!log_.is_open()) return;
  for (size_t i = 0; i < columns_ && i < row.size(); ++i) {
    if (i) log_ << ',';
    write_cell(log_, row[i].second);
  }
  for (double cell : tasks) log_ << ',', write_cell(log_, cell);
  log_ << '\n' << std::flush;
  curve_.points.push_back({step, train, val, t});
  write_file_atomic(o_.plot_file, viz::loss_plot_svg({curve_}));
}

void Progress::evaluated(int64_t step, float train, float val, float lr, double train_seconds,
                         const Health& health) {
  evaluated_since_step_ = true;
  if (std::isfinite(val)) best_val_ = std::min(best_val_, val);
  // Token files made elsewhere do not say how many bytes their tokens are: no figure.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double bits_per_byte = o_.val_tokens_per_byte > 0 ? val * o_.val_tokens_per_byte / std::log(2.0) : nan;
  const double bits_per_char = o_.val_tokens_per_char > 0 ? val * o_.val_tokens_per_char / std::log(2.0) : nan;
  log_row(step, train, val, lr, train_seconds, health, bits_per_char, bits_per_byte);
  if (o_.quiet) return;
  std::printf("%sstep %lld: train loss %.4f, val loss %.4f%s%s%s\n", live_ ? "\r\033[K" : "", (long long)step, train,
              val, std::isnan(bits_per_byte) ? "" : cat(" (", fixed3(bits_per_byte), " bits/byte)").c_str(),
              o_.plot_file.empty() ? "" : "  ",
              o_.plot_file.empty() ? "" : o_.plot_file.c_str());
  std::fflush(stdout);
}

void Progress::repeat_row(int64_t step, float lr, double train_seconds, const Health& health) {
  const auto p = std::find_if(curve_.points.rbegin(), curve_.points.rend(),
                              [&](const viz::LossPoint& q) { return q.step == step; });
  if (p == curve_.points.rend()) return;
  const viz::LossPoint was = *p;  // log_row adds to the points
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double per_byte = o_.val_tokens_per_byte > 0 ? was.val * o_.val_tokens_per_byte / std::log(2.0) : nan;
  const double per_char = o_.val_tokens_per_char > 0 ? was.val * o_.val_tokens_per_char / std::log(2.0) : nan;
  log_row(step, float(was.train), float(was.val), lr, train_seconds, health, per_char, per_byte);
}

PhaseLine::PhaseLine(bool quiet) : quiet_(quiet), live_(!quiet && isatty(fileno(stdout))) {}

void PhaseLine::show(const std::string& what, double seconds, bool done) {
  if (quiet_ || (!done && shown_at_ >= 0 && seconds - shown_at_ < (live_ ? 0.5 : 10.0))) return;
  shown_at_ = seconds;
  char took[48];
  std::snprintf(took, sizeof took, done ? ": done in %.1f s" : seconds < 0.5 ? "" : ": %.0f s", seconds);
  std::printf(live_ ? "\r\033[K%s%s%s" : "%s%s%s", what.c_str(), took, done || !live_ ? "\n" : "");
  std::fflush(stdout);
}

void Progress::say(const std::string& line) {
  if (o_.quiet) return;
  std::printf("%s%s\n", live_ ? "\r\033[K" : "", line.c_str());
  std::fflush(stdout);
}

void Progress::notice(const std::string& line) {
  if (live_) std::printf("\r\033[K"), std::fflush(stdout);  // off the live line
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

std::string bytes_a_token(int64_t bytes, int64_t tokens) {
  const double b = double(std::lround(100.0 * double(bytes) / double(tokens))) / 100.0;
  return cat(", ", b, b == 1.0 ? " byte a token" : " bytes a token");
}

void report_ranks(Progress& progress, int64_t steps, double wait_seconds, double step_seconds) {
  const size_t n = size_t(dist::size()), r = size_t(dist::rank());
  std::vector<double> wait_ms(n, 0.0), step_ms(n, 0.0), peak_mib(n, 0.0);
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  wait_ms[r] = 1e3 * wait_seconds / double(std::max<int64_t>(steps, 1));
  step_ms[r] = 1e3 * step_seconds / double(std::max<int64_t>(steps, 1));
  peak_mib[r] = double(usage.ru_maxrss) / 1024.0;  // Linux: KiB
  dist::sum(wait_ms);
  dist::sum(step_ms);
  dist::sum(peak_mib);
  if (dist::size() == 1) return progress.say(cat("peak memory ", std::lround(peak_mib[0]), " MiB"));
  auto ms = [](double v) { return std::lround(v * 1000) / 1000.0; };
  for (size_t i = 0; i < n; ++i)
    progress.say(cat("rank ", i, ": all-reduce ", ms(wait_ms[i]), " ms/step not hidden, step ", ms(step_ms[i]),
                     " ms, peak memory ", std::lround(peak_mib[i]), " MiB"));
}

}  // namespace folio
