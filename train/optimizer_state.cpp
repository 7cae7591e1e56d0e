#include "train/optimizer_state.h"

#include "base/error.h"
#include "io/folio_format.h"
#include "io/json.h"

namespace folio {

const Tensor* OptimizerState::find(std::string_view name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t.tensor;
  return nullptr;
}

OptimizerState OptimizerState::snapshot() const {
  OptimizerState copy = *this;
  for (NamedTensor& t : copy.tensors) t.tensor = Tensor::from(t.tensor.shape(), {t.tensor.data(), size_t(t.tensor.numel())});
  return copy;
}

Tensor flat_tensor(const std::vector<float>& values) { return Tensor::from({int64_t(values.size())}, values); }

const Tensor& checked_tensor(const OptimizerState& s, const std::string& name, const std::string& where,
                             bool non_negative, const std::string& why) {
  const Tensor* t = s.find(name);
  if (!t || t->ndim() != 1)
    fail("checkpoint", where, ": tensor ", name, " is missing or not 1-D", why.empty() ? "" : " (" + why + ")");
  check_finite(*t, name, where, non_negative);
  return *t;
}

int64_t checked_counter(const OptimizerState& s, const std::string& name, const std::string& where) {
  const std::string* text = nullptr;
  for (const auto& [key, value] : s.counters)
    if (key == name) text = &value;
  if (!text) fail("checkpoint", where, ": __metadata__: no key \"", name, "\"");
  Json v;
  try {
    v = Json::parse(*text);
  } catch (const Error& e) {
    fail("checkpoint", where, ": __metadata__.", name, ": ", e.what());
  }
  if (!v.is_int() || v.as_int() < 0) fail("checkpoint", where, ": __metadata__.", name, ": expected an integer >= 0");
  return v.as_int();
}

}  // namespace folio
