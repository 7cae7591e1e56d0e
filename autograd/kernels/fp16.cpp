// IEEE half <-> float (fp16.h).
#include "autograd/kernels/fp16.h"

#include <bit>
#include <cmath>

namespace folio::kernels {

// Both conversions in float arithmetic on the bits (no F16C needed), as the half type
// of the IEEE standard defines them; tests/test_quant.cpp holds them to F16C's.
uint16_t fp16_from_float(float f) {
  // Times 2^112 then 2^-110: a value too large for a half becomes infinity. Adding a
  // power of two 13 binades above the value's own then makes the float addition round
  // its mantissa to a half's 10 bits, to nearest even.
  float base = (std::fabs(f) * 0x1.0p+112f) * 0x1.0p-110f;
  const uint32_t w = std::bit_cast<uint32_t>(f), shl1_w = w + w, sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;  // below half's normal range: a fixed step
  base = std::bit_cast<float>((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = std::bit_cast<uint32_t>(base);
  const uint32_t nonsign = ((bits >> 13) & 0x00007C00u) + (bits & 0x00000FFFu);
  return uint16_t((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));  // NaN stays NaN
}

float fp16_to_float(uint16_t h) {
  const uint32_t w = uint32_t(h) << 16, sign = w & 0x80000000u, two_w = w + w;
  const float normalized = std::bit_cast<float>((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
  const float denormalized = std::bit_cast<float>((two_w >> 17) | (126u << 23)) - 0.5f;
  const uint32_t magnitude = two_w < (1u << 27) ? std::bit_cast<uint32_t>(denormalized)
                                                : std::bit_cast<uint32_t>(normalized);
  return std::bit_cast<float>(sign | magnitude);
}

}  // namespace folio::kernels
