#pragma once
// An optimizer's state as it is saved, like PyTorch's optimizer.state_dict(): named
// flat tensors and named counters, under names each optimizer owns (AdamW: "adamw.m",
// "adamw.v" and the counter "adamw_steps"; Muon: "muon.momentum"). What holds them
// does not look inside: a run's state file (train/run_state.h) writes the tensors as
// safetensors tensors and the counters as __metadata__ entries, as they are.
//   OptimizerState    the tensors and the counters, in the order they are saved
//   flat_tensor       a (N,) tensor copied from a flat buffer
//   checked_tensor    a tensor of a state read back: present, 1-D, finite
//   checked_counter   a counter of a state read back: an integer >= 0
// Errors name the file: "[checkpoint] <where>: tensor adamw.m is missing or not 1-D".
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "io/safetensors.h"

namespace folio {

struct OptimizerState {
  std::vector<NamedTensor> tensors;  // each (N,), flat
  Metadata counters;                 // name -> an integer >= 0 in decimal

  const Tensor* find(std::string_view name) const;  // nullptr if absent
  // The same state in buffers of its own (a state can share an optimizer's: shared_state).
  OptimizerState snapshot() const;
};

Tensor flat_tensor(const std::vector<float>& values);  // (N,)

// `why`, when not empty, is said when the tensor is missing ("the run's optimizer is muon").
const Tensor& checked_tensor(const OptimizerState& s, const std::string& name, const std::string& where,
                             bool non_negative = false, const std::string& why = "");
int64_t checked_counter(const OptimizerState& s, const std::string& name, const std::string& where);

}  // namespace folio
