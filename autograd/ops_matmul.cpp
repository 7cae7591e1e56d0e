// Matrix products on oneDNN. With C = op(A) @ op(B):
//   d op(A) = dC @ op(B)^T     d op(B) = op(A)^T @ dC
// and a transposed operand receives the transpose of that, so every backward
// product is again one kernel call with transpose flags, never a copy.
//
// In bf16, each operand is rounded once, in the forward, and nothing else changes: the
// same kernel calls, on bf16 pointers. When the product records a backward, the
// rounded operands it will need (A for dB, B for dA) go into pool buffers that the
// backward keeps instead of the fp32 operands: half the bytes held from forward to
// backward, and no second rounding of the same values there (the backward computes
// what it computed when it rounded them again, bit for bit). Otherwise, and for the
// backward's dC, the rounding goes into a per-thread scratch buffer that grows to the
// largest product seen and is then reused; a steady-state step allocates nothing.
// Weights are rounded per call too, measured as fast as a copy kept per training step
// (bench/README.md, "bf16").
#include <memory>
#include <type_traits>

#include "base/error.h"
#include "autograd/kernels/matmul.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"
#include "base/parse_name.h"

namespace folio {
namespace {

using kernels::bf16;
using kernels::Gemm;

// Elements of A and B that a product reads.
int64_t size_a(const Gemm& g) { return (g.broadcast_a ? 1 : g.batch) * g.M * g.K; }
int64_t size_b(const Gemm& g) { return (g.broadcast_b ? 1 : g.batch) * g.K * g.N; }

// The scratch buffers: one per operand role, so that converting one never
// overwrites another that the same product reads.
enum Role { kA, kB, kGrad };
struct Scratch {
  std::unique_ptr<bf16[]> data;
  int64_t capacity = 0;
};

// The role's scratch buffer, room for at least n elements.
bf16* scratch(Role role, int64_t n) {
  thread_local Scratch buffers[3];
  Scratch& s = buffers[role];
  if (s.capacity < n) s.data.reset(new bf16[size_t(n)]), s.capacity = n;
  return s.data.get();
}

// An operand in the element type T the product runs in: float as it is, bf16
// rounded into the role's scratch buffer.
template <class T>
const T* operand(const float* x, int64_t n, Role role) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
    bf16* y = scratch(role, n);
    kernels::to_bf16(x, y, n);
    return y;
  }
}

// An operand rounded to bf16 in the forward and kept for the backward, in a pool
// buffer: (n + 1) / 2 floats' room for n bf16. Empty when the backward does not read it.
struct Rounded {
  Tensor room;
  const bf16* data() const { return reinterpret_cast<const bf16*>(room.data()); }
};
Rounded rounded(const float* x, int64_t n) {
  Rounded r{Tensor::empty(Shape{(n + 1) / 2})};
  kernels::to_bf16(x, reinterpret_cast<bf16*>(r.room.data()), n);
  return r;
}

// The forward of a bf16 product that records a backward: A is kept when B needs its
// gradient (dB reads A) and B when A does; an operand that is not kept goes through
// the scratch buffer.
struct KeptOperands {
  Rounded a, b;
};
KeptOperands forward_keeping(const Gemm& g, const float* A, const float* B, float* C, const float* bias, bool keep_a,
                             bool keep_b) {
  KeptOperands k;
  if (keep_a) k.a = rounded(A, size_a(g));
  if (keep_b) k.b = rounded(B, size_b(g));
  kernels::matmul(g, keep_a ? k.a.data() : operand<bf16>(A, size_a(g), kA),
                  keep_b ? k.b.data() : operand<bf16>(B, size_b(g), kB), C, bias);
  return k;
}

struct Plan {
  Gemm g;
  Shape out;
};

