#pragma once
// What this CPU runs, asked once at run time whatever the build's -march: the
// hand-written AVX2 kernels (swiglu_avx2.cpp, quant_avx2.cpp, quant_x8.cpp) are
// chosen by these and their plain twins run elsewhere.
namespace folio::kernels::detail {

bool avx2_fma();  // AVX2 and FMA
bool has_f16c();  // F16C: the fp16 scales of Q8_0 blocks
}  // namespace folio::kernels::detail
