// The AVX2 kernel of q8x8_rows (quant.h): int8 weights in the decoder's interleaved
// layout times int8 activations, exact int32 sums per block.
// Compiled for AVX2 + FMA + F16C whatever the build's -march; quant_x8.cpp calls it
// only on a CPU that has those.
#include <immintrin.h>

#include <cstring>

#include "infer/kernels/quant.h"
#include "infer/kernels/quant_panels.h"

#define FOLIO_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace folio::kernels::detail {
namespace {

constexpr int64_t kPanelRows = 4;  // 4 rows' sums in registers, with the block's scales and a few more

// Group G (nb blocks) against R activation rows: out[m][r] for m < R, r < 8.
// A weight vector holds 4 weights of each of the 8 rows (BlockQ8x8); the activation's
// matching 4 quants, broadcast to all 8 lanes, multiply it in vpmaddubsw, which needs
// one unsigned operand: x's signs move onto w (vpsignb) and x becomes |x|, 32 products
// summed in pairs to int16 (at most 2 * 127 * 127, no saturation), then vpmaddwd with
// ones sums each lane's pairs: lane r holds row r's 4 products, and 8 such vectors
// added give the block's 8 row sums with no sum across lanes. The sums convert to fp32
// and are scaled by the 8 weight scales (one load) times x's in one FMA.
struct Avx2 {
  static constexpr int kGroups = 1;
  template <int R, int Groups>
  FOLIO_AVX2 static void panel(const BlockQ8x8* G, const int8_t* x, const float* xs, const int32_t*, int64_t nb,
                               float (*out)[kPanelColumns]);
};

template <int R, int Groups>
FOLIO_AVX2 void Avx2::panel(const BlockQ8x8* G, const int8_t* x, const float* xs, const int32_t*, int64_t nb,
                            float (*out)[kPanelColumns]) {
  static_assert(Groups == 1);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R];
  for (int m = 0; m < R; ++m) acc[m] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ8x8& blk = G[b];
    prefetch_ahead(blk);
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scale)));
#pragma GCC unroll 8
    for (int m = 0; m < R; ++m) {  // unrolled: acc[m] stays in a register
      const int8_t* xb = x + (m * nb + b) * kQ8Block;
      __m256i s = _mm256_setzero_si256();
      // Unrolled, each weight vector loaded where it is used: as an array the 8 were
      // copied to the stack and back each block (twice the instructions of a step).
#pragma GCC unroll 8
      for (int i = 0; i < kQ8Block / kQ8Quad; ++i) {
        int32_t quad;
        std::memcpy(&quad, xb + i * kQ8Quad, sizeof quad);
        const __m256i xv = _mm256_set1_epi32(quad);
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.q[i]));
        const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(xv, xv), _mm256_sign_epi8(w, xv));
        s = _mm256_add_epi32(s, _mm256_madd_epi16(p16, ones));
      }
      acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(d, _mm256_set1_ps(xs[m * nb + b])), acc[m]);
    }
  }
  for (int m = 0; m < R; ++m) _mm256_storeu_ps(out[m], acc[m]);
}

}  // namespace

void q8x8_rows_avx2(const BlockQ8x8* P, const int8_t* xq, const float* xscale, float* y, int64_t M, int64_t N,
                    int64_t K, const float* bias, int64_t first_group, int64_t last_group) {
  rows_by_panels<Avx2, kPanelRows>(P, xq, xscale, nullptr, y, M, N, K, bias, first_group, last_group);
}

}  // namespace folio::kernels::detail
