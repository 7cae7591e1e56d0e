// oneDNN matmul against the plain reference, on ragged shapes and every layout.
#include <gtest/gtest.h>

#include <vector>

#include "autograd/kernels/matmul.h"
#include "autograd/rng.h"

namespace folio::kernels {
namespace {

std::vector<float> random_vector(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = rng.normal();
  return v;
}

void expect_matches_reference(Gemm g, bool bias) {
  const int64_t na = (g.broadcast_a ? 1 : g.batch) * g.M * g.K;
  const int64_t nb = (g.broadcast_b ? 1 : g.batch) * g.K * g.N;
  const auto a = random_vector(na, 1), b = random_vector(nb, 2), c0 = random_vector(g.batch * g.M * g.N, 3);
  const auto bv = random_vector(g.N, 4);
  std::vector<float> fast = c0, slow = c0;
  matmul(g, a.data(), b.data(), fast.data(), bias ? bv.data() : nullptr);
  matmul_reference(g, a.data(), b.data(), slow.data(), bias ? bv.data() : nullptr);
  for (size_t i = 0; i < fast.size(); ++i)
    ASSERT_NEAR(fast[i], slow[i], 1e-4f * (1.0f + std::abs(slow[i])))
        << "element " << i << " of batch " << g.batch << " M " << g.M << " N " << g.N << " K " << g.K
        << " ta " << g.trans_a << " tb " << g.trans_b << " bcast " << g.broadcast_a << g.broadcast_b
        << " acc " << g.accumulate;
}

TEST(Matmul, OneDnnEqualsReferenceOnRaggedShapes) {
  // M = 1 rows take matmul_row: generation's shapes (a token through a Linear, one
  // query against 37 cached keys, its weights against the values).
  const int64_t shapes[][4] = {{1, 1, 1, 1},   {1, 7, 13, 5},   {3, 7, 13, 5},  {4, 1, 9, 17},
                               {2, 33, 1, 65}, {1, 1, 384, 128}, {4, 1, 37, 32}, {4, 1, 32, 37}};
  for (auto& s : shapes)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (int acc = 0; acc < 2; ++acc)
          for (int bias = 0; bias < 2; ++bias) {
            Gemm g;
            g.batch = s[0], g.M = s[1], g.N = s[2], g.K = s[3];
            g.trans_a = ta, g.trans_b = tb, g.accumulate = acc;
            expect_matches_reference(g, bias);
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

}  // namespace
}  // namespace folio::kernels
