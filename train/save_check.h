#pragma once
// What an evaluation checks before its checkpoint is saved (train/trainer.cpp:
// evaluate_and_save): everything the save would write must be sound and read back, as
// folio reads only finite weights, moments and averages (io/folio_format.h).
//   unsound_evaluation  why the evaluation diverged, "" when its checkpoint may be saved:
//                       a loss or a weight not finite; a loss above twice a uniform
//                       guess's (2 ln V: a model that bad is broken, if finite), unless
//                       the guards are off; or a state that would not read back (an
//                       optimizer moment or the average of the weights that overflowed,
//                       as AdamW's second moment does for a gradient value past 1.8e19,
//                       which --grad-clip 0 lets through while the weights stay finite)
#include <cstdint>
#include <string>

#include "nn/transformer.h"
#include "train/run_state.h"

namespace folio {

std::string unsound_evaluation(float train_loss, float val_loss, int64_t vocab_size, const nn::GPT& model,
                               const TrainState& state);

}  // namespace folio