Plan plan(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  const Shape &sa = a.shape(), &sb = b.shape();
  if (sa.ndim < 2 || sb.ndim < 2)
    fail("matmul", "needs operands of at least 2 dims, got shapes ", sa, " and ", sb);
  Plan p;
  Gemm& g = p.g;
  g.M = ta ? sa[-1] : sa[-2];
  g.K = ta ? sa[-2] : sa[-1];
  const int64_t kb = tb ? sb[-1] : sb[-2];
  g.N = tb ? sb[-2] : sb[-1];
  g.trans_a = ta;
  g.trans_b = tb;
  if (g.K != kb)
    fail("matmul", "shapes ", sa, (ta ? "^T" : ""), " and ", sb, (tb ? "^T" : ""),
         " do not match: inner dims ", g.K, " and ", kb);
  int64_t batch_a = 1, batch_b = 1;
  for (int i = 0; i < sa.ndim - 2; ++i) batch_a *= sa.dims[i];
  for (int i = 0; i < sb.ndim - 2; ++i) batch_b *= sb.dims[i];
  const Shape& batched = sa.ndim >= sb.ndim ? sa : sb;
  if (sa.ndim > 2 && sb.ndim > 2) {
    bool same = sa.ndim == sb.ndim;
    for (int i = 0; same && i < sa.ndim - 2; ++i) same = sa.dims[i] == sb.dims[i];
    if (!same) fail("matmul", "batch dims of shapes ", sa, " and ", sb, " differ");
  }
  g.batch = sa.ndim > 2 ? batch_a : sb.ndim > 2 ? batch_b : 1;
  g.broadcast_a = sa.ndim == 2 && g.batch > 1;
  g.broadcast_b = sb.ndim == 2 && g.batch > 1;
  p.out = batched;
  p.out[-2] = g.M;
  p.out[-1] = g.N;
  return p;
}

// C (+)= A-side x B-side where the product's batch must be summed into an operand
// that was broadcast: one kernel call per batch entry, all but the first accumulating.
template <class T>
void product_into(const Gemm& g, const T* A, const T* B, float* C, bool sum_over_batch) {
  if (!sum_over_batch) return kernels::matmul(g, A, B, C);
  Gemm one = g;
  one.batch = 1;
  one.broadcast_a = one.broadcast_b = false;
  for (int64_t i = 0; i < g.batch; ++i) {
    one.accumulate = g.accumulate || i > 0;
    kernels::matmul(one, A + (g.broadcast_a ? 0 : i * g.M * g.K), B + (g.broadcast_b ? 0 : i * g.K * g.N), C,
                    nullptr);
  }
}

// Gradients of C = op(A) @ op(B), given dC, into dA and dB: stored when `overwrite`
// (their first contribution), else added.
template <class T>
void matmul_backward_a(const Gemm& f, const T* B, const T* dC, float* dA, bool overwrite) {
  Gemm g;
  g.batch = f.batch;
  g.accumulate = !overwrite;
  if (!f.trans_a) {  // dA (M, K) = dC (M, N) @ op(B)^T
    g.M = f.M, g.N = f.K, g.K = f.N;
    g.trans_a = false, g.trans_b = !f.trans_b;
    g.broadcast_b = f.broadcast_b;
    product_into(g, dC, B, dA, f.broadcast_a);
  } else {  // dA^T (K, M) = op(B) (K, N) @ dC^T
    g.M = f.K, g.N = f.M, g.K = f.N;
    g.trans_a = f.trans_b, g.trans_b = true;
    g.broadcast_a = f.broadcast_b;
    product_into(g, B, dC, dA, f.broadcast_a);
  }
}

