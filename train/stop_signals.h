#pragma once
// How a training run hears that it should stop: Ctrl-C (SIGINT), SIGTERM (kill, a
// container or job scheduler stopping it) and SIGPIPE (`folio train | head`: the reader
// of the progress is gone). Each ends the step; the run then saves and says so.
namespace folio {

// Ctrl-C and SIGTERM, from construction until destruction, after which the previous
// handlers come back however the loop ended. Construction forgets an earlier stop.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  void (*on_int_)(int);
  void (*on_term_)(int);
};

// SIGPIPE would kill the process between two writes, say between a log row and the
// save it belongs to. It stops the run like SIGTERM instead, and for the whole run: the
// final evaluation still prints, and those writes fail quietly.
class PipeSignal {
 public:
  PipeSignal();
  ~PipeSignal();
  PipeSignal(const PipeSignal&) = delete;
  PipeSignal& operator=(const PipeSignal&) = delete;

 private:
  void (*before_)(int);
};

bool stop_requested();        // a stop signal arrived since the last StopSignals
int stop_signal_received();   // the first one, 0 if none
const char* signal_name(int sig);  // "SIGINT", "SIGTERM", "SIGPIPE"

}  // namespace folio
