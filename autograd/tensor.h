#pragma once
// Tensor: a shared handle to contiguous float32 data, its gradient, and the graph
// node that produced it. Copies of a Tensor alias the same data (like torch.Tensor).
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

#include "base/rng.h"
#include "base/scoped_value.h"
#include "autograd/shape.h"

namespace folio {

// A float buffer from the pool, returned to it when the last owner goes.
struct Storage {
  float* data;
  size_t size;
  // Counts in-place writes (Tensor::mark_modified). An op that saves this data for
  // backward records the count, and backward refuses to run on a changed one.
  uint64_t version = 0;
  explicit Storage(size_t n);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

class Tensor;
struct Node;

struct TensorImpl {
  Shape shape;
  std::shared_ptr<Storage> data;
  int64_t offset = 0;              // first element in data
  std::shared_ptr<Storage> grad;   // allocated (zeroed) on first use
  int64_t grad_offset = 0;         // first element in grad (non-zero only for aliases)
  std::shared_ptr<Node> node;      // the op that produced this tensor; null for leaves
  bool requires_grad = false;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  static Tensor empty(const Shape& shape);  // uninitialised
  static Tensor zeros(const Shape& shape);
  static Tensor ones(const Shape& shape);
  static Tensor full(const Shape& shape, float value);
  static Tensor scalar(float value);        // 0-d
  static Tensor from(const Shape& shape, std::span<const float> values);
  static Tensor randn(const Shape& shape, Rng& rng, float stddev = 1.0f);
  static Tensor uniform(const Shape& shape, Rng& rng, float lo = 0.0f, float hi = 1.0f);

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl_->shape; }
  int ndim() const { return impl_->shape.ndim; }
  int64_t size(int dim) const { return impl_->shape[dim]; }
  int64_t numel() const { return impl_->shape.numel(); }

  float* data() const { return impl_->data->data + impl_->offset; }
  float item() const;                    // the value of a one-element tensor
  std::vector<float> to_vector() const;
  float at(std::initializer_list<int64_t> index) const;  // slow, for tests

  bool requires_grad() const { return impl_->requires_grad; }
  Tensor& set_requires_grad(bool on = true);
  bool is_leaf() const { return impl_->node == nullptr; }

  bool has_grad() const { return impl_->grad != nullptr; }
  // A leaf's gradient (non-leaf gradients live in the graph and are freed by backward).
  Tensor grad() const;          // the gradient as a tensor (no graph); undefined if none
  float* grad_data() const;     // allocates a zero gradient on first use (leaves)
  void zero_grad() const;       // sets an existing gradient to zero

  Tensor detach() const;        // same data, no graph, no grad
  Tensor clone() const;         // a copy of the data, no graph
  // A leaf alias of `shape` at element `offset` from this leaf's first element; it
  // shares both data and gradient, so parameters can be views of one flat buffer
  // (nn/arena.h). The range may extend past this tensor but not past its storage.
  Tensor alias(int64_t offset, const Shape& shape) const;

  // Code that writes into data() in place calls mark_modified(): a graph that saved
  // the old values then fails in backward instead of computing gradients from the new
  // ones. Tensors sharing the storage (views, aliases, detached handles) share the count.
  void mark_modified() const { ++impl_->data->version; }
  uint64_t version() const { return impl_->data->version; }

