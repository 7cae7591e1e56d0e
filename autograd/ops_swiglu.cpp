// SwiGLU's gate as one op over the up-projection's packed output: no split into two
// tensors, no separate SiLU and product, and a backward that writes both halves'
// gradients in one pass. Rows run in parallel; each row is independent of the others,
// so the result does not depend on the thread count.
#include "base/error.h"
#include "autograd/kernels/swiglu.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"

namespace folio {

Tensor swiglu(const Tensor& x) {
  if (x.ndim() == 0 || x.shape().last() % 2 != 0)
    fail("swiglu", "needs an even last dim (gate then up), got shape ", x.shape());
  const int64_t H = x.shape().last() / 2, rows = x.shape().rows();
  Shape out_shape = x.shape();
  out_shape[-1] = H;
  Tensor out = Tensor::empty(out_shape);  // (..., H)
  {
    const float* in = x.data();  // (rows, 2H)
    float* o = out.data();       // (rows, H)
#pragma omp parallel for if (x.numel() >= kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) kernels::swiglu_rows(in + r * 2 * H, o + r * H, 1, H);
  }
  if (!needs_grad({&x})) return out;
  const Tensor saved = x.detach();  // (..., 2H): the gate is recomputed from it, not stored
  record(out, "swiglu", {&x}, [saved, rows, H](const Tensor& grad, const InputGrads& in) {
    in.write(0, [&](float* gx, bool overwrite) {  // gx (rows, 2H)
      const float *xs = saved.data(), *g = grad.data();  // g (rows, H)
#pragma omp parallel for if (rows * 2 * H >= kParallelGrain)
      for (int64_t r = 0; r < rows; ++r)
        kernels::swiglu_rows_backward(xs + r * 2 * H, g + r * H, gx + r * 2 * H, overwrite, 1, H);
    });
  }, {&saved});
  return out;
}

}  // namespace folio
