// Shape ops: reshape (shares data), transpose / permute / concat / split (copy).
#include <cstring>

#include "base/error.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"

namespace folio {
namespace {

Shape shape_of(const char* op, const std::vector<int64_t>& dims, int64_t numel, const Shape& from) {
  if (dims.size() > Shape::kMaxDims) fail(op, "at most 4 dimensions, got ", dims.size());
  Shape s;
  s.ndim = int(dims.size());
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < s.ndim; ++i) {
    if (dims[i] == -1 && infer < 0) {
      infer = i;
      continue;
    }
    if (dims[i] < 0) fail(op, "bad dimension ", dims[i], " for shape ", from);
    s.dims[i] = dims[i];
    known *= dims[i];
  }
  if (infer >= 0) s.dims[infer] = known ? numel / known : 0;
  if (s.numel() != numel) fail(op, "cannot view shape ", from, " as ", s);
  return s;
}

// Strides of a contiguous shape.
void strides_of(const Shape& s, int64_t* st) {
  int64_t acc = 1;
  for (int i = s.ndim - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= s.dims[i];
  }
}

// dst[index permuted] (+)= src[index]: out dim i is in dim order[i].
void permute_copy(const Shape& in_shape, const std::vector<int>& order, const float* src, float* dst,
                  bool accumulate_into_src_layout) {
  // Iterate over the output; pad to 4-D.
  const int nd = in_shape.ndim;
  int64_t in_st[4], od[4] = {1, 1, 1, 1}, os[4] = {0, 0, 0, 0};
  strides_of(in_shape, in_st);
  for (int i = 0; i < nd; ++i) {
    od[4 - nd + i] = in_shape.dims[order[i]];
    os[4 - nd + i] = in_st[order[i]];
  }
  const int64_t outer = od[0] * od[1] * od[2];
#pragma omp parallel for if (in_shape.numel() >= kParallelGrain)
  for (int64_t r = 0; r < outer; ++r) {
    const int64_t i2 = r % od[2], i1 = (r / od[2]) % od[1], i0 = r / (od[2] * od[1]);
    const int64_t base = i0 * os[0] + i1 * os[1] + i2 * os[2];
    for (int64_t j = 0; j < od[3]; ++j) {
      if (accumulate_into_src_layout)
        dst[base + j * os[3]] += src[r * od[3] + j];  // backward: out-grad back to in layout
      else
        dst[r * od[3] + j] = src[base + j * os[3]];
    }
  }
}

// x's block [begin, begin + size) per dim, padded to 4 dims, copied out (or its
// gradient added back): one contiguous run of size[3] floats per row of the block.
void slice_copy(const Shape& in_shape, const int64_t* begin, const int64_t* size, const float* src, float* dst,
                bool scatter_back) {
  const int pad = 4 - in_shape.ndim;
  int64_t st[4], b[4] = {0, 0, 0, 0}, n[4] = {1, 1, 1, 1}, full[4] = {0, 0, 0, 0};
  strides_of(in_shape, full + pad);
  for (int i = 0; i < 4; ++i) st[i] = full[i];
  for (int i = 0; i < in_shape.ndim; ++i) {
    b[pad + i] = begin[i];
    n[pad + i] = size[i];
  }
  const int64_t outer = n[0] * n[1] * n[2], width = n[3];
#pragma omp parallel for if (outer * width >= kParallelGrain)
  for (int64_t r = 0; r < outer; ++r) {
    const int64_t i2 = r % n[2], i1 = (r / n[2]) % n[1], i0 = r / (n[2] * n[1]);
    const int64_t at = (b[0] + i0) * st[0] + (b[1] + i1) * st[1] + (b[2] + i2) * st[2] + b[3] * st[3];
    if (scatter_back)  // backward: the block's gradient rows back to their places in x's
      for (int64_t j = 0; j < width; ++j) dst[at + j] += src[r * width + j];
    else
      std::memcpy(dst + r * width, src + at, sizeof(float) * width);
  }
}

}  // namespace

Tensor slice(const Tensor& x, const std::vector<int64_t>& begin, const std::vector<int64_t>& end) {
  const int nd = x.ndim();
  if (nd == 0) fail("slice", "cannot slice a scalar");
  if (int(begin.size()) != nd || int(end.size()) != nd)
    fail("slice", "needs one [begin, end) per dim of shape ", x.shape(), ", got ", begin.size(), " and ", end.size());
  Shape s = x.shape();
  std::vector<int64_t> size(nd);
  for (int i = 0; i < nd; ++i) {
    if (begin[i] < 0 || begin[i] > end[i] || end[i] > x.size(i))
      fail("slice", "[", begin[i], ", ", end[i], ") is not within dim ", i, " of shape ", x.shape());
    size[i] = s.dims[i] = end[i] - begin[i];
  }
  Tensor out = Tensor::empty(s);  // x's block: (end - begin) per dim
  if (out.numel()) slice_copy(x.shape(), begin.data(), size.data(), x.data(), out.data(), false);
  record(out, "slice", {&x}, [shape = x.shape(), begin, size](const Tensor& grad, const InputGrads& in) {
    in.write(0, [&](float* gx) {  // zero outside the block: only its elements reached the output
      if (grad.numel()) slice_copy(shape, begin.data(), size.data(), grad.data(), gx, true);
    });
  });
  return out;
}

