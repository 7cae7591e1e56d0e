// The autograd engine through composites of ops: a tensor feeding several ops, or both
// inputs of one, intermediates whose first gradient is stored rather than added. Each op
// on its own is checked by the registry (autograd/gradcheck_ops.cpp, run by
// tests/test_gradcheck.cpp and `folio gradcheck`).
#include "autograd/ops.h"
#include "tests/gradcheck.h"

namespace folio {
namespace {

using testing::gradcheck;
using testing::param;
using V = std::vector<Tensor>;

// Products of intermediates: the first gradient into a buffer is stored, not added
// (InputGrads::write), so a tensor feeding both operands, or a product and another op,
// must still receive every contribution.
TEST(Grad, MatmulOfIntermediates) {
  EXPECT_TRUE(gradcheck([](const V& v) { const Tensor h = tanh(v[0]); return matmul(h, h, false, true); },
                        {param({3, 4}, 1)}));
  EXPECT_TRUE(gradcheck([](const V& v) { const Tensor h = tanh(v[0]); return matmul(h, h, true, false); },
                        {param({3, 4}, 2)}));
  EXPECT_TRUE(gradcheck(
      [](const V& v) {
        const Tensor h = scale(v[0], 2.0f);
        return concat({matmul(h, tanh(v[1])), h});
      },
      {param({3, 4}, 3), param({4, 5}, 4)}));
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      // Broadcast on either side: the broadcast operand's gradient sums the batch.
      Tensor a = param(ta ? Shape{4, 3} : Shape{3, 4}, 5), b = param(tb ? Shape{2, 5, 4} : Shape{2, 4, 5}, 6);
      EXPECT_TRUE(gradcheck([ta, tb](const V& v) { return matmul(tanh(v[0]), tanh(v[1]), ta, tb); }, {a, b}))
          << "broadcast left, trans_a " << ta << " trans_b " << tb;
      Tensor c = param(ta ? Shape{3, 4, 2} : Shape{3, 2, 4}, 7), d = param(tb ? Shape{5, 4} : Shape{4, 5}, 8);
      EXPECT_TRUE(gradcheck([ta, tb](const V& v) { return matmul(tanh(v[0]), tanh(v[1]), ta, tb); }, {c, d}))
          << "broadcast right, trans_a " << ta << " trans_b " << tb;
    }
  EXPECT_TRUE(gradcheck([](const V& v) { return linear(tanh(v[0]), v[1], v[2]); },
                        {param({2, 3, 4}, 9), param({5, 4}, 10), param({5}, 11)}));
}
// One tensor feeding both inputs of a binary op: both inputs' gradients go into one
// buffer, and x's gradient must be the sum of the two, as with two separate copies of
// x. Through an intermediate (h = 1 * x) the op's first contribution to h's buffer is
// stored, not added; a leaf's buffer only ever accumulates.
TEST(Grad, OneTensorFeedingBothInputsOfABinaryOp) {
  using Binary = Tensor (*)(const Tensor&, const Tensor&);
  const std::pair<const char*, Binary> ops[] = {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); }},
      {"matmul", [](const Tensor& a, const Tensor& b) { return matmul(a, b); }},
      {"matmul a b^T", [](const Tensor& a, const Tensor& b) { return matmul(a, b, false, true); }},
      {"matmul a^T b", [](const Tensor& a, const Tensor& b) { return matmul(a, b, true, false); }},
      {"linear", [](const Tensor& a, const Tensor& b) { return linear(a, b); }},
  };
  Rng init(11);
  const Tensor x0 = Tensor::uniform({4, 4}, init, 0.5f, 1.5f);  // away from 0 for div
  for (const auto& [name, op] : ops)
    for (bool intermediate : {false, true}) {
      SCOPED_TRACE(::testing::Message() << name << (intermediate ? ", through an intermediate" : ", of a leaf"));
      auto grad_of = [&, op = op](const Tensor& a, const Tensor& b) {  // d sum(op(a, b) * r)
        auto feed = [&](const Tensor& t) { return intermediate ? scale(t, 1.0f) : t; };
        const Tensor fa = feed(a), fb = a.same(b) ? fa : feed(b);
        const Tensor out = op(fa, fb);
        Rng rr(12);
        sum(mul(out, Tensor::randn(out.shape(), rr))).backward();
      };
      const Tensor x = x0.clone().set_requires_grad();
      grad_of(x, x);
      const Tensor a = x0.clone().set_requires_grad(), b = x0.clone().set_requires_grad();
      grad_of(a, b);
      for (int64_t i = 0; i < x.numel(); ++i)
        ASSERT_NEAR(x.grad().data()[i], a.grad().data()[i] + b.grad().data()[i], 1e-5f) << "element " << i;
    }
}
// The same for elementwise ops: an intermediate read by several of them (and twice by
// one) gets its first gradient stored and the others added.
TEST(Grad, ElementwiseOfIntermediates) {
  EXPECT_TRUE(gradcheck(
      [](const V& v) {
        const Tensor h = scale(v[0], 1.5f);
        return sub(add(mul(h, h), relu(h)), div(tanh(h), add(exp(v[1]), v[1])));
      },
      {param({3, 5}, 1), param({3, 5}, 2)}));
  EXPECT_TRUE(gradcheck([](const V& v) { const Tensor h = gelu(v[0]); return add(h, gelu(h)); },
                        {param({2, 7}, 3)}));
}
// Softmax backward stores a first gradient over the whole row, zeros past the mask.
TEST(Grad, SoftmaxOfIntermediates) {
  EXPECT_TRUE(gradcheck(
      [](const V& v) {
        const Tensor h = tanh(v[0]);
        return add(causal_softmax(h, 0.7f), softmax(h));
      },
      {param({2, 5, 5}, 1)}));
  EXPECT_TRUE(gradcheck([](const V& v) { return causal_softmax(scale(v[0], 2.0f), 0.5f); },
                        {param({2, 3, 6}, 2)}));  // fewer queries than keys (the KV-cache case)
}
TEST(Grad, TensorReusedAcrossOps) {  // x feeds three branches; gradients must add up
  EXPECT_TRUE(gradcheck(
      [](const V& v) {
        const Tensor& x = v[0];
        return add(mul(tanh(x), x), matmul(x, v[1]));
      },
      {param({3, 3}, 1), param({3, 3}, 2)}));
}
TEST(Grad, AttentionChain) {  // q k^T -> causal softmax -> @ v, batched and non-square
  EXPECT_TRUE(gradcheck(
      [](const V& v) { return matmul(causal_softmax(matmul(v[0], v[1], false, true), 0.5f), v[2]); },
      {param({2, 4, 3}, 1), param({2, 4, 3}, 2), param({2, 4, 2}, 3)}));
}


}  // namespace
}  // namespace folio
