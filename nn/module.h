#pragma once
// Module: parameters and child modules registered by name, so that every parameter
// has a stable dotted name (blocks.0.attn.heads.1.query.weight) for checkpoints.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/ops.h"

namespace folio::nn {

using NamedParameters = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  virtual ~Module() = default;

  NamedParameters named_parameters() const;  // depth-first, in registration order
  std::vector<Tensor> parameters() const;
  // The modules below this one with their dotted names (blocks.0.attn), depth-first,
  // in registration order.
  std::vector<std::pair<std::string, const Module*>> named_modules() const;
  int64_t num_parameters() const;
  void zero_grad() const;

  void train(bool on = true);  // switches dropout (recursively)
  void eval() { train(false); }
  bool training() const { return training_; }

  // The precision of the module's matrix products, forward and backward (recursively;
  // autograd/ops.h). A setting of the model, like train(), rather than a scoped guard
  // such as torch.autocast: a guard is state of the thread that sets it, and
  // data-parallel training runs the model's replicas on other threads, which would
  // not see it; a setting travels with the model (DataParallel copies it to the
  // replicas as it copies train()). Each product records its precision for its own
  // backward, so a graph is differentiated as it was built.
  void set_precision(Precision p);
  Precision precision() const { return precision_; }

 protected:
  const Tensor& register_parameter(std::string name, Tensor t);
  template <class M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> m) {
    children_.emplace_back(std::move(name), m);
    return m;
  }

 private:
  void collect(const std::string& prefix, NamedParameters& out) const;
  NamedParameters params_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  Precision precision_ = Precision::fp32;
};

// The parameters' gradients as maximal runs of adjacent memory (allocating missing
// gradients): a module's parameters are one run (they share an arena, nn/arena.h).
struct GradRun {
  float* grad;
  int64_t numel;
};
std::vector<GradRun> grad_runs(const std::vector<Tensor>& params);

}  // namespace folio::nn
