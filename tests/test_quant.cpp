// Weights stored small (infer/kernels/quant.h): the fp16 scales (autograd/kernels/
// fp16.h) against F16C, Q8_0 quantization of weights and of activation rows, and every
// product (AVX2, plain; fp32 or int8 activations) against its reference in double, on
// ragged shapes: K not a multiple of 32 (nor of 8), one row and several, N not a
// multiple of the four rows the AVX2 products take at a time nor of the 8 of the
// decoder's repacked blocks.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <bit>
#include <cstring>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "autograd/kernels/fp16.h"
#include "infer/kernels/quant.h"

namespace folio::kernels {
namespace {

__attribute__((target("f16c"))) uint16_t f16c_from(float x) { return _cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT); }
__attribute__((target("f16c"))) float f16c_to(uint16_t h) { return _cvtsh_ss(h); }

TEST(Quant, Fp16ConversionsAreF16Cs) {
  if (!detail::has_f16c()) GTEST_SKIP() << "no F16C on this CPU to compare with";
  for (uint32_t h = 0; h < 65536; ++h) {  // every half
    const float got = fp16_to_float(uint16_t(h)), want = f16c_to(uint16_t(h));
    if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << h;
    else ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << "half " << h;
  }
  std::mt19937 gen(7);
  std::vector<float> xs = {0.0f, -0.0f, 1.0f, 65504.0f, 65520.0f, 1e9f, -1e9f, 6.1e-5f, 5.96e-8f, 2.9e-8f, 3.0e-8f,
                           1e-12f, INFINITY, -INFINITY};
  for (int i = 0; i < 200000; ++i) xs.push_back(std::bit_cast<float>(uint32_t(gen())));  // every exponent
  for (float x : xs) {
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(fp16_to_float(fp16_from_float(x))));
      continue;
    }
    ASSERT_EQ(fp16_from_float(x), f16c_from(x)) << x;
  }
}

std::vector<float> randoms(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(gen);
  return v;
}

TEST(Quant, Q8BlocksRoundEachWeightToItsBlocksStep) {
  for (int64_t K : {1, 31, 32, 33, 100}) {
    std::vector<float> w = randoms(K, uint32_t(K));
    if (K > 40) std::fill(w.begin() + 32, w.begin() + 64, 0.0f);  // an all-zero block: scale 0
    std::vector<BlockQ8> blocks(static_cast<size_t>(q8_blocks(K)));
    quantize_q8(w.data(), K, blocks.data());
    std::vector<float> back(static_cast<size_t>(K));
    dequantize_q8(blocks.data(), K, back.data());
    for (int64_t b = 0; b < q8_blocks(K); ++b) {
      float amax = 0.0f;
      for (int64_t k = b * 32; k < std::min(K, b * 32 + 32); ++k) amax = std::max(amax, std::abs(w[size_t(k)]));
      const float step = fp16_to_float(blocks[size_t(b)].scale);
      EXPECT_NEAR(step, amax / 127.0f, amax / 127.0f * 1e-3f) << "K " << K << " block " << b;
      for (int64_t k = b * 32; k < std::min(K, b * 32 + 32); ++k)
        EXPECT_LE(std::abs(back[size_t(k)] - w[size_t(k)]), 0.5f * step + 1e-3f * step) << "K " << K << " k " << k;
      for (int64_t i = K - b * 32; i < 32; ++i) EXPECT_EQ(blocks[size_t(b)].q[i], 0) << "padding of K " << K;
      for (int8_t q : blocks[size_t(b)].q) EXPECT_GE(q, -127);
    }
  }
}

using RowsFn = void (*)(const BlockQ8*, const float*, float*, int64_t, int64_t, int64_t, const float*);
using Bf16Fn = void (*)(const bf16*, const float*, float*, int64_t, int64_t, int64_t, const float*);

struct Shape {
  int64_t M, N, K;
};
const Shape kShapes[] = {{1, 1, 1}, {1, 7, 31}, {1, 4, 32}, {3, 5, 33}, {1, 65, 100}, {5, 9, 256}, {2, 3, 517}};

