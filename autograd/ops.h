#pragma once
// Every differentiable op. Each lives in an ops_*.cpp file with its backward closure
// right beneath its forward. Shapes use B batch, T time, C channels, V vocabulary.
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "base/rng.h"
#include "autograd/tensor.h"

namespace folio {

// ---- elementwise (ops_elementwise.cpp); binary ops broadcast trailing dimensions
Tensor add(const Tensor& a, const Tensor& b);  // e.g. (B, T, C) + (C) -> (B, T, C)
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor scale(const Tensor& x, float s);        // x * s
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x);                  // exact: x * Phi(x), as torch.nn.GELU()
Tensor gelu_tanh(const Tensor& x);             // tanh approximation, as GPT-2 (torch GELU(approximate="tanh"))
Tensor relu_squared(const Tensor& x);          // relu(x)^2, one pass (the "ReLU^2" activation)
Tensor silu(const Tensor& x);                  // x * sigmoid(x) (SwiGLU's gate)
// x (..., 2H) = [gate; up] -> silu(gate) * up (..., H) as one op (ops_swiglu.cpp):
// FeedForward's gated unit over its packed up-projection.
Tensor swiglu(const Tensor& x);
// x with `value` where mask (nonzero = fill) is set; mask broadcasts over x's leading
// dims, e.g. a (T, T) mask on (B, T, T) scores. Gradient: g where kept, 0 where filled.
Tensor masked_fill(const Tensor& x, const Tensor& mask, float value);
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& x) { return neg(x); }

// ---- reductions (ops_reduce.cpp)
Tensor sum(const Tensor& x);                                 // -> () scalar
Tensor sum(const Tensor& x, int axis, bool keepdim = false); // removes (or keeps as 1) axis
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, int axis, bool keepdim = false);

// ---- shape (ops_shape.cpp); these copy, except reshape which shares the data
Tensor reshape(const Tensor& x, std::vector<int64_t> dims);  // one dim may be -1
Tensor transpose(const Tensor& x);                           // (..., M, N) -> (..., N, M)
Tensor permute(const Tensor& x, std::vector<int> order);     // out dim i = x dim order[i]
Tensor concat(const std::vector<Tensor>& xs);                // along the last dim
// x's block [begin[i], end[i]) along every dim i (step 1), e.g. x[:, :T] of (B, T', C)
// -> (B, T, C); its gradient is the output's scattered into zeros of x's shape.
Tensor slice(const Tensor& x, const std::vector<int64_t>& begin, const std::vector<int64_t>& end);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes);  // last dim
// x (B, T, W) -> (B, n_head, T, head_size), out[b, h, t, d] = x[b, t, offset + h * stride + d]:
// one of q/k/v, per head, out of a packed projection.
Tensor select_heads(const Tensor& x, int64_t n_head, int64_t head_size, int64_t offset, int64_t stride);
// The way back in: x (B, T, W), y (B, T, n_head * head_size) -> x with each head's slice
// of y added at its place, out[b, t, offset + h * stride + d] = x[...] + y[b, t, h * head_size + d]
// (MultiHead adds value embeddings into its packed projection's values with it).
Tensor add_into_heads(const Tensor& x, const Tensor& y, int64_t n_head, int64_t head_size, int64_t offset,
                      int64_t stride);

// ---- matrix products (ops_matmul.cpp), through oneDNN
// Precision of a product: fp32, or bf16, where the operands are rounded to bfloat16
// (to nearest even) and the products are summed, and written, in fp32. A product run
// in bf16 runs its backward products (dA, dB) in bf16 too; tensors stay fp32.
enum class Precision { fp32, bf16 };
const char* to_string(Precision p);                               // "fp32", "bf16"
std::optional<Precision> parse_precision(std::string_view name);  // nullopt: neither
// (..., M, K) @ (..., K, N) -> (..., M, N); trans_a reads a as (..., K, M) and trans_b
// reads b as (..., N, K), without copying. Batch dims must match, or one side is 2-D.
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false,
              Precision precision = Precision::fp32);
// x (..., in) @ w (out, in)^T + b (out) -> (..., out); b may be undefined. Fused bias.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = {}, Precision precision = Precision::fp32);
// relu(linear(x, w, b)) as one op: the ReLU is the product's epilogue, so it costs no
// pass of its own and the pre-activation is never stored.
Tensor linear_relu(const Tensor& x, const Tensor& w, const Tensor& b = {}, Precision precision = Precision::fp32);

