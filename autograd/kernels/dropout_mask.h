#pragma once
// Dropout's mask as a pure function of (seed, element index): forward and backward
// regenerate it instead of storing it, any thread count draws the same mask, and the
// fused attention (ops_causal_attention.cpp) drops exactly the weights that dropout()
// would drop from the composition's weight tensor under the same seed.
#include <cstdint>

#include "base/error.h"

namespace folio::kernels {

struct DropoutMask {
  uint64_t seed;
  uint32_t threshold;  // element i is dropped when its 32-bit draw < threshold
  float keep_scale;    // 1 / (1 - p): what a kept element is multiplied by

  DropoutMask(float p, uint64_t seed) : seed(seed), threshold(threshold_of(p)), keep_scale(1.0f / (1.0f - p)) {}

  // A counter-based hash (splitmix64's finaliser) of the element's index; the loops
  // that call it vectorise (64-bit multiplies of AVX-512DQ).
  bool kept(int64_t i) const {
    uint64_t z = seed + uint64_t(i) * 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return uint32_t((z ^ (z >> 31)) >> 32) >= threshold;
  }

 private:
  // Checked before the conversion: a p outside [0, 1) (or NaN) would overflow it.
  static uint32_t threshold_of(float p) {
    require_probability("dropout", p);
    return uint32_t(double(p) * 4294967296.0);
  }
};

}  // namespace folio::kernels
