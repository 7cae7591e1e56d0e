// SwiGLU's plain path and the dispatch (swiglu.h). exp_plain is the AVX2 exp of
// swiglu_avx2.cpp lane by lane: the same reduction, polynomial and scaling.
#include "autograd/kernels/swiglu.h"

#include <bit>
#include <cmath>

#include "autograd/kernels/vecmath.h"

namespace folio::kernels {
namespace detail {

// e^x = 2^n e^r, n = round(x / ln 2), |r| <= ln 2 / 2; e^r by exp_reduced (vecmath.h).
// 2^n as 2^(n/2) 2^(n - n/2), so that n from -150 to 128 needs no exponent outside the
// normal range: the product rounds once, into a subnormal or to inf where e^x does.
float exp_plain(float x) {
  if (std::isnan(x)) return x;
  const float xc = x < -104.0f ? -104.0f : x > 89.0f ? 89.0f : x;  // e^-104 rounds to 0, e^89 to inf
  const float n = std::nearbyint(xc * 1.44269504088896341f);
  float r = xc - n * 0.693359375f;  // ln 2 = 0.693359375 - 2.12194440e-4, the first part exact in n
  r = r - n * -2.12194440e-4f;
  const float p = exp_reduced(r);
  const int32_t ni = int32_t(n), n1 = ni >> 1, n2 = ni - n1;
  return p * std::bit_cast<float>((n1 + 127) << 23) * std::bit_cast<float>((n2 + 127) << 23);
}

void exp_n_plain(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = exp_plain(x[i]);
}

void swiglu_rows_plain(const float* x, float* out, int64_t rows, int64_t H) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *gate = x + r * 2 * H, *up = gate + H;
    float* o = out + r * H;
    for (int64_t i = 0; i < H; ++i) {
      const float s = 1.0f / (1.0f + exp_plain(-gate[i]));
      o[i] = gate[i] * s * up[i];
    }
  }
}

void swiglu_backward_plain(const float* x, const float* g, float* gx, bool store, int64_t rows, int64_t H) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *gate = x + r * 2 * H, *up = gate + H, *gr = g + r * H;
    float *dgate = gx + r * 2 * H, *dup = dgate + H;
    for (int64_t i = 0; i < H; ++i) {
      const float s = 1.0f / (1.0f + exp_plain(-gate[i])), silu = gate[i] * s;
      const float dg = gr[i] * up[i] * (s * (1.0f + gate[i] * (1.0f - s))), du = gr[i] * silu;
      dgate[i] = store ? dg : dgate[i] + dg;
      dup[i] = store ? du : dup[i] + du;
    }
  }
}

}  // namespace detail

void exp_n(const float* x, float* y, int64_t n) {
  detail::avx2_fma() ? detail::exp_n_avx2(x, y, n) : detail::exp_n_plain(x, y, n);
}

void swiglu_rows(const float* x, float* out, int64_t rows, int64_t H) {
  detail::avx2_fma() ? detail::swiglu_rows_avx2(x, out, rows, H) : detail::swiglu_rows_plain(x, out, rows, H);
}

void swiglu_rows_backward(const float* x, const float* g, float* gx, bool store, int64_t rows, int64_t H) {
  detail::avx2_fma() ? detail::swiglu_backward_avx2(x, g, gx, store, rows, H)
                     : detail::swiglu_backward_plain(x, g, gx, store, rows, H);
}

}  // namespace folio::kernels
