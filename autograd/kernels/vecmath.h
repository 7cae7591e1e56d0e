#pragma once
// exp and erf in plain float arithmetic that GCC vectorizes inside `omp simd` loops
// (libm's expf/erff are scalar calls and cost more than the matmuls around them).
// Their plain twins are std::exp / std::erf; tests/test_vecmath.cpp compares them.
// Written branch-free (selects only, no float->int conversion) so that nothing in
// them stops GCC's if-conversion.
#include <bit>
#include <cmath>
#include <cstdint>

namespace folio::kernels {

// e^r for |r| <= ln 2 / 2, by Cephes' expf minimax polynomial: what every exp here and
// SwiGLU's (kernels/swiglu.cpp, whose AVX2 twin runs the same steps) computes once x is
// reduced to n ln 2 + r.
inline float exp_reduced(float r) {
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * (r * r) + r + 1.0f;
}

// e^x, relative error below 3e-7 over the float range; 0 below -87.3, +inf above 88.7.
inline float fast_exp(float x) {
  constexpr float kLo = -87.33654f, kHi = 88.72283f;
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;  // ln 2 split for exact reduction
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer in the low bits
  float xc = x < kLo ? kLo : x;
  xc = xc > kHi ? kHi : xc;
  const float shifted = xc * kLog2e + kRound;  // n = round(x / ln 2), held in the mantissa
  const float n = shifted - kRound;
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;  // |r| <= ln2 / 2
  const float p = exp_reduced(r);
  // 2^n: n sits in the low mantissa bits of `shifted`; move it into the exponent field.
  const int32_t n_bits = std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(kRound);
  float result = p * std::bit_cast<float>((n_bits + 127) << 23);
  result = x < kLo ? 0.0f : result;
  result = x > kHi ? __builtin_inff() : result;
  return result;
}

// erf(x), absolute error below 6e-7 (Abramowitz & Stegun 7.1.26, 1.5e-7, evaluated in float).
inline float fast_erf(float x) {
  const float a = x < 0.0f ? -x : x;
  const float t = 1.0f / (1.0f + 0.3275911f * a);
  float poly = 1.061405429f;
  poly = poly * t - 1.453152027f;
  poly = poly * t + 1.421413741f;
  poly = poly * t - 0.284496736f;
  poly = poly * t + 0.254829592f;
  const float y = 1.0f - poly * t * fast_exp(-a * a);
  return x < 0.0f ? -y : y;
}

// GELU in its exact (erf) form, PyTorch's default: x * Phi(x).
inline float gelu(float x) { return 0.5f * x * (1.0f + fast_erf(x * 0.70710678118654752f)); }

// GELU's tanh approximation, GPT-2's "gelu_new": 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
// Computed as x sigmoid(2u), the same function (0.5 (1 + tanh u) = 1 / (1 + e^-2u)), on
// fast_exp: libm's tanhf is a scalar call, and it was a fifth of a GPT-2-shape prompt's
// time at one thread (a 512-token prefill, 124M: 1.29 s with it, 0.99 s without). The
// sigmoid form also keeps its relative accuracy where 1 + tanh u cancels (x << 0);
// tests/test_vecmath.cpp holds it to the formula in double.
constexpr float kGeluTanhK = 0.79788456080286536f;  // sqrt(2 / pi)
constexpr float kGeluTanhA = 0.044715f;
// sigmoid(2u) = 0.5 (1 + tanh u): the share of x that GELU-tanh passes, and a factor
// of its derivative.
inline float gelu_tanh_gate(float x) {
  const float u = kGeluTanhK * (x + kGeluTanhA * x * x * x);
  return 1.0f / (1.0f + fast_exp(-2.0f * u));
}
inline float gelu_tanh(float x) { return x * gelu_tanh_gate(x); }

// d/dx x s, s = sigmoid(2u): s + x 2 s (1 - s) du/dx, du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
inline float gelu_tanh_grad(float x) {
  const float s = gelu_tanh_gate(x);
  return s + 2.0f * x * s * (1.0f - s) * kGeluTanhK * (1.0f + 3.0f * kGeluTanhA * x * x);
}

}  // namespace folio::kernels
