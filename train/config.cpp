#include "train/config.h"

#include "base/parse_name.h"
#include "train/settings.h"

namespace folio {

const char* to_string(OptimizerKind k) { return k == OptimizerKind::muon ? "muon" : "adamw"; }

std::optional<OptimizerKind> parse_optimizer(std::string_view name) {
  return parse_name(name, {OptimizerKind::adamw, OptimizerKind::muon});
}

const char* to_string(Decay d) { return d == Decay::wsd ? "wsd" : "cosine"; }

std::optional<Decay> parse_decay(std::string_view name) { return parse_name(name, {Decay::cosine, Decay::wsd}); }

const char* to_string(OnDivergence d) {
  switch (d) {
    case OnDivergence::skip: return "skip";
    case OnDivergence::stop: return "stop";
    case OnDivergence::off: return "off";
    case OnDivergence::rollback: break;
  }
  return "rollback";
}

// Each setting's default, then TrainConfig's checks: every value in its range, then
// what a setting asks of the others (so those are in range when it is asked).
TrainConfig::TrainConfig() {
  for (const TrainSetting& s : train_settings()) reset(s, *this);
}

void TrainConfig::validate() const {
  for (const TrainSetting& s : train_settings()) check_range(s, *this);
  for (const TrainSetting& s : train_settings())
    if (const Range* r = range_of(s); r && r->also) r->also(*this);
}

}  // namespace folio
