#include "train/distributed.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <thread>
#include <vector>

#include "base/error.h"

#ifdef FOLIO_HAVE_MPI
#include <mpi.h>
#endif

namespace folio::dist {
namespace {

int g_rank = 0, g_size = 1;
bool g_mpi = false;
bool g_serialized = false;
double g_sum_seconds = 0;

// The watchdog of set_timeout(): when the current exchange began (steady clock, ns;
// 0: none under way) and what it is.
std::atomic<int64_t> g_busy_since{0};
std::atomic<const char*> g_busy_what{""};
std::atomic<double> g_timeout{0};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Marks an exchange under way for its scope (an outer one keeps its start).
struct Busy {
  bool mine;
  explicit Busy(const char* what) : mine(g_busy_since == 0) {
    if (mine) g_busy_what = what, g_busy_since = now_ns();
  }
  ~Busy() {
    if (mine) g_busy_since = 0;
  }
};

void watch() {
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const int64_t since = g_busy_since;
    const double limit = g_timeout;
    if (since == 0 || limit <= 0) continue;
    const double waited = double(now_ns() - since) * 1e-9;
    if (waited < limit) continue;
    std::fprintf(stderr,
                 "[mpi] rank %d of %d: no answer from the other ranks for %.0f s in %s (the --comm-timeout): a rank "
                 "died or the network between the ranks is cut; ending the job (the last checkpoint saved stays "
                 "as it was)\n",
                 g_rank, g_size, waited, g_busy_what.load());
    std::fflush(stderr);
    std::_Exit(1);
  }
}

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : 0;
}

// The size a launcher announced (Open MPI, MPICH/Hydra and PMIx, Slurm), 0 if none.
int launcher_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (const int n = env_int(name)) return n;
  if (std::getenv("SLURM_STEP_ID")) return env_int("SLURM_NTASKS");  // srun, not sbatch's batch script
  return 0;
}

#ifdef FOLIO_HAVE_MPI
std::vector<MPI_Request> g_pending;  // the sums start_sum() started

void finalize() {
  int done = 0;
  MPI_Finalized(&done);
  if (!done) MPI_Finalize();
}

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  fail("mpi", what, " failed on rank ", g_rank, ": ", std::string(text, size_t(len)));
}
#endif

}  // namespace

bool built_with_mpi() {
#ifdef FOLIO_HAVE_MPI
  return true;
#else
  return false;
#endif
}

