#pragma once
// oneDNN's JIT products can run with the stack pointer on a heap buffer (on the AVX2
// machine about one signal in twelve that met a product found it there). A handler run
// then has its frame written below that pointer, over the heap: Ctrl-C, or any signal
// Python handles, during Model.generate() now and then aborted the process in free().
// So asynchronous signals wait while a product runs. DeferSignals blocks them on the
// calling thread for its scope (nested scopes cost nothing), and on the other threads
// of its OpenMP team, which run parts of oneDNN's products, for good: they only ever
// work for the caller, and a signal sent to the process is delivered to a thread that
// takes it, the caller once its product is done. Faults (SIGSEGV, SIGBUS, SIGFPE,
// SIGILL, SIGTRAP, SIGSYS) and SIGABRT are never blocked.
// tests/test_signals_during_products.cpp sends products a storm of signals.
#include <signal.h>

namespace folio::kernels {

class DeferSignals {
 public:
  DeferSignals();
  ~DeferSignals();
  DeferSignals(const DeferSignals&) = delete;
  DeferSignals& operator=(const DeferSignals&) = delete;

 private:
  bool outermost_ = false;
  sigset_t before_{};  // the caller's mask, restored at the end of the outermost scope
};

}  // namespace folio::kernels
