// oneDNN matmul against the plain reference, on ragged shapes and every layout, in
// fp32 and from bf16 operands.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support.h"
#include "autograd/kernels/matmul.h"
#include "base/rng.h"

namespace folio::kernels {
namespace {

std::vector<float> random_vector(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = rng.normal();
  return v;
}

// Random A, B, C (the accumulated-into output) and bias for a product.
struct Operands {
  std::vector<float> a, b, c, bias;
  explicit Operands(const Gemm& g)
      : a(random_vector((g.broadcast_a ? 1 : g.batch) * g.M * g.K, 1)),
        b(random_vector((g.broadcast_b ? 1 : g.batch) * g.K * g.N, 2)),
        c(random_vector(g.batch * g.M * g.N, 3)),
        bias(random_vector(g.N, 4)) {}
};

std::string describe(const Gemm& g, size_t element) {
  std::ostringstream s;
  s << "element " << element << " of batch " << g.batch << " M " << g.M << " N " << g.N << " K " << g.K << " ta "
    << g.trans_a << " tb " << g.trans_b << " bcast " << g.broadcast_a << g.broadcast_b << " acc " << g.accumulate << " relu " << g.relu;
  return s.str();
}

void expect_matches_reference(Gemm g, bool bias) {
  const Operands in(g);
  const float* bp = bias ? in.bias.data() : nullptr;
  std::vector<float> fast = in.c, slow = in.c;
  matmul(g, in.a.data(), in.b.data(), fast.data(), bp);
  matmul_reference(g, in.a.data(), in.b.data(), slow.data(), bp);
  for (size_t i = 0; i < fast.size(); ++i)
    ASSERT_NEAR(fast[i], slow[i], 1e-4f * (1.0f + std::abs(slow[i]))) << describe(g, i);
}

TEST(Matmul, OneDnnEqualsReferenceOnRaggedShapes) {
  // M = 1 rows take matmul_row: generation's shapes (a token through a Linear, one
  // query against 37 cached keys, its weights against the values). K = 0 is an empty
  // sum, which oneDNN refuses. The ReLU comes last, after the bias and the old C.
  const int64_t shapes[][4] = {{1, 1, 1, 1},   {1, 7, 13, 5},    {3, 7, 13, 5},  {4, 1, 9, 17}, {2, 33, 1, 65},
                               {1, 1, 384, 128}, {4, 1, 37, 32}, {4, 1, 32, 37}, {2, 3, 4, 0}};
  for (auto& s : shapes)
    for (int layout = 0; layout < 32; ++layout) {
      Gemm g;
      g.batch = s[0], g.M = s[1], g.N = s[2], g.K = s[3];
      g.trans_a = layout & 1, g.trans_b = layout & 2, g.accumulate = layout & 4, g.relu = layout & 16;
      expect_matches_reference(g, layout & 8);
    }
}

TEST(Matmul, BroadcastOperands) {
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (int side = 0; side < 2; ++side) {
        Gemm g;
        for (int64_t M : {5, 1}) {
          g.batch = 3, g.M = M, g.N = 6, g.K = 7;
          g.trans_a = ta, g.trans_b = tb;
          (side ? g.broadcast_a : g.broadcast_b) = true;
          expect_matches_reference(g, false);
        }
      }
}

TEST(Matmul, RepeatedShapeCreatesNoPrimitive) {
  Gemm g;
  g.M = 11, g.N = 12, g.K = 13;
  std::vector<float> a(11 * 13, 1.0f), b(13 * 12, 1.0f), c(11 * 12);
  matmul(g, a.data(), b.data(), c.data());
  const int64_t created = matmul_primitives_created();
  for (int i = 0; i < 3; ++i) matmul(g, a.data(), b.data(), c.data());
  EXPECT_EQ(matmul_primitives_created(), created);
  EXPECT_FLOAT_EQ(c[0], 13.0f);
}

// ---- bf16 operands

std::vector<bf16> bf16_of(const std::vector<float>& v) {
  std::vector<bf16> out(v.size());
  to_bf16(v.data(), out.data(), int64_t(v.size()));
  return out;
}
std::vector<float> float_of(const std::vector<bf16>& v) {
  std::vector<float> out;
  for (bf16 x : v) out.push_back(to_float(x));
  return out;
}
std::vector<float> abs_of(std::vector<float> v) {
  for (float& x : v) x = std::abs(x);
  return v;
}

// The bf16 product against two oracles, element by element, with scale = the same
// product over absolute values (sum_k |a_ik b_kj| + |bias_j| + |c_ij|):
//  * the reference on the operands rounded to bf16: only fp32 accumulation differs,
//    so within 1e-5 * scale. This pins layouts and rounding: fp32 operands (an
//    fp32 product, or truncation instead of rounding) are ~1e-3 off.
//  * the fp32 reference: rounding to 7 mantissa bits moves a value by at most 2^-8
//    of itself, so a product of two rounded values by 2^-7 (+ 2^-16): within 2^-7 * scale.
void expect_bf16_matches_reference(Gemm g, bool bias) {
  const Operands in(g);
  const auto a16 = bf16_of(in.a), b16 = bf16_of(in.b);
  const float* bp = bias ? in.bias.data() : nullptr;
  std::vector<float> fast = in.c, rounded = in.c, exact = in.c, scale = abs_of(in.c);
  matmul(g, a16.data(), b16.data(), fast.data(), bp);
  matmul_reference(g, float_of(a16).data(), float_of(b16).data(), rounded.data(), bp);
  matmul_reference(g, in.a.data(), in.b.data(), exact.data(), bp);
  const auto abs_bias = abs_of(in.bias);
  Gemm gs = g;
  gs.accumulate = true;  // |c| counts only when accumulating
  if (!g.accumulate) std::fill(scale.begin(), scale.end(), 0.0f);
  matmul_reference(gs, abs_of(in.a).data(), abs_of(in.b).data(), scale.data(), bias ? abs_bias.data() : nullptr);
  for (size_t i = 0; i < fast.size(); ++i) {
    ASSERT_NEAR(fast[i], rounded[i], 1e-5f * scale[i]) << "vs rounded operands: " << describe(g, i) << " bias " << bias;
    ASSERT_NEAR(fast[i], exact[i], 1.01f * std::ldexp(1.0f, -7) * scale[i]) << "vs fp32: " << describe(g, i);
  }
}

// Both conversions: the instruction's (when the CPU has it) and the plain loop's.
void expect_conversion(void (*convert)(const float*, bf16*, int64_t)) {
  const float inf = std::numeric_limits<float>::infinity();
  auto bits = [](uint32_t u) { return std::bit_cast<float>(u); };
  // {input, expected bf16 bits}
  const std::pair<float, uint16_t> cases[] = {
      {1.0f, 0x3f80},
      {bits(0x3f808000), 0x3f80},  // exactly half way, kept half even: down
      {bits(0x3f818000), 0x3f82},  // half way, kept half odd: up
      {bits(0x3f808001), 0x3f81},  // just above half: up
      {bits(0x3f807fff), 0x3f80},  // just below half: down
      {-2.5f, 0xc020},
      {bits(0x7f7fffff), 0x7f80},  // the largest float rounds to infinity
      {inf, 0x7f80},
      {-inf, 0xff80},
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {bits(0x00018000), 0x0000},  // subnormals flush to a signed zero, as vcvtneps2bf16 does
      {bits(0x80400000), 0x8000},
  };
  // Each case alone (the instruction's masked tail) and all at once.
  std::vector<float> in;
  for (const auto& [x, want] : cases) {
    bf16 y;
    convert(&x, &y, 1);
    EXPECT_EQ(uint16_t(y), want) << std::hex << "input bits 0x" << std::bit_cast<uint32_t>(x);
    in.push_back(x);
  }
  std::vector<bf16> out(in.size());
  convert(in.data(), out.data(), int64_t(in.size()));
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(uint16_t(out[i]), cases[i].second) << "case " << i << " in a run";
  // NaN stays NaN, including the one whose rounding would carry into infinity.
  for (const uint32_t nan : {0x7fc00000u, 0x7f800001u, 0xffffffffu, 0x7fffffffu}) {
    bf16 y;
    const float x = bits(nan);
    convert(&x, &y, 1);
    EXPECT_TRUE(std::isnan(to_float(y))) << std::hex << "input bits 0x" << nan;
  }
}

TEST(MatmulBf16, ConversionRoundsToNearestEven) {
  expect_conversion(to_bf16);
  expect_conversion(detail::to_bf16_plain);
  // A long (threaded, vectorised) run equals the plain loop.
  const auto v = random_vector(1000003, 9);
  const auto all = bf16_of(v);
  std::vector<bf16> plain(v.size());
  detail::to_bf16_plain(v.data(), plain.data(), int64_t(v.size()));
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(uint16_t(all[i]), uint16_t(plain[i])) << "element " << i;
}

// The model's products (config S: B*T = 768, C = 128, 4 heads of 32), in the layouts
// linear and attention use them forward and backward.
TEST(MatmulBf16, ModelShapesMatchReference) {
  FOLIO_SKIP_WITHOUT_BF16();
  struct Case {
    int64_t batch, M, N, K;
    bool ta, tb, ba, bb, acc, bias, relu = false;
  };
  const Case cases[] = {
      {1, 768, 384, 128, false, true, false, false, false, true},    // qkv: x @ W^T (+ b)
      {1, 768, 512, 128, false, true, false, false, false, true},    // fc
      {1, 768, 128, 512, false, false, false, false, true, false},   // dx += dy @ W
      {1, 512, 128, 768, true, false, false, false, true, false},    // dW^T += dy^T @ x (A transposed)
      {48, 64, 64, 32, false, true, false, false, false, false},     // q @ k^T per head
      {48, 64, 32, 64, false, false, false, false, false, false},    // att @ v
      {48, 64, 64, 32, true, false, false, false, true, false},      // A and C both batched, A^T
      {4, 64, 32, 128, false, true, false, true, false, true},       // batch against a broadcast weight
      {4, 128, 32, 64, true, false, true, false, true, false},       // broadcast A, transposed
      {3, 7, 13, 5, true, true, false, false, true, true},           // ragged, both transposed
      {1, 768, 512, 128, false, true, false, false, false, true, true},  // fc with its ReLU fused
  };
  for (const Case& c : cases) {
    Gemm g;
    g.batch = c.batch, g.M = c.M, g.N = c.N, g.K = c.K;
    g.trans_a = c.ta, g.trans_b = c.tb, g.broadcast_a = c.ba, g.broadcast_b = c.bb, g.accumulate = c.acc;
    g.relu = c.relu;
    expect_bf16_matches_reference(g, c.bias);
  }
}

TEST(MatmulBf16, EveryLayoutOnRaggedShapes) {
  FOLIO_SKIP_WITHOUT_BF16();
  const int64_t shapes[][4] = {{1, 1, 1, 1}, {3, 7, 13, 5}, {2, 33, 1, 65}};
  for (auto& s : shapes)
    for (int layout = 0; layout < 64; ++layout) {
      Gemm g;
      g.batch = s[0], g.M = s[1], g.N = s[2], g.K = s[3];
      g.trans_a = layout & 1, g.trans_b = layout & 2, g.accumulate = layout & 4, g.relu = layout & 32;
      g.broadcast_a = (layout & 24) == 8, g.broadcast_b = (layout & 24) == 16;
      expect_bf16_matches_reference(g, layout & 16 && !(layout & 8));
    }
}

TEST(MatmulBf16, SharesThePrimitiveCacheWithoutMixingTypes) {
  FOLIO_SKIP_WITHOUT_BF16();
  Gemm g;
  g.M = 9, g.N = 10, g.K = 11;
  std::vector<float> a(9 * 11, 1.0f + 1.0f / 256), b(11 * 10, 1.0f), c(9 * 10);
  const auto a16 = bf16_of(a), b16 = bf16_of(b);
  matmul(g, a.data(), b.data(), c.data());
  EXPECT_FLOAT_EQ(c[0], 11.0f * (1.0f + 1.0f / 256));  // fp32 keeps the 1/256
  matmul(g, a16.data(), b16.data(), c.data());
  EXPECT_FLOAT_EQ(c[0], 11.0f);  // bf16 has 7 mantissa bits: 1 + 2^-8 rounds to 1
  const int64_t created = matmul_primitives_created();
  for (int i = 0; i < 3; ++i) matmul(g, a16.data(), b16.data(), c.data());
  EXPECT_EQ(matmul_primitives_created(), created);
}

}  // namespace
}  // namespace folio::kernels
