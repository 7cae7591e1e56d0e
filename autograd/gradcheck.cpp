#include "autograd/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <ostream>

#include "base/error.h"

namespace folio {
namespace {

double weighted_sum(const Tensor& out, const Tensor& r) {
  double s = 0.0;
  for (int64_t i = 0; i < out.numel(); ++i) s += double(out.data()[i]) * double(r.data()[i]);
  return s;
}

// The larger of a and b, NaN if either is: a NaN error must not hide behind max().
double max_nan(double a, double b) { return std::isnan(a) || std::isnan(b) ? std::nan("") : std::max(a, b); }

// Compares every element of `x` (input `index`) against central differences.
InputGradcheck check_input(const GradcheckFn& f, std::vector<Tensor>& inputs, size_t index, const Tensor& r,
                           const GradcheckOptions& opt) {
  const Tensor& x = inputs[index];
  InputGradcheck in;
  in.index = index;
  in.shape = x.shape();
  in.received_gradient = x.has_grad();
  const std::vector<float> analytic = in.received_gradient ? x.grad().to_vector() : std::vector<float>(x.numel());
  const double floor = double(opt.atol) / double(opt.rtol);
  double worst_ratio = -1.0;  // error / tolerance of the worst element
  NoGradGuard no_grad;
  for (int64_t i = 0; i < x.numel(); ++i) {
    float* p = x.data() + i;
    const float saved = *p, above = saved + opt.eps, below = saved - opt.eps;
    *p = above;
    const double up = weighted_sum(f(inputs), r);
    *p = below;
    const double down = weighted_sum(f(inputs), r);
    *p = saved;
    // Over the step actually taken: float rounding makes it differ from 2 * eps by up
    // to an ulp of x, 1e-4 of the gradient for x near 1.
    const double numeric = (up - down) / (double(above) - double(below)), a = analytic[size_t(i)];
    const double err = std::abs(a - numeric), magnitude = std::max(std::abs(a), std::abs(numeric));
    const double tolerance = opt.atol + opt.rtol * magnitude;
    const bool ok = err <= tolerance;  // false for NaN
    in.pass = in.pass && ok;
    in.max_abs_error = max_nan(in.max_abs_error, err);
    in.max_rel_error = max_nan(in.max_rel_error, err / std::max(magnitude, floor));
    const double ratio = std::isnan(err) ? std::numeric_limits<double>::infinity() : err / tolerance;
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      in.worst = i, in.worst_analytic = a, in.worst_numeric = numeric;
    }
  }
  in.pass = in.pass && in.received_gradient;
  return in;
}

}  // namespace

GradcheckResult gradcheck(const GradcheckFn& f, std::vector<Tensor> inputs, const GradcheckOptions& opt) {
  GradcheckResult result;
  for (Tensor& x : inputs) x.zero_grad();
  const Tensor out = f(inputs);
  result.output_shape = out.shape();
  if (!out.requires_grad()) {
    result.error = "output does not require grad";
    return result;
  }
  Rng rng(opt.seed);
  const Tensor r = Tensor::randn(out.shape(), rng);
  sum(mul(out, r)).backward();
  for (size_t k = 0; k < inputs.size(); ++k)
    if (inputs[k].requires_grad()) result.inputs.push_back(check_input(f, inputs, k, r, opt));
  return result;
}

bool GradcheckResult::pass() const {
  if (!error.empty()) return false;
  return std::all_of(inputs.begin(), inputs.end(), [](const InputGradcheck& in) { return in.pass; });
}

double GradcheckResult::max_abs_error() const {
  double m = 0.0;
  for (const InputGradcheck& in : inputs) m = max_nan(m, in.max_abs_error);
  return m;
}

double GradcheckResult::max_rel_error() const {
  double m = 0.0;
  for (const InputGradcheck& in : inputs) m = max_nan(m, in.max_rel_error);
  return m;
}

