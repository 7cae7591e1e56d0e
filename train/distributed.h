#pragma once
// The processes of one training run. Launched by mpirun or srun, folio trains one model
// on every rank: each takes its share of every batch, and the gradients are summed
// across ranks once per step (MPI_Allreduce on the packed gradient buffer), so every
// rank applies the same update and the weights stay identical. Alone, it is a world
// of one and nothing here costs anything.
//
// Built without MPI (cmake -DFOLIO_MPI=OFF), a launch on several ranks is refused
// with an error that says so.
#include <cstdint>
#include <span>
#include <string>
#include <utility>

namespace folio::dist {

// Starts MPI when a launcher started this process (and then only), and stops it at exit.
// Returns the number of ranks; throws folio::Error when the launcher asks for several
// ranks and this folio has no MPI.
int init(int* argc, char*** argv);

int rank();        // 0 alone
int size();        // 1 alone
inline bool is_root() { return rank() == 0; }
bool built_with_mpi();
// Ranks on this machine (the launcher's local size), for the default thread count.
int local_size();

// In place, across ranks: sum (a no-op alone).
void sum(std::span<float> values);
void sum(std::span<double> values);
// Rank 0's values, everywhere.
void broadcast(std::span<float> values);
void broadcast(std::span<uint64_t> values);
void broadcast(std::span<double> values);  // short spans (a clock)
// True when `flag` is true on any rank.
bool any(bool flag);
// Returns when every rank has called it.
void barrier();
// True when `value` is the same on every rank.
bool same_everywhere(double value);

// Ends every rank with `code` after an error on this one (others may be waiting in a
// collective call and would never return otherwise). Alone: std::exit.
[[noreturn]] void abort(int code);

// A rank that waits longer than `seconds` (0: no limit) in one exchange with the
// others prints why on stderr and exits 1, and the launcher then ends the job. Over
// TCP nothing else would end it: Open MPI has no timeout of its own, and a peer whose
// host died or whose network was cut closes no connection, so a collective waits for
// ever. The wait that counts is one call's (or a started sum's), not the step's.
void set_timeout(double seconds);

// Seconds spent in sum() since the start (for progress and benchmarks).
double seconds_in_sum();
// This rank's rows of a batch of B: [begin, end).
std::pair<int64_t, int64_t> share_of(int64_t B);

// Sums started now and finished later (MPI_Iallreduce), so that a gradient bucket
// travels while the backward pass computes the next. Nothing moves unless some thread
// calls poll_sums() or wait_sums() (Open MPI has no progress thread of its own over
// TCP): one thread owns them, and no other thread calls this file meanwhile.
// Alone: no-ops.
void start_sum(std::span<float> values);
bool poll_sums();  // true when every started sum has finished (they are then forgotten)
void wait_sums();
// True when another thread than main may make the calls above (MPI_THREAD_SERIALIZED).
bool threads_may_call();

}  // namespace folio::dist
