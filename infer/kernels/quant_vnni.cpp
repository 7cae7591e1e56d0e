// The AVX-512 VNNI kernel of q8x8_rows (quant.h): vpdpbusd multiplies 4 unsigned
// bytes by 4 signed ones and adds the 4 products to an int32 lane, in one instruction.
// On 256-bit vectors (AVX-512 VL): a vector of BlockQ8x8 holds 4 weights of each of 8
// rows, so lane r sums row r's products, as in the AVX2 kernel, with 1 instruction per
// 32 products where AVX2 takes 6. Compiled for it whatever the build's -march;
// quant_x8.cpp calls it only where avx512_vnni() says so.
#include <cpuid.h>
#include <immintrin.h>

#include <cstring>
#include <vector>

#include "infer/kernels/quant.h"
#include "infer/kernels/quant_panels.h"

#define FOLIO_VNNI __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))

namespace folio::kernels::detail {

// cpuid leaf 7: AVX-512 F (ebx 16), BW (ebx 30), VL (ebx 31), VNNI (ecx 11); and the OS
// saving the AVX-512 registers (XCR0 bits 1, 2, 5, 6, 7), without which they fault.
namespace {
bool cpu_has_avx512(bool vnni) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;  // OSXSAVE: xgetbv is there
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool cpu = (b & (1u << 16)) && (b & (1u << 30)) && (b & (1u << 31)) && (!vnni || (c & (1u << 11)));
  unsigned lo = 0, hi = 0;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return cpu && (lo & 0xE6u) == 0xE6u && avx2_fma_f16c();
}
}  // namespace

bool avx512_bw_vl() {
  static const bool has = cpu_has_avx512(false);
  return has;
}

bool avx512_vnni() {
  static const bool has = cpu_has_avx512(true);
  return has;
}

namespace {

constexpr int64_t kPanelRows = 8;  // 8 rows' sums in registers, of 32

// Group G (nb blocks) against R activation rows: out[m][r] for m < R, r < 8. x holds
// the activations' quants plus 128 (0..254, as unsigned bytes: vpdpbusd's unsigned
// operand), so each lane's sum is row r's products plus 128 times the sum of its
// weights; that term, the same for every activation row, is computed once per block
// (vpdpbusd of 128s) and is where each row's sum starts, negated.
struct Vnni {
  template <int R>
  FOLIO_VNNI static void panel(const BlockQ8x8* G, const int8_t* x, const float* xs, int64_t nb, float (*out)[kQ8Group]);
};

template <int R>
FOLIO_VNNI void Vnni::panel(const BlockQ8x8* G, const int8_t* x, const float* xs, int64_t nb, float (*out)[kQ8Group]) {
  const __m256i offset = _mm256_set1_epi8(char(0x80));
  __m256 acc[R];
  for (int m = 0; m < R; ++m) acc[m] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ8x8& blk = G[b];
    prefetch_ahead(blk);
    const auto* w = reinterpret_cast<const __m256i*>(blk.q);  // (8) vectors of 4 weights of each row
    __m256i shift = _mm256_setzero_si256();  // (8) 128 * each row's sum of weights
#pragma GCC unroll 8
    for (int i = 0; i < kQ8Block / kQ8Quad; ++i) shift = _mm256_dpbusd_epi32(shift, offset, _mm256_loadu_si256(w + i));
    const __m256i start = _mm256_sub_epi32(_mm256_setzero_si256(), shift);
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scale)));
#pragma GCC unroll 8
    for (int m = 0; m < R; ++m) {  // unrolled: acc[m] stays in a register
      const int8_t* xb = x + (m * nb + b) * kQ8Block;
      __m256i s = start;
      // Unrolled, each weight vector an operand in memory (L1): as an array the 8
      // were copied to the stack and back each block.
#pragma GCC unroll 8
      for (int i = 0; i < kQ8Block / kQ8Quad; ++i) {
        int32_t quad;
        std::memcpy(&quad, xb + i * kQ8Quad, sizeof quad);
        s = _mm256_dpbusd_epi32(s, _mm256_set1_epi32(quad), _mm256_loadu_si256(w + i));
      }
      acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(d, _mm256_set1_ps(xs[m * nb + b])), acc[m]);
    }
  }
  for (int m = 0; m < R; ++m) _mm256_storeu_ps(out[m], acc[m]);
}

}  // namespace

// xq's quants plus 128 (a flip of the sign bit), once per call into this thread's
// buffer (M * K bytes against the product's M * N * K), then the panels.
void q8x8_rows_vnni(const BlockQ8x8* P, const int8_t* xq, const float* xscale, float* y, int64_t M, int64_t N,
                    int64_t K, const float* bias, int64_t first_group, int64_t last_group) {
  thread_local std::vector<int8_t> biased;  // (M, nb * 32)
  const size_t n = size_t(M * q8_blocks(K) * kQ8Block);
  if (biased.size() < n) biased.resize(n);
  for (size_t i = 0; i < n; ++i) biased[i] = int8_t(uint8_t(xq[i]) ^ 0x80u);
  rows_by_panels<Vnni, kPanelRows>(P, biased.data(), xscale, y, M, N, K, bias, first_group, last_group);
}

}  // namespace folio::kernels::detail
