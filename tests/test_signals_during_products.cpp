// A signal's handler runs on the thread it interrupts, its frame written just below
// that thread's stack pointer. oneDNN's JIT products can point the stack pointer at a
// heap buffer while they run (on the AVX2 machine, about 6% of the signals that reached
// a generation's products found it there), and a handler run then wrote its frame over
// the heap: Ctrl-C, or any signal Python handles, during Model.generate() now and then
// aborted the process in free() ("double free or corruption"). Here a storm of signals
// meets products on one thread and on a team of two, and every handler must have run
// on its own thread's stack.
#include <gtest/gtest.h>
#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "autograd/kernels/matmul.h"
#include "autograd/parallel.h"

namespace folio::kernels {
namespace {

#if defined(__x86_64__)

struct ThreadStack {
  std::atomic<pid_t> tid{0};
  uintptr_t lo = 0, hi = 0;
  // The handler's own stack: with SA_ONSTACK its frame goes here, not below whatever
  // the interrupted code's stack pointer was, so a bad moment is counted, not
  // written over the heap (which aborted this test instead of failing it).
  alignas(64) char handler_stack[64 * 1024];
};
ThreadStack g_stacks[64];
std::atomic<int> g_stack_count{0};
std::atomic<int64_t> g_handled{0}, g_off_stack{0}, g_unknown_thread{0};

void register_this_thread() {
  const pid_t tid = pid_t(syscall(SYS_gettid));
  for (int i = 0; i < g_stack_count.load(); ++i)
    if (g_stacks[i].tid.load() == tid) return;
  pthread_attr_t attr;
  void* base = nullptr;
  size_t size = 0;
  pthread_getattr_np(pthread_self(), &attr);
  pthread_attr_getstack(&attr, &base, &size);
  pthread_attr_destroy(&attr);
  const int i = g_stack_count.fetch_add(1);
  ASSERT_LT(i, 64);
  g_stacks[i].lo = uintptr_t(base), g_stacks[i].hi = uintptr_t(base) + size;
  stack_t alternate{};
  alternate.ss_sp = g_stacks[i].handler_stack;
  alternate.ss_size = sizeof g_stacks[i].handler_stack;
  ASSERT_EQ(sigaltstack(&alternate, nullptr), 0);
  g_stacks[i].tid.store(tid);
}

// Only async-signal-safe work: a system call and atomic counters.
extern "C" void on_signal(int, siginfo_t*, void* context) {
  const auto sp = uintptr_t(static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_RSP]);
  const pid_t tid = pid_t(syscall(SYS_gettid));
  g_handled.fetch_add(1);
  for (int i = 0; i < g_stack_count.load(); ++i)
    if (g_stacks[i].tid.load() == tid) {
      if (sp < g_stacks[i].lo || sp >= g_stacks[i].hi) g_off_stack.fetch_add(1);
      return;
    }
  g_unknown_thread.fetch_add(1);
}

// Products of a prompt's shapes (rows of a context against a layer's weights, forward
// and backward layouts) on `threads` threads, while another thread sends SIGUSR1 to the
// process every few microseconds; the kernel hands each to a thread that takes it.
void products_under_signals(int threads) {
  const int threads_before = num_threads();
  set_num_threads(threads);
  g_stack_count = 0, g_handled = 0, g_off_stack = 0, g_unknown_thread = 0;
  register_this_thread();
#pragma omp parallel num_threads(threads)
  register_this_thread();
  struct sigaction action {}, before {};
  action.sa_sigaction = on_signal;
  action.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
  sigaction(SIGUSR1, &action, &before);

  std::atomic<bool> stop{false};
  std::thread sender([&] {
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, nullptr);  // the storm is for the other threads
    while (!stop) {
      kill(getpid(), SIGUSR1);
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  });
  // A context's rows into a layer's weights, stored (out, in) as the decoder keeps them,
  // and the training step's layouts.
  const std::vector<Gemm> shapes = {
      {.M = 64, .N = 384, .K = 128, .trans_b = true},   // into q, k, v
      {.M = 64, .N = 128, .K = 128, .trans_b = true},   // the attention's projection
      {.M = 64, .N = 512, .K = 128, .trans_b = true},   // into the MLP
      {.M = 64, .N = 128, .K = 512, .trans_b = true},   // out of it
      {.M = 127, .N = 65, .K = 128, .trans_b = true},   // to a character vocabulary's logits
      {.M = 128, .N = 384, .K = 128},                   // a step's forward
      {.M = 128, .N = 384, .K = 96, .trans_a = true},   // a weight's gradient
  };
  std::vector<float> a(128 * 512, 0.5f), b(512 * 512, 0.25f), c(128 * 512), bias(512, 1.0f);  // (M, K), (K, N), (M, N), (N) at most
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1500))
    for (const Gemm& g : shapes) matmul(g, a.data(), b.data(), c.data(), bias.data());
  stop = true;
  sender.join();
  sigaction(SIGUSR1, &before, nullptr);
  stack_t none{};
  none.ss_flags = SS_DISABLE;
  sigaltstack(&none, nullptr);  // this thread's; the team's keep theirs (static)
  set_num_threads(threads_before);

  EXPECT_GT(g_handled.load(), 100) << "too few signals arrived for the test to mean anything";
  EXPECT_EQ(g_off_stack.load(), 0) << "of " << g_handled.load()
                                   << " signals, these were handled off their thread's stack";
  EXPECT_EQ(g_unknown_thread.load(), 0) << "signals handled on a thread the test did not know";
}

TEST(SignalsDuringProducts, HandlersRunOnTheStackOnOneThread) { products_under_signals(1); }
TEST(SignalsDuringProducts, HandlersRunOnTheStackOnATeam) { products_under_signals(2); }

#endif

}  // namespace
}  // namespace folio::kernels
