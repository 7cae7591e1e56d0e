#pragma once
// Faults a test makes a run suffer on purpose (folio train --fault-inject, which users
// never need), so that the divergence guards (train/divergence_guard.h) are tried
// without touching the code they guard:
//   nan-grad@K   one gradient value (the first of the first parameter) becomes NaN at step K
//   huge-grad@K  that value becomes 1e30 at step K: finite, so the step goes through
//                (with --grad-clip 0 nothing scales it), but its square overflows
//                AdamW's second moment to inf, which a checkpoint must never hold
//   inf-loss@K   the step's loss becomes +inf at step K (its gradients stay as they are)
//   spike@K      the step's loss becomes 10x the mean of the guard's window at step K
//   bad-batch@K  the same, from the batch step K draws: at step K, and at any step
//                that draws that batch again (a batch of the data that makes the loss
//                spike, whatever the weights)
//   nan-forward:OP@K   the first op named OP (autograd/ops.h: gelu, matmul, linear, ...) in
//                      step K's forward pass puts a NaN into its output
//   nan-backward:OP@K  the first op named OP in step K's backward pass puts a NaN into
//                      its first input's gradient
// (the last two for --detect-anomaly, which must name that op; autograd/anomaly.h).
// Faults are comma-separated ("nan-grad@30,spike@50"). Each fires the first time the run
// reaches its step (bad-batch also when its batch is drawn again): not when a rollback
// makes the run take that step again, nor on a resume past it.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace folio {

enum class FaultKind { nan_grad, inf_loss, spike, nan_forward, nan_backward, huge_grad, bad_batch };
// "nan-grad", "inf-loss", "spike", "nan-forward", "nan-backward", "huge-grad", "bad-batch"
const char* to_string(FaultKind k);

struct Fault {
  FaultKind kind;
  int64_t step;
  std::string op = {};  // nan-forward and nan-backward's
  bool operator==(const Fault&) const = default;
};

// fail("config", ...) naming the text and what is expected (and refusing two op faults
// at one step: one op is armed at a time).
std::vector<Fault> parse_faults(std::string_view text);
std::string faults_text(const std::vector<Fault>& faults);  // parse_faults' input

// The faults of `step` when the run reaches it for the first time: on the step's loss,
// and on the flat gradient grad (P,). window_mean: the mean loss of the guard's window.
// bad_batch_drawn: the step drew the batch a bad-batch fault marked (at its step, or
// again later), which is when that fault fires.
void inject_faults(const std::vector<Fault>& faults, int64_t step, bool first_time, bool bad_batch_drawn,
                   float window_mean, float& loss, std::span<float> grad);

// The op fault (nan-forward, nan-backward) of `step`, armed when the run reaches it for
// the first time; nullptr if there is none. disarm_op_fault() ends it after the step's
// backward: a fault whose op never ran fails naming it (the op's name was wrong).
const Fault* arm_op_fault(const std::vector<Fault>& faults, int64_t step, bool first_time);
void disarm_op_fault(const Fault* armed);

}  // namespace folio