Tensor reshape(const Tensor& x, std::vector<int64_t> dims) {
  const Shape s = shape_of("reshape", dims, x.numel(), x.shape());
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = s;
  impl->data = x.impl()->data;
  impl->offset = x.impl()->offset;
  Tensor out(std::move(impl));
  record(out, "reshape", {&x}, [n = x.numel()](const Tensor& grad, const InputGrads& in) {
    in.write(0, [&](float* gx) {
      const float* g = grad.data();
#pragma omp parallel for simd if (n >= kParallelGrain)
      for (int64_t i = 0; i < n; ++i) gx[i] += g[i];
    });
  });
  return out;
}

Tensor permute(const Tensor& x, std::vector<int> order) {
  const int nd = x.ndim();
  if (int(order.size()) != nd) fail("permute", "order of ", order.size(), " dims for shape ", x.shape());
  bool used[4] = {};
  Shape s = x.shape();
  for (int i = 0; i < nd; ++i) {
    if (order[i] < 0 || order[i] >= nd || used[order[i]])
      fail("permute", "order is not a permutation of the dims of ", x.shape());
    used[order[i]] = true;
    s.dims[i] = x.shape().dims[order[i]];
  }
  Tensor out = Tensor::empty(s);
  permute_copy(x.shape(), order, x.data(), out.data(), false);
  record(out, "permute", {&x}, [shape = x.shape(), order](const Tensor& grad, const InputGrads& in) {
    in.write(0, [&](float* gx) { permute_copy(shape, order, grad.data(), gx, true); });
  });
  return out;
}

Tensor transpose(const Tensor& x) {
  if (x.ndim() < 2) fail("transpose", "needs at least 2 dims, got shape ", x.shape());
  std::vector<int> order(x.ndim());
  for (int i = 0; i < x.ndim(); ++i) order[i] = i;
  std::swap(order[x.ndim() - 1], order[x.ndim() - 2]);
  return permute(x, order);
}

Tensor concat(const std::vector<Tensor>& xs) {
  if (xs.empty()) fail("concat", "needs at least one tensor");
  const Shape& first = xs[0].shape();
  if (first.ndim == 0) fail("concat", "cannot concatenate scalars");
  Shape s = first;
  s.dims[s.ndim - 1] = 0;
  for (const Tensor& x : xs) {
    Shape lead = x.shape();
    lead.dims[lead.ndim - 1] = 0;
    Shape want = first;
    want.dims[want.ndim - 1] = 0;
    if (x.ndim() != first.ndim || lead != want)
      fail("concat", "shapes ", first, " and ", x.shape(), " differ outside the last dim");
    s.dims[s.ndim - 1] += x.shape().last();
  }
  Tensor out = Tensor::empty(s);
  const int64_t rows = s.rows(), width = s.last();
  int64_t col = 0;
  for (const Tensor& x : xs) {
    const int64_t w = x.shape().last();
    const float* src = x.data();
    float* dst = out.data() + col;
    for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * width, src + r * w, sizeof(float) * w);
    col += w;
  }
  std::vector<int64_t> widths;
  for (const Tensor& x : xs) widths.push_back(x.shape().last());
  record(out, "concat", xs, [widths, rows, width](const Tensor& grad, const InputGrads& in) {
    int64_t col = 0;
    for (size_t k = 0; k < widths.size(); ++k) {
      const int64_t w = widths[k];
      in.write(k, [&](float* gx) {
        const float* g = grad.data() + col;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < w; ++j) gx[r * w + j] += g[r * width + j];
      });
      col += w;
    }
  });
  return out;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes) {
  if (x.ndim() == 0) fail("split", "cannot split a scalar");
  int64_t total = 0;
  for (int64_t w : sizes) {
    if (w < 0) fail("split", "negative size ", w);
    total += w;
  }
  if (total != x.shape().last())
    fail("split", "sizes add up to ", total, " but the last dim of ", x.shape(), " is ", x.shape().last());
  const int64_t rows = x.shape().rows(), width = x.shape().last();
  std::vector<Tensor> outs;
  int64_t col = 0;
  for (int64_t w : sizes) {
    Shape s = x.shape();
    s.dims[s.ndim - 1] = w;
    Tensor out = Tensor::empty(s);
    const float* src = x.data() + col;
    for (int64_t r = 0; r < rows; ++r) std::memcpy(out.data() + r * w, src + r * width, sizeof(float) * w);
    record(out, "split", {&x}, [col, w, rows, width](const Tensor& grad, const InputGrads& in) {
      in.write(0, [&](float* gx_all) {
        float* gx = gx_all + col;  // this piece's columns
        const float* g = grad.data();
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < w; ++j) gx[r * width + j] += g[r * w + j];
      });
    });
    outs.push_back(out);
    col += w;
  }
  return outs;
}

}  // namespace folio