template <class T>
void matmul_backward_b(const Gemm& f, const T* A, const T* dC, float* dB, bool overwrite) {
  Gemm g;
  g.batch = f.batch;
  g.accumulate = !overwrite;
  g.K = f.M;
  // B broadcast against a batched, untransposed A: dB's sum over the batch is one
  // product over the batch's rows stacked (A_flat^T @ dC_flat).
  const bool fold = f.broadcast_b && !f.broadcast_a && !f.trans_a;
  if (fold) g.K = f.M * f.batch, g.batch = 1;
  if (!f.trans_b) {  // dB (K, N) = op(A)^T (K, M) @ dC (M, N)
    g.M = f.K, g.N = f.N;
    g.trans_a = !f.trans_a, g.trans_b = false;
    g.broadcast_a = f.broadcast_a;
    product_into(g, A, dC, dB, f.broadcast_b && !fold);
  } else {  // dB^T (N, K) = dC^T (N, M) @ op(A) (M, K)
    g.M = f.N, g.N = f.K;
    g.trans_a = true, g.trans_b = f.trans_a;
    g.broadcast_b = f.broadcast_a;
    product_into(g, dC, A, dB, f.broadcast_b && !fold);
  }
}

template <class T>
void forward(const Gemm& g, const float* A, const float* B, float* C, const float* bias) {
  kernels::matmul(g, operand<T>(A, size_a(g), kA), operand<T>(B, size_b(g), kB), C, bias);
}

// Both gradients, one after the other (A and B may be one tensor with one buffer).
template <class T>
void backward(const Gemm& f, const float* A, const float* B, const float* dC, const InputGrads& in) {
  const T* dc = operand<T>(dC, f.batch * f.M * f.N, kGrad);
  in.write(0, [&](float* dA, bool overwrite) { matmul_backward_a(f, operand<T>(B, size_b(f), kB), dc, dA, overwrite); });
  in.write(1, [&](float* dB, bool overwrite) { matmul_backward_b(f, operand<T>(A, size_a(f), kA), dc, dB, overwrite); });
}

void matmul_forward(Precision p, const Gemm& g, const float* A, const float* B, float* C, const float* bias = nullptr) {
  p == Precision::bf16 ? forward<bf16>(g, A, B, C, bias) : forward<float>(g, A, B, C, bias);
}

void matmul_backward(Precision p, const Gemm& f, const float* A, const float* B, const float* dC, const InputGrads& in) {
  p == Precision::bf16 ? backward<bf16>(f, A, B, dC, in) : backward<float>(f, A, B, dC, in);
}

// The bf16 backward from the operands the forward kept and dC, rounded.
void matmul_backward_kept(const Gemm& f, const KeptOperands& k, const bf16* dc, const InputGrads& in) {
  in.write(0, [&](float* dA, bool overwrite) { matmul_backward_a(f, k.b.data(), dc, dA, overwrite); });
  in.write(1, [&](float* dB, bool overwrite) { matmul_backward_b(f, k.a.data(), dc, dB, overwrite); });
}

}  // namespace

const char* to_string(Precision p) { return p == Precision::bf16 ? "bf16" : "fp32"; }

std::optional<Precision> parse_precision(std::string_view name) {
  return parse_name(name, {Precision::fp32, Precision::bf16});
}

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b, Precision precision) {
  const Plan p = plan(a, b, trans_a, trans_b);
  Tensor out = Tensor::empty(p.out);
  const bool grad = needs_grad({&a, &b});
  if (grad && precision == Precision::bf16) {
    const KeptOperands k = forward_keeping(p.g, a.data(), b.data(), out.data(), nullptr, needs_grad({&b}),
                                           needs_grad({&a}));
    record(out, "matmul", {&a, &b}, [k, g = p.g](const Tensor& grad, const InputGrads& in) {
      matmul_backward_kept(g, k, operand<bf16>(grad.data(), g.batch * g.M * g.N, kGrad), in);
    });
    return out;
  }
  matmul_forward(precision, p.g, a.data(), b.data(), out.data());
  if (!grad) return out;
  record(out, "matmul", {&a, &b},
         [sa = a.detach(), sb = b.detach(), g = p.g, precision](const Tensor& grad, const InputGrads& in) {
           matmul_backward(precision, g, sa.data(), sb.data(), grad.data(), in);
         }, {&a, &b});
  return out;
}

