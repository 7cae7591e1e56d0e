// Tensor basics, the RNG, and the autograd engine's bookkeeping.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <thread>

#include "base/error.h"
#include "autograd/ops.h"
#include "autograd/pool.h"
#include "tests/support.h"

namespace folio {
namespace {

TEST(Tensor, Factories) {
  EXPECT_EQ(Tensor::zeros({2, 3}).to_vector(), std::vector<float>(6, 0.0f));
  EXPECT_EQ(Tensor::ones({4}).to_vector(), std::vector<float>(4, 1.0f));
  EXPECT_EQ(Tensor::full({1, 2}, 2.5f).to_vector(), (std::vector<float>{2.5f, 2.5f}));
  EXPECT_FLOAT_EQ(Tensor::scalar(3.0f).item(), 3.0f);
  const std::vector<float> v{1, 2, 3, 4, 5, 6};
  Tensor t = Tensor::from({2, 3}, v);
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_FLOAT_EQ(t.at({1, 2}), 6.0f);
  EXPECT_THROW(Tensor::from({2, 2}, v), Error);
}

TEST(Rng, SeededAndPortable) {
  Rng a(1337), b(1337), c(1338);
  EXPECT_EQ(a.next_u64(), b.next_u64());
  EXPECT_NE(a.next_u64(), c.next_u64());
  // Fixed values: the same on every machine and compiler.
  Rng r(0);
  EXPECT_EQ(r.next_u64(), 11091344671253066420ULL);
  Rng n(42);
  const Tensor x = Tensor::randn({10000}, n);
  double m = 0, s = 0;
  for (float v : x.to_vector()) m += v, s += double(v) * v;
  m /= 10000;
  EXPECT_NEAR(m, 0.0, 0.03);
  EXPECT_NEAR(s / 10000 - m * m, 1.0, 0.05);
}

TEST(Rng, StateRoundTrip) {
  Rng a(9);
  a.normal();  // leaves a cached spare
  const Rng::State st = a.state();
  const float next = a.normal();
  Rng b(0);
  b.set_state(st);
  EXPECT_EQ(b.normal(), next);
}

TEST(Autograd, AccumulatesAcrossUsesAndCalls) {
  Tensor x = Tensor::from({2}, std::vector<float>{2.0f, -1.0f}).set_requires_grad();
  sum(add(mul(x, x), x)).backward();  // d/dx (x^2 + x) = 2x + 1
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{5.0f, -1.0f}));
  sum(x).backward();  // += 1: gradients accumulate until zeroed
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{6.0f, 0.0f}));
  x.zero_grad();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{0.0f, 0.0f}));
}

TEST(Autograd, BackwardFreesTheGraphAndItsSavedData) {
  Tensor x = Tensor::ones({3}).set_requires_grad();
  Tensor y = exp(x);  // saves its output for backward
  std::weak_ptr<Storage> saved = y.impl()->data;
  Tensor loss = sum(y);
  y = Tensor();
  EXPECT_FALSE(saved.expired());  // the exp node still needs it
  loss.backward();
  EXPECT_TRUE(saved.expired());   // freed as backward passed the node
  EXPECT_FALSE(loss.is_leaf());
  testing::expect_error([&] { loss.backward(); }, {"already used"});  // a second backward through a used graph
}

TEST(Autograd, ForwardKeepsOnlyWhatBackwardReads) {
  // causal_softmax's backward reads its output, not its input: the scores can go as
  // soon as the caller drops them, even while the graph is alive.
  Tensor q = Tensor::ones({2, 4, 4}).set_requires_grad();
  Tensor scores = matmul(q, q, false, true);
  std::weak_ptr<Storage> scores_data = scores.impl()->data;
  Tensor weights = causal_softmax(scores);
  scores = Tensor();
  EXPECT_TRUE(scores_data.expired());
  sum(weights).backward();
  EXPECT_TRUE(q.has_grad());
}

