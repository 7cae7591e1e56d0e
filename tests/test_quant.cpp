// Weights stored small (autograd/kernels/quant.h): the fp16 scales against F16C, Q8_0
// quantization, and every product (AVX2, plain) against its reference in double, on
// ragged shapes: K not a multiple of 32 (nor of 8), one row and several, N not a
// multiple of the four rows the AVX2 products take at a time.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "autograd/kernels/quant.h"

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

}  // namespace
}  // namespace folio::kernels