namespace {

// bias's gradient: the column sums of d (rows, N), added.
void add_column_sums(float* gb, const float* d, int64_t rows, int64_t N) {
  for (int64_t r = 0; r < rows; ++r)
#pragma omp simd
    for (int64_t j = 0; j < N; ++j) gb[j] += d[r * N + j];
}

// out = x w^T + bias, with `relu` then max(0, out). The backward reads only out: out > 0
// is where the ReLU passed its input, so the pre-activation is never kept.
Tensor linear_op(const char* op, const Tensor& x, const Tensor& w, const Tensor& bias, Precision precision,
                 bool relu) {
  if (x.ndim() < 1 || w.ndim() != 2 || x.shape().last() != w.size(1))
    fail(op, "input ", x.shape(), " does not match weight ", w.shape(), " (out, in)");
  if (bias.defined() && (bias.ndim() != 1 || bias.size(0) != w.size(0)))
    fail(op, "bias ", bias.shape(), " does not match weight ", w.shape());
  Gemm g;
  g.M = x.shape().rows();
  g.K = w.size(1);
  g.N = w.size(0);
  g.trans_b = true;
  g.relu = relu;
  Shape out_shape = x.shape();
  out_shape[-1] = g.N;
  Tensor out = Tensor::empty(out_shape);
  const float* b = bias.defined() ? bias.data() : nullptr;
  const bool grad = needs_grad({&x, &w, &bias});
  const bool keep = grad && precision == Precision::bf16;  // the rounded operands, not x and w
  KeptOperands kept;
  if (keep)
    kept = forward_keeping(g, x.data(), w.data(), out.data(), b, needs_grad({&w}), needs_grad({&x}));
  else
    matmul_forward(precision, g, x.data(), w.data(), out.data(), b);
  if (!grad) return out;
  g.relu = false;  // the forward's plan, as the backward sees it: the plain product
  const Tensor sy = relu ? out.detach() : Tensor();  // the output, read by the ReLU's backward
  const Tensor sx = keep ? Tensor() : x.detach(), sw = keep ? Tensor() : w.detach();
  record(out, op, {&x, &w, &bias}, [sx, sw, kept, sy, g, precision](const Tensor& grad, const InputGrads& in) {
    if (!sx.defined()) {  // bf16: the ReLU's mask, the rounding and the bias's sums in one pass over grad
      bf16* dc = scratch(kGrad, g.M * g.N);
      const float* relu_out = sy.defined() ? sy.data() : nullptr;
      if (!in.write(2, [&](float* gb) { kernels::to_bf16_gradient(grad.data(), relu_out, g.M, g.N, dc, gb); }))
        kernels::to_bf16_gradient(grad.data(), relu_out, g.M, g.N, dc, nullptr);
      return matmul_backward_kept(g, kept, dc, in);
    }
    // The product's gradient: grad, or with the ReLU, grad where the output is positive
    // (where the ReLU passed its input) and 0 elsewhere.
    const float* d = grad.data();
    Tensor masked;
    if (sy.defined()) {
      masked = Tensor::empty(sy.shape());
      flat_map(masked.data(), true, sy.numel(), [](float gi, float y) { return y > 0.0f ? gi : 0.0f; }, d, sy.data());
      d = masked.data();
    }
    matmul_backward(precision, g, sx.data(), sw.data(), d, in);
    in.write(2, [&](float* gb) { add_column_sums(gb, d, g.M, g.N); });
  }, {&sx, &sw, &sy});
  return out;
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias, Precision precision) {
  return linear_op("linear", x, w, bias, precision, false);
}

Tensor linear_relu(const Tensor& x, const Tensor& w, const Tensor& bias, Precision precision) {
  return linear_op("linear_relu", x, w, bias, precision, true);
}

}  // namespace folio
