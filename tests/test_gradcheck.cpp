// The gradient check itself, and its registry: every op and layer passes; no op of
// ops.h and no module of nn/ lacks a check; a wrong backward is caught and reported
// with its errors.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <set>
#include <sstream>

#include "autograd/parallel.h"
#include "nn/gradcheck_layers.h"
#include "tests/gradcheck.h"
#include "tests/support.h"

namespace folio {
namespace {

// "matmul batched a^T" -> "matmul_batched_aT", "sum axis -1" -> "sum_axis_minus1".
std::string test_name(const ::testing::TestParamInfo<GradcheckCase>& info) {
  std::string out;
  for (char c : info.param.label()) {
    if (std::isalnum(static_cast<unsigned char>(c))) out += c;
    else if (c == '-') out += "minus";
    else if (c != '^' && !out.empty() && out.back() != '_') out += '_';
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out;
}

// One thread, as folio gradcheck: on tensors this small more only wait for each other
// (on a busy machine the MultiHead check took 7 s on 2 threads).
class OneThread : public ::testing::TestWithParam<GradcheckCase> {
 protected:
  void SetUp() override { set_num_threads(1); }
  void TearDown() override { set_num_threads(0); }
};

class OpGradcheck : public OneThread {};
TEST_P(OpGradcheck, Passes) { EXPECT_TRUE(testing::gradcheck(GetParam())); }
INSTANTIATE_TEST_SUITE_P(Registry, OpGradcheck, ::testing::ValuesIn(op_gradcheck_cases()), test_name);

class LayerGradcheck : public OneThread {};
TEST_P(LayerGradcheck, Passes) { EXPECT_TRUE(testing::gradcheck(GetParam())); }
INSTANTIATE_TEST_SUITE_P(Registry, LayerGradcheck, ::testing::ValuesIn(nn::layer_gradcheck_cases()), test_name);

std::set<std::string> names(const std::vector<GradcheckCase>& cases) {
  std::set<std::string> out;
  for (const GradcheckCase& c : cases) out.insert(c.name);
  return out;
}

// The identifiers that follow `prefix` at the start of a line of `file` (that also
// holds `and_then`): the functions or classes it declares.
std::set<std::string> declared(const std::string& file, const std::string& prefix, const std::string& and_then = "") {
  std::istringstream text(testing::slurp(std::string(FOLIO_SOURCE_DIR) + "/" + file));
  std::set<std::string> out;
  for (std::string line; std::getline(text, line);) {
    if (line.rfind(prefix, 0) != 0 || line.find(and_then) == std::string::npos) continue;
    size_t end = prefix.size();
    while (end < line.size() && (std::isalnum(static_cast<unsigned char>(line[end])) || line[end] == '_')) ++end;
    out.insert(line.substr(prefix.size(), end - prefix.size()));
  }
  return out;
}

// A new op or module fails here until it has a check in the registry.
TEST(GradcheckRegistry, CoversEveryOpOfOpsH) {
  std::set<std::string> ops = declared("autograd/ops.h", "Tensor ");
  ops.merge(declared("autograd/ops.h", "std::vector<Tensor> "));
  EXPECT_GE(ops.size(), 28u);  // the prefixes still find them
  const std::set<std::string> checked = names(op_gradcheck_cases());
  for (const std::string& op : ops) EXPECT_TRUE(checked.count(op)) << op << " has no case in autograd/gradcheck_ops.cpp";
  for (const std::string& name : checked) EXPECT_TRUE(ops.count(name)) << name << " is not an op of ops.h";
}

TEST(GradcheckRegistry, CoversEveryModuleOfNn) {
  std::set<std::string> modules;
  for (const char* h : {"nn/layers.h", "nn/attention.h", "nn/transformer.h"})
    modules.merge(declared(h, "class ", ": public Module"));
  EXPECT_GE(modules.size(), 9u);
  const std::set<std::string> checked = names(nn::layer_gradcheck_cases());
  for (const std::string& m : modules) EXPECT_TRUE(checked.count(m)) << m << " has no case in nn/gradcheck_layers.cpp";
  for (const std::string& name : checked) EXPECT_TRUE(modules.count(name)) << name << " is not a module of nn/";
}

// The check must catch what it is for. x * x with a backward of `factor` * 2x * g,
// or (factor < 0) a backward that never touches the input's gradient.
Tensor square_with_backward(const Tensor& x, float factor) {
  Tensor out = Tensor::empty(x.shape());
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) out.data()[i] = x.data()[i] * x.data()[i];
  record(out, "square_with_backward", {&x}, [sx = x.detach(), factor, n](const Tensor& grad, const InputGrads& in) {
    if (factor < 0.0f) return;
    in.write(0, [&](float* gx) {
      for (int64_t i = 0; i < n; ++i) gx[i] += factor * 2.0f * sx.data()[i] * grad.data()[i];
    });
  });
  return out;
}

GradcheckCase square_case(float factor) {
  return {"square", cat("backward x ", factor), [factor] {
            return GradcheckSetup{[factor](const std::vector<Tensor>& v) { return square_with_backward(v[0], factor); },
                                  {testing::param({3, 2}, 1)}, 0, ""};
          }};
}

TEST(Gradcheck, PassesTheRightBackward) {  // the control for the ones below
  const GradcheckResult r = square_case(1.0f).run();
  EXPECT_TRUE(r.pass()) << r.failure();
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_LT(r.max_abs_error(), 1e-3);
  EXPECT_EQ(r.failure(), "");
}

// A backward twice too large: the analytic gradient is 4 x r where the numeric one is
// 2 x r, so every element is off by 2 |x r|, half the larger of the two.
TEST(Gradcheck, ReportsABackwardTwiceTooLargeWithItsErrors) {
  const GradcheckResult r = square_case(2.0f).run();
  ASSERT_FALSE(r.pass()) << "a gradient twice too large passed the check";
  ASSERT_EQ(r.inputs.size(), 1u);
  const InputGradcheck& in = r.inputs[0];
  EXPECT_FALSE(in.pass);
  EXPECT_TRUE(in.received_gradient);
  EXPECT_EQ(in.shape, Shape({3, 2}));
  // R as the check draws it (GradcheckOptions::seed): the expected errors, exactly.
  const Tensor x = testing::param({3, 2}, 1);
  Rng rng(GradcheckOptions{}.seed);
  const Tensor rr = Tensor::randn({3, 2}, rng);
  double largest = 0.0;
  int64_t where = -1;
  for (int64_t i = 0; i < 6; ++i) {
    const double g = 2.0 * x.data()[i] * rr.data()[i];
    if (std::abs(g) > largest) largest = std::abs(g), where = i;
  }
  EXPECT_NEAR(in.max_abs_error, largest, 1e-3 * largest);
  EXPECT_NEAR(r.max_abs_error(), largest, 1e-3 * largest);
  EXPECT_NEAR(in.max_rel_error, 0.5, 1e-3);
  EXPECT_EQ(in.worst, where);  // the largest error is the furthest outside its tolerance
  EXPECT_NEAR(in.worst_numeric, 2.0 * x.data()[where] * rr.data()[where], 1e-3);
  EXPECT_NEAR(in.worst_analytic, 2.0 * in.worst_numeric, 1e-3);
  testing::expect_contains(r.failure(), {cat("input 0 (3, 2) element ", where, ": analytic "), " vs numeric ",
                                         "max rel error 0.5"});
  // GoogleTest's adapter fails with the same message.
  const ::testing::AssertionResult a = testing::gradcheck(square_case(2.0f));
  EXPECT_FALSE(a);
  EXPECT_EQ(a.message(), r.failure());
}

TEST(Gradcheck, ReportsABackwardTenPercentOff) {  // well inside a factor of 2, outside rtol
  const GradcheckResult r = square_case(1.1f).run();
  EXPECT_FALSE(r.pass()) << "a gradient 10% too large passed the check";
  EXPECT_NEAR(r.max_rel_error(), 0.1 / 1.1, 1e-3);
}

TEST(Gradcheck, ReportsAnInputThatReceivedNoGradient) {
  const GradcheckResult r = square_case(-1.0f).run();
  ASSERT_FALSE(r.pass()) << "an input without a gradient passed the check";
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_FALSE(r.inputs[0].received_gradient);
  EXPECT_GT(r.max_abs_error(), 0.1);  // compared as zero against the numeric gradient
  EXPECT_EQ(r.failure(), "input 0 received no gradient");
}

TEST(Gradcheck, ReportsAnOutputWithoutGraph) {
  const GradcheckResult r = gradcheck([](const std::vector<Tensor>& v) { return v[0].detach(); }, {testing::param({2}, 1)});
  EXPECT_FALSE(r.pass());
  EXPECT_EQ(r.failure(), "output does not require grad");
}

TEST(Gradcheck, ANanGradientFails) {
  const GradcheckResult r = gradcheck([](const std::vector<Tensor>& v) { return log(v[0]); },
                                      {Tensor::from({2}, std::vector<float>{-1.0f, 2.0f}).set_requires_grad()});
  EXPECT_FALSE(r.pass());
  EXPECT_TRUE(std::isnan(r.max_abs_error()));
  EXPECT_EQ(r.inputs[0].worst, 0);
}

// The table `folio gradcheck` prints: a row per case, what failed under it, a summary,
// and false when any case failed (folio gradcheck then exits 1).
TEST(Gradcheck, TableMarksAWrongBackwardFail) {
  const GradcheckCase good = square_case(1.0f), bad = square_case(2.0f);
  const GradcheckCase throws{"broken", "", []() -> GradcheckSetup { fail("broken", "no setup"); }};
  std::ostringstream out;
  EXPECT_FALSE(print_gradcheck_table({&good, &bad, &throws}, out));
  const std::string text = out.str();
  std::istringstream lines(text);
  std::string header, row_good, row_bad, why_bad, row_throws, why_throws, summary;
  for (std::string* l : {&header, &row_good, &row_bad, &why_bad, &row_throws, &why_throws, &summary})
    std::getline(lines, *l);
  EXPECT_EQ(header.rfind("check", 0), 0u) << text;
  testing::expect_contains(header, {"shapes", "max abs err", "max rel err", "result"});
  EXPECT_EQ(row_good.rfind("square backward x 1 ", 0), 0u) << text;
  testing::expect_contains(row_good, {"(3, 2) -> (3, 2)", "PASS"});
  testing::expect_contains(row_bad, {"square backward x 2 ", "5.00e-01", "FAIL"});
  testing::expect_contains(why_bad, {"  input 0 (3, 2) element "});
  testing::expect_contains(row_throws, {"broken", "FAIL"});
  EXPECT_EQ(why_throws, "  error: [broken] no setup");
  EXPECT_EQ(summary.rfind("3 checks: 1 passed, 2 failed", 0), 0u) << text;

  std::ostringstream only_good;
  EXPECT_TRUE(print_gradcheck_table({&good}, only_good));
  EXPECT_NE(only_good.str().find("1 check: 1 passed, 0 failed"), std::string::npos) << only_good.str();
}

}  // namespace
}  // namespace folio