int init(int* argc, char*** argv) {
  const int announced = launcher_size();
  if (announced <= 0) return 1;  // not launched by mpirun/srun: a world of one, no MPI at all
#ifdef FOLIO_HAVE_MPI
  // Serialized: the gradient buckets' thread makes the calls while the main thread
  // computes (never two threads at once), which MPI_THREAD_FUNNELED would not allow.
  int provided = MPI_THREAD_SINGLE;
  check(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
  g_serialized = provided >= MPI_THREAD_SERIALIZED;
  g_mpi = true;
  std::atexit(finalize);
  // Errors come back as codes, turned into folio::Error, so that main() can print them
  // and abort every rank instead of MPI printing its own message.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  return g_size;
#else
  (void)argc, (void)argv;
  if (announced > 1)
    fail("mpi", "launched on ", announced, " ranks, but this folio was built without MPI (cmake -DFOLIO_MPI=OFF); "
         "rebuild with -DFOLIO_MPI=ON (needs libopenmpi-dev) or run one process");
  return 1;
#endif
}

int rank() { return g_rank; }
int size() { return g_size; }

int local_size() {
  const int n = env_int("OMPI_COMM_WORLD_LOCAL_SIZE");
  return n > 0 ? n : (env_int("MPI_LOCALNRANKS") > 0 ? env_int("MPI_LOCALNRANKS") : 1);
}

void sum(std::span<float> values) {
  if (g_size == 1) return;
#ifdef FOLIO_HAVE_MPI
  const auto start = std::chrono::steady_clock::now();
  const Busy busy("MPI_Allreduce (the gradient sum)");
  // Large buffers go in pieces that fit an int count.
  for (size_t done = 0; done < values.size();) {
    const int n = int(std::min<size_t>(values.size() - done, size_t(1) << 30));
    check(MPI_Allreduce(MPI_IN_PLACE, values.data() + done, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
    done += size_t(n);
  }
  g_sum_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
#endif
}

void sum(std::span<double> values) {
  if (g_size == 1) return;
#ifdef FOLIO_HAVE_MPI
  const Busy busy("MPI_Allreduce");
  check(MPI_Allreduce(MPI_IN_PLACE, values.data(), int(values.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
        "MPI_Allreduce");
#endif
}

void broadcast(std::span<float> values) {
  if (g_size == 1) return;
#ifdef FOLIO_HAVE_MPI
  const Busy busy("MPI_Bcast");
  for (size_t done = 0; done < values.size();) {
    const int n = int(std::min<size_t>(values.size() - done, size_t(1) << 30));
    check(MPI_Bcast(values.data() + done, n, MPI_FLOAT, 0, MPI_COMM_WORLD), "MPI_Bcast");
    done += size_t(n);
  }
#endif
}

template <class T>
void broadcast_from_root(std::span<T> values) {
  if (g_size == 1) return;
#ifdef FOLIO_HAVE_MPI
  const Busy busy("MPI_Bcast");
  const MPI_Datatype type = std::is_same_v<T, double> ? MPI_DOUBLE : MPI_UINT64_T;
  check(MPI_Bcast(values.data(), int(values.size()), type, 0, MPI_COMM_WORLD), "MPI_Bcast");
#endif
}

std::pair<int64_t, int64_t> share_of(int64_t B) {
  const int64_t r = rank(), n = size();
  return {B * r / n, B * (r + 1) / n};
}

void broadcast(std::span<uint64_t> values) { broadcast_from_root(values); }
void broadcast(std::span<double> values) { broadcast_from_root(values); }

bool any(bool flag) {
  if (g_size == 1) return flag;
#ifdef FOLIO_HAVE_MPI
  const Busy busy("MPI_Allreduce (the stop flag)");
  int v = flag ? 1 : 0;
  check(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
  return v != 0;
#else
  return flag;
#endif
}

void barrier() {
#ifdef FOLIO_HAVE_MPI
  if (g_size == 1) return;
  const Busy busy("MPI_Barrier");
  check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
#endif
}

bool same_everywhere(double value) {
  if (g_size == 1) return true;
#ifdef FOLIO_HAVE_MPI
  const Busy busy("MPI_Allreduce (the weights' checksum)");
  double lo = value, hi = value;
  check(MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
  check(MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
  return lo == hi;
#else
  return true;
#endif
}

void abort(int code) {
#ifdef FOLIO_HAVE_MPI
  if (g_mpi && g_size > 1) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::exit(code);
}

double seconds_in_sum() { return g_sum_seconds; }

bool threads_may_call() { return g_size == 1 || g_serialized; }

void set_timeout(double seconds) {
  g_timeout = seconds;
  static bool watching = false;
  if (g_size > 1 && seconds > 0 && !watching) {
    watching = true;
    std::thread(watch).detach();
  }
}

void start_sum(std::span<float> values) {
  if (g_size == 1) return;
#ifdef FOLIO_HAVE_MPI
  for (size_t done = 0; done < values.size();) {
    const int n = int(std::min<size_t>(values.size() - done, size_t(1) << 30));
    if (g_busy_since == 0) g_busy_what = "MPI_Iallreduce (a gradient bucket)", g_busy_since = now_ns();
    g_pending.push_back(MPI_REQUEST_NULL);
    check(MPI_Iallreduce(MPI_IN_PLACE, values.data() + done, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &g_pending.back()),
          "MPI_Iallreduce");
    done += size_t(n);
  }
#endif
}

bool poll_sums() {
#ifdef FOLIO_HAVE_MPI
  if (g_pending.empty()) return true;
  int done = 0;
  check(MPI_Testall(int(g_pending.size()), g_pending.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall");
  if (done) g_pending.clear(), g_busy_since = 0;
  return done != 0;
#else
  return true;
#endif
}

void wait_sums() {
#ifdef FOLIO_HAVE_MPI
  if (g_pending.empty()) return;
  check(MPI_Waitall(int(g_pending.size()), g_pending.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
  g_pending.clear();
  g_busy_since = 0;
#endif
}

}  // namespace folio::dist
