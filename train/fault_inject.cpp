#include "train/fault_inject.h"

#include <charconv>
#include <limits>

#include "base/error.h"
#include "base/parse_name.h"

namespace folio {

const char* to_string(FaultKind k) {
  switch (k) {
    case FaultKind::nan_grad: return "nan-grad";
    case FaultKind::inf_loss: return "inf-loss";
    case FaultKind::spike: break;
  }
  return "spike";
}

std::vector<Fault> parse_faults(std::string_view text) {
  std::vector<Fault> faults;
  for (size_t from = 0; from < text.size();) {
    const size_t comma = std::min(text.find(',', from), text.size());
    const std::string_view item = text.substr(from, comma - from);
    const size_t at = item.find('@');
    const auto kind = parse_name(item.substr(0, std::min(at, item.size())),
                                 {FaultKind::nan_grad, FaultKind::inf_loss, FaultKind::spike});
    int64_t step = -1;
    const std::string_view number = at == std::string_view::npos ? "" : item.substr(at + 1);
    const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), step);
    if (!kind || number.empty() || ec != std::errc() || end != number.data() + number.size() || step < 0)
      fail("config", "fault_inject '", text, "': expected faults such as nan-grad@30,inf-loss@40,spike@50 (a kind, "
           "nan-grad, inf-loss or spike, then @ and a step >= 0), got '", item, "'");
    faults.push_back({*kind, step});
    from = comma + 1;
  }
  return faults;
}

std::string faults_text(const std::vector<Fault>& faults) {
  std::string text;
  for (const Fault& f : faults) text += cat(text.empty() ? "" : ",", to_string(f.kind), "@", f.step);
  return text;
}

void inject_faults(const std::vector<Fault>& faults, int64_t step, bool first_time, float window_mean, float& loss,
                   std::span<float> grad) {
  for (const Fault& f : faults) {
    if (f.step != step || !first_time) continue;
    if (f.kind == FaultKind::nan_grad && !grad.empty()) grad[0] = std::numeric_limits<float>::quiet_NaN();
    if (f.kind == FaultKind::inf_loss) loss = std::numeric_limits<float>::infinity();
    if (f.kind == FaultKind::spike) loss = 10 * (window_mean > 0 ? window_mean : loss);
  }
}

}  // namespace folio
