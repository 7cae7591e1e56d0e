#include "nn/module.h"

#include <cstring>

#include "base/error.h"

namespace folio::nn {

const Tensor& Module::register_parameter(std::string name, Tensor t) {
  t.set_requires_grad(true);
  params_.emplace_back(std::move(name), std::move(t));
  return params_.back().second;
}

void Module::collect(const std::string& prefix, NamedParameters& out) const {
  for (const auto& [name, t] : params_) out.emplace_back(prefix + name, t);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out);
}

NamedParameters Module::named_parameters() const {
  NamedParameters out;
  collect("", out);
  return out;
}

std::vector<std::pair<std::string, const Module*>> Module::named_modules() const {
  std::vector<std::pair<std::string, const Module*>> out;
  for (const auto& [name, child] : children_) {
    out.emplace_back(name, child.get());
    for (auto& [below, m] : child->named_modules()) out.emplace_back(name + "." + below, m);
  }
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const Tensor& t : parameters()) n += t.numel();
  return n;
}

void Module::zero_grad() const {
  for (const GradRun& run : grad_runs(parameters())) std::memset(run.grad, 0, sizeof(float) * run.numel);
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::set_precision(Precision p) {
  precision_ = p;
  for (auto& [name, child] : children_) child->set_precision(p);
}

std::vector<GradRun> grad_runs(const std::vector<Tensor>& params) {
  std::vector<GradRun> runs;
  for (const Tensor& p : params) {
    float* g = p.grad_data();
    if (!runs.empty() && runs.back().grad + runs.back().numel == g)
      runs.back().numel += p.numel();
    else
      runs.push_back({g, p.numel()});
  }
  return runs;
}

}  // namespace folio::nn
