#pragma once
// SwiGLU's elementwise half, fused: a row x (2H) = [gate (H); up (H)], the
// up-projection's output as FeedForward packs it, gives out (H) = silu(gate) * up,
// silu(g) = g * sigmoid(g) = g / (1 + e^-g). Its backward writes both halves'
// gradients in one pass. The AVX2 + FMA path runs wherever the CPU has those
// (whatever the build's -march); the plain path, the same polynomial in scalar code,
// elsewhere. tests/test_swiglu.cpp holds both against std::exp.
#include <cstdint>

#include "autograd/kernels/cpu_features.h"

namespace folio::kernels {

// e^x to about 1 ulp over the whole float range: +inf above ~88.72, subnormals down
// to ~-103.97, 0 below; -inf -> 0, +inf -> +inf, NaN -> NaN. y may be x.
void exp_n(const float* x, float* y, int64_t n);
// x (rows, 2H) -> out (rows, H). Row by row in order, so out may overlap x's front
// (out == x: the decoder packs its rows in place).
void swiglu_rows(const float* x, float* out, int64_t rows, int64_t H);
// x (rows, 2H), g = dL/dout (rows, H) -> gx (rows, 2H) stored (`store`) or added:
// d gate = g * up * s * (1 + gate * (1 - s)), d up = g * gate * s, s = sigmoid(gate).
void swiglu_rows_backward(const float* x, const float* g, float* gx, bool store, int64_t rows, int64_t H);

namespace detail {
float exp_plain(float x);
void exp_n_plain(const float* x, float* y, int64_t n);
void exp_n_avx2(const float* x, float* y, int64_t n);
void swiglu_rows_plain(const float* x, float* out, int64_t rows, int64_t H);
void swiglu_rows_avx2(const float* x, float* out, int64_t rows, int64_t H);
void swiglu_backward_plain(const float* x, const float* g, float* gx, bool store, int64_t rows, int64_t H);
void swiglu_backward_avx2(const float* x, const float* g, float* gx, bool store, int64_t rows, int64_t H);
}  // namespace detail

}  // namespace folio::kernels
