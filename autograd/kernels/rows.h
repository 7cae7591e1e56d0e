#pragma once
// Loops over one row of the last dimension, shared by the ops (which run them over
// every row of a tensor) and the one-token decoder (infer/decoder.cpp), so both compute
// the same sums in the same order.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "autograd/kernels/vecmath.h"

namespace folio::kernels {

inline float row_max(const float* x, int64_t n) {
  float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
  for (int64_t j = 0; j < n; ++j) mx = std::max(mx, x[j]);
  return mx;
}

// y = softmax(scale * x[0, n)) into y[0, n); y[n, width) = 0. n >= 1, scale finite and
// >= 0: only then is max(x) * scale the largest scaled score, so that no exp overflows.
inline void softmax_row(const float* x, float* y, int64_t n, int64_t width, float scale) {
  const float mx = row_max(x, n) * scale;
  float total = 0.0f;
#pragma omp simd reduction(+ : total)
  for (int64_t j = 0; j < n; ++j) {
    y[j] = fast_exp(x[j] * scale - mx);
    total += y[j];
  }
  const float inv = 1.0f / total;
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) y[j] *= inv;
  for (int64_t j = n; j < width; ++j) y[j] = 0.0f;
}

struct RowStats {
  float mean, rstd;  // 1 / sqrt(variance + eps)
};

// out[0, C) = (x - mean) * rstd * w + b. Vectorised sums: lane-wise partial sums, an
// order that depends on nothing but C.
inline RowStats layer_norm_row(const float* x, const float* w, const float* b, float* out, int64_t C, float eps) {
  float m = 0.0f;
#pragma omp simd reduction(+ : m)
  for (int64_t c = 0; c < C; ++c) m += x[c];
  m /= float(C);
  float v = 0.0f;
#pragma omp simd reduction(+ : v)
  for (int64_t c = 0; c < C; ++c) v += (x[c] - m) * (x[c] - m);
  const float rstd = 1.0f / std::sqrt(v / float(C) + eps);
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) out[c] = (x[c] - m) * rstd * w[c] + b[c];
  return {m, rstd};
}

// out[0, C) = x * k, k = 1 / sqrt(mean(x^2) + eps); returns k.
inline float rms_norm_row(const float* x, float* out, int64_t C, float eps) {
  float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
  for (int64_t c = 0; c < C; ++c) ss += x[c] * x[c];
  const float k = 1.0f / std::sqrt(ss / float(C) + eps);
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) out[c] = x[c] * k;
  return k;
}

// Rotary embedding of one row of 2h values, pairs (i, i + h) rotated by the angles
// whose cos and sin are given (times `dir`: -1 rotates back). y may be x: each pair is
// read before it is written.
inline void rotate_half_row(const float* x, float* y, int64_t h, const float* cos, const float* sin, float dir) {
#pragma omp simd
  for (int64_t i = 0; i < h; ++i) {
    const float a = x[i], b = x[i + h], s = dir * sin[i];
    y[i] = a * cos[i] - b * s;
    y[i + h] = a * s + b * cos[i];
  }
}

}  // namespace folio::kernels
