#pragma once
// AdamW (decoupled weight decay, as torch.optim.AdamW) and clipping by global norm.
// Both sweep parameters as long runs of adjacent memory: a model's parameters are
// views of one flat buffer (nn/arena.h), so a step is a handful of vectorised,
// threaded loops over it (one per stretch of the same weight-decay rule).
#include <string>
#include <vector>

#include "nn/module.h"
#include "train/config.h"
#include "train/optimizer_state.h"

namespace folio {

struct AdamWConfig {
  float beta1 = 0.9f, beta2 = 0.99f, eps = 1e-8f;
  float weight_decay = 0.1f;  // applied only to parameters of 2 or more dims
};

class AdamW {
 public:
  AdamW(const nn::NamedParameters& params, AdamWConfig config);
  // One update with learning rate lr from the parameters' current gradients.
  void step(float lr);
  int64_t steps_taken() const { return t_; }

  // The state, under AdamW's names: "adamw.m" and "adamw.v", each (P,) the moments flat
  // in parameter order, and the counter "adamw_steps". check_state() checks a state
  // read from the file `where` holds them (before an AdamW exists); load_state() also
  // checks that they fit this AdamW's parameters.
  void save_state(OptimizerState& into) const;
  static void check_state(const OptimizerState& s, const std::string& where);
  void load_state(const OptimizerState& s, const std::string& where);
  static bool owns(std::string_view name) { return name == "adamw.m" || name == "adamw.v"; }
  int64_t size() const { return m_.numel(); }  // P, the values it updates
  const AdamWConfig& config() const { return config_; }

 private:
  // Adjacent parameters with the same weight-decay rule, merged.
  struct Segment {
    float* data;
    float* grad;
    int64_t numel;
    int64_t offset;  // into m_ and v_
    bool decay;
  };
  AdamWConfig config_;
  std::vector<Tensor> params_;  // keeps the storage the segments point into alive
  std::vector<Segment> segments_;
  Tensor m_, v_;  // (P,) each: the first and second moments (save_state shares them)
  int64_t t_ = 0;
};

// Scales all gradients so their global L2 norm is at most max_norm (when > 0);
// returns the norm before clipping, as torch.nn.utils.clip_grad_norm_.
float clip_grad_norm(const std::vector<Tensor>& params, float max_norm);

// Warm-up (linear, over warmup_iters) then a decay from lr to min_lr at decay_iters;
// constant min_lr after. The decay is a cosine, or (wsd) lr held until the last
// `cooldown` fraction of the progress and then a straight line down: a long stable
// phase at the peak, and the loss falls mostly in the cool-down. With min_lr == lr and
// no warm-up: constant.
// With decay_seconds > 0 the decay follows time instead: after the warm-up (still in
// steps) its progress is seconds / decay_seconds, `seconds` being the training time
// before the step, so a run on a time budget ends its decay as its budget ends.
struct Schedule {
  float lr = 1e-3f, min_lr = 1e-4f;
  int64_t warmup_iters = 100, decay_iters = 2000;
  double decay_seconds = 0;
  Decay decay = Decay::cosine;
  double cooldown = 0.2;  // wsd: the share of the progress the straight line takes
  float at(int64_t step, double seconds = 0) const;
};

// The schedule a run's options give (a decay horizon of 0 means max_iters, or max_time).
Schedule schedule_of(const TrainConfig& tc);

}  // namespace folio
