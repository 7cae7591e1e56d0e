#pragma once
// Faults a test makes a run suffer on purpose (folio train --fault-inject, which users
// never need), so that the divergence guards (train/divergence_guard.h) are tried
// without touching the code they guard:
//   nan-grad@K   one gradient value (the first of the first parameter) becomes NaN at step K
//   inf-loss@K   the step's loss becomes +inf at step K (its gradients stay as they are)
//   spike@K      the step's loss becomes 10x the mean of the guard's window at step K
// Faults are comma-separated ("nan-grad@30,spike@50"). Each fires the first time the run
// reaches its step: not when a rollback makes the run take that step again, nor on a
// resume past it.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace folio {

enum class FaultKind { nan_grad, inf_loss, spike };
const char* to_string(FaultKind k);  // "nan-grad", "inf-loss", "spike"

struct Fault {
  FaultKind kind;
  int64_t step;
  bool operator==(const Fault&) const = default;
};

// fail("config", ...) naming the text and what is expected.
std::vector<Fault> parse_faults(std::string_view text);
std::string faults_text(const std::vector<Fault>& faults);  // parse_faults' input

// The faults of `step` when the run reaches it for the first time: on the step's loss,
// and on the flat gradient grad (P,). window_mean: the mean loss of the guard's window.
void inject_faults(const std::vector<Fault>& faults, int64_t step, bool first_time, float window_mean, float& loss,
                   std::span<float> grad);

}  // namespace folio
