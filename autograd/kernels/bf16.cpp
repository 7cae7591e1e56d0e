// fp32 -> bf16 conversion, and whether this CPU has bf16 instructions.
#include <immintrin.h>

#include <algorithm>
#include <atomic>

#include <oneapi/dnnl/dnnl.hpp>

#include "autograd/kernels/matmul.h"
#include "autograd/parallel.h"

namespace folio::kernels {
namespace {

// The instruction itself, where the CPU has it: 2-3x the plain loop, though GCC
// vectorises that (one Zen 4 core: 15.5 against 8.6 Gelem/s on 768K elements, 6.9
// against 2.7 on 6M).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void convert_native(const float* x, uint16_t* y,
                                                                                      int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512bh r = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(x + i));
    _mm512_storeu_si512(y + i, __m512i(r));
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    _mm256_mask_storeu_epi16(y + i, m, __m256i(_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + i))));
  }
}

std::atomic<int64_t> g_rounded{0};
constexpr int64_t kGradientChunk = 128;  // columns a thread of to_bf16_gradient takes at a time

}  // namespace

void detail::to_bf16_plain(const float* x, bf16* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = round_to_bf16(x[i]);
}

// n elements with the instruction where the CPU has it, else the plain loop.
static void convert(const float* x, bf16* y, int64_t n) {
  static const bool native = __builtin_cpu_supports("avx512bf16");
  native ? convert_native(x, reinterpret_cast<uint16_t*>(y), n) : detail::to_bf16_plain(x, y, n);
}

void to_bf16_row(const float* x, bf16* y, int64_t n) { convert(x, y, n); }

int64_t bf16_rounded() { return g_rounded.load(std::memory_order_relaxed); }

void to_bf16(const float* x, bf16* y, int64_t n) {
  g_rounded.fetch_add(n, std::memory_order_relaxed);
  auto run = [&](int64_t begin, int64_t count) { convert(x + begin, y + begin, count); };
  // Not `omp parallel if (...)`: even a region that stays on one thread costs ~5 us,
  // more than converting 64K elements.
  constexpr int64_t kChunk = 1 << 16;  // a multiple of 32, so only the last chunk has a tail
  if (n <= kChunk || num_threads() == 1) return run(0, n);
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for
  for (int64_t c = 0; c < chunks; ++c) run(c * kChunk, std::min(kChunk, n - c * kChunk));
}

// Columns [j0, j1) of every row, row after row (each column's sum in row order), a
// chunk of the row at a time: the mask into a buffer in L1 (when there is one), rounded
// from there, and summed into the bias gradient.
static void gradient_columns(const float* g, const float* relu_out, int64_t rows, int64_t N, int64_t j0, int64_t j1,
                             bf16* d16, float* bias_grad) {
  float masked[kGradientChunk];
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c0 = j0; c0 < j1; c0 += kGradientChunk) {
      const int64_t n = std::min(kGradientChunk, j1 - c0);
      const float* d = g + r * N + c0;
      if (relu_out) {
        const float* y = relu_out + r * N + c0;
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) masked[j] = y[j] > 0.0f ? d[j] : 0.0f;
        d = masked;
      }
      convert(d, d16 + r * N + c0, n);
      if (bias_grad) {
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) bias_grad[c0 + j] += d[j];
      }
    }
}

void to_bf16_gradient(const float* g, const float* relu_out, int64_t rows, int64_t N, bf16* d16, float* bias_grad) {
  g_rounded.fetch_add(rows * N, std::memory_order_relaxed);
  // Threads split the columns, so that each column's sum keeps its row order on any
  // thread count; one thread reads the rows straight through.
  const int64_t threads = std::min<int64_t>(num_threads(), (N + kGradientChunk - 1) / kGradientChunk);
  if (rows * N <= (int64_t(1) << 16) || threads <= 1)
    return gradient_columns(g, relu_out, rows, N, 0, N, d16, bias_grad);
#pragma omp parallel for num_threads(int(threads))
  for (int64_t t = 0; t < threads; ++t) {
    const int64_t per = (N + threads - 1) / threads;
    gradient_columns(g, relu_out, rows, N, std::min(N, t * per), std::min(N, (t + 1) * per), d16, bias_grad);
  }
}

// oneDNN's view rather than cpuid's: it is what decides how the products run, and it
// honours ONEDNN_MAX_CPU_ISA, so a machine with the instructions can test the refusal.
static bool onednn_has(dnnl::cpu_isa needed) {
  const auto isa = unsigned(dnnl::get_effective_cpu_isa()), need = unsigned(needed);
  return (isa & need) == need;
}

bool bf16_native() { return onednn_has(dnnl::cpu_isa::avx512_core_bf16); }

bool bf16_runs() { return onednn_has(dnnl::cpu_isa::avx512_core); }

}  // namespace folio::kernels
