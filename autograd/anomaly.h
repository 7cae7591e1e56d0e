#pragma once
// Anomaly detection (folio train --detect-anomaly), torch.autograd.detect_anomaly's
// idea: while it is on, every op's output is checked for non-finite values when the op
// records it (autograd/tensor.cpp: record, the one place every op that builds a graph
// passes through), and every gradient an op's backward produces as soon as it has run
// (autograd/backward.cpp). The first op to produce one is kept, named with the module it
// ran in and the shape, for the caller to take(); the computation goes on (a stop in
// the middle of a data-parallel step would leave the other threads and ranks waiting).
// Off, the default, it costs one predictable branch per op and per backward node.
//   ModuleScope   the module an op runs in (the GPT's forward names its parts)
//   Detecting     switches detection on for a scope; take() the first anomaly found
//   arm_fault     for tests: a NaN put into one op's output or input gradient
// Only ops that record a node are seen: those of a forward pass with grad enabled
// (training), not an evaluation's under NoGradGuard.
#include <atomic>
#include <string>
#include <string_view>

#include "autograd/tensor.h"
#include "base/scoped_value.h"

namespace folio::anomaly {

// A name that lives as long as the process, for ModuleScope and Node::module: a graph
// may outlive the model whose forward built it. Interning the same text twice gives
// the same pointer; meant for a model's few module names, when it is built.
const char* intern(std::string_view name);

// The module ops recorded on this thread run in: "blocks.1.attn", "" outside any.
const char* current_module();
// Ops recorded in this scope (on this thread) run in `interned` (from intern()); the
// previous module comes back when it ends. Costs two thread-local stores.
class ModuleScope : ScopedValue<const char*> {
 public:
  explicit ModuleScope(const char* interned);
};

// Detection on (when `on`) for this object's life, for every thread; off again after.
class Detecting {
 public:
  explicit Detecting(bool on);
  ~Detecting();
  Detecting(const Detecting&) = delete;
  Detecting& operator=(const Detecting&) = delete;

 private:
  bool previous_;
};
bool detecting();
// The first anomaly found since the last take(), "" if none; e.g.
//   "forward: op softmax in blocks.0.attn produced nan in its output (4, 2, 16, 16)"
//   "backward: op matmul in blocks.1.ffwd produced a non-finite gradient (inf) for its input 0 (4, 16, 64)"
std::string take();

// For tests of what finds a non-finite value (--fault-inject nan-forward:OP@K): the next
// op named `op` (ops.h's names: "gelu", "matmul", "linear", ...) to record its output
// (forward) or to write its first input's gradient (backward) gets a NaN in the first
// element of it, once, before detection looks. disarm_fault() ends it and says whether
// it fired.
enum class Phase { forward, backward };
const char* to_string(Phase p);  // "forward", "backward"
void arm_fault(std::string op, Phase phase);
bool disarm_fault();

// autograd's own seams. hooks_on(): detection or a fault is armed; the seams call the
// hooks only then.
namespace detail {
extern std::atomic<bool> hooks;
}
inline bool hooks_on() { return detail::hooks.load(std::memory_order_relaxed); }
// `out` was just computed by `op` (in current_module()).
void after_forward(const Tensor& out, const char* op);
// `node`'s backward has just added into its inputs' gradients.
void after_backward(const Node& node);

}  // namespace folio::anomaly
