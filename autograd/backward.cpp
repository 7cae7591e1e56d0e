// Reverse-mode autodiff: a depth-first topological sort from the root, then a walk in
// reverse order that hands each node its output's gradient. Gradients accumulate with
// +=, so a tensor used twice receives both contributions. The graph is released as
// the walk passes, and so are the gradients of intermediate tensors.
#include <memory>
#include <unordered_set>
#include <vector>

#include "autograd/error.h"
#include "autograd/parallel.h"
#include "autograd/tensor.h"

namespace folio {
namespace {

using ImplPtr = std::shared_ptr<TensorImpl>;

// Inputs come before the tensors computed from them. Holding owners keeps every
// tensor alive while the walk frees the nodes that referenced them.
std::vector<ImplPtr> topological_order(const ImplPtr& root) {
  std::vector<ImplPtr> order;
  std::unordered_set<TensorImpl*> seen{root.get()};
  std::vector<std::pair<ImplPtr, size_t>> stack{{root, 0}};  // (tensor, next input)
  while (!stack.empty()) {
    auto& [t, next] = stack.back();
    if (t->node && next < t->node->inputs.size()) {
      const ImplPtr& in = t->node->inputs[next++].impl_ptr();
      if (in && in->requires_grad && seen.insert(in.get()).second) stack.push_back({in, 0});
    } else {
      order.push_back(t);
      stack.pop_back();
    }
  }
  return order;
}

void run_backward(const ImplPtr& root) {
  std::vector<ImplPtr> order = topological_order(root);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    TensorImpl* t = it->get();
    if (!t->node) continue;  // a leaf: its gradient stays
    std::shared_ptr<Node> node = std::move(t->node);
    t->requires_grad = false;  // spent: nothing above it any more
    if (!t->grad) continue;    // nothing flowed here (e.g. an unused output)
    auto g = std::make_shared<TensorImpl>();
    g->shape = t->shape;
    g->data = std::move(t->grad);
    g->offset = t->grad_offset;
    node->backward(Tensor(std::move(g)));
  }
}

}  // namespace

void Tensor::backward() const {
  if (numel() != 1)
    fail("backward", "a non-scalar output of shape ", shape(), " needs an explicit gradient");
  backward(Tensor::ones(shape()));
}

void Tensor::backward(const Tensor& grad) const {
  if (!requires_grad()) fail("backward", "the tensor of shape ", shape(), " does not require grad");
  if (grad.shape() != shape())
    fail("backward", "gradient of shape ", grad.shape(), " for a tensor of shape ", shape());
  const int64_t n = numel();
  const float* src = grad.data();
  float* g = grad_data();
#pragma omp parallel for simd if (n >= kParallelGrain)
  for (int64_t i = 0; i < n; ++i) g[i] += src[i];
  if (!is_leaf()) run_backward(impl_);
}

}  // namespace folio