// |got - want| within float rounding of the terms' magnitudes (sum |w x|).
void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::vector<float>& magnitude,
                  const char* what, Shape s) {
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-5f * magnitude[i] + 1e-7f)
        << what << " (M, N, K) = (" << s.M << ", " << s.N << ", " << s.K << ") at " << i;
}

// Sum |w x| + |bias| of each output, from the weights as dequantized (W (N, K)).
std::vector<float> magnitudes(const std::vector<float>& W, const std::vector<float>& x, const std::vector<float>& bias,
                              Shape s) {
  std::vector<float> m(static_cast<size_t>(s.M * s.N));
  for (int64_t i = 0; i < s.M; ++i)
    for (int64_t n = 0; n < s.N; ++n) {
      double a = std::abs(bias[size_t(n)]);
      for (int64_t k = 0; k < s.K; ++k) a += std::abs(double(W[size_t(n * s.K + k)]) * x[size_t(i * s.K + k)]);
      m[size_t(i * s.N + n)] = float(a);
    }
  return m;
}

// Every kernel's (M, N) outputs against the reference's, without a bias and with one.
template <class Stored>
void expect_products(const std::vector<std::pair<const char*, void (*)(const Stored*, const float*, float*, int64_t,
                                                                        int64_t, int64_t, const float*)>>& kernels,
                     void (*reference)(const Stored*, const float*, float*, int64_t, int64_t, int64_t, const float*),
                     const Stored* W, const std::vector<float>& x, const std::vector<float>& bias,
                     const std::vector<float>& mag, Shape s) {
  for (const float* b : {static_cast<const float*>(nullptr), bias.data()}) {
    std::vector<float> want(static_cast<size_t>(s.M * s.N)), got(want.size());  // (M, N)
    reference(W, x.data(), want.data(), s.M, s.N, s.K, b);
    for (const auto& [name, fn] : kernels) {
      std::fill(got.begin(), got.end(), NAN);
      fn(W, x.data(), got.data(), s.M, s.N, s.K, b);
      expect_close(got, want, mag, name, s);
    }
  }
}

TEST(Quant, Q8ProductsMatchTheReference) {
  std::vector<std::pair<const char*, RowsFn>> kernels = {{"plain", detail::q8_rows_plain}, {"chosen", q8_rows}};
  if (detail::avx2_fma_f16c()) kernels.push_back({"avx2", detail::q8_rows_avx2});
  for (const Shape s : kShapes) {
    const std::vector<float> w = randoms(s.N * s.K, 1, 0.05f), x = randoms(s.M * s.K, 2), bias = randoms(s.N, 3);
    const int64_t nb = q8_blocks(s.K);
    std::vector<BlockQ8> W(static_cast<size_t>(s.N * nb));
    for (int64_t n = 0; n < s.N; ++n) quantize_q8(w.data() + n * s.K, s.K, W.data() + n * nb);
    std::vector<float> dq(w.size());
    for (int64_t n = 0; n < s.N; ++n) dequantize_q8(W.data() + n * nb, s.K, dq.data() + n * s.K);
    const std::vector<float> mag = magnitudes(dq, x, bias, s);
    expect_products(kernels, detail::q8_rows_reference, W.data(), x, bias, mag, s);
  }
}

TEST(Quant, Bf16ProductsMatchTheReference) {
  std::vector<std::pair<const char*, Bf16Fn>> kernels = {{"plain", detail::bf16_rows_plain}, {"chosen", bf16_rows}};
  if (detail::avx2_fma_f16c()) kernels.push_back({"avx2", detail::bf16_rows_avx2});
  for (const Shape s : kShapes) {
    const std::vector<float> w = randoms(s.N * s.K, 4, 0.05f), x = randoms(s.M * s.K, 5), bias = randoms(s.N, 6);
    std::vector<bf16> W(w.size());
    to_bf16(w.data(), W.data(), int64_t(w.size()));
    std::vector<float> wide(w.size());
    for (size_t i = 0; i < w.size(); ++i) wide[i] = to_float(W[i]);
    const std::vector<float> mag = magnitudes(wide, x, bias, s);
    expect_products(kernels, detail::bf16_rows_reference, W.data(), x, bias, mag, s);
  }
}

