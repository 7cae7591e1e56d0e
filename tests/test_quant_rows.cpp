// The activation rows of the integer product (quantize_rows_q8, infer/kernels/
// quant_rows.cpp): each vector loop this CPU runs writes the plain loop's bytes and
// scales exactly, on ragged shapes (K not a multiple of 32, nor of the 8 or 16 lanes of
// a vector) and on the values where a loop could differ: ties to even, NaN, infinities,
// subnormal and all-zero blocks.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "infer/kernels/quant.h"

namespace folio::kernels {
namespace {

// x (M, K): normal values of a few magnitudes, and in some blocks special ones.
std::vector<float> activations(int64_t M, int64_t K, uint32_t seed, bool special) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(size_t(M * K));
  for (float& v : x) v = normal(gen) * std::pow(10.0f, float(int(gen() % 7)) - 3.0f);
  if (!special) return x;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float specials[] = {nan, -nan, inf, -inf, 0.0f, -0.0f, 1e-40f, -3e-39f, 1e-44f, 2.5f, -2.5f, 3.5f, 126.5f};
  for (size_t i = 0; i < x.size(); i += 1 + gen() % 23) x[i] = specials[gen() % std::size(specials)];
  if (K >= 64) {  // row 0's block 1: all zero (scale 0); its last block ties: amax 127, so x * inv = x
    std::fill(x.begin() + 32, x.begin() + 64, 0.0f);
    for (int64_t k = (K - 1) / 32 * 32; k < K; ++k) x[size_t(k)] = float(k % 64) - 31.5f;
    x[size_t((K - 1) / 32 * 32)] = 127.0f;
  }
  if (M >= 2 && K >= 32)  // row 1's block 0: subnormals only, whose scale's inverse overflows
    for (int64_t k = 0; k < 32; ++k) x[size_t(K + k)] = float(k - 16) * 1e-41f;
  return x;
}

TEST(QuantRows, EveryLoopWritesThePlainLoopsBytes) {
  const std::vector<RowQuantizer>& loops = row_quantizers();
  ASSERT_EQ(std::string(loops.front().name), "plain");
  std::vector<std::string> names, want = {"plain"};
  for (const RowQuantizer& loop : loops) names.push_back(loop.name);
  if (detail::avx2_fma_f16c()) want.push_back("avx2");
  if (detail::avx512_bw_vl()) want.push_back("avx512");
  EXPECT_EQ(names, want);
  for (int64_t M : {1, 2, 5})
    for (int64_t K : {1, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 768, 3077})
      for (const bool special : {false, true}) {
        const int64_t nb = q8_blocks(K);
        const std::vector<float> x = activations(M, K, uint32_t(M * 7919 + K), special);
        std::vector<int8_t> want_q(size_t(M * nb * 32), 99);  // (M, nb * 32), 99: not written
        std::vector<float> want_scale(size_t(M * nb), -1.0f);  // (M, nb)
        detail::quantize_rows_q8_plain(x.data(), M, K, want_q.data(), want_scale.data());
        for (const RowQuantizer& loop : loops) {
          std::vector<int8_t> q(want_q.size(), 99);
          std::vector<float> scale(want_scale.size(), -1.0f);
          loop.rows(x.data(), M, K, q.data(), scale.data());
          const std::string where = std::string(loop.name) + " M " + std::to_string(M) + " K " + std::to_string(K) +
                                    (special ? " special values" : "");
          for (size_t i = 0; i < q.size(); ++i) ASSERT_EQ(q[i], want_q[i]) << where << " quant " << i;
          for (size_t i = 0; i < scale.size(); ++i)  // bit for bit (a NaN scale would fail ==)
            ASSERT_EQ(std::bit_cast<uint32_t>(scale[i]), std::bit_cast<uint32_t>(want_scale[i]))
                << where << " scale " << i;
        }
      }
}

// What the special values quantize to, so that the comparison above is not between two
// loops that agree on something wrong: NaN and padding 0, ties to even, a block with an
// infinity all 0 but the infinity (NaN * 0 -> 0, then clamped), subnormals clamped.
TEST(QuantRows, SpecialValuesQuantizeAsThePlainLoopSays) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x(32 * 3 + 5, 0.0f);  // (1, 101): three whole blocks and a ragged one
  x[0] = 127.0f, x[1] = 2.5f, x[2] = 3.5f, x[3] = -2.5f, x[4] = nan, x[5] = -126.5f;
  x[32] = inf, x[33] = 1.0f, x[34] = -inf;
  x[64] = 1e-38f, x[65] = -1e-38f;  // scale 1e-38 / 127 (subnormal), inverse 1.27e40 -> inf: +-127
  x[96] = -4.0f, x[100] = 2.0f;
  for (const RowQuantizer& loop : row_quantizers()) {
    std::vector<int8_t> q(4 * 32, 99);
    std::vector<float> scale(4, -1.0f);
    loop.rows(x.data(), 1, int64_t(x.size()), q.data(), scale.data());
    SCOPED_TRACE(loop.name);
    EXPECT_EQ(scale[0], 1.0f);
    EXPECT_EQ(std::vector<int>(q.begin(), q.begin() + 7), (std::vector<int>{127, 2, 4, -2, 0, -126, 0}));
    EXPECT_EQ(scale[1], inf);
    EXPECT_EQ(std::vector<int>(q.begin() + 32, q.begin() + 36), (std::vector<int>{0, 0, 0, 0}));
    EXPECT_EQ(q[64], 127);
    EXPECT_EQ(q[65], -127);
    EXPECT_EQ(scale[3], 4.0f / 127.0f);
    EXPECT_EQ(q[96], -127);
    EXPECT_EQ(q[100], 64);
    for (int i = 101; i < 128; ++i) EXPECT_EQ(q[size_t(i)], 0) << "padding " << i;
  }
}

}  // namespace
}  // namespace folio::kernels
