#include "autograd/tensor.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "autograd/anomaly.h"
#include "autograd/pool.h"

namespace folio {

Storage::Storage(size_t n) : data(pool::acquire(n)), size(n) {}
Storage::~Storage() { pool::release(data, size); }

Tensor Tensor::empty(const Shape& shape) {
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->data = std::make_shared<Storage>(size_t(shape.numel()));
  return Tensor(std::move(impl));
}

Tensor Tensor::full(const Shape& shape, float value) {
  Tensor t = empty(shape);
  std::fill_n(t.data(), t.numel(), value);
  return t;
}
Tensor Tensor::zeros(const Shape& shape) { return full(shape, 0.0f); }
Tensor Tensor::ones(const Shape& shape) { return full(shape, 1.0f); }
Tensor Tensor::scalar(float value) { return full(Shape{}, value); }

Tensor Tensor::from(const Shape& shape, std::span<const float> values) {
  if (int64_t(values.size()) != shape.numel())
    fail("tensor", "shape ", shape, " needs ", shape.numel(), " values, got ", values.size());
  Tensor t = empty(shape);
  std::copy(values.begin(), values.end(), t.data());
  return t;
}

Tensor Tensor::randn(const Shape& shape, Rng& rng, float stddev) {
  Tensor t = empty(shape);
  float* p = t.data();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = stddev * rng.normal();
  return t;
}

Tensor Tensor::uniform(const Shape& shape, Rng& rng, float lo, float hi) {
  Tensor t = empty(shape);
  float* p = t.data();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = rng.uniform(lo, hi);
  return t;
}

float Tensor::item() const {
  if (numel() != 1) fail("item", "needs a tensor of one element, got shape ", shape());
  return data()[0];
}

std::vector<float> Tensor::to_vector() const { return {data(), data() + numel()}; }

float Tensor::at(std::initializer_list<int64_t> index) const {
  if (int(index.size()) != ndim()) fail("at", "index of rank ", index.size(), " for shape ", shape());
  int64_t flat = 0, d = 0;
  for (int64_t i : index) {
    if (i < 0 || i >= size(int(d))) fail("at", "index ", i, " out of range for shape ", shape());
    flat = flat * size(int(d++)) + i;
  }
  return data()[flat];
}

Tensor& Tensor::set_requires_grad(bool on) {
  if (!is_leaf()) fail("requires_grad", "only leaf tensors can change requires_grad");
  impl_->requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const {
  if (!impl_->grad) return {};
  auto g = std::make_shared<TensorImpl>();
  g->shape = impl_->shape;
  g->data = impl_->grad;
  g->offset = impl_->grad_offset;
  return Tensor(std::move(g));
}

float* Tensor::grad_data() const {
  if (!is_leaf()) fail("grad", "a non-leaf tensor's gradient lives in the graph (", impl_->node->op, ")");
  if (!impl_->grad) {
    // A leaf alias shares the gradient of the flat tensor it came from (made when
    // the alias was); everything else owns a gradient of exactly its own size.
    impl_->grad = std::make_shared<Storage>(size_t(numel()));
    impl_->grad_offset = 0;
    std::memset(impl_->grad->data, 0, sizeof(float) * numel());
  }
  return impl_->grad->data + impl_->grad_offset;
}

void Tensor::zero_grad() const {
  if (impl_->grad) std::memset(impl_->grad->data + impl_->grad_offset, 0, sizeof(float) * numel());
}

Tensor Tensor::detach() const {
  auto d = std::make_shared<TensorImpl>();
  d->shape = impl_->shape;
  d->data = impl_->data;
  d->offset = impl_->offset;
  return Tensor(std::move(d));
}

Tensor Tensor::clone() const {
  Tensor c = empty(shape());
  std::memcpy(c.data(), data(), sizeof(float) * numel());
  return c;
}

Tensor Tensor::alias(int64_t offset, const Shape& shape) const {
  if (!is_leaf()) fail("alias", "only leaf tensors can be aliased");
  const int64_t room = int64_t(impl_->data->size) - impl_->offset;
  if (offset < 0 || offset + shape.numel() > room)
    fail("alias", "range [", offset, ", ", offset + shape.numel(), ") outside a storage of ", room,
         " elements from this tensor");
  if (requires_grad()) grad_data();  // the alias must share an existing gradient buffer
  auto a = std::make_shared<TensorImpl>();
  a->shape = shape;
  a->data = impl_->data;
  a->offset = impl_->offset + offset;
  a->requires_grad = impl_->requires_grad;
  if (impl_->grad) {
    if (impl_->grad_offset + offset + shape.numel() > int64_t(impl_->grad->size))
      fail("alias", "range outside the gradient storage");
    a->grad = impl_->grad;
    a->grad_offset = impl_->grad_offset + offset;
  }
  return Tensor(std::move(a));
}

namespace {
thread_local bool g_grad_enabled = true;
}

bool grad_enabled() { return g_grad_enabled; }
NoGradGuard::NoGradGuard() : ScopedValue(g_grad_enabled, false) {}

bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!g_grad_enabled) return false;
  for (const Tensor* t : inputs)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}