// The activations of the integer product: each row's blocks on the same grid as the
// weights', rounded to the nearest of their own scale's steps.
TEST(Quant, ActivationRowsRoundEachValueToItsBlocksStep) {
  for (int64_t K : {1, 31, 32, 33, 100}) {
    const int64_t M = 3, nb = q8_blocks(K);
    std::vector<float> x = randoms(M * K, uint32_t(K + 11), 3.0f);
    if (K > 40) std::fill(x.begin() + K + 32, x.begin() + K + 64, 0.0f);  // row 1's block 1 all zero: scale 0
    std::vector<int8_t> q(size_t(M * nb * 32), 99);  // (M, nb * 32), 99: not written
    std::vector<float> scale(size_t(M * nb));        // (M, nb)
    quantize_rows_q8(x.data(), M, K, q.data(), scale.data());
    for (int64_t m = 0; m < M; ++m)
      for (int64_t b = 0; b < nb; ++b) {
        const float d = scale[size_t(m * nb + b)];
        float amax = 0.0f;
        for (int64_t k = b * 32; k < std::min(K, b * 32 + 32); ++k)
          amax = std::max(amax, std::abs(x[size_t(m * K + k)]));
        EXPECT_FLOAT_EQ(d, amax / 127.0f) << "K " << K << " row " << m << " block " << b;
        for (int64_t i = 0; i < 32; ++i) {
          const int8_t qi = q[size_t((m * nb + b) * 32 + i)];
          EXPECT_GE(qi, -127);
          if (b * 32 + i >= K) EXPECT_EQ(qi, 0) << "padding of K " << K;
          else EXPECT_LE(std::abs(d * qi - x[size_t(m * K + b * 32 + i)]), 0.5f * d * (1 + 1e-5f)) << K << " " << i;
        }
      }
  }
}

// The integer product on the decoder's layout (BlockQ8x8) behind the reference's
// signature: W repacked, then every group at once, or in two ranges (as two threads
// split it).
template <bool kSplit>
void repacked(Q8x8Rows* fn, const BlockQ8* W, const int8_t* xq, const float* xs, float* y, int64_t M, int64_t N,
              int64_t K, const float* bias) {
  std::vector<BlockQ8x8> P(size_t(q8x8_groups(N) * q8_blocks(K)));  // (groups, nb)
  repack_q8x8(W, N, K, P.data());
  const int64_t G = q8x8_groups(N), half = kSplit ? G / 2 : G;
  fn(P.data(), xq, xs, y, M, N, K, bias, 0, half);
  if (half < G) fn(P.data(), xq, xs, y, M, N, K, bias, half, G);
}

// Each kernel the CPU has is on the list, and q8x8_rows runs the last (the fastest).
TEST(Quant, IntegerKernelsAreTheOnesThisCpuRuns) {
  std::vector<std::string> names;
  for (const IntegerKernel& k : integer_kernels()) names.push_back(k.name);
  std::vector<std::string> want = {"plain"};
  if (detail::avx2_fma_f16c()) want.push_back("avx2");
  if (detail::avx512_vnni()) want.push_back("vnni");
  EXPECT_EQ(names, want);
  for (const std::string& name : names) EXPECT_EQ(find_integer_kernel(name)->name, name);
  EXPECT_EQ(find_integer_kernel("amx"), nullptr);
}

