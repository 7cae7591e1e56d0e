#include "nn/layers.h"

#include "base/error.h"

namespace folio::nn {

Linear::Linear(int64_t in, int64_t out, bool with_bias, Arena arena, float init_std) {
  if (in < 1 || out < 1) fail("linear", "sizes must be positive, got in ", in, " out ", out);
  weight = register_parameter("weight", arena.normal({out, in}, init_std));
  if (with_bias) bias = register_parameter("bias", arena.full({out}, 0.0f));
}
Linear::Linear(const Tensor& tied, bool with_bias, Arena arena) : weight(tied) {
  if (!tied.defined() || tied.ndim() != 2 || !tied.requires_grad())
    fail("linear", "a tied weight must be a 2-D parameter, got ", tied.defined() ? tied.shape() : Shape{});
  if (with_bias) bias = register_parameter("bias", arena.full({tied.size(0)}, 0.0f));
}
Linear::Linear(int64_t in, int64_t out, bool bias, Rng& init)
    : Linear(in, out, bias, Arena(parameter_count(in, out, bias), init)) {}

Embedding::Embedding(int64_t num, int64_t dim, Arena arena) {
  if (num < 1 || dim < 1) fail("embedding", "sizes must be positive, got ", num, " x ", dim);
  weight = register_parameter("weight", arena.normal({num, dim}, kInitStd));
}
Embedding::Embedding(int64_t num, int64_t dim, Rng& init) : Embedding(num, dim, Arena(parameter_count(num, dim), init)) {}

LayerNorm::LayerNorm(int64_t dim, Arena arena, bool rms) {
  if (dim < 1) fail("layer_norm", "size must be positive, got ", dim);
  weight = register_parameter("weight", arena.full({dim}, 1.0f));
  if (!rms) bias = register_parameter("bias", arena.full({dim}, 0.0f));
}
LayerNorm::LayerNorm(int64_t dim, bool rms) : LayerNorm(dim, Arena(parameter_count(dim, rms)), rms) {}

Gates::Gates(int64_t count, int64_t dim, Arena arena, float start) {
  if (count < 1 || dim < 1) fail("gates", "sizes must be positive, got ", count, " x ", dim);
  for (int64_t i = 0; i < count; ++i) gate.push_back(register_parameter(std::to_string(i), arena.full({dim}, start)));
}
Gates::Gates(int64_t count, int64_t dim, float start) : Gates(count, dim, Arena(parameter_count(count, dim)), start) {}

Dropout::Dropout(float p, std::shared_ptr<Rng> rng) : p_(p), rng_(std::move(rng)) {
  require_probability("dropout", p);
}

DropPath::DropPath(float p, std::shared_ptr<Rng> rng) : p_(p), rng_(std::move(rng)) {
  require_probability("drop_path", p);
}

}  // namespace folio::nn
