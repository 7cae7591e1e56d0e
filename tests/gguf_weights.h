// Two models' weights compared after a GGUF round trip, for the tests of every
// architecture: bit for bit (f32), or within the bound f16 or q8_0 keeps each weight:
// f16 keeps 11 significant bits (a relative 1e-3 of the tensor's largest magnitude is
// generous), q8_0 one step of its block's scale (max |w| / 127, and no block's max
// exceeds the tensor's).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "io/gguf.h"
#include "nn/transformer.h"

namespace folio {

inline void expect_same_weights(const nn::GPT& a, const nn::GPT& b) {
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(pa[i].first, pb[i].first);
    ASSERT_EQ(pa[i].second.numel(), pb[i].second.numel()) << pa[i].first;
    EXPECT_EQ(std::memcmp(pa[i].second.data(), pb[i].second.data(), size_t(pa[i].second.numel()) * 4), 0)
        << pa[i].first << " differs";
  }
}

inline void expect_within_gguf_rounding(const nn::GPT& original, const nn::GPT& imported, GgufDtype dtype) {
  const auto pa = original.named_parameters(), pb = imported.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    float amax = 0.0f, worst = 0.0f;
    for (int64_t j = 0; j < pa[i].second.numel(); ++j) {
      amax = std::max(amax, std::fabs(pa[i].second.data()[j]));
      worst = std::max(worst, std::fabs(pa[i].second.data()[j] - pb[i].second.data()[j]));
    }
    EXPECT_LE(worst, dtype == GgufDtype::f16 ? amax * 1e-3f : amax / 127.0f) << pa[i].first;
  }
}

}  // namespace folio