// Rows of the repacked blocks come back as the blocks they were made from, one at a
// time and a range of groups at a time, and the padding rows of the last group are
// zeros (and are not written back as rows).
TEST(Quant, RepackedBlocksKeepEachRow) {
  for (const Shape s : kShapes) {
    const int64_t nb = q8_blocks(s.K), G = q8x8_groups(s.N);
    const std::vector<float> w = randoms(s.N * s.K, 10, 0.05f);
    std::vector<BlockQ8> W(static_cast<size_t>(s.N * nb));  // (N, nb)
    for (int64_t n = 0; n < s.N; ++n) quantize_q8(w.data() + n * s.K, s.K, W.data() + n * nb);
    std::vector<BlockQ8x8> P(size_t(G * nb));  // (G, nb)
    std::memset(P.data(), 0x5A, P.size() * sizeof(BlockQ8x8));  // not zero: the padding must be written
    repack_q8x8(W.data(), s.N, s.K, P.data());
    std::vector<float> want(size_t(s.K)), got(want.size());  // (K)
    for (int64_t n = 0; n < s.N; ++n) {
      dequantize_q8(W.data() + n * nb, s.K, want.data());
      dequantize_q8x8_row(P.data(), n, s.K, got.data());
      ASSERT_EQ(got, want) << "row " << n << " of N " << s.N << " K " << s.K;
    }
    // Groups widened together (a prompt's tiles), the chosen kernel and the plain one,
    // all groups and a range that starts past the first: the same rows.
    for (const auto& [name, widen] : {std::pair{"chosen", &dequantize_q8x8_groups},
                                      std::pair{"plain", &detail::dequantize_q8x8_groups_plain}})
      for (const int64_t first : {int64_t(0), G / 2}) {
        std::vector<float> rows(size_t((G - first) * kQ8Group * s.K), -7.0f);  // (rows, K)
        widen(P.data(), first, G, s.N, s.K, rows.data());
        for (int64_t n = first * kQ8Group; n < s.N; ++n) {
          dequantize_q8(W.data() + n * nb, s.K, want.data());
          const float* row = rows.data() + (n - first * kQ8Group) * s.K;
          ASSERT_EQ(std::vector<float>(row, row + s.K), want)
              << name << ": row " << n << " of groups " << first << ".." << G << ", N " << s.N << " K " << s.K;
        }
        for (size_t i = size_t((s.N - first * kQ8Group) * s.K); i < rows.size(); ++i)
          ASSERT_EQ(rows[i], -7.0f) << name << ": wrote past row N " << s.N;
      }
    for (int64_t n = s.N; n < G * kQ8Group; ++n)
      for (int64_t b = 0; b < nb; ++b) {
        const BlockQ8x8& blk = P[size_t((n / kQ8Group) * nb + b)];
        ASSERT_EQ(blk.scale[n % kQ8Group], 0) << "padding row " << n;
        for (int64_t i = 0; i < kQ8Block; ++i) ASSERT_EQ(blk.at(n % kQ8Group, i), 0) << "padding row " << n;
      }
  }
}

