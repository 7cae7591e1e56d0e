#include "autograd/anomaly.h"

#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <set>
#include <utility>

#include "base/error.h"

namespace folio::anomaly {

namespace detail {
std::atomic<bool> hooks{false};
}

namespace {

thread_local const char* t_module = "";

// Set before a step and read by every thread of it; the mutex guards the rare writes
// (an anomaly found, a fault fired) and what they write.
std::atomic<bool> g_detecting{false};
std::atomic<bool> g_armed{false};
std::mutex g_mutex;
std::string g_first;   // the first anomaly since take()
std::string g_fault_op;
Phase g_fault_phase = Phase::forward;
bool g_fault_fired = false;

void update_hooks() { detail::hooks.store(g_detecting.load() || g_armed.load()); }

// The first non-finite value of data (n,), or 0 (finite) if none.
float first_non_finite(const float* data, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(data[i])) return data[i];
  return 0.0f;
}

// "nan" (whatever its sign bit: x86's own NaNs have it set), "inf" or "-inf".
const char* name_of(float bad) { return std::isnan(bad) ? "nan" : bad > 0 ? "inf" : "-inf"; }

std::string where(const char* op, const char* module) {
  return *module ? cat("op ", op, " in ", module) : cat("op ", op);
}

void found(std::string message) {
  const std::lock_guard lock(g_mutex);
  if (g_first.empty()) g_first = std::move(message);
}

// True once, for the first op named `op` in `phase` while a fault is armed.
bool fault_fires(const char* op, Phase phase) {
  if (!g_armed.load(std::memory_order_relaxed)) return false;
  const std::lock_guard lock(g_mutex);
  if (g_fault_fired || g_fault_phase != phase || g_fault_op != op) return false;
  g_fault_fired = true;
  return true;
}

// A gradient buffer an edge leads to: its first element and count; null when nothing
// was written into it.
std::pair<float*, int64_t> gradient_of(const Edge& e) {
  if (e.node) return {e.node->grad ? e.node->grad->data : nullptr, e.node->shape.numel()};
  if (e.leaf && e.leaf->grad) return {e.leaf->grad->data + e.leaf->grad_offset, e.leaf->shape.numel()};
  return {nullptr, 0};
}

}  // namespace

const char* intern(std::string_view name) {
  static std::mutex mutex;
  static std::set<std::string, std::less<>> names;  // nodes keep their pointers: never erased
  const std::lock_guard lock(mutex);
  auto it = names.find(name);
  if (it == names.end()) it = names.emplace(name).first;
  return it->c_str();
}

const char* current_module() { return t_module; }
ModuleScope::ModuleScope(const char* interned) : ScopedValue(t_module, interned) {}

Detecting::Detecting(bool on) : previous_(g_detecting.load()) {
  g_detecting.store(on || previous_);
  update_hooks();
}
Detecting::~Detecting() {
  g_detecting.store(previous_);
  update_hooks();
}
bool detecting() { return g_detecting.load(std::memory_order_relaxed); }

std::string take() {
  const std::lock_guard lock(g_mutex);
  return std::exchange(g_first, std::string());
}

const char* to_string(Phase p) { return p == Phase::backward ? "backward" : "forward"; }

void arm_fault(std::string op, Phase phase) {
  {
    const std::lock_guard lock(g_mutex);
    g_fault_op = std::move(op), g_fault_phase = phase, g_fault_fired = false;
  }
  g_armed.store(true);
  update_hooks();
}

bool disarm_fault() {
  g_armed.store(false);
  update_hooks();
  const std::lock_guard lock(g_mutex);
  return std::exchange(g_fault_fired, false);
}

void after_forward(const Tensor& out, const char* op) {
  if (out.numel() > 0 && fault_fires(op, Phase::forward)) out.data()[0] = std::numeric_limits<float>::quiet_NaN();
  if (!detecting()) return;
  if (const float bad = first_non_finite(out.data(), out.numel()); !std::isfinite(bad))
    found(cat("forward: ", where(op, t_module), " produced ", name_of(bad), " in its output ", out.shape()));
}

void after_backward(const Node& node) {
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const auto [grad, n] = gradient_of(node.inputs[i]);
    if (!grad || n == 0) continue;
    if (fault_fires(node.op, Phase::backward)) grad[0] = std::numeric_limits<float>::quiet_NaN();
    if (!detecting()) continue;
    if (const float bad = first_non_finite(grad, n); !std::isfinite(bad))
      return found(cat("backward: ", where(node.op, node.module), " produced a non-finite gradient (", name_of(bad),
                       ") for its input ", i, " ", node.inputs[i].shape));
  }
}

}  // namespace folio::anomaly
