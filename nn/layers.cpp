#include "nn/layers.h"

#include "autograd/error.h"

namespace folio::nn {

Linear::Linear(int64_t in, int64_t out, bool with_bias, Rng& init) {
  if (in < 1 || out < 1) fail("linear", "sizes must be positive, got in ", in, " out ", out);
  weight = register_parameter("weight", Tensor::randn({out, in}, init, kInitStd));
  if (with_bias) bias = register_parameter("bias", Tensor::zeros({out}));
}

Embedding::Embedding(int64_t num, int64_t dim, Rng& init) {
  if (num < 1 || dim < 1) fail("embedding", "sizes must be positive, got ", num, " x ", dim);
  weight = register_parameter("weight", Tensor::randn({num, dim}, init, kInitStd));
}

LayerNorm::LayerNorm(int64_t dim) {
  if (dim < 1) fail("layer_norm", "size must be positive, got ", dim);
  weight = register_parameter("weight", Tensor::ones({dim}));
  bias = register_parameter("bias", Tensor::zeros({dim}));
}

Dropout::Dropout(float p, std::shared_ptr<Rng> rng) : p_(p), rng_(std::move(rng)) {
  if (!(p >= 0.0f && p < 1.0f)) fail("dropout", "probability ", p, " outside [0, 1)");
}

}  // namespace folio::nn