// Every integer kernel this CPU runs (plain, AVX2, AVX-512 VNNI) and the chosen one,
// against the reference (both operands dequantized, sums in double: within 1e-5 of
// sum |w x|, the int32 block sums being exact in both) for M = 1..20 rows (a decode
// step's streams, and prompts' panels of 4 and 8 rows with ragged tails, and of 16
// and more, where VNNI takes two groups of weight rows at once) on ragged K
// and N, over all groups at once and in two ranges; the vector kernels against AVX2's
// bit for bit; and the reference against the fp32-activation product, from which it
// may differ by the activations' rounding alone: at most half an activation step
// times sum |w| per block.
TEST(Quant, IntegerProductsMatchTheReference) {
  std::vector<std::pair<std::string, Q8x8Rows*>> kernels = {{"chosen", q8x8_rows}};
  for (const IntegerKernel& k : integer_kernels()) kernels.push_back({k.name, k.rows});
  std::vector<Shape> shapes(std::begin(kShapes), std::end(kShapes));
  for (int64_t M = 1; M <= 20; ++M) shapes.push_back({M, 3 + M % 5, 16 + 37 * M});
  for (int64_t M = 1; M <= 9; M += 2)  // N around and past the repacked groups of 8
    for (int64_t N : {int64_t(8), int64_t(9), int64_t(15), int64_t(16), int64_t(17), 23 + 8 * M}) shapes.push_back({M, N, 33 + 61 * M});
  shapes.push_back({1, 6, 512});
  shapes.push_back({37, 21, 4000});  // more rows than a tile of 128 KiB of quants holds (32)
  for (int64_t N : {int64_t(16), int64_t(17), int64_t(40), int64_t(57)})  // 16 rows and more: VNNI's pairs of groups
    for (int64_t M : {int64_t(16), int64_t(29)}) shapes.push_back({M, N, 96 + N});
  for (const Shape s : shapes) {
    const int64_t nb = q8_blocks(s.K);
    const std::vector<float> w = randoms(s.N * s.K, 7, 0.05f), x = randoms(s.M * s.K, 8), bias = randoms(s.N, 9);
    std::vector<BlockQ8> W(static_cast<size_t>(s.N * nb));  // (N, nb)
    for (int64_t n = 0; n < s.N; ++n) quantize_q8(w.data() + n * s.K, s.K, W.data() + n * nb);
    std::vector<int8_t> xq(size_t(s.M * nb * 32));  // (M, nb * 32)
    std::vector<float> xs(size_t(s.M * nb));        // (M, nb)
    quantize_rows_q8(x.data(), s.M, s.K, xq.data(), xs.data());
    std::vector<float> dw(w.size()), dx(x.size());  // both dequantized: (N, K), (M, K)
    for (int64_t n = 0; n < s.N; ++n) dequantize_q8(W.data() + n * nb, s.K, dw.data() + n * s.K);
    for (int64_t k = 0; k < s.M * s.K; ++k)
      dx[size_t(k)] = xs[size_t(k / s.K * nb + k % s.K / 32)] * xq[size_t(k / s.K * nb * 32 + k % s.K)];
    const std::vector<float> mag = magnitudes(dw, dx, bias, s);
    for (const float* b : {static_cast<const float*>(nullptr), bias.data()}) {
      std::vector<float> want(size_t(s.M * s.N)), got(want.size()), fp32x(want.size());  // (M, N)
      detail::q8q8_rows_reference(W.data(), xq.data(), xs.data(), want.data(), s.M, s.N, s.K, b);
      // The vector kernels' int32 block sums are exact and their float steps the same
      // (widen, scale, fused add), so they agree bit for bit with AVX2's.
      std::vector<float> avx2;  // (M, N)
      if (const IntegerKernel* k = find_integer_kernel("avx2")) {
        avx2.resize(want.size());
        repacked<false>(k->rows, W.data(), xq.data(), xs.data(), avx2.data(), s.M, s.N, s.K, b);
      }
      for (const auto& [name, fn] : kernels)
        for (const bool two_ranges : {false, true}) {
          std::fill(got.begin(), got.end(), NAN);
          (two_ranges ? repacked<true> : repacked<false>)(fn, W.data(), xq.data(), xs.data(), got.data(), s.M, s.N,
                                                          s.K, b);
          expect_close(got, want, mag, (name + (two_ranges ? ", two ranges" : "")).c_str(), s);
          if (name != "plain" && !avx2.empty())
            ASSERT_EQ(got, avx2) << name << " against avx2, M " << s.M << " N " << s.N << " K " << s.K;
        }
      detail::q8_rows_reference(W.data(), x.data(), fp32x.data(), s.M, s.N, s.K, b);
      for (int64_t m = 0; m < s.M; ++m)
        for (int64_t n = 0; n < s.N; ++n) {
          double bound = 1e-5 * mag[size_t(m * s.N + n)];
          for (int64_t k = 0; k < s.K; ++k)
            bound += 0.5 * xs[size_t(m * nb + k / 32)] * std::abs(dw[size_t(n * s.K + k)]);
          ASSERT_NEAR(want[size_t(m * s.N + n)], fp32x[size_t(m * s.N + n)], bound) << "M " << s.M << " K " << s.K;
        }
    }
  }
}

}  // namespace
}  // namespace folio::kernels
