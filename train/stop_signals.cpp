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

StopOnSignals::StopOnSignals(std::initializer_list<int> signals) {
  for (int sig : signals) before_.emplace_back(sig, std::signal(sig, on_stop));
}
StopOnSignals::~StopOnSignals() {
  for (const auto& [sig, handler] : before_) std::signal(sig, handler);
}

StopSignals::StopSignals() : StopOnSignals({SIGINT, SIGTERM}) { g_interrupted = false, g_signal = 0; }
PipeSignal::PipeSignal() : StopOnSignals({SIGPIPE}) {}

bool stop_requested() { return g_interrupted; }
int stop_signal_received() { return g_signal; }

const char* signal_name(int sig) {
  return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGPIPE ? "SIGPIPE" : "a signal";
}

}  // namespace folio
