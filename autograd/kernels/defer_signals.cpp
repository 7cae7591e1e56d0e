#include "autograd/kernels/defer_signals.h"

#include <omp.h>
#include <pthread.h>

#include <atomic>
#include <cstdint>

namespace folio::kernels {
namespace {

const sigset_t& asynchronous_signals() {
  static const sigset_t set = [] {
    sigset_t s;
    sigfillset(&s);
    for (int fault : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT}) sigdelset(&s, fault);
    return s;
  }();
  return set;
}

// The OpenMP runtime retires a team's threads when a smaller team starts and makes new
// ones, with their creator's mask, when a larger one does. A thread that blocked the
// signals counts its own end, so that a team whose threads may have been replaced
// blocks them again.
std::atomic<uint64_t> g_team_threads_ended{0};
struct CountsItsEnd {
  ~CountsItsEnd() { g_team_threads_ended.fetch_add(1, std::memory_order_relaxed); }
};

thread_local int t_depth = 0;             // DeferSignals scopes open on this thread
thread_local int t_team_blocked = 1;      // the team size whose other threads block them
thread_local uint64_t t_ends_seen = 0;    // g_team_threads_ended when they did

// The other threads of the team this thread's next parallel region gets block the
// signals, unless they already do. Called with this thread's own signals blocked, so
// that a thread the runtime makes now inherits that mask.
void block_on_team() {
  const int team = omp_get_max_threads();
  if (team <= 1 || omp_in_parallel()) return;  // products inside a region run on their caller alone
  const uint64_t ends = g_team_threads_ended.load(std::memory_order_relaxed);
  if (team == t_team_blocked && ends == t_ends_seen) return;
#pragma omp parallel num_threads(team)
  if (omp_get_thread_num() != 0) {
    pthread_sigmask(SIG_BLOCK, &asynchronous_signals(), nullptr);
    thread_local CountsItsEnd counts;
    (void)counts;
  }
  t_team_blocked = team, t_ends_seen = ends;
}

}  // namespace

DeferSignals::DeferSignals() {
  if (t_depth++ > 0) return;
  outermost_ = true;
  pthread_sigmask(SIG_BLOCK, &asynchronous_signals(), &before_);
  block_on_team();
}

DeferSignals::~DeferSignals() {
  --t_depth;
  if (outermost_) pthread_sigmask(SIG_SETMASK, &before_, nullptr);
}

}  // namespace folio::kernels