// ---- softmax family and losses (ops_softmax.cpp), over the last dim
Tensor softmax(const Tensor& x);
Tensor log_softmax(const Tensor& x);
// scores (..., Tq, Tk) -> softmax(scale * scores) with key j hidden from query i when
// j > i + (Tk - Tq), i.e. the tril mask filled with -inf (queries are the last Tq positions).
// scale must be finite and >= 0.
Tensor causal_softmax(const Tensor& scores, float scale = 1.0f);
// Dropout on the attention weights inside the fused ops below: it drops the weights
// that dropout(weights, p, true, rng) would drop from the composition's (..., T, T)
// weight tensor when `seed` is that call's draw, rng.next_u64(). p = 0: none.
struct WeightDropout {
  float p = 0.0f;
  uint64_t seed = 0;
};
// q, k, v (..., T, hs) -> dropout(causal_softmax(q k^T, scale)) v (..., T, hs) in one op
// (ops_causal_attention.cpp): equal to the composition, without computing the masked half.
// In bf16, the products of its forward and backward take bf16 operands (q, k, v, the
// output's gradient, and the weights and their gradient as they enter a product), summed
// in fp32; the softmax and its backward stay fp32, and the backward recomputes the
// weights instead of keeping them (autograd/attention_slice_bf16.cpp).
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale, WeightDropout dropout = {},
                        Precision precision = Precision::fp32);
// The same over MultiHead's packed projection, read and written in place (no per-head
// copies): qkv (B, T, n_head * 3 * hs), head h's key, query and value at h * 3 * hs +
// {0, hs, 2 * hs} -> (B, T, n_head * hs), the heads' outputs side by side. The weights
// are numbered as the composition's (B, n_head, T, T) tensor.
Tensor causal_attention_packed(const Tensor& qkv, int64_t n_head, float scale, WeightDropout dropout = {},
                               Precision precision = Precision::fp32);
// How many of the two ops' forwards have run, by precision, on all threads.
struct AttentionCalls {
  int64_t fp32 = 0, bf16 = 0;
};
AttentionCalls causal_attention_calls();
// A row with no target: left out of cross_entropy's mean and gradient.
constexpr int32_t kNoTarget = -1;
// logits (..., V), targets (one per row, in [0, V), or kNoTarget) -> () mean
// cross-entropy over the rows that have a target (0 when none has).
Tensor cross_entropy(const Tensor& logits, std::span<const int32_t> targets);

// ---- layers' ops (ops_nn.cpp)
// weight (V, C), ids of shape S (values in [0, V)) -> S + (C)
Tensor embedding(const Tensor& weight, std::span<const int32_t> ids, const Shape& ids_shape);
// x (..., C), weight (C), bias (C) -> (..., C)
constexpr float kLayerNormEps = 1e-5f, kRmsNormEps = 1e-6f;  // PyTorch's defaults
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps = kLayerNormEps);
// x (..., C) -> x / sqrt(mean(x^2) + eps) per row of the last dim: RMSNorm without
// a weight (torch.nn.functional.rms_norm(x, (C,), None, eps)).
Tensor rms_norm(const Tensor& x, float eps = kRmsNormEps);
// The same times a learned weight (C), as one op: rms_norm(x, eps) * weight, the
// RMSNorm layer (ops_nn.cpp); no product and no broadcast reduction of its own.
Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps = kRmsNormEps);
// Rotary position embedding (RoPE), the "rotate half" pairing of GPT-NeoX and Llama:
// x (..., T, HS), HS even; cos, sin (P, HS/2) with cos[p, i] = cos(p * theta_i).
// Row t is at position start + t (start + T <= P), and its pair (i, i + HS/2) is
// rotated by that position's angle: y_i = x_i cos - x_{i+HS/2} sin,
// y_{i+HS/2} = x_i sin + x_{i+HS/2} cos. The tables are constants (no gradient).
Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t start);
// MultiHead's packed projection with its attention options applied, in one op:
// qkv (B, T, n_head * 3 * hs) laid out as causal_attention_packed reads it -> the same
// shape, each head's key and query rms_norm'ed (qk_norm) and then rope'd from position
// 0 (cos and sin defined: (P >= T, hs / 2)), its value copied. Equal to those ops on
// select_heads' copies.
Tensor position_qk_packed(const Tensor& qkv, int64_t n_head, bool qk_norm, const Tensor& cos, const Tensor& sin,
                          float eps = kRmsNormEps);
// Zeroes each element with probability p, scales the rest by 1/(1-p); identity when
// !training or p == 0. The mask is a function of one draw from rng, so it is seeded.
Tensor dropout(const Tensor& x, float p, bool training, Rng& rng);
// Stochastic depth's mask: x (B, ...) -> x with each row x[b] zeroed whole with
// probability p and the others scaled by 1/(1-p); identity when !training or p == 0.
// Row b's fate is element b of the dropout mask of one draw from rng.
Tensor drop_rows(const Tensor& x, float p, bool training, Rng& rng);

}  // namespace folio
