#pragma once
// How a training run hears that it should stop: Ctrl-C (SIGINT), SIGTERM (kill, a
// container or job scheduler stopping it) and SIGPIPE (`folio train | head`: the reader
// of the progress is gone). Each ends the step; the run then saves and says so.
#include <initializer_list>
#include <utility>
#include <vector>

namespace folio {

// The stop handler on `signals` from construction until destruction, after which the
// previous handlers come back however the loop ended.
class StopOnSignals {
 public:
  explicit StopOnSignals(std::initializer_list<int> signals);
  ~StopOnSignals();
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;

 private:
  std::vector<std::pair<int, void (*)(int)>> before_;  // each signal and its previous handler
};

// Ctrl-C and SIGTERM, for the training loop. Construction forgets an earlier stop.
struct StopSignals : StopOnSignals {
  StopSignals();
};

// SIGPIPE would kill the process between two writes, say between a log row and the
// save it belongs to. It stops the run like SIGTERM instead, and for the whole run: the
// final evaluation still prints, and those writes fail quietly.
struct PipeSignal : StopOnSignals {
  PipeSignal();
};

bool stop_requested();        // a stop signal arrived since the last StopSignals
int stop_signal_received();   // the first one, 0 if none
const char* signal_name(int sig);  // "SIGINT", "SIGTERM", "SIGPIPE"

}  // namespace folio
