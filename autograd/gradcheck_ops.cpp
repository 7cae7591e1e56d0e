// The gradient checks of the ops: at least one per differentiable op of ops.h (the
// suite checks that none is missing), with its broadcasting, axes and transposed
// operands as variants. Shapes are small and odd-sized, so that no two dims match by
// accident. tests/test_gradcheck.cpp runs every one; `folio gradcheck --op` too.
#include <cmath>
#include <initializer_list>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "autograd/gradcheck.h"

namespace folio {
namespace {

using V = std::vector<Tensor>;

// A case on tensor inputs, built afresh (by `inputs`) for every run.
GradcheckCase op(std::string name, std::string variant, GradcheckFn f, std::function<V()> inputs,
                 std::string other_inputs = "") {
  return {std::move(name), std::move(variant), [f = std::move(f), inputs = std::move(inputs), other_inputs] {
            return GradcheckSetup{f, inputs(), 0, other_inputs};
          }};
}

Tensor leaf(const Shape& shape, uint64_t seed, float stddev = 1.0f) { return randn_leaf(shape, seed, stddev); }

// n values lo, lo + step, ...: inputs kept away from a kink or a pole.
Tensor spaced(int64_t n, float lo, float step) {
  Tensor x = leaf({n}, 1);
  for (int64_t i = 0; i < n; ++i) x.data()[i] = lo + step * float(i);
  return x;
}

// A leaf holding `v`, row-major.
Tensor values(const Shape& shape, std::initializer_list<float> v) {
  return Tensor::from(shape, std::span(v.begin(), v.size())).set_requires_grad();
}

std::string trans_label(bool ta, bool tb) {  // " a^T b^T"
  return std::string(ta ? " a^T" : "") + (tb ? " b^T" : "");
}

void add_elementwise(std::vector<GradcheckCase>& cases) {
  auto binary = [](Tensor (*fn)(const Tensor&, const Tensor&)) { return [fn](const V& v) { return fn(v[0], v[1]); }; };
  cases.push_back(op("add", "same shape", binary(add), [] { return V{leaf({3, 4}, 1), leaf({3, 4}, 2)}; }));
  cases.push_back(op("add", "bias over rows", binary(add), [] { return V{leaf({2, 3, 5}, 1), leaf({5}, 2)}; }));
  cases.push_back(op("add", "broadcast both sides", binary(add), [] { return V{leaf({3, 1}, 1), leaf({1, 4}, 2)}; }));
  cases.push_back(op("sub", "broadcast middle", binary(sub), [] { return V{leaf({2, 3, 4}, 1), leaf({2, 1, 4}, 2)}; }));
  cases.push_back(op("mul", "by one element", binary(mul), [] { return V{leaf({4, 3}, 1), leaf({1}, 2)}; }));
  cases.push_back(op("mul", "a tensor by itself", [](const V& v) { return mul(v[0], v[0]); },
                     [] { return V{leaf({5, 2}, 3)}; }));
  cases.push_back(op("div", "broadcast", binary(div), [] { return V{leaf({2, 3}, 1), spaced(3, 1.5f, 1.0f)}; }));
  cases.push_back(op("scale", "", [](const V& v) { return scale(v[0], -2.5f); }, [] { return V{leaf({3, 3}, 1)}; }));
  cases.push_back(op("neg", "", [](const V& v) { return neg(v[0]); }, [] { return V{leaf({4}, 1)}; }));
  cases.push_back(op("exp", "", [](const V& v) { return exp(v[0]); }, [] { return V{leaf({2, 5}, 1, 0.5f)}; }));
  cases.push_back(op("log", "", [](const V& v) { return log(v[0]); }, [] { return V{spaced(6, 0.5f, 0.4f)}; }));
  cases.push_back(op("tanh", "", [](const V& v) { return tanh(v[0]); }, [] { return V{leaf({3, 4}, 1)}; }));
  // No value within eps of 0: central differences across the kink are not the gradient.
  cases.push_back(op("relu", "", [](const V& v) { return relu(v[0]); }, [] { return V{spaced(10, -1.0f, 0.23f)}; }));
  cases.push_back(op("gelu", "", [](const V& v) { return gelu(v[0]); }, [] { return V{leaf({4, 5}, 1, 1.5f)}; }));
  cases.push_back(op("silu", "", [](const V& v) { return silu(v[0]); }, [] { return V{leaf({4, 5}, 1, 1.5f)}; }));
  // H 5: only the kernel's tail; H 11: a full block of 8 and a tail. Gates spread to
  // +-4 reach both of the sigmoid's flat ends.
  cases.push_back(op("swiglu", "H 5", [](const V& v) { return swiglu(v[0]); },
                     [] { return V{leaf({2, 3, 10}, 1, 1.5f)}; }));
  // Over an intermediate: its gradient is stored, not added, by swiglu's backward.
  cases.push_back(op("swiglu", "H 11, of an intermediate, x used twice",
                     [](const V& v) { return add(swiglu(scale(v[0], 1.5f)), slice(v[0], {0, 0}, {3, 11})); },
                     [] { return V{leaf({3, 22}, 2, 2.0f)}; }));
  cases.push_back(
      op("gelu_tanh", "", [](const V& v) { return gelu_tanh(v[0]); }, [] { return V{leaf({4, 5}, 1, 1.5f)}; }));
  // The causal mask (1 above the diagonal: hidden) of 4 positions, over a batch of 2.
  static const Tensor above_diagonal = [] {
    Tensor m = Tensor::zeros({4, 4});  // (T, T)
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = i + 1; j < 4; ++j) m.data()[i * 4 + j] = 1.0f;
    return m;
  }();
  cases.push_back(op("masked_fill", "(T, T) mask over (B, T, T)",
                     [](const V& v) { return masked_fill(v[0], above_diagonal, -2.5f); },
                     [] { return V{leaf({2, 4, 4}, 1)}; }, "mask (4, 4)"));
  // The tutorials' use: -inf where hidden, then a softmax (the -inf never reaches the sum).
  cases.push_back(op("masked_fill", "-inf then softmax",
                     [](const V& v) { return softmax(masked_fill(v[0], above_diagonal, -std::numeric_limits<float>::infinity())); },
                     [] { return V{leaf({3, 4, 4}, 2)}; }, "mask (4, 4)"));
  // Smooth at 0 (both sides' slopes are 0), so any input will do.
  cases.push_back(op("relu_squared", "", [](const V& v) { return relu_squared(v[0]); },
                     [] { return V{leaf({3, 5}, 1)}; }));
}

void add_reductions(std::vector<GradcheckCase>& cases) {
  auto x = [] { return V{leaf({2, 3, 4}, 1)}; };
  cases.push_back(op("sum", "all", [](const V& v) { return sum(v[0]); }, x));
  // A plain pair, not structured bindings: clang 14 (the fuzz build) cannot capture those.
  for (const std::pair<int, bool>& a : {std::pair{0, false}, {1, false}, {2, false}, {-1, false}, {0, true},
                                       {1, true}, {-1, true}, {-3, true}})
    cases.push_back(op("sum", cat("axis ", a.first, a.second ? " keepdim" : ""),
                       [a](const V& v) { return sum(v[0], a.first, a.second); }, x));
  cases.push_back(op("mean", "all", [](const V& v) { return mean(v[0]); }, x));
  cases.push_back(op("mean", "axis 1", [](const V& v) { return mean(v[0], 1); }, [] { return V{leaf({3, 5, 2}, 1)}; }));
  cases.push_back(op("mean", "axis -1 keepdim", [](const V& v) { return mean(v[0], -1, true); },
                     [] { return V{leaf({3, 5}, 1)}; }));
}

void add_shape_ops(std::vector<GradcheckCase>& cases) {
  // Times a second input, so that the gradient reaching the reshape is not uniform.
  cases.push_back(op("reshape", "", [](const V& v) { return mul(reshape(v[0], {3, -1}), v[1]); },
                     [] { return V{leaf({2, 3, 2}, 1), leaf({3, 4}, 2)}; }));
  cases.push_back(op("transpose", "", [](const V& v) { return transpose(v[0]); }, [] { return V{leaf({2, 3, 5}, 1)}; }));
  for (const std::vector<int>& order : {std::vector<int>{0, 2, 1, 3}, {3, 1, 0, 2}})
    cases.push_back(op("permute", cat("(", order[0], ", ", order[1], ", ", order[2], ", ", order[3], ")"),
                       [order](const V& v) { return permute(v[0], order); }, [] { return V{leaf({2, 3, 4, 5}, 1)}; }));
  cases.push_back(op("concat", "", [](const V& v) { return concat({v[0], v[1], v[0]}); },
                     [] { return V{leaf({2, 3, 2}, 1), leaf({2, 3, 4}, 2)}; }));
  cases.push_back(op("split", "",
                     [](const V& v) {
                       const auto parts = split(v[0], {1, 3, 2});
                       return mul(concat({parts[2], parts[0]}), parts[1]);
                     },
                     [] { return V{leaf({4, 6}, 1)}; }));
  // Times a second input, so that each kept element's gradient differs.
  cases.push_back(op("slice", "leading axis and the last two",
                     [](const V& v) { return mul(slice(v[0], {1, 0, 1}, {3, 4, 3}), v[1]); },
                     [] { return V{leaf({3, 5, 4}, 1), leaf({2, 4, 2}, 2)}; }));
  cases.push_back(op("slice", "4-D, one row of the first axis",
                     [](const V& v) { return slice(v[0], {1, 0, 2, 1}, {2, 3, 4, 5}); },
                     [] { return V{leaf({2, 3, 5, 6}, 3)}; }));
  // q/k/v of 2 heads of size 2, interleaved per head in a (B, T, 3 * 2 * 2) projection.
  for (int64_t offset : {0, 2, 4})
    cases.push_back(op("select_heads", cat("offset ", offset),
                       [offset](const V& v) { return select_heads(v[0], 2, 2, offset, 6); },
                       [] { return V{leaf({2, 3, 12}, 1)}; }));
  // The values of that projection gain a (B, T, 2 * 2) tensor.
  cases.push_back(op("add_into_heads", "", [](const V& v) { return mul(add_into_heads(v[0], v[1], 2, 2, 4, 6), v[2]); },
                     [] { return V{leaf({2, 3, 12}, 1), leaf({2, 3, 4}, 2), leaf({2, 3, 12}, 3)}; }));
}

void add_products(std::vector<GradcheckCase>& cases) {
  // (M, K) @ (K, N) for each way of reading the operands, then batched, then with one
  // side 2-D: the broadcast operand's gradient sums over the batch.
  struct Layout {
    const char* name;
    Shape a, b;  // (..., M, K) and (..., K, N), before either is transposed
  };
  for (const Layout& l : {Layout{"2d", {3, 4}, {4, 5}}, Layout{"batched", {2, 3, 3, 4}, {2, 3, 4, 2}},
                          Layout{"broadcast weight", {3, 2, 4}, {4, 5}}, Layout{"broadcast left", {3, 4}, {2, 4, 5}}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        auto stored = [](Shape s, bool transposed) {  // how the operand is laid out in memory
          if (transposed) std::swap(s[-1], s[-2]);
          return s;
        };
        const Shape a = stored(l.a, ta), b = stored(l.b, tb);
        cases.push_back(op("matmul", l.name + trans_label(ta, tb),
                           [ta, tb](const V& v) { return matmul(v[0], v[1], ta, tb); },
                           [a, b] { return V{leaf(a, 1), leaf(b, 2)}; }));
      }
  cases.push_back(op("linear", "with bias", [](const V& v) { return linear(v[0], v[1], v[2]); },
                     [] { return V{leaf({2, 3, 4}, 1), leaf({5, 4}, 2), leaf({5}, 3)}; }));
  cases.push_back(op("linear", "without bias", [](const V& v) { return linear(v[0], v[1]); },
                     [] { return V{leaf({3, 4}, 1), leaf({2, 4}, 2)}; }));
  // Central differences are wrong across the ReLU's kink: every pre-activation is kept
  // clear of 0 (checked, as a changed Rng would draw others), of both signs.
  cases.push_back(op("linear_relu", "with bias", [](const V& v) { return linear_relu(v[0], v[1], v[2]); }, [] {
    V v{leaf({2, 3, 5}, 1), leaf({4, 5}, 2, 0.1f), spaced(4, -1.5f, 1.0f)};
    NoGradGuard no_grad;
    for (float z : linear(v[0], v[1], v[2]).to_vector())
      if (std::abs(z) < 0.05f) fail("gradcheck", "linear_relu's pre-activation ", z, " is too near the kink");
    return v;
  }));
  // Without one: rows of x of one sign each against weight rows of one sign each, so
  // every pre-activation is at least 0.46 from 0.
  cases.push_back(op("linear_relu", "without bias", [](const V& v) { return linear_relu(v[0], v[1]); }, [] {
    return V{values({4, 2}, {0.5f, 1.0f, -0.6f, -0.3f, 0.9f, 0.4f, -0.4f, -0.9f}),
             values({3, 2}, {0.7f, 0.2f, -0.5f, -0.8f, 0.6f, 0.9f})};
  }));
}

void add_softmax_and_layers(std::vector<GradcheckCase>& cases) {
  cases.push_back(op("softmax", "", [](const V& v) { return softmax(v[0]); }, [] { return V{leaf({3, 5}, 1)}; }));
  cases.push_back(op("log_softmax", "", [](const V& v) { return log_softmax(v[0]); },
                     [] { return V{leaf({2, 2, 6}, 1)}; }));
  cases.push_back(op("causal_softmax", "scale 0.5", [](const V& v) { return causal_softmax(v[0], 0.5f); },
                     [] { return V{leaf({2, 5, 5}, 1)}; }));
  // The KV-cache case: the queries are the last 2 of 5 positions.
  cases.push_back(op("causal_softmax", "fewer queries than keys", [](const V& v) { return causal_softmax(v[0], 1.3f); },
                     [] { return V{leaf({2, 2, 5}, 1)}; }));
  cases.push_back(op("causal_attention", "(B, nh, T, hs) scale 0.7",
                     [](const V& v) { return causal_attention(v[0], v[1], v[2], 0.7f); },
                     [] { return V{leaf({2, 2, 5, 3}, 1), leaf({2, 2, 5, 3}, 2), leaf({2, 2, 5, 3}, 3)}; }));
  // Dropout on the weights: the mask is fixed by the seed, so the op stays a function.
  cases.push_back(op("causal_attention", "dropout 0.4 on the weights",
                     [](const V& v) { return causal_attention(v[0], v[1], v[2], 0.7f, {0.4f, 17}); },
                     [] { return V{leaf({2, 2, 5, 3}, 1), leaf({2, 2, 5, 3}, 2), leaf({2, 2, 5, 3}, 3)}; }));
  cases.push_back(op("causal_attention_packed", "dropout 0.3 on the weights",
                     [](const V& v) { return causal_attention_packed(v[0], 2, 0.6f, {0.3f, 18}); },
                     [] { return V{leaf({2, 5, 18}, 5)}; }));
  cases.push_back(op("causal_attention_packed", "2 heads of 3, T 5",
                     [](const V& v) { return causal_attention_packed(v[0], 2, 0.6f); },
                     [] { return V{leaf({2, 5, 18}, 5)}; }));
  // The second op's gradient adds to the first's (one op overwrites, the other adds).
  cases.push_back(op("causal_attention_packed", "input used twice",
                     [](const V& v) { return add(causal_attention_packed(v[0], 2, 0.6f), causal_attention_packed(v[0], 2, 1.1f)); },
                     [] { return V{leaf({1, 4, 24}, 6)}; }));
  // One tensor as q, k and v: three contributions into one gradient buffer.
  cases.push_back(op("causal_attention", "q = k = v", [](const V& v) { return causal_attention(v[0], v[0], v[0], 1.1f); },
                     [] { return V{leaf({6, 4}, 4)}; }));
  static const std::vector<int32_t> targets{0, 4, 2, 2, 1, 3};
  cases.push_back(op("cross_entropy", "", [](const V& v) { return cross_entropy(v[0], targets); },
                     [] { return V{leaf({2, 3, 5}, 1)}; }, "targets (6)"));
  static const std::vector<int32_t> some_targets{0, kNoTarget, 2, kNoTarget, 1, 3};
  cases.push_back(op("cross_entropy", "rows without a target",
                     [](const V& v) { return cross_entropy(v[0], some_targets); }, [] { return V{leaf({2, 3, 5}, 1)}; },
                     "targets (6), two of them none"));
  static const std::vector<int32_t> ids{1, 3, 1, 0, 3, 3};
  cases.push_back(op("embedding", "repeated ids", [](const V& v) { return embedding(v[0], ids, Shape{2, 3}); },
                     [] { return V{leaf({4, 3}, 1)}; }, "ids (2, 3)"));
  cases.push_back(op("layer_norm", "", [](const V& v) { return layer_norm(v[0], v[1], v[2]); },
                     [] { return V{leaf({2, 3, 6}, 1), leaf({6}, 2), leaf({6}, 3)}; }));
  cases.push_back(op("rms_norm", "", [](const V& v) { return rms_norm(v[0]); }, [] { return V{leaf({2, 3, 6}, 1)}; }));
  cases.push_back(op("rms_norm", "eps 0.1", [](const V& v) { return rms_norm(v[0], 0.1f); },
                     [] { return V{leaf({4, 5}, 2, 0.3f)}; }));
  cases.push_back(op("rms_norm", "weight", [](const V& v) { return rms_norm(v[0], v[1]); },
                     [] { return V{leaf({2, 3, 6}, 3), leaf({6}, 4)}; }));
  // Over an intermediate (its gradient stored, not added), x used twice.
  cases.push_back(op("rms_norm", "weight, eps 0.1, of an intermediate",
                     [](const V& v) { return add(rms_norm(scale(v[0], 1.5f), v[1], 0.1f), v[0]); },
                     [] { return V{leaf({4, 5}, 5, 0.3f), leaf({5}, 6)}; }));
  static const Tensor cos = [] { Rng r(5); return Tensor::uniform({7, 3}, r, -1.0f, 1.0f); }();
  static const Tensor sin = [] { Rng r(6); return Tensor::uniform({7, 3}, r, -1.0f, 1.0f); }();
  cases.push_back(op("rope", "(B, nh, T, hs) from position 2", [](const V& v) { return rope(v[0], cos, sin, 2); },
                     [] { return V{leaf({2, 2, 3, 6}, 1)}; }, "tables (7, 3)"));
  cases.push_back(op("rope", "every position", [](const V& v) { return rope(v[0], cos, sin, 0); },
                     [] { return V{leaf({7, 6}, 2)}; }, "tables (7, 3)"));
  // qkv (B 2, T 3, 2 heads x 3 x hs 6); tables of exactly T rows, and of more
  static const Tensor cos3 = [] { Rng r(7); return Tensor::uniform({3, 3}, r, -1.0f, 1.0f); }();
  static const Tensor sin3 = [] { Rng r(8); return Tensor::uniform({3, 3}, r, -1.0f, 1.0f); }();
  cases.push_back(op("position_qk_packed", "qk_norm",
                     [](const V& v) { return position_qk_packed(v[0], 2, true, Tensor{}, Tensor{}); },
                     [] { return V{leaf({2, 3, 36}, 1)}; }, "2 heads"));
  cases.push_back(op("position_qk_packed", "rope",
                     [](const V& v) { return position_qk_packed(v[0], 2, false, cos3, sin3); },
                     [] { return V{leaf({2, 3, 36}, 2)}; }, "2 heads, tables (3, 3)"));
  cases.push_back(op("position_qk_packed", "qk_norm and rope",
                     [](const V& v) { return position_qk_packed(v[0], 2, true, cos, sin); },
                     [] { return V{leaf({2, 3, 36}, 3)}; }, "2 heads, tables (7, 3)"));
  cases.push_back(op("dropout", "train, fixed mask",
                     [](const V& v) {
                       Rng rng(42);  // the same mask on every evaluation
                       return dropout(v[0], 0.3f, true, rng);
                     },
                     [] { return V{leaf({4, 8}, 1)}; }));
  cases.push_back(op("drop_rows", "train, fixed mask",
                     [](const V& v) {
                       Rng rng(7);  // the same rows on every evaluation: 2 of the 6 dropped
                       return drop_rows(v[0], 0.4f, true, rng);
                     },
                     [] { return V{leaf({6, 3, 2}, 2)}; }));
}

}  // namespace

const std::vector<GradcheckCase>& op_gradcheck_cases() {
  static const std::vector<GradcheckCase> cases = [] {
    std::vector<GradcheckCase> all;
    add_elementwise(all);
    add_reductions(all);
    add_shape_ops(all);
    add_products(all);
    add_softmax_and_layers(all);
    return all;
  }();
  return cases;
}

}  // namespace folio
