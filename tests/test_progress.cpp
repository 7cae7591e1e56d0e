// What a training run shows while it runs: the live line fits the terminal, the ETA
// does not jump with every evaluation, tokens/s is of the steps alone, and under --mtp
// the loss shown is the one evaluations measure.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/ioctl.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "tests/support.h"
#include "train/progress.h"

namespace folio {
namespace {

using namespace folio::testing;

TEST(Progress, FieldsAreDroppedLeastImportantFirstToFitTheWidth) {
  const std::vector<Field> fields = {{"step 12/40", 0}, {"loss 3.7094", 1}, {"lr 1.86e-04", 6},
                                     {"3447 tok/s", 4}, {"0m01s elapsed", 5}, {"ETA 0m05s", 2},
                                     {"best val 3.7520", 3}};
  EXPECT_EQ(fit_fields(fields, 200),
            "step 12/40  loss 3.7094  lr 1.86e-04  3447 tok/s  0m01s elapsed  ETA 0m05s  best val 3.7520");
  EXPECT_EQ(fit_fields(fields, 60), "step 12/40  loss 3.7094  ETA 0m05s  best val 3.7520");
  EXPECT_EQ(fit_fields(fields, 30), "step 12/40  loss 3.7094");
  EXPECT_EQ(fit_fields(fields, 8), "step 12");  // the first field alone, cut
  for (size_t width = 1; width < 120; ++width) EXPECT_LT(fit_fields(fields, width).size(), width) << width;
}

// Steps of 0.1 s with an evaluation of 2 s every 10 steps: once a step and an
// evaluation have been timed, the estimate of the time left falls by the time that
// passed, evaluations included, where a rate measured since the last progress line
// swung by a factor of two or more.
TEST(Progress, EtaCountsDownWithoutJumps) {
  EtaEstimate eta;
  const int64_t total = 200, every = 10;
  double now = 0, previous = 0;
  for (int64_t step = 0; step < total; ++step) {
    const double dt = 0.1 + (step % every == 0 ? 2.0 : 0.0);
    now += dt;
    eta.step_done(now, step % every == 0);
    const int64_t evals_left = (total - 1) / every - step / every + 1;
    const double left = eta.seconds_left(total - step - 1, evals_left);
    if (step > every + 1) {
      EXPECT_NEAR(previous - left, dt, 0.05) << "step " << step;
    }
    previous = left;
  }
  EXPECT_NEAR(previous, 2.0, 0.05);  // the last evaluation is still ahead
}

// Steps of 10 ms of training time, and an evaluation (here a pause of 300 ms) between
// two of them: tokens/s is the steps' tokens over the steps' time, on the progress
// line and in log.csv's row, not dragged down by the evaluation's wall time.
TEST(Progress, ThroughputLeavesOutEvaluations) {
  TempDir d("progress_rate");
  Progress p({.quiet = true, .max_iters = 100, .log_interval = 50, .log_file = d / "log.csv",
              .plot_file = d / "loss.svg", .run_name = "r", .eval_interval = 2, .train_seconds = 5.0},
             false);
  p.step_done(0, 3.0f, 1e-3f, 5.01, 1000);
  p.step_done(1, 3.0f, 1e-3f, 5.02, 1000);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the evaluation and its save
  p.evaluated(2, 3.0f, 3.1f, 1e-3f, 5.02);
  p.step_done(2, 3.0f, 1e-3f, 5.03, 1000);
  EXPECT_NEAR(p.tokens_per_sec(), 100000, 1);  // 3000 tokens in 30 ms
  p.evaluated(3, 3.0f, 3.1f, 1e-3f, 5.03);
  std::ifstream log(d / "log.csv");
  std::string header, row, cell;
  std::getline(log, header), std::getline(log, row), std::getline(log, row);
  std::istringstream cells(row);
  for (int i = 0; i < 5; ++i) std::getline(cells, cell, ',');  // tokens_per_sec
  EXPECT_NEAR(std::stod(cell), 100000, 1) << row;
}

// Under --mtp the progress line shows the next-token loss, the figure log.csv's
// train_loss measures, not the loss trained on (which adds the second head's term, half
// as large again at the start). At the first step both are near ln(vocabulary).
TEST(Progress, TheMtpLossShownIsTheNextTokenLoss) {
  TempDir d("progress_mtp");
  const std::string corpus = write_small_corpus(d.path / "corpus.txt");
  const Result r = run_folio({"train", "--data", corpus, "--out", d / "run", "--n-layer", "1", "--n-head", "2",
                              "--n-embd", "16", "--block-size", "16", "--mtp", "0.5", "--dropout", "0",
                              "--max-iters", "1", "--log-interval", "1", "--eval-iters", "4", "--threads", "1"},
                             d.path);
  ASSERT_EQ(r.code, 0) << r.err;
  const size_t at = r.out.find("step 1/1: loss ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const double shown = std::stod(r.out.substr(at + 15));
  std::ifstream log(d / "run/log.csv");
  std::string header, row;
  std::getline(log, header), std::getline(log, row);  // the evaluation at step 0
  const double logged = std::stod(row.substr(row.find(',') + 1));
  EXPECT_NEAR(shown, logged, 0.05 * logged) << r.out;
}

// The phases before a run's first line and a token directory's each have lines of
// their own: SentencePiece's training (silent for up to a minute) says so at its start
// and end, and in a log the sampling's line ends at the figure it reached, not at the
// first small document's "20.0 KB of 540.0 KB".
TEST(Progress, SilentPhasesHaveLines) {
  TempDir d("progress_phases");
  const std::string text = slurp(write_small_corpus(d.path / "corpus.txt", 600000));
  fs::create_directories(d.path / "docs");
  for (int i = 0; i < 30; ++i) spit(d.path / "docs" / ("act" + std::to_string(i) + ".txt"), text.substr(size_t(i) * 20000, 20000));
  const Result t = run_folio({"tokenize", d / "docs", "--out", d / "tok", "--tokenizer", "bpe", "--vocab-size", "400"},
                             d.path);
  ASSERT_EQ(t.code, 0) << t.err;
  const size_t training = t.out.find("training the tokenizer on ");
  ASSERT_NE(training, std::string::npos) << t.out;
  const size_t sampled = t.out.rfind("sampling text for the tokenizer: ", training);
  ASSERT_NE(sampled, std::string::npos) << t.out;
  const std::string line = t.out.substr(sampled + 33, t.out.find('\n', sampled) - sampled - 33);  // "A of B"
  const size_t of = line.find(" of ");
  ASSERT_NE(of, std::string::npos) << line;
  const std::string total = line.substr(of + 4);
  EXPECT_EQ(line.substr(0, of), total) << t.out;
  expect_contains(t.out, {"training the tokenizer on " + total + " of text: done in "});

  const Result r = run_folio({"train", "--data", d / "corpus.txt", "--out", d / "run", "--tokenizer", "bpe",
                              "--vocab-size", "400", "--n-layer", "1", "--n-head", "2", "--n-embd", "16",
                              "--block-size", "16", "--max-iters", "1", "--eval-iters", "1", "--threads", "1"},
                             d.path);
  ASSERT_EQ(r.code, 0) << r.err;
  expect_contains(r.out, {"training the bpe tokenizer on 540.0 KB of text\n",
                          "training the bpe tokenizer on 540.0 KB of text: done in "});
  EXPECT_LT(r.out.find("done in "), r.out.find("model: ")) << r.out;
}

// A pseudo-terminal `columns` wide: its master and the path of its other end; none
// where no pty can be opened (a chroot or container without /dev/pts), with errno set.
struct Pty {
  int master = -1;
  std::string slave;
};
std::optional<Pty> open_pty(unsigned short columns) {
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0) return std::nullopt;
  const char* name = ::grantpt(master) == 0 && ::unlockpt(master) == 0 ? ::ptsname(master) : nullptr;
  // The child opens this path as its stdout: a path that does not open would fail the
  // test from inside the child, where a chroot without /dev/pts is not a failure.
  const int slave = name ? ::open(name, O_RDWR | O_NOCTTY) : -1;
  winsize ws{};
  ws.ws_row = 24, ws.ws_col = columns;
  if (slave < 0 || ::ioctl(master, TIOCSWINSZ, &ws) != 0) {
    const int error = errno;
    if (slave >= 0) ::close(slave);
    ::close(master);
    errno = error;
    return std::nullopt;
  }
  ::close(slave);
  return Pty{master, name};
}

// Through the binary on a pseudo-terminal 60 columns wide: every redraw of the live
// line is narrower than the terminal (a wrapped line leaves debris at each \r).
TEST(Progress, TheLiveLineFitsTheTerminal) {
  TempDir d("progress_pty");
  const std::string corpus = write_small_corpus(d.path / "corpus.txt");
  const std::optional<Pty> pty = open_pty(60);
  if (!pty) GTEST_SKIP() << "no pseudo-terminal can be opened here (" << std::strerror(errno) << ")";
  const int master = pty->master;
  const Child c = spawn_folio({"train", "--data", corpus, "--out", d / "run", "--n-layer", "1", "--n-head", "2",
                               "--n-embd", "16", "--block-size", "16", "--max-iters", "40", "--eval-interval", "20",
                               "--eval-iters", "1", "--threads", "1"},
                              pty->slave, d / "err");
  std::string out;
  for (bool done = false; !done;) {
    pollfd p{master, POLLIN, 0};
    if (::poll(&p, 1, 50) > 0 && (p.revents & POLLIN)) {
      char buf[4096];
      const ssize_t n = ::read(master, buf, sizeof buf);
      if (n > 0) out.append(buf, size_t(n));
    }
    int status;
    done = ::waitpid(c.pid, &status, WNOHANG) == c.pid;
  }
  ::close(master);
  int lines = 0;
  size_t begin = 0;
  while (begin < out.size()) {
    const size_t end = std::min(out.find_first_of("\r\n", begin), out.size());
    std::string segment = out.substr(begin, end - begin);
    if (segment.rfind("\033[K", 0) == 0) segment.erase(0, 3);
    // A redraw ("step 12/40  loss ..."), not an evaluation's line ("step 20: train loss").
    if (segment.rfind("step ", 0) == 0 && segment.find(':') == std::string::npos) {
      ++lines;
      EXPECT_LT(segment.size(), 60u) << segment;
      expect_contains(segment, {"loss ", "ETA "});
    }
    begin = end + 1;
  }
  EXPECT_GT(lines, 10) << out << slurp(d / "err");
}

}  // namespace
}  // namespace folio
