// Elementwise ops. Binary ops broadcast like NumPy over trailing dimensions; their
// backward sums the gradient over the dimensions an input was broadcast along.
#include <cmath>

#include "base/error.h"
#include "autograd/kernels/vecmath.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"

namespace folio {
namespace {

// Both operands and the output padded to 4 dims; element strides, 0 where broadcast.
struct Broadcast {
  int64_t dims[4];
  int64_t sa[4], sb[4];
  bool a_full, b_full;  // operand has the output's shape (no reduction in backward)
};

Broadcast plan(const char* op, const Shape& a, const Shape& b, Shape& out) {
  out = Shape{};
  out.ndim = std::max(a.ndim, b.ndim);
  Broadcast p{};
  int64_t stride_a = 1, stride_b = 1;
  for (int i = 3; i >= 0; --i) {
    const int ia = a.ndim - 4 + i, ib = b.ndim - 4 + i;
    const int64_t da = ia >= 0 ? a.dims[ia] : 1, db = ib >= 0 ? b.dims[ib] : 1;
    if (da != db && da != 1 && db != 1) fail(op, "shapes ", a, " and ", b, " do not broadcast");
    p.dims[i] = std::max(da, db);
    if (da == 0 || db == 0) p.dims[i] = 0;
    p.sa[i] = da == 1 ? 0 : stride_a;
    p.sb[i] = db == 1 ? 0 : stride_b;
    stride_a *= da;
    stride_b *= db;
    const int io = out.ndim - 4 + i;
    if (io >= 0) out.dims[io] = p.dims[i];
  }
  p.a_full = a == out;
  p.b_full = b == out;
  return p;
}

// Calls fn(o, ia, ib) for every output element o; parallel over rows when safe.
template <class Fn>
void each(const Broadcast& p, bool parallel, Fn fn) {
  const int64_t outer = p.dims[0] * p.dims[1] * p.dims[2], inner = p.dims[3];
  parallel = parallel && outer * inner >= kParallelGrain && outer > 1;
#pragma omp parallel for if (parallel)
  for (int64_t r = 0; r < outer; ++r) {
    const int64_t i2 = r % p.dims[2], i1 = (r / p.dims[2]) % p.dims[1], i0 = r / (p.dims[2] * p.dims[1]);
    const int64_t a0 = i0 * p.sa[0] + i1 * p.sa[1] + i2 * p.sa[2];
    const int64_t b0 = i0 * p.sb[0] + i1 * p.sb[1] + i2 * p.sb[2];
    for (int64_t j = 0; j < inner; ++j) fn(r * inner + j, a0 + j * p.sa[3], b0 + j * p.sb[3]);
  }
}

// out = f(a, b); backward: ga += da(g, a, b), gb += db(g, a, b), reduced over broadcasts.
// kSave: the derivatives read a and b, so the node keeps their data. Operands of one
// shape (a residual add) take flat loops; broadcasting ones walk the strides.
template <bool kSave, class F, class DA, class DB>
Tensor binary(const char* op, const Tensor& a, const Tensor& b, F f, DA da, DB db) {
  Shape out_shape;
  const Broadcast p = plan(op, a.shape(), b.shape(), out_shape);
  Tensor out = Tensor::empty(out_shape);
  const bool flat = p.a_full && p.b_full;
  const int64_t n = out_shape.numel();
  {
    const float *x = a.data(), *y = b.data();
    float* o = out.data();
    if (flat)
      flat_map(o, true, n, f, x, y);
    else
      each(p, true, [&](int64_t i, int64_t ia, int64_t ib) { o[i] = f(x[ia], y[ib]); });
  }
  if (!needs_grad({&a, &b})) return out;
  Tensor sa = kSave ? a.detach() : Tensor(), sb = kSave ? b.detach() : Tensor();
  record(out, op, {&a, &b}, [sa, sb, p, flat, n, da, db](const Tensor& grad, const InputGrads& in) {
    const float* g = grad.data();
    const float *x = kSave ? sa.data() : nullptr, *y = kSave ? sb.data() : nullptr;
    auto at = [](const float* v, int64_t i) { return kSave ? v[i] : 0.0f; };
    if (flat) {
      // d(g, x, y), or d(g, 0, 0) when the operands were not saved.
      auto grad_into = [&](float* dst, bool store, auto d) {
        if constexpr (kSave)
          flat_map(dst, store, n, d, g, x, y);
        else
          flat_map(dst, store, n, [d](float gi) { return d(gi, 0.0f, 0.0f); }, g);
      };
      in.write(0, [&](float* gx, bool overwrite) { grad_into(gx, overwrite, da); });
      in.write(1, [&](float* gy, bool overwrite) { grad_into(gy, overwrite, db); });
      return;
    }
    in.write(0, [&](float* gx) {
      each(p, p.a_full, [&](int64_t i, int64_t ia, int64_t ib) { gx[ia] += da(g[i], at(x, ia), at(y, ib)); });
    });
    in.write(1, [&](float* gy) {
      each(p, p.b_full, [&](int64_t i, int64_t ia, int64_t ib) { gy[ib] += db(g[i], at(x, ia), at(y, ib)); });
    });
  }, {&sa, &sb});
  return out;
}

// What a unary op's derivative reads, and so what its node keeps.
enum class Saves { nothing, input, output };

// out = f(x); backward: gx += df(g, x, out) (x or out are 0 when not saved).
template <Saves kSave, class F, class DF>
Tensor unary(const char* op, const Tensor& x, F f, DF df) {
  Tensor out = Tensor::empty(x.shape());
  const int64_t n = x.numel();
  {
    const float* in = x.data();
    float* o = out.data();
#pragma omp parallel for simd if (n >= kParallelGrain)
    for (int64_t i = 0; i < n; ++i) o[i] = f(in[i]);
  }
  if (!needs_grad({&x})) return out;
  const Tensor saved = kSave == Saves::input ? x.detach() : kSave == Saves::output ? out.detach() : Tensor();
  record(out, op, {&x}, [saved, n, df](const Tensor& grad, const InputGrads& in) {
    const float *g = grad.data(), *v = saved.defined() ? saved.data() : nullptr;
    in.write(0, [&](float* gx, bool overwrite) {
      if constexpr (kSave == Saves::nothing)
        flat_map(gx, overwrite, n, [df](float gi) { return df(gi, 0.0f, 0.0f); }, g);
      else
        flat_map(gx, overwrite, n, [df](float gi, float value) {
          return kSave == Saves::output ? df(gi, 0.0f, value) : df(gi, value, 0.0f);
        }, g, v);
    });
  }, {&saved});
  return out;
}

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  return binary<false>("add", a, b, [](float x, float y) { return x + y; },
                [](float g, float, float) { return g; }, [](float g, float, float) { return g; });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  return binary<false>("sub", a, b, [](float x, float y) { return x - y; },
                [](float g, float, float) { return g; }, [](float g, float, float) { return -g; });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  return binary<true>("mul", a, b, [](float x, float y) { return x * y; },
                [](float g, float, float y) { return g * y; },
                [](float g, float x, float) { return g * x; });
}

Tensor div(const Tensor& a, const Tensor& b) {
  return binary<true>("div", a, b, [](float x, float y) { return x / y; },
                [](float g, float, float y) { return g / y; },
                [](float g, float x, float y) { return -g * x / (y * y); });
}

Tensor scale(const Tensor& x, float s) {
  return unary<Saves::nothing>("scale", x, [s](float v) { return v * s; },
               [s](float g, float, float) { return g * s; });
}

Tensor neg(const Tensor& x) {
  return unary<Saves::nothing>("neg", x, [](float v) { return -v; }, [](float g, float, float) { return -g; });
}

Tensor exp(const Tensor& x) {
  return unary<Saves::output>("exp", x, [](float v) { return std::exp(v); },
               [](float g, float, float y) { return g * y; });
}

Tensor log(const Tensor& x) {
  return unary<Saves::input>("log", x, [](float v) { return std::log(v); },
               [](float g, float v, float) { return g / v; });
}

Tensor tanh(const Tensor& x) {
  return unary<Saves::output>("tanh", x, [](float v) { return std::tanh(v); },
               [](float g, float, float y) { return g * (1.0f - y * y); });
}

Tensor relu(const Tensor& x) {
  return unary<Saves::input>("relu", x, [](float v) { return v > 0.0f ? v : 0.0f; },
               [](float g, float v, float) { return v > 0.0f ? g : 0.0f; });
}

Tensor relu_squared(const Tensor& x) {
  return unary<Saves::input>("relu_squared", x, [](float v) { return v > 0.0f ? v * v : 0.0f; },
               [](float g, float v, float) { return v > 0.0f ? 2.0f * v * g : 0.0f; });
}

Tensor silu(const Tensor& x) {
  return unary<Saves::input>("silu", x, [](float v) { return v / (1.0f + std::exp(-v)); },
               [](float g, float v, float) {
                 const float s = 1.0f / (1.0f + std::exp(-v));  // d/dv v s(v) = s (1 + v (1 - s))
                 return g * s * (1.0f + v * (1.0f - s));
               });
}

Tensor gelu(const Tensor& x) {
  using kernels::fast_erf, kernels::fast_exp;
  return unary<Saves::input>("gelu", x, [](float v) { return kernels::gelu(v); },
               [](float g, float v, float) {
                 const float cdf = 0.5f * (1.0f + fast_erf(v * kInvSqrt2));
                 const float pdf = kInvSqrt2Pi * fast_exp(-0.5f * v * v);
                 return g * (cdf + v * pdf);
               });
}

Tensor gelu_tanh(const Tensor& x) {
  return unary<Saves::input>("gelu_tanh", x, [](float v) { return kernels::gelu_tanh(v); },
               [](float g, float v, float) { return g * kernels::gelu_tanh_grad(v); });
}

// Where the mask is nonzero the value, elsewhere x; the mask broadcasts like a binary
// op's operand but may not grow x (a (T, T) mask over (B, T, T) scores). The mask is
// a constant, as torch's bool masks are: no gradient reaches it.
Tensor masked_fill(const Tensor& x, const Tensor& mask, float value) {
  Shape out_shape;
  const Broadcast p = plan("masked_fill", x.shape(), mask.shape(), out_shape);
  if (out_shape != x.shape())
    fail("masked_fill", "mask ", mask.shape(), " would broadcast x ", x.shape(), " to ", out_shape,
         "; the mask must broadcast to x's shape");
  Tensor out = Tensor::empty(x.shape());  // x's shape
  {
    const float *in = x.data(), *m = mask.data();
    float* o = out.data();
    each(p, true, [&](int64_t i, int64_t ix, int64_t im) { o[i] = m[im] != 0.0f ? value : in[ix]; });
  }
  if (!needs_grad({&x})) return out;
  const Tensor saved_mask = mask.detach();  // backward refuses it if changed in place meanwhile
  record(out, "masked_fill", {&x}, [m = saved_mask, p](const Tensor& grad, const InputGrads& in) {
    const float *g = grad.data(), *pm = m.data();
    in.write(0, [&](float* gx) {  // x has the output's shape: element i is x's element i
      each(p, true, [&](int64_t i, int64_t, int64_t im) { gx[i] += pm[im] != 0.0f ? 0.0f : g[i]; });
    });
  }, {&saved_mask});
  return out;
}

}  // namespace folio
