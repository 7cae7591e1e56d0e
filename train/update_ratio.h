#pragma once
// The update/weight ratio of a step, per group of parameters: ||W_after - W_before|| /
// ||W_before|| over the group's weights, the size of the step the optimizer took
// relative to the weights it moved (about 1e-3 is a healthy order; much larger, the
// learning rate is too high for that group; much smaller, it barely learns). log.csv
// has a column per group, measured on the step just before each evaluation: the other
// steps pay nothing. The sums are taken in a fixed order, in double, on one thread: the
// figure depends on the weights alone, not on how many threads sum it, and every rank
// (whose weights are the same to the bit) logs the same one.
// The groups are train/param_groups.h's; UpdateRatio's before() and after() go around
// one optimizer step.
#include <cstdint>
#include <vector>

#include "nn/module.h"
#include "train/param_groups.h"

namespace folio {

class UpdateRatio {
 public:
  UpdateRatio() = default;
  // `params`: the model's, each a view of `flat` (nn/arena.h).
  UpdateRatio(const nn::NamedParameters& params, const Tensor& flat);
  // Keeps the weights (P,) the coming update starts from.
  void before(const Tensor& flat);
  // The ratio per group of the update since before(); NaN for a group without weights
  // or whose weights are all 0. Frees the weights before() kept.
  UpdateRatios after(const Tensor& flat);

 private:
  struct Run {
    int64_t offset, numel;  // in flat
    ParamGroup group;
  };
  std::vector<Run> runs_;
  // (P,) from before() to after() only: kept, it stayed beside the evaluation that
  // follows a logged step (GPT-2 small: 0.5 GB).
  std::vector<float> before_;
};

}  // namespace folio
