#pragma once
// A value put in a variable for a scope, the one before coming back when the scope ends
// however it ends: a thread's grad mode (NoGradGuard), the module its ops run in
// (anomaly::ModuleScope), its progress listeners (ScopedProgressHooks).
#include <utility>

namespace folio {

template <class T>
class ScopedValue {
 public:
  ScopedValue(T& slot, T value) : slot_(slot), before_(std::exchange(slot, std::move(value))) {}
  ~ScopedValue() { slot_ = std::move(before_); }
  ScopedValue(const ScopedValue&) = delete;
  ScopedValue& operator=(const ScopedValue&) = delete;

 private:
  T& slot_;  // the variable, which outlives the scope (a thread_local, on the thread that made this)
  T before_;
};

}  // namespace folio