// Backward reads the data ops saved in forward. Were that data changed in place in
// between, the gradients would silently be those of other values: backward refuses
// instead, naming the op (PyTorch's version counter).
TEST(Autograd, SavedDataChangedInPlaceIsAnError) {
  const Tensor x = Tensor::from({3}, std::vector<float>{1, 2, 3}).set_requires_grad();
  const Tensor w = Tensor::zeros({3}).set_requires_grad();
  const Tensor loss = sum(mul(x, w));  // mul saves x and w: dx = w
  // New values copied into w's storage, as loading a checkpoint does: a write in place.
  const float fresh[] = {4, 5, 6};
  std::copy(fresh, fresh + 3, w.data());
  w.mark_modified();
  try {
    loss.backward();
    ADD_FAILURE() << "backward used data changed since forward; x's gradient: " << x.grad().at({0}) << " ...";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const char* fragment : {"[backward]", "mul", "modified in place"})
      EXPECT_NE(msg.find(fragment), std::string::npos) << msg << " lacks " << fragment;
  }
  EXPECT_FALSE(x.has_grad());
  // A forward after the change saves the new values: its backward is fine.
  sum(mul(x, w)).backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{4, 5, 6}));
}

// Tensors that share storage share the count: a write through a detached handle is
// seen by the op that saved the original (exp saves its output).
TEST(Autograd, InPlaceWritesThroughAnyHandleAreSeen) {
  const Tensor x = Tensor::ones({2}).set_requires_grad();
  const Tensor y = exp(x);
  const Tensor loss = sum(reshape(y, {2, 1}));
  const Tensor handle = y.detach();
  const uint64_t before = handle.version();
  handle.data()[0] = 0.0f;
  handle.mark_modified();
  EXPECT_EQ(y.version(), before + 1);
  EXPECT_THROW(loss.backward(), Error);
  const Tensor fresh = sum(exp(x));
  fresh.backward();  // unchanged since its forward: fine
  EXPECT_FLOAT_EQ(x.grad().at({0}), std::exp(1.0f));
}

// A backward that took one input's gradient buffer while writing another's would,
// were both inputs one tensor, hold a stale overwrite flag and lose a contribution:
// InputGrads::write takes and writes a buffer in one step and refuses nesting.
TEST(Autograd, TakingAGradientBufferWhileWritingAnotherIsAnError) {
  const Tensor x = Tensor::ones({3}).set_requires_grad();
  const Tensor h = scale(x, 2.0f);
  Tensor out = Tensor::zeros({3});
  record(out, "both_at_once", {&h, &h}, [](const Tensor&, const InputGrads& in) {
    in.write(0, [&](float*, bool) { in.write(1, [](float*) {}); });
  });
  try {
    sum(out).backward();
    ADD_FAILURE() << "a buffer was taken while another was being written";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("both_at_once"), std::string::npos) << msg;
    EXPECT_NE(msg.find("while another is being written"), std::string::npos) << msg;
  }
}

TEST(Autograd, NoGradGuardRecordsNothing) {
  Tensor x = Tensor::ones({3}).set_requires_grad();
  {
    NoGradGuard guard;
    Tensor y = exp(x);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_TRUE(y.is_leaf());
  }
  EXPECT_TRUE(exp(x).requires_grad());
}

TEST(Autograd, AliasesShareDataAndGradient) {
  Tensor packed = Tensor::zeros({6}).set_requires_grad();
  Tensor left = packed.alias(0, {2}), right = packed.alias(2, {2, 2});
  sum(mul(right, Tensor::full({2, 2}, 3.0f))).backward();
  sum(left).backward();
  EXPECT_EQ(packed.grad().to_vector(), (std::vector<float>{1, 1, 3, 3, 3, 3}));
  right.data()[0] = 7.0f;
  EXPECT_EQ(packed.data()[2], 7.0f);
  EXPECT_THROW(packed.alias(5, {2}), Error);
}