std::string GradcheckResult::failure() const {
  if (!error.empty()) return error;
  for (const InputGradcheck& in : inputs) {
    if (!in.received_gradient) return cat("input ", in.index, " received no gradient");
    if (!in.pass)
      return cat("input ", in.index, " ", in.shape, " element ", in.worst, ": analytic ", in.worst_analytic,
                 " vs numeric ", in.worst_numeric, " (max abs error ", in.max_abs_error, ", max rel error ",
                 in.max_rel_error, ")");
  }
  return "";
}

Tensor randn_leaf(const Shape& shape, uint64_t seed, float stddev) {
  Rng rng(seed);
  return Tensor::randn(shape, rng, stddev).set_requires_grad();
}

GradcheckResult GradcheckCase::run() const {
  GradcheckSetup s = setup();
  return gradcheck(s.f, std::move(s.inputs));
}

namespace {

// "(2, 5, 4) + 15 weights -> (2, 5, 3)": the data inputs, then the module's parameters.
std::string shapes_of(const GradcheckSetup& s, const Shape& out) {
  std::string text;
  auto add = [&](const std::string& part) { text += (text.empty() ? "" : " ") + part; };
  for (size_t k = s.n_weights; k < s.inputs.size(); ++k) add(s.inputs[k].shape().str());
  if (!s.other_inputs.empty()) add(s.other_inputs);
  int64_t weights = 0;
  for (size_t k = 0; k < s.n_weights; ++k) weights += s.inputs[k].numel();
  if (s.n_weights) add(cat("+ ", weights, " weights"));
  return cat(text, " -> ", out);
}

std::string column(double v) {  // 11 wide, as the header's "max abs err"
  char buf[32];
  std::snprintf(buf, sizeof buf, "%11.2e", v);
  return buf;
}

std::string padded(const std::string& s, size_t width) { return s + std::string(width > s.size() ? width - s.size() : 0, ' '); }

}  // namespace

bool print_gradcheck_table(const std::vector<const GradcheckCase*>& cases, std::ostream& out) {
  // Set every case up first (cheap: small tensors, one forward without a graph), so
  // the columns are as wide as their widest entry before the first row is printed.
  struct Row {
    const GradcheckCase* c;
    GradcheckSetup setup;
    std::string shapes, error;
  };
  std::vector<Row> rows;
  size_t label_width = 5, shapes_width = 6;
  for (const GradcheckCase* c : cases) {
    Row row{c, {}, "", ""};
    try {
      row.setup = c->setup();
      NoGradGuard no_grad;
      row.shapes = shapes_of(row.setup, row.setup.f(row.setup.inputs).shape());
    } catch (const std::exception& e) {
      row.error = e.what();
    }
    label_width = std::max(label_width, c->label().size());
    shapes_width = std::max(shapes_width, row.shapes.size());
    rows.push_back(std::move(row));
  }
  out << padded("check", label_width) << "  " << padded("shapes", shapes_width) << "  max abs err  max rel err  result\n";
  int failed = 0;
  for (Row& row : rows) {
    GradcheckResult r;
    if (row.error.empty()) {
      try {
        r = gradcheck(row.setup.f, std::move(row.setup.inputs));
      } catch (const std::exception& e) {
        row.error = e.what();
      }
    }
    const bool pass = row.error.empty() && r.pass();
    failed += !pass;
    out << padded(row.c->label(), label_width) << "  " << padded(row.shapes, shapes_width) << "  "
        << (row.error.empty() ? column(r.max_abs_error()) + "  " + column(r.max_rel_error()) : padded("", 24)) << "  "
        << (pass ? "PASS" : "FAIL") << "\n";
    if (!pass) out << "  " << (row.error.empty() ? r.failure() : "error: " + row.error) << "\n";
    out.flush();
  }
  const GradcheckOptions opt;
  out << rows.size() << (rows.size() == 1 ? " check: " : " checks: ") << rows.size() - size_t(failed) << " passed, " << failed << " failed (eps "
      << opt.eps << "; an element passes when |analytic - numeric| <= " << opt.atol << " + " << opt.rtol
      << " * max(|analytic|, |numeric|))\n";
  return failed == 0;
}

}  // namespace folio