namespace folio {

Tensor select_heads(const Tensor& x, int64_t n_head, int64_t head_size, int64_t offset, int64_t stride) {
  if (x.ndim() != 3) fail("select_heads", "needs (B, T, W), got shape ", x.shape());
  const int64_t B = x.size(0), T = x.size(1), W = x.size(2);
  if (n_head < 1 || head_size < 1 || offset < 0 || stride < head_size ||
      offset + (n_head - 1) * stride + head_size > W)
    fail("select_heads", n_head, " heads of size ", head_size, " at offset ", offset, " stride ", stride,
         " do not fit in shape ", x.shape());
  Tensor out = Tensor::empty({B, n_head, T, head_size});
  const float* in = x.data();
  float* o = out.data();
#pragma omp parallel for collapse(2) if (out.numel() >= kParallelGrain)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < n_head; ++h)
      for (int64_t t = 0; t < T; ++t)
        std::memcpy(o + ((b * n_head + h) * T + t) * head_size, in + (b * T + t) * W + offset + h * stride,
                    sizeof(float) * head_size);
  record(out, "select_heads", {&x}, [B, T, W, n_head, head_size, offset, stride](const Tensor& grad, const InputGrads& in) {
    const float* g = grad.data();
    in.write(0, [=](float* gx) {
#pragma omp parallel for collapse(2) if (grad.numel() >= kParallelGrain)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < n_head; ++h)
          for (int64_t t = 0; t < T; ++t) {
            const float* src = g + ((b * n_head + h) * T + t) * head_size;
            float* dst = gx + (b * T + t) * W + offset + h * stride;
            for (int64_t d = 0; d < head_size; ++d) dst[d] += src[d];
          }
    });
  });
  return out;
}

Tensor add_into_heads(const Tensor& x, const Tensor& y, int64_t n_head, int64_t head_size, int64_t offset,
                      int64_t stride) {
  if (x.ndim() != 3) fail("add_into_heads", "needs x (B, T, W), got shape ", x.shape());
  const int64_t B = x.size(0), T = x.size(1), W = x.size(2), width = n_head * head_size;
  if (n_head < 1 || head_size < 1 || offset < 0 || stride < head_size ||
      offset + (n_head - 1) * stride + head_size > W)
    fail("add_into_heads", n_head, " heads of size ", head_size, " at offset ", offset, " stride ", stride,
         " do not fit in shape ", x.shape());
  if (y.shape() != Shape{B, T, width})
    fail("add_into_heads", "y ", y.shape(), " must be (", B, ", ", T, ", ", width, ") for x ", x.shape());
  Tensor out = Tensor::empty(x.shape());  // (B, T, W)
  std::memcpy(out.data(), x.data(), sizeof(float) * x.numel());
  const float* src = y.data();
  float* o = out.data();
#pragma omp parallel for if (out.numel() >= kParallelGrain)
  for (int64_t bt = 0; bt < B * T; ++bt)
    for (int64_t h = 0; h < n_head; ++h) {
      float* dst = o + bt * W + offset + h * stride;
      const float* add = src + bt * width + h * head_size;
      for (int64_t d = 0; d < head_size; ++d) dst[d] += add[d];
    }
  record(out, "add_into_heads", {&x, &y},
         [B, T, W, n_head, head_size, offset, stride, width](const Tensor& grad, const InputGrads& in) {
           const float* g = grad.data();
           in.write(0, [g, n = B * T * W](float* gx, bool overwrite) {  // x passes through
             flat_map(gx, overwrite, n, [](float gi) { return gi; }, g);
           });
           in.write(1, [=](float* gy) {  // y's gradient: its slices' places in the output's
#pragma omp parallel for if (grad.numel() >= kParallelGrain)
             for (int64_t bt = 0; bt < B * T; ++bt)
               for (int64_t h = 0; h < n_head; ++h) {
                 const float* from = g + bt * W + offset + h * stride;
                 float* to = gy + bt * width + h * head_size;
                 for (int64_t d = 0; d < head_size; ++d) to[d] += from[d];
               }
           });
         });
  return out;
}

}  // namespace folio