TEST(Pool, SteadyStateReusesBuffers) {
  auto step = [] {
    Tensor x = Tensor::ones({64, 64}).set_requires_grad();
    sum(tanh(matmul(x, x))).backward();
  };
  step();
  step();
  const uint64_t fresh = pool::stats().fresh;
  for (int i = 0; i < 5; ++i) step();
  EXPECT_EQ(pool::stats().fresh, fresh);
}

// Caches are per thread: a buffer may be released by another thread than the one that
// took it, a thread reuses what it released, and a thread's cache goes when it ends.
TEST(Pool, BuffersCrossThreadsAndLeaveWithTheirThread) {
  const pool::Stats before = pool::stats();
  float* p = nullptr;
  std::thread([&] { p = pool::acquire(1000), p[999] = 1.0f; }).join();
  EXPECT_EQ(pool::stats().bytes_in_use, before.bytes_in_use + 1008 * sizeof(float));  // whole 64-byte lines
  std::thread([&] {
    pool::release(p, 1000);
    EXPECT_EQ(pool::stats().bytes_cached, before.bytes_cached + 1008 * sizeof(float));
    const uint64_t fresh = pool::stats().fresh;
    float* again = pool::acquire(1000);  // served from this thread's cache
    EXPECT_EQ(again, p);
    EXPECT_EQ(pool::stats().fresh, fresh);
    pool::release(again, 1000);
  }).join();
  const pool::Stats after = pool::stats();
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
  EXPECT_EQ(after.bytes_cached, before.bytes_cached);  // freed with the thread that held it
}

// end_step() frees what the thread did not ask for during the step, keep_step_sizes()
// what the last step did not ask for: a step's buffers stay, an evaluation's or a save's
// go (run on a thread of its own, whose cache holds only this test's buffers).
TEST(Pool, StepsKeepTheirBuffersAndOneOffsGo) {
  std::thread([] {
    const uint64_t cached = pool::stats().bytes_cached;
    const auto use = [](size_t n) { pool::release(pool::acquire(n), n); };
    const auto held = [cached] { return (pool::stats().bytes_cached - cached) / sizeof(float); };
    use(1008);  // an evaluation before any step
    pool::keep_step_sizes();
    EXPECT_EQ(held(), 0u);
    use(1008), use(4000);  // a step
    pool::end_step();
    EXPECT_EQ(held(), 1008u + 4000u);
    use(1008), use(5008);  // an evaluation, and a save's copy
    pool::keep_step_sizes();
    EXPECT_EQ(held(), 1008u + 4000u);  // the step's sizes
    const uint64_t fresh = pool::stats().fresh;
    use(1008), use(4000);  // the next step: served from the cache
    EXPECT_EQ(pool::stats().fresh, fresh);
    use(5008);
    pool::end_step();
    EXPECT_EQ(held(), 1008u + 4000u + 5008u);
    use(4000);
    pool::end_step();
    EXPECT_EQ(held(), 4000u);
    pool::end_step();
    EXPECT_EQ(held(), 0u);
  }).join();
}

// The high-water mark that bench_model reports as a step's memory: it follows the most
// in use at once, not the sum of what was ever taken, and restarts at reset_peak().
TEST(Pool, PeakIsTheMostInUseAtOnce) {
  pool::reset_peak();
  const uint64_t base = pool::stats().bytes_in_use;
  EXPECT_EQ(pool::stats().bytes_in_use_peak, base);
  float* a = pool::acquire(1008);
  float* b = pool::acquire(2000);  // 2000 floats: whole lines already
  pool::release(a, 1008);
  float* c = pool::acquire(16);
  EXPECT_EQ(pool::stats().bytes_in_use_peak, base + 3008 * sizeof(float));
  pool::release(b, 2000);
  pool::release(c, 16);
  EXPECT_EQ(pool::stats().bytes_in_use_peak, base + 3008 * sizeof(float));
  pool::reset_peak();
  EXPECT_EQ(pool::stats().bytes_in_use_peak, base);
}

}  // namespace
}  // namespace folio
