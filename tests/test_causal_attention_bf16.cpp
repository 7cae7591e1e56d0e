// The causal attention op in bf16 (autograd/attention_slice_bf16.cpp): against a plain
// reference in double that rounds where the op rounds, near the fp32 op, the packed
// form equal to the per-head one; and its tiles (vdpbf16ps) against their plain loops.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "autograd/kernels/attention_tiles_bf16.h"
#include "autograd/kernels/dropout_mask.h"
#include "autograd/ops.h"
#include "autograd/pool.h"
#include "base/rng.h"

namespace folio {
namespace {

using kernels::bf16;
namespace tiles16 = kernels::attention_tiles_bf16;

double r16(double x) { return kernels::to_float(kernels::round_to_bf16(float(x))); }

// A result and, element by element, the same sums over absolute values: the scale its
// rounding errors are measured in.
struct Sums {
  std::vector<double> value, magnitude;
  explicit Sums(size_t n) : value(n), magnitude(n) {}
  void add(size_t i, double a, double b) { value[i] += a * b, magnitude[i] += std::fabs(a * b); }
};

struct Reference {
  Sums y, dq, dk, dv;
};

// Slices (S, T, hs) forward and backward in double, rounding to bf16 exactly where the op
// does: q (times scale), k, v and dy; the dropped weights pd before they multiply v and
// dy; ds before it multiplies k and q. The softmax and its backward are exact.
Reference reference(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dy, float scale,
                    const WeightDropout& drop) {
  const int64_t T = q.size(-2), hs = q.size(-1), S = q.numel() / (T * hs);
  const size_t n = size_t(q.numel());
  Reference ref{Sums(n), Sums(n), Sums(n), Sums(n)};
  const kernels::DropoutMask mask(drop.p, drop.seed);
  auto at = [&](const Tensor& x, int64_t s, int64_t t, int64_t c) { return double(x.data()[(s * T + t) * hs + c]); };
  for (int64_t s = 0; s < S; ++s) {
    std::vector<double> p(size_t(T * T), 0.0), pd(size_t(T * T), 0.0), ds(size_t(T * T), 0.0);
    for (int64_t i = 0; i < T; ++i) {
      double top = -std::numeric_limits<double>::infinity(), total = 0.0;
      for (int64_t j = 0; j <= i; ++j) {
        double score = 0.0;
        for (int64_t c = 0; c < hs; ++c) score += r16(scale * float(at(q, s, i, c))) * r16(at(k, s, j, c));
        p[i * T + j] = score;
        top = std::max(top, score);
      }
      for (int64_t j = 0; j <= i; ++j) total += p[i * T + j] = std::exp(p[i * T + j] - top);
      for (int64_t j = 0; j <= i; ++j) {
        p[i * T + j] /= total;
        const bool kept = drop.p == 0.0f || mask.kept(s * T * T + i * T + j);
        pd[i * T + j] = kept ? p[i * T + j] * (drop.p > 0.0f ? mask.keep_scale : 1.0f) : 0.0;
      }
      double D = 0.0;
      std::vector<double> dpd(size_t(i + 1));
      for (int64_t j = 0; j <= i; ++j) {
        for (int64_t c = 0; c < hs; ++c) dpd[j] += r16(at(dy, s, i, c)) * r16(at(v, s, j, c));
        D += pd[i * T + j] * dpd[j];
      }
      for (int64_t j = 0; j <= i; ++j) ds[i * T + j] = scale * (pd[i * T + j] * dpd[j] - p[i * T + j] * D);
    }
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j <= i; ++j)
        for (int64_t c = 0; c < hs; ++c) {
          const double pr = r16(pd[i * T + j]), dsr = r16(ds[i * T + j]);
          ref.y.add(size_t((s * T + i) * hs + c), pr, r16(at(v, s, j, c)));
          ref.dq.add(size_t((s * T + i) * hs + c), dsr, r16(at(k, s, j, c)));
          ref.dk.add(size_t((s * T + j) * hs + c), dsr, r16(at(q, s, i, c)));
          ref.dv.add(size_t((s * T + j) * hs + c), pr, r16(at(dy, s, i, c)));
        }
  }
  return ref;
}

// The largest |got - want| over its element's magnitude.
double worst_error(const Tensor& got, const Sums& want) {
  double worst = 0.0;
  for (int64_t i = 0; i < got.numel(); ++i)
    worst = std::max(worst, std::fabs(got.data()[i] - want.value[size_t(i)]) / (want.magnitude[size_t(i)] + 1e-30));
  return worst;
}

struct Result {
  Tensor y, dq, dk, dv;
};

Result run(const Shape& shape, float scale, WeightDropout drop, Precision precision, Tensor* dy_out = nullptr,
           std::vector<Tensor>* inputs = nullptr) {
  Rng r(31);
  Tensor q = Tensor::randn(shape, r).set_requires_grad(), k = Tensor::randn(shape, r).set_requires_grad(),
         v = Tensor::randn(shape, r).set_requires_grad();
  const Tensor dy = Tensor::randn(shape, r);
  Tensor y = causal_attention(q, k, v, scale, drop, precision);
  y.backward(dy);
  if (dy_out) *dy_out = dy;
  if (inputs) *inputs = {q.detach(), k.detach(), v.detach()};
  return {y.detach(), q.grad(), k.grad(), v.grad()};
}

// Within 3e-5 of the magnitude: fp32's summation error over up to a few hundred terms,
// where one wrong rounding point (pd or ds left fp32, or rounded twice) shows at ~1e-3.
void expect_matches_reference(const Shape& shape, float scale, WeightDropout drop = {}) {
  SCOPED_TRACE(::testing::Message() << "shape " << shape << " dropout " << drop.p);
  Tensor dy;
  std::vector<Tensor> in;
  const Result got = run(shape, scale, drop, Precision::bf16, &dy, &in);
  const Reference want = reference(in[0], in[1], in[2], dy, scale, drop);
  EXPECT_LT(worst_error(got.y, want.y), 3e-5) << "y";
  EXPECT_LT(worst_error(got.dq, want.dq), 3e-5) << "dq";
  EXPECT_LT(worst_error(got.dk, want.dk), 3e-5) << "dk";
  EXPECT_LT(worst_error(got.dv, want.dv), 3e-5) << "dv";
}

TEST(CausalAttentionBf16, MatchesItsReference) {
  expect_matches_reference({2, 2, 64, 32}, 1.0f / std::sqrt(32.0f));  // whole vectors
  expect_matches_reference({3, 37, 24}, 0.3f);                        // T and hs padded
  expect_matches_reference({2, 40, 16}, 0.25f, {0.3f, 77});           // weights' dropout
  expect_matches_reference({1, 1, 6}, 1.0f);                          // one position
  expect_matches_reference({2, 21, 7}, 0.4f);  // an odd hs, after wider rows on this thread's scratch
}

double relative_error(const Tensor& got, const Tensor& want) {
  double diff = 0.0, norm = 0.0;
  for (int64_t i = 0; i < got.numel(); ++i)
    diff += std::pow(double(got.data()[i]) - want.data()[i], 2), norm += std::pow(double(want.data()[i]), 2);
  return std::sqrt(diff / norm);
}

// Near the fp32 op (bf16 keeps 8 bits: ~0.3 % an element), and not equal to it.
TEST(CausalAttentionBf16, NearFp32) {
  for (const WeightDropout drop : {WeightDropout{}, WeightDropout{0.2f, 5}}) {
    const Result b = run({2, 3, 96, 64}, 0.125f, drop, Precision::bf16);
    const Result f = run({2, 3, 96, 64}, 0.125f, drop, Precision::fp32);
    const std::pair<const Tensor*, const Tensor*> pairs[] = {{&b.y, &f.y}, {&b.dq, &f.dq}, {&b.dk, &f.dk}, {&b.dv, &f.dv}};
    for (const auto& [got, want] : pairs) {
      const double e = relative_error(*got, *want);
      EXPECT_LT(e, 1e-2);
      EXPECT_GT(e, 1e-5) << "equal to fp32: the bf16 slices did not run";
    }
  }
}

// The packed op reads the same slices in place: equal to the op on per-head copies.
TEST(CausalAttentionBf16, PackedEqualsPerHead) {
  const int64_t B = 2, T = 37, nh = 3, hs = 24;
  const float scale = 0.2f;
  Rng r(8);
  const Tensor qkv0 = Tensor::randn({B, T, nh * 3 * hs}, r), dy = Tensor::randn({B, T, nh * hs}, r);
  Tensor got_y, got_g, want_y, want_g;
  for (const bool packed : {true, false}) {
    Tensor qkv = qkv0.detach().set_requires_grad();
    Tensor y;
    if (packed) {
      y = causal_attention_packed(qkv, nh, scale, {0.25f, 9}, Precision::bf16);
    } else {
      const Tensor k = select_heads(qkv, nh, hs, 0, 3 * hs), q = select_heads(qkv, nh, hs, hs, 3 * hs),
                   v = select_heads(qkv, nh, hs, 2 * hs, 3 * hs);
      y = reshape(permute(causal_attention(q, k, v, scale, {0.25f, 9}, Precision::bf16), {0, 2, 1, 3}), {B, T, nh * hs});
    }
    y.backward(dy);
    (packed ? got_y : want_y) = y.detach();
    (packed ? got_g : want_g) = qkv.grad();
  }
  for (int64_t i = 0; i < got_y.numel(); ++i) ASSERT_EQ(got_y.data()[i], want_y.data()[i]) << "y element " << i;
  for (int64_t i = 0; i < got_g.numel(); ++i) ASSERT_EQ(got_g.data()[i], want_g.data()[i]) << "dqkv element " << i;
}

TEST(CausalAttentionBf16, CountsItsCallsByPrecision) {
  const AttentionCalls before = causal_attention_calls();
  run({1, 16, 16}, 0.25f, {}, Precision::bf16);
  run({1, 16, 16}, 0.25f, {}, Precision::fp32);
  const AttentionCalls after = causal_attention_calls();
  EXPECT_EQ(after.bf16 - before.bf16, 1);
  EXPECT_EQ(after.fp32 - before.fp32, 1);
}

// What a forward keeps for its backward: the fp32 form the (T, T) weights of every
// slice, the bf16 form only two numbers a row (its backward recomputes the weights).
TEST(CausalAttentionBf16, KeepsTheSoftmaxStatisticsNotTheWeights) {
  const int64_t slices = 4, T = 256, hs = 32;
  const uint64_t weights_bytes = slices * T * T * sizeof(float), y_bytes = slices * T * hs * sizeof(float);
  for (const Precision precision : {Precision::fp32, Precision::bf16}) {
    Rng r(3);
    const Tensor q = Tensor::randn({slices, T, hs}, r).set_requires_grad();
    const Tensor k = Tensor::randn({slices, T, hs}, r), v = Tensor::randn({slices, T, hs}, r);
    const uint64_t before = pool::stats().bytes_in_use;
    const Tensor y = causal_attention(q, k, v, 0.2f, {}, precision);
    const uint64_t held = pool::stats().bytes_in_use - before - y_bytes;  // what the graph keeps
    SCOPED_TRACE(precision == Precision::bf16 ? "bf16" : "fp32");
    if (precision == Precision::fp32) {
      EXPECT_GE(held, weights_bytes);
    } else {
      EXPECT_LE(held, 2 * slices * T * sizeof(float) + 4096);
    }
  }
}

// The op reads only what it wrote in the same call (it no longer clears the columns
// past each row's visible keys): with every thread's scratch and the pool's free buffers
// left holding NaN, padded shapes give what they gave before, bit for bit.
TEST(CausalAttentionBf16, ReadsNothingItDidNotWrite) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const Precision precision : {Precision::fp32, Precision::bf16})
    for (const WeightDropout drop : {WeightDropout{}, WeightDropout{0.3f, 4}})
      for (const Shape& shape : {Shape{4, 37, 24}, Shape{4, 21, 7}, Shape{2, 2, 64, 32}}) {
        SCOPED_TRACE(::testing::Message() << "shape " << shape << " dropout " << drop.p << " bf16 "
                                          << (precision == Precision::bf16));
        const Result clean = run(shape, 0.3f, drop, precision);
        {  // NaN scores at a longer context, on every thread's scratch
          const Tensor q = Tensor::full({8, 150, 40}, nan).set_requires_grad();
          causal_attention(q, q, q, 0.3f, drop, precision).backward(Tensor::full({8, 150, 40}, nan));
        }
        {  // free NaN buffers of every size the op asks the pool for: (slices, what it keeps)
          const int64_t T = shape[-2], Tp = (T + 15) / 16 * 16, slices = shape.numel() / (T * shape.last());
          std::vector<Tensor> held;  // several of each: the op's own inputs may take one first
          for (int copy = 0; copy < 4; ++copy)
            for (const int64_t kept : {Tp * Tp, 2 * Tp}) held.push_back(Tensor::full({slices, kept}, nan));
        }
        const Result again = run(shape, 0.3f, drop, precision);
        const std::pair<const Tensor*, const Tensor*> pairs[] = {
            {&again.y, &clean.y}, {&again.dq, &clean.dq}, {&again.dk, &clean.dk}, {&again.dv, &clean.dv}};
        for (const auto& [got, want] : pairs)
          for (int64_t i = 0; i < got->numel(); ++i) ASSERT_EQ(got->data()[i], want->data()[i]) << "element " << i;
      }
}

