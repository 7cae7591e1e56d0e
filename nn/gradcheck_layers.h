#pragma once
// The gradient checks of the layers, beside the ops' (autograd/gradcheck.h).
#include <vector>

#include "autograd/gradcheck.h"

namespace folio::nn {

// Every module of nn/, named as its class (the GPT as "GPT loss", "GPT logits", ...),
// small, with the gradient of every parameter and of the input checked.
const std::vector<GradcheckCase>& layer_gradcheck_cases();

}  // namespace folio::nn
