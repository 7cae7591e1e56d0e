#pragma once
// The small layers: Linear, Embedding, LayerNorm, Gates, Dropout, DropPath. Initialised as the
// well-known GPT recipes do: weights ~ N(0, 0.02), biases 0, LayerNorm weight 1.
//
// Every module with parameters takes them from an Arena (nn/arena.h), and says how
// many it needs (parameter_count, with the constructor's sizes). Its constructor
// taking an Rng instead builds it standalone, on an arena of its own.
#include <memory>

#include "autograd/ops.h"
#include "nn/arena.h"
#include "nn/module.h"

namespace folio::nn {

constexpr float kInitStd = 0.02f;

// x (..., in) -> (..., out); weight (out, in) as in PyTorch.
class Linear : public Module {
 public:
  // weight ~ N(0, init_std); init_std 0: zeros (see Arena::normal).
  Linear(int64_t in, int64_t out, bool bias, Arena arena, float init_std = kInitStd);
  Linear(int64_t in, int64_t out, bool bias, Rng& init);
  // Weight tying: `tied` (out, in) is a parameter another module registered (the GPT's
  // token embedding); this Linear reads it and registers only its bias, so the weight
  // is one parameter (named once, updated once) whose gradient sums both uses.
  Linear(const Tensor& tied, bool bias, Arena arena);
  static int64_t parameter_count(int64_t in, int64_t out, bool bias) { return out * in + (bias ? out : 0); }
  Tensor forward(const Tensor& x) const { return linear(x, weight, bias, precision()); }
  Tensor forward_relu(const Tensor& x) const { return linear_relu(x, weight, bias, precision()); }  // relu(forward(x))
  Tensor weight, bias;  // bias undefined when off
};

// ids of shape S -> S + (dim)
class Embedding : public Module {
 public:
  Embedding(int64_t num, int64_t dim, Arena arena);
  Embedding(int64_t num, int64_t dim, Rng& init);
  static int64_t parameter_count(int64_t num, int64_t dim) { return num * dim; }
  Tensor forward(std::span<const int32_t> ids, const Shape& ids_shape) const {
    return embedding(weight, ids, ids_shape);
  }
  Tensor weight;
};

// x (..., dim) -> (..., dim). rms: RMSNorm, as llama normalises: x / sqrt(mean(x^2) +
// kModelRmsNormEps) * weight, no mean taken and no bias (bias stays undefined).
constexpr float kModelRmsNormEps = 1e-5f;  // llama 2's and 3's norm_eps
class LayerNorm : public Module {
 public:
  LayerNorm(int64_t dim, Arena arena, bool rms = false);
  explicit LayerNorm(int64_t dim, bool rms = false);
  static int64_t parameter_count(int64_t dim, bool rms = false) { return rms ? dim : 2 * dim; }
  Tensor forward(const Tensor& x) const {
    return bias.defined() ? layer_norm(x, weight, bias) : rms_norm(x, weight, kModelRmsNormEps);
  }
  bool rms() const { return !bias.defined(); }
  Tensor weight, bias;  // (dim) each; bias undefined with rms
};

// `count` learned vectors of (dim), every element starting at `start`, named "0", "1",
// ...: one gate a layer for a stream added into its input (GPT's x0 shortcut and U-net
// skips). A constant draws nothing from the initialisation RNG.
class Gates : public Module {
 public:
  Gates(int64_t count, int64_t dim, Arena arena, float start = 0.0f);
  Gates(int64_t count, int64_t dim, float start = 0.0f);
  static int64_t parameter_count(int64_t count, int64_t dim) { return count * dim; }
  // x (..., dim) + gate[i] * extra (..., dim) -> (..., dim)
  Tensor forward(const Tensor& x, const Tensor& extra, size_t i) const { return add(x, mul(extra, gate.at(i))); }
  std::vector<Tensor> gate;  // (dim) each
};

// Draws its masks from a generator it shares with the rest of the model, so that
// one saved state reproduces every mask of a resumed run.
class Dropout : public Module {
 public:
  explicit Dropout(float p, std::shared_ptr<Rng> rng = std::make_shared<Rng>(0));
  Tensor forward(const Tensor& x) const { return dropout(x, p_, training(), *rng_); }
  // The dropout a fused op applies in its place: the same draw from the generator as
  // forward() makes, and none (p = 0, no draw) when it would be the identity.
  WeightDropout fused() const {
    return training() && p_ > 0.0f ? WeightDropout{p_, rng_->next_u64()} : WeightDropout{};
  }
  float p() const { return p_; }

 private:
  float p_;
  std::shared_ptr<Rng> rng_;
};

// Stochastic depth: in training, a residual branch's output (B, T, C) is dropped for
// whole sequences, each with probability p, and scaled by 1/(1-p) where kept, so those
// sequences skip the branch. Its masks come from the model's shared generator, as
// Dropout's do; each call draws afresh.
class DropPath : public Module {
 public:
  explicit DropPath(float p, std::shared_ptr<Rng> rng = std::make_shared<Rng>(0));
  Tensor forward(const Tensor& x) const { return drop_rows(x, p_, training(), *rng_); }
  float p() const { return p_; }

 private:
  float p_;
  std::shared_ptr<Rng> rng_;
};

}  // namespace folio::nn
