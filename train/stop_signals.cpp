#include "train/stop_signals.h"

#include <atomic>
#include <csignal>

namespace folio {
namespace {

std::atomic<bool> g_interrupted{false};
std::atomic<int> g_signal{0};  // the first stop signal received
void on_stop(int sig) {
  int none = 0;
  g_signal.compare_exchange_strong(none, sig);
  g_interrupted = true;
}

}  // namespace

StopSignals::StopSignals() : on_int_(std::signal(SIGINT, on_stop)), on_term_(std::signal(SIGTERM, on_stop)) {
  g_interrupted = false, g_signal = 0;
}
StopSignals::~StopSignals() {
  std::signal(SIGINT, on_int_);
  std::signal(SIGTERM, on_term_);
}

PipeSignal::PipeSignal() : before_(std::signal(SIGPIPE, on_stop)) {}
PipeSignal::~PipeSignal() { std::signal(SIGPIPE, before_); }

bool stop_requested() { return g_interrupted; }
int stop_signal_received() { return g_signal; }

const char* signal_name(int sig) {
  return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGPIPE ? "SIGPIPE" : "a signal";
}

}  // namespace folio
