#include "autograd/kernels/cpu_features.h"

#include <cpuid.h>

namespace folio::kernels::detail {

bool avx2_fma() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

bool has_f16c() {  // cpuid leaf 1, ecx bit 29 (clang 14's __builtin_cpu_supports does not know "f16c")
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}
}  // namespace folio::kernels::detail
