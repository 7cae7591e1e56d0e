#include "train/update_ratio.h"

#include <cmath>
#include <limits>

#include "base/error.h"

namespace folio {

const char* column_name(ParamGroup g) {
  switch (g) {
    case ParamGroup::embeddings: return "update_ratio_embeddings";
    case ParamGroup::attention: return "update_ratio_attention";
    case ParamGroup::feed_forward: return "update_ratio_feed_forward";
    case ParamGroup::norms: return "update_ratio_norms";
    case ParamGroup::output: break;
  }
  return "update_ratio_output";
}

ParamGroup group_of(std::string_view name) {
  auto has = [&](std::string_view part) {  // a whole dotted segment of the name
    for (size_t at = name.find(part); at != name.npos; at = name.find(part, at + 1)) {
      const size_t end = at + part.size();
      if ((at == 0 || name[at - 1] == '.') && (end == name.size() || name[end] == '.')) return true;
    }
    return false;
  };
  if (has("lm_head") || has("mtp_head")) return ParamGroup::output;
  if (has("attn")) return ParamGroup::attention;
  if (has("ffwd")) return ParamGroup::feed_forward;
  if (has("ln1") || has("ln2") || has("ln_f") || has("x0_gates") || has("skip_gates")) return ParamGroup::norms;
  return ParamGroup::embeddings;  // token_embedding, position_embedding, bigram_embedding, value_embeddings.N
}

UpdateRatio::UpdateRatio(const nn::NamedParameters& params, const Tensor& flat) {
  for (const auto& [name, p] : params) {
    const int64_t offset = p.data() - flat.data();
    if (offset < 0 || offset + p.numel() > flat.numel())
      fail("train", "parameter ", name, " is not a view of the model's flat weights");
    runs_.push_back({offset, p.numel(), group_of(name)});
  }
}

void UpdateRatio::before(const Tensor& flat) {
  before_.assign(flat.data(), flat.data() + flat.numel());
}

UpdateRatios UpdateRatio::after(const Tensor& flat) {
  if (int64_t(before_.size()) != flat.numel())
    fail("train", "the update ratio needs the weights before the update: before(), then after()");
  std::array<double, kParamGroups> moved{}, weight{};  // sums of squares, by group
  const float* w = flat.data();
  for (const Run& r : runs_) {
    double dd = 0, ww = 0;
    for (int64_t i = r.offset; i < r.offset + r.numel; ++i) {
      const double b = before_[size_t(i)], d = double(w[i]) - b;
      dd += d * d, ww += b * b;
    }
    moved[size_t(r.group)] += dd, weight[size_t(r.group)] += ww;
  }
  UpdateRatios ratio;
  for (size_t g = 0; g < ratio.size(); ++g)
    ratio[g] = weight[g] > 0 ? std::sqrt(moved[g] / weight[g]) : std::numeric_limits<double>::quiet_NaN();
  std::vector<float>().swap(before_);
  return ratio;
}

}  // namespace folio