std::vector<bf16> random_bf16(size_t n, Rng& r) {
  std::vector<bf16> x(n);
  for (bf16& e : x) e = kernels::round_to_bf16(r.normal());
  return x;
}

// vdpbf16ps against the plain loops that spell out its arithmetic: wide and narrow
// tiles, a range of pairs that starts inside, stored and added.
TEST(AttentionTilesBf16, NativeEqualsPlain) {
  if (!tiles16::native()) GTEST_SKIP() << "this CPU has no AVX512-BF16: the plain loops are the only form";
  Rng r(4);
  const int64_t pairs = 40, ars = 44, n = 48, ldb = 56;
  const std::vector<bf16> a = random_bf16(size_t(2 * 8 * ars), r), b = random_bf16(size_t(2 * pairs * ldb), r);
  for (const bool add : {false, true}) {
    std::vector<float> got(size_t(8 * n), 1.5f), want(size_t(8 * n), 1.5f);
    tiles16::tiles(a.data(), ars, b.data(), ldb, 3, pairs, got.data(), n, n, add);
    tiles16::detail::tiles_plain(a.data(), ars, b.data(), ldb, 3, pairs, want.data(), n, n, add);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5f * (1.0f + std::fabs(want[i]))) << i;
  }
}

// The interleaving rounder: to_bf16's rounding (ties to even, NaN kept, subnormals
// flushed), element 2j from the first row and 2j + 1 from the second (or zero).
TEST(AttentionTilesBf16, PairRowsInterleaveAndRound) {
  std::vector<float> x0(37), x1(37);
  Rng r(6);
  for (size_t j = 0; j < x0.size(); ++j) x0[j] = r.normal(), x1[j] = r.normal();
  x0[3] = std::nanf(""), x1[4] = std::numeric_limits<float>::infinity(), x0[5] = 1e-40f, x1[6] = 1.00390625f;
  for (const bool second : {true, false}) {
    std::vector<bf16> got(2 * x0.size()), plain(2 * x0.size());
    tiles16::round_pair_rows(x0.data(), second ? x1.data() : nullptr, int64_t(x0.size()), got.data());
    tiles16::detail::round_pair_rows_plain(x0.data(), second ? x1.data() : nullptr, int64_t(x0.size()), plain.data());
    for (size_t j = 0; j < x0.size(); ++j) {
      EXPECT_EQ(got[2 * j], kernels::round_to_bf16(x0[j])) << j;
      EXPECT_EQ(got[2 * j + 1], second ? kernels::round_to_bf16(x1[j]) : bf16(0)) << j;
      EXPECT_EQ(got[2 * j], plain[2 * j]) << j;
      EXPECT_EQ(got[2 * j + 1], plain[2 * j + 1]) << j;
    }
  }
}

}  // namespace
}  // namespace folio
