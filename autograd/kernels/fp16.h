#pragma once
// IEEE half precision, a number format as bf16 is (matmul.h): GGUF's f16 tensors and
// the scales of its Q8_0 blocks (io/gguf.cpp, infer/kernels/quant.h).
#include <cstdint>

namespace folio::kernels {

// IEEE half <-> float, round to nearest even; subnormals kept, overflow to infinity.
uint16_t fp16_from_float(float x);
float fp16_to_float(uint16_t h);

}  // namespace folio::kernels
