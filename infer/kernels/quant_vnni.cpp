// The AVX-512 VNNI kernel of q8x8_rows (quant.h): vpdpbusd multiplies 4 unsigned
// bytes by 4 signed ones and adds the 4 products to an int32 lane, in one instruction.
// On 256-bit vectors (AVX-512 VL): a vector of BlockQ8x8 holds 4 weights of each of 8
// rows, so lane r sums row r's products, as in the AVX2 kernel, with 1 instruction per
// 32 products where AVX2 takes 6. For 16 activation rows and more, 512-bit vectors
// hold two groups' quads, so that each broadcast activation quad meets 16 weight rows.
// Compiled for it whatever the build's -march; quant_x8.cpp calls it only where
// avx512_vnni() says so.
// GCC 12 warns that its own 512-bit intrinsics (_mm512_cvtph_ps, ...) use an
// uninitialized operand, the pass-through of their unmasked form; the pragma precedes
// the header, where the warnings point.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
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

// The vectors of a panel of one group (256 bits: 8 rows) or two (512 bits: 16 rows,
// the second group's lanes above the first's).
template <int Groups>
struct Lanes;

template <>
struct Lanes<1> {
  using Int = __m256i;    // (8) int32, or (8, 4) bytes
  using Float = __m256;   // (8)
  // Quad i of block b: 4 weights of each row, + 128 (unsigned).
  FOLIO_VNNI static Int weights(const BlockQ8x8* G, int64_t, int64_t b, int i) {
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(G[b].q[i]));
    return _mm256_xor_si256(w, _mm256_set1_epi8(char(0x80)));
  }
  FOLIO_VNNI static Float scales(const BlockQ8x8* G, int64_t, int64_t b) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(G[b].scale)));
  }
  FOLIO_VNNI static Int splat(int32_t v) { return _mm256_set1_epi32(v); }
  FOLIO_VNNI static Int dot(Int s, Int w, Int x) { return _mm256_dpbusd_epi32(s, w, x); }
  FOLIO_VNNI static Float zero() { return _mm256_setzero_ps(); }
  // acc + s * (d * xs), s widened to fp32.
  FOLIO_VNNI static Float scaled_add(Int s, Float d, float xs, Float acc) {
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(d, _mm256_set1_ps(xs)), acc);
  }
  FOLIO_VNNI static void store(float* out, Float v) { _mm256_storeu_ps(out, v); }
};

template <>
struct Lanes<2> {
  using Int = __m512i;   // (16) int32, or (16, 4) bytes
  using Float = __m512;  // (16)
  FOLIO_VNNI static Int weights(const BlockQ8x8* G, int64_t nb, int64_t b, int i) {
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(G[b].q[i]));
    const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(G[nb + b].q[i]));
    return _mm512_xor_si512(_mm512_inserti64x4(_mm512_zextsi256_si512(lo), hi, 1), _mm512_set1_epi8(char(0x80)));
  }
  FOLIO_VNNI static Float scales(const BlockQ8x8* G, int64_t nb, int64_t b) {
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(G[b].scale));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(G[nb + b].scale));
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_zextsi128_si256(lo), hi, 1));
  }
  FOLIO_VNNI static Int splat(int32_t v) { return _mm512_set1_epi32(v); }
  FOLIO_VNNI static Int dot(Int s, Int w, Int x) { return _mm512_dpbusd_epi32(s, w, x); }
  FOLIO_VNNI static Float zero() { return _mm512_setzero_ps(); }
  FOLIO_VNNI static Float scaled_add(Int s, Float d, float xs, Float acc) {
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(d, _mm512_set1_ps(xs)), acc);
  }
  FOLIO_VNNI static void store(float* out, Float v) { _mm512_storeu_ps(out, v); }
};

// Groups groups from G (nb blocks each) against R activation rows: out[m][c] for
// m < R, c < 8 * Groups. vpdpbusd's first operand is unsigned: the weights, flipped to
// w + 128 (1..255) by one xor per vector, shared by the panel's R rows. Lane c then
// sums its row's products plus 128 times the activation block's sum, the same for
// every weight row: xterm holds its negation, -128 * sum(x), once per activation
// block, and each sum starts there. The int32 sums are exact, and the float steps
// the AVX2 kernel's, so the results are its own bit for bit.
struct Vnni {
  static constexpr int kGroups = 2;
  // Two groups are two streams of weights, 16 rows' blocks apart. Read from memory by
  // a few activation rows (a decode step), they measured 1.4-1.6x slower than one
  // stream at a time (bench_quant, from_memory:1, M 1 to 8); from 16 rows they
  // are even from memory and faster from cache (1.3-1.6x).
  static constexpr int64_t kGroupsFromRows = 16;
  template <int R, int Groups>
  FOLIO_VNNI static void panel(const BlockQ8x8* G, const int8_t* x, const float* xs, const int32_t* xterm, int64_t nb,
                               float (*out)[kPanelColumns]);
};

template <int R, int Groups>
FOLIO_VNNI void Vnni::panel(const BlockQ8x8* G, const int8_t* x, const float* xs, const int32_t* xterm, int64_t nb,
                            float (*out)[kPanelColumns]) {
  using V = Lanes<Groups>;
  constexpr int kQuads = kQ8Block / kQ8Quad;
  typename V::Float acc[R];
  for (int m = 0; m < R; ++m) acc[m] = V::zero();
  for (int64_t b = 0; b < nb; ++b) {
    prefetch_ahead(G[b]);
    if (Groups == 2) prefetch_ahead(G[nb + b]);
    typename V::Int w[kQuads];  // (8) 4 weights of each row, + 128
#pragma GCC unroll 8
    for (int i = 0; i < kQuads; ++i) w[i] = V::weights(G, nb, b, i);
    const typename V::Float d = V::scales(G, nb, b);
#pragma GCC unroll 8
    for (int m = 0; m < R; ++m) {  // unrolled: acc[m] stays in a register
      const int8_t* xb = x + (m * nb + b) * kQ8Block;
      typename V::Int s = V::splat(xterm[m * nb + b]);
#pragma GCC unroll 8
      for (int i = 0; i < kQuads; ++i) {
        int32_t quad;
        std::memcpy(&quad, xb + i * kQ8Quad, sizeof quad);
        s = V::dot(s, w[i], V::splat(quad));
      }
      acc[m] = V::scaled_add(s, d, xs[m * nb + b], acc[m]);
    }
  }
  for (int m = 0; m < R; ++m) V::store(out[m], acc[m]);
}

}  // namespace

// -128 times each activation block's sum, once per call into this thread's buffer
// (M * nb sums against the product's M * N * K), then the panels.
void q8x8_rows_vnni(const BlockQ8x8* P, const int8_t* xq, const float* xscale, float* y, int64_t M, int64_t N,
                    int64_t K, const float* bias, int64_t first_group, int64_t last_group) {
  thread_local std::vector<int32_t> xterm;  // (M, nb)
  const int64_t blocks = M * q8_blocks(K);
  if (xterm.size() < size_t(blocks)) xterm.resize(size_t(blocks));
  for (int64_t i = 0; i < blocks; ++i) {
    int32_t sum = 0;
    for (int64_t k = 0; k < kQ8Block; ++k) sum += xq[i * kQ8Block + k];
    xterm[size_t(i)] = -128 * sum;
  }
  rows_by_panels<Vnni, kPanelRows>(P, xq, xscale, xterm.data(), y, M, N, K, bias, first_group, last_group);
}

}  // namespace folio::kernels::detail