  // Reverse-mode autodiff from this tensor: a scalar, or any shape given its gradient.
  void backward() const;
  void backward(const Tensor& grad) const;
  // backward() of a scalar that calls `on_leaf_ready` once for every leaf that requires
  // grad as soon as no op left in the walk adds into its gradient: a data-parallel run
  // starts sending a parameter's gradient while the rest of the backward pass runs.
  using LeafReady = std::function<void(const TensorImpl& leaf)>;
  void backward(const LeafReady& on_leaf_ready) const;

  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& o) const { return impl_ == o.impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// Where an op sends the gradient of one of its inputs: the node that produced that
// input, or the input itself when it is a leaf that requires grad; neither when the
// input needs no gradient. An edge never holds a non-leaf input's data, so a
// forward pass keeps alive only what some backward will read (PyTorch's design).
struct Edge {
  std::shared_ptr<Node> node;
  std::shared_ptr<TensorImpl> leaf;
  Shape shape;  // the input's shape
  bool active() const { return node || leaf; }
};

// Gradient buffers of an op's inputs, handed to its backward. write(i, fn) hands fn
// input i's buffer and returns true, or returns false without calling fn when input i
// needs no gradient. fn takes one of two forms:
//   fn(float* g)                 adds its contribution into g (zeroed on first use);
//   fn(float* g, bool overwrite) for a kernel that writes every element: stores when
//                                overwrite (g's first contribution: no zero-fill, no
//                                read), else adds.
// The buffer is taken and written in one step: two inputs may be one tensor with one
// buffer, so a buffer must not be held while another is taken (its overwrite flag
// would be stale and a contribution lost). fn calling write again is an error.
// Keep a hot loop's scalars out of fn's captured references: GCC then assumes a store
// to g may change them, and such loops ran up to 2.7x slower. Pass them to a function
// (flat_map, dropout_backward) or capture them by value, and measure.
class InputGrads {
 public:
  explicit InputGrads(Node& node) : node_(node) {}
  template <class Fn>
  bool write(size_t i, Fn&& fn) const {
    const Slot s = take(i);
    if (!s.data) return false;
    struct Done {
      bool& writing;
      ~Done() { writing = false; }
    } done{writing_};
    if constexpr (std::is_invocable_v<Fn&, float*, bool>) {
      fn(s.data, s.overwrite);
    } else {
      if (s.overwrite) zero(i, s.data);
      fn(s.data);
    }
    return true;
  }

 private:
  struct Slot {
    float* data;
    bool overwrite;
  };
  Slot take(size_t i) const;  // marks a write under way
  void zero(size_t i, float* data) const;
  Node& node_;
  mutable bool writing_ = false;
};

// The backward of one op: reads the output's gradient and accumulates into its
// inputs' gradients. It captures only the data it reads (saved tensors).
using BackwardFn = std::function<void(const Tensor& grad_out, const InputGrads& in)>;

// Data a backward reads, and its version when the op saved it. The storage is kept
// alive by the backward closure, which holds the saved tensor.
struct SavedVersion {
  const Storage* storage = nullptr;
  uint64_t version = 0;
};

struct Node {
  static constexpr int kMaxSaved = 3;
  const char* op;
  const char* module = "";        // the module the op ran in (autograd/anomaly.h), for messages
  std::vector<Edge> inputs;
  BackwardFn backward;            // released once run: a graph is used once
  std::shared_ptr<Storage> grad;  // gradient of the output, accumulated from its consumers
  Shape shape;                    // of the output
  SavedVersion saved[kMaxSaved];  // checked before backward runs; inline: no allocation
  int n_saved = 0;
};

// Autograd recording is on by default; a NoGradGuard switches it off in its scope.
bool grad_enabled();
class NoGradGuard : ScopedValue<bool> {
 public:
  NoGradGuard();
};

// For op implementations: does an op over `inputs` need to record a node?
bool needs_grad(std::initializer_list<const Tensor*> inputs);
// Makes `out` a non-leaf produced by `op` (only if grad mode is on and some input
// requires grad). The inputs are only used to build edges; they are not kept.
// `saved` lists the tensors whose data `backward` reads (it holds them itself; undefined
// ones are skipped, at most Node::kMaxSaved): backward fails if one was changed in place
// (Tensor::mark_modified) after this call.
void record(Tensor& out, const char* op, std::initializer_list<const Tensor*> inputs, BackwardFn backward,
            std::initializer_list<const Tensor*> saved = {});
void record(Tensor& out, const char* op, const std::vector<Tensor>& inputs, BackwardFn backward);

}  // namespace folio
