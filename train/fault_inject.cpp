#include "train/fault_inject.h"

#include <charconv>
#include <limits>

#include "base/error.h"
#include "base/parse_name.h"
#include "autograd/anomaly.h"

namespace folio {

const char* to_string(FaultKind k) {
  switch (k) {
    case FaultKind::nan_grad: return "nan-grad";
    case FaultKind::inf_loss: return "inf-loss";
    case FaultKind::nan_forward: return "nan-forward";
    case FaultKind::nan_backward: return "nan-backward";
    case FaultKind::huge_grad: return "huge-grad";
    case FaultKind::bad_batch: return "bad-batch";
    case FaultKind::spike: break;
  }
  return "spike";
}

std::vector<Fault> parse_faults(std::string_view text) {
  std::vector<Fault> faults;
  for (size_t from = 0; from < text.size();) {
    const size_t comma = std::min(text.find(',', from), text.size());
    const std::string_view item = text.substr(from, comma - from);
    const size_t at = std::min(item.find('@'), item.size());
    const size_t colon = std::min(item.find(':'), at);
    const auto kind = parse_name(item.substr(0, colon), {FaultKind::nan_grad, FaultKind::inf_loss, FaultKind::spike,
                                                         FaultKind::nan_forward, FaultKind::nan_backward,
                                                         FaultKind::huge_grad, FaultKind::bad_batch});
    const bool op_fault = kind == FaultKind::nan_forward || kind == FaultKind::nan_backward;
    const std::string_view op = colon < at ? item.substr(colon + 1, at - colon - 1) : "";
    const bool op_ok = op_fault ? !op.empty() && op.find_first_not_of("abcdefghijklmnopqrstuvwxyz_") == op.npos
                                : colon == at;
    int64_t step = -1;
    const std::string_view number = at == item.size() ? "" : item.substr(at + 1);
    const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), step);
    if (!kind || !op_ok || number.empty() || ec != std::errc() || end != number.data() + number.size() || step < 0)
      fail("config", "fault_inject '", text, "': expected faults such as nan-grad@30,inf-loss@40,spike@50,"
           "nan-forward:gelu@60 (a kind, nan-grad, huge-grad, inf-loss, spike, bad-batch, or nan-forward or nan-backward then : and an "
           "op's name, then @ and a step >= 0), got '", item, "'");
    for (const Fault& f : faults)
      if (op_fault && f.step == step && !f.op.empty())
        fail("config", "fault_inject '", text, "': two op faults at step ", step, " (one op is armed at a time)");
    faults.push_back({*kind, step, std::string(op)});
    from = comma + 1;
  }
  return faults;
}

std::string faults_text(const std::vector<Fault>& faults) {
  std::string text;
  for (const Fault& f : faults)
    text += cat(text.empty() ? "" : ",", to_string(f.kind), f.op.empty() ? "" : ":", f.op, "@", f.step);
  return text;
}

void inject_faults(const std::vector<Fault>& faults, int64_t step, bool first_time, bool bad_batch_drawn,
                   float window_mean, float& loss, std::span<float> grad) {
  for (const Fault& f : faults) {
    const bool fires = f.kind == FaultKind::bad_batch ? bad_batch_drawn : f.step == step && first_time;
    if (!fires) continue;
    if (f.kind == FaultKind::nan_grad && !grad.empty()) grad[0] = std::numeric_limits<float>::quiet_NaN();
    if (f.kind == FaultKind::huge_grad && !grad.empty()) grad[0] = 1e30f;
    if (f.kind == FaultKind::inf_loss) loss = std::numeric_limits<float>::infinity();
    if (f.kind == FaultKind::spike || f.kind == FaultKind::bad_batch)
      loss = 10 * (window_mean > 0 ? window_mean : loss);
  }
}

const Fault* arm_op_fault(const std::vector<Fault>& faults, int64_t step, bool first_time) {
  for (const Fault& f : faults)
    if (f.step == step && first_time && !f.op.empty()) {
      anomaly::arm_fault(f.op, f.kind == FaultKind::nan_backward ? anomaly::Phase::backward : anomaly::Phase::forward);
      return &f;
    }
  return nullptr;
}

void disarm_op_fault(const Fault* armed) {
  if (armed && !anomaly::disarm_fault())
    fail("train", "--fault-inject ", faults_text({*armed}), ": no op named '", armed->op, "' ran in the ",
         armed->kind == FaultKind::nan_backward ? "backward" : "forward", " pass of step ", armed->step,
         " (the op names are autograd/ops.h's: gelu, matmul, linear, layer_norm, ...)");
}

}  // namespace folio
