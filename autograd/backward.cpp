// Reverse-mode autodiff: a depth-first topological sort of the nodes above the root,
// then a walk in reverse order. Each node's output gradient has been accumulated (+=)
// by all of its consumers before the node runs, so a tensor used twice receives both
// contributions. A node frees its closure (and with it the data it saved) and its
// gradient as soon as it has run: memory falls as backward proceeds.
#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/error.h"
#include "autograd/anomaly.h"
#include "autograd/parallel.h"
#include "autograd/tensor.h"

namespace folio {
namespace {

using NodePtr = std::shared_ptr<Node>;

// Producers come before the nodes that consumed them.
std::vector<NodePtr> topological_order(const NodePtr& root) {
  std::vector<NodePtr> order;
  std::unordered_set<Node*> seen{root.get()};
  std::vector<std::pair<NodePtr, size_t>> stack{{root, 0}};  // (node, next input)
  while (!stack.empty()) {
    auto& [n, next] = stack.back();
    if (next < n->inputs.size()) {
      const NodePtr& in = n->inputs[next++].node;
      if (in && seen.insert(in.get()).second) stack.push_back({in, 0});
    } else {
      order.push_back(n);
      stack.pop_back();
    }
  }
  return order;
}

// What the node's backward will read must still be what its forward saw.
void check_saved(const Node& node) {
  for (int i = 0; i < node.n_saved; ++i) {
    const SavedVersion& s = node.saved[i];
    if (s.storage->version != s.version)
      fail("backward", "a tensor that ", node.op, " saved for its gradient was modified in place after the forward "
           "pass (version ", s.storage->version, ", saved at ", s.version, "): run the forward again after changing it");
  }
}

// Every check before anything runs: a refused backward leaves every gradient as it was.
void check_graph(const std::vector<NodePtr>& order) {
  for (const NodePtr& node : order) {
    if (!node->backward) fail("backward", "the graph through ", node->op, " was already used by a backward pass");
    check_saved(*node);
  }
}

// The leaves each node is the last to write, by the node's place in `order`: the walk
// runs backwards, so a leaf's last writer is its consumer with the smallest place.
// (place, leaf) pairs, the walk's order (places descending).
std::vector<std::pair<size_t, std::shared_ptr<TensorImpl>>> last_writers(const std::vector<NodePtr>& order) {
  std::unordered_map<TensorImpl*, size_t> place;
  std::vector<std::shared_ptr<TensorImpl>> leaves;
  for (size_t i = order.size(); i-- > 0;)
    for (const Edge& e : order[i]->inputs)
      if (e.leaf) {
        auto [it, fresh] = place.insert({e.leaf.get(), i});
        if (fresh) leaves.push_back(e.leaf);
        it->second = i;
      }
  std::vector<std::pair<size_t, std::shared_ptr<TensorImpl>>> out;
  for (auto& leaf : leaves) out.push_back({place[leaf.get()], leaf});
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return out;
}

void run_backward(const std::vector<NodePtr>& order, const Tensor::LeafReady* on_leaf_ready = nullptr) {
  std::vector<std::pair<size_t, std::shared_ptr<TensorImpl>>> ready;
  if (on_leaf_ready) ready = last_writers(order);
  size_t next_ready = 0;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node& node = **it;
    BackwardFn fn = std::move(node.backward);
    node.backward = nullptr;
    if (node.grad) {  // else nothing flowed here (e.g. an unused output)
      auto g = std::make_shared<TensorImpl>();
      g->shape = node.shape;
      g->data = std::move(node.grad);
      fn(Tensor(std::move(g)), InputGrads(node));
      if (anomaly::hooks_on()) anomaly::after_backward(node);  // --detect-anomaly: off, one branch
    }
    node.inputs.clear();  // the graph below is no longer reachable from here
    node.n_saved = 0;     // the saved data went with the closure
    const size_t place = size_t(order.rend() - it) - 1;
    for (; next_ready < ready.size() && ready[next_ready].first == place; ++next_ready)
      (*on_leaf_ready)(*ready[next_ready].second);
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
  std::vector<NodePtr> order;
  float* g;
  if (is_leaf()) {
    g = grad_data();
  } else {
    order = topological_order(impl_->node);
    check_graph(order);
    Node& node = *impl_->node;
    if (!node.grad) {
      node.grad = std::make_shared<Storage>(size_t(n));
      std::memset(node.grad->data, 0, sizeof(float) * n);
    }
    g = node.grad->data;
  }
#pragma omp parallel for simd if (n >= kParallelGrain)
  for (int64_t i = 0; i < n; ++i) g[i] += src[i];
  if (!is_leaf()) run_backward(order);
}

void Tensor::backward(const LeafReady& on_leaf_ready) const {
  if (!requires_grad()) fail("backward", "the tensor of shape ", shape(), " does not require grad");
  if (numel() != 1) fail("backward", "a non-scalar output of shape ", shape(), " needs an explicit gradient");
  if (is_leaf()) {
    grad_data()[0] += 1.0f;
    return on_leaf_ready(*impl_);
  }
  const std::vector<NodePtr> order = topological_order(impl_->node);
  check_graph(order);
  Node& node = *impl_->node;
  if (!node.grad) {
    node.grad = std::make_shared<Storage>(size_t(1));
    node.grad->data[0] = 0.0f;
  }
  node.grad->data[0] += 1.0f;
  run_backward(order, &on_leaf_ready);
}

}  // namespace folio