namespace {
Edge edge_to(const Tensor& t) {
  Edge e;
  if (!t.defined() || !t.requires_grad()) return e;
  e.shape = t.shape();
  if (t.is_leaf())
    e.leaf = t.impl_ptr();
  else
    e.node = t.impl()->node;
  return e;
}

template <class Inputs, class Get>
void record_edges(Tensor& out, const char* op, const Inputs& inputs, Get get, BackwardFn backward,
                  std::initializer_list<const Tensor*> saved) {
  if (!g_grad_enabled) return;
  if (anomaly::hooks_on()) anomaly::after_forward(out, op);  // --detect-anomaly: off, one branch
  auto node = std::make_shared<Node>();
  bool any = false;
  for (const auto& in : inputs) {
    node->inputs.push_back(edge_to(get(in)));
    any = any || node->inputs.back().active();
  }
  if (!any) return;
  for (const Tensor* t : saved) {
    if (!t->defined()) continue;
    if (node->n_saved == Node::kMaxSaved) fail(op, "saves more than ", Node::kMaxSaved, " tensors for backward");
    node->saved[node->n_saved++] = {t->impl()->data.get(), t->version()};
  }
  node->op = op;
  node->module = anomaly::current_module();
  node->backward = std::move(backward);
  node->shape = out.shape();
  out.impl()->requires_grad = true;
  out.impl()->node = std::move(node);
}
}  // namespace

void record(Tensor& out, const char* op, std::initializer_list<const Tensor*> inputs, BackwardFn backward,
            std::initializer_list<const Tensor*> saved) {
  record_edges(out, op, inputs, [](const Tensor* t) -> const Tensor& { return *t; }, std::move(backward), saved);
}

void record(Tensor& out, const char* op, const std::vector<Tensor>& inputs, BackwardFn backward) {
  record_edges(out, op, inputs, [](const Tensor& t) -> const Tensor& { return t; }, std::move(backward), {});
}

InputGrads::Slot InputGrads::take(size_t i) const {
  if (writing_) fail("backward", node_.op, ": a gradient buffer was taken while another is being written");
  if (i >= node_.inputs.size()) return {nullptr, false};
  Edge& e = node_.inputs[i];
  Slot s{nullptr, false};
  if (e.leaf) {
    s = {Tensor(e.leaf).grad_data(), false};  // a leaf's gradient accumulates across passes
  } else if (e.node) {
    Node& producer = *e.node;
    const bool fresh = !producer.grad;
    if (fresh) producer.grad = std::make_shared<Storage>(size_t(producer.shape.numel()));
    s = {producer.grad->data, fresh};
  }
  writing_ = s.data != nullptr;
  return s;
}

void InputGrads::zero(size_t i, float* data) const {
  std::memset(data, 0, sizeof(float) * size_t(node_.inputs[i].node->shape.numel()));
}

}  // namespace folio
