#include "autograd/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/error.h"

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

}  // namespace folio
