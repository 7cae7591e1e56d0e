// Anomaly detection at the autograd level (autograd/anomaly.h), without a model or the
// CLI: the first op whose output (forward) or input gradient (backward) is not finite
// is named with its module and shape; off, nothing is looked at; the faults tests arm
// put their NaN into the op they name, once.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/anomaly.h"
#include "autograd/ops.h"

namespace folio {
namespace {

using anomaly::ModuleScope;

Tensor leaf(const Shape& shape, std::initializer_list<float> values) {
  return Tensor::from(shape, std::vector<float>(values)).set_requires_grad();
}

// The first op to go non-finite is named, not the ops its value flows through after.
TEST(Anomaly, ForwardNamesTheFirstOpItsModuleAndShape) {
  const anomaly::Detecting on(true);
  anomaly::take();
  const Tensor x = leaf({2, 2}, {1, 0, 2, 3});
  Tensor y;  // (2, 2)
  {
    const ModuleScope scope(anomaly::intern("blocks.0.attn"));
    y = exp(log(x));  // log(0) = -inf; exp(-inf) = 0, finite again
  }
  const Tensor z = div(y, y);  // 0 / 0: nan, after the first
  EXPECT_EQ(anomaly::take(), "forward: op log in blocks.0.attn produced -inf in its output (2, 2)");
  EXPECT_EQ(anomaly::take(), "") << "taken once";
  const Tensor w = div(y, y);  // outside any module
  EXPECT_EQ(anomaly::take(), "forward: op div produced nan in its output (2, 2)");
}

// The gradient of x through scale(scale(x, 1e30), 1e30) at x = 0: every value of the
// forward pass is 0, and the inner scale's gradient for x is 1e60, infinite in float.
// The backward runs after the scopes have ended: each node remembers its module.
TEST(Anomaly, BackwardNamesTheOpWhoseInputGradientWentNonFinite) {
  const anomaly::Detecting on(true);
  anomaly::take();
  const Tensor x = leaf({3}, {0, 0, 0});
  Tensor a, b;  // (3) each
  {
    const ModuleScope scope(anomaly::intern("inner"));
    a = scale(x, 1e30f);
  }
  {
    const ModuleScope scope(anomaly::intern("outer"));
    b = scale(a, 1e30f);
  }
  sum(b).backward();
  EXPECT_EQ(anomaly::take(), "backward: op scale in inner produced a non-finite gradient (inf) for its input 0 (3)");
}

TEST(Anomaly, OffNothingIsLookedAt) {
  anomaly::take();
  const Tensor x = leaf({3}, {0, 0, 0});
  sum(scale(scale(log(x), 1e30f), 1e30f)).backward();
  EXPECT_FALSE(anomaly::detecting());
  EXPECT_FALSE(anomaly::hooks_on());
  EXPECT_EQ(anomaly::take(), "");
}

// A fault puts a NaN into the first op of its name, once, in the phase it names; detection
// then names that op. A fault whose op never runs says so when disarmed.
TEST(Anomaly, AFaultPutsItsNaNIntoTheOpItNames) {
  const anomaly::Detecting on(true);
  anomaly::take();
  const Tensor x = leaf({2, 3}, {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f});
  const ModuleScope scope(anomaly::intern("blocks.1.ffwd"));
  anomaly::arm_fault("gelu", anomaly::Phase::forward);
  Tensor y = gelu(gelu(scale(x, 2.0f)));  // (2, 3)
  EXPECT_TRUE(std::isnan(y.data()[0]));
  EXPECT_TRUE(anomaly::disarm_fault());
  EXPECT_EQ(anomaly::take(), "forward: op gelu in blocks.1.ffwd produced nan in its output (2, 3)");

  anomaly::arm_fault("gelu", anomaly::Phase::backward);
  y = gelu(scale(x, 2.0f));
  EXPECT_EQ(anomaly::take(), "") << "a backward fault leaves the forward pass alone";
  sum(y).backward();
  EXPECT_TRUE(anomaly::disarm_fault());
  EXPECT_EQ(anomaly::take(),
            "backward: op gelu in blocks.1.ffwd produced a non-finite gradient (nan) for its input 0 (2, 3)");

  x.zero_grad();  // a leaf's gradient accumulates: the NaN above would be seen again
  anomaly::arm_fault("gelu", anomaly::Phase::forward);
  sum(scale(x, 2.0f)).backward();
  EXPECT_FALSE(anomaly::disarm_fault()) << "no gelu ran";
  EXPECT_EQ(anomaly::take(), "");
}

TEST(Anomaly, InterningGivesOnePointerPerName) {
  const std::string name = "blocks.3.attn";
  EXPECT_EQ(anomaly::intern(name), anomaly::intern("blocks.3.attn"));
  EXPECT_STREQ(anomaly::intern(name), "blocks.3.attn");
  EXPECT_NE(anomaly::intern("blocks.3.ffwd"), anomaly::intern(name));
  EXPECT_STREQ(anomaly::current_module(), "");
}

}  // namespace
}  // namespace folio
