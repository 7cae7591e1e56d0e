// The decoder's matrix products (infer/decoder_matrices.h): the weights as stored for
// inference (fp32 panels, bf16, Q8_0 blocks) and the products over one row, a batch's
// rows and a prompt's.
#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <new>
#include <string>
#include <string_view>

#include "base/error.h"
#include "autograd/kernels/matmul.h"
#include "infer/kernels/quant.h"
#include "infer/decoder_matrices.h"
#include "infer/thread_split.h"

namespace folio::infer {

using namespace nn;  // the model the decoder reads
namespace {

const float* data_or_null(const Tensor& t) { return t.defined() ? t.data() : nullptr; }

// A block's products in DecoderMatrices' order (qkv, proj, fc, fc2): weight and bias
// (qkv's only with gpt2_biases; an undefined tensor is none).
std::array<std::pair<const Tensor*, const Tensor*>, 4> block_products(const Block& b) {
  return {{{&b.attn->qkv_weight(), &b.attn->qkv_bias()},
           {&b.attn->proj->weight, &b.attn->proj->bias},
           {&b.ffwd->fc->weight, &b.ffwd->fc->bias},
           {&b.ffwd->proj->weight, &b.ffwd->proj->bias}}};
}

// The integer kernel of --weights int8 products, and whether a long prompt's products
// run on weights widened to fp32 tiles (oneDNN's fp32 product) instead. Unset, the
// fastest kernel this CPU runs, and a long prompt in integers only with VNNI (one
// vpdpbusd per 32 products): with AVX2 alone, the integer prefill took 28 % more
// instructions than the widened one (callgrind, 512 tokens at 25M: 4.53G against
// 3.53G). FOLIO_INT8_KERNEL, a benchmark's choice (to time one against another on the
// same build): "plain", "avx2" or "vnni" for that kernel everywhere, prompts included,
// or "widened" for the fastest kernel and widened prompts.
struct Int8Choice {
  kernels::Q8x8Rows* rows;
  bool widened_prompts;
};
Int8Choice int8_choice() {
  static const Int8Choice chosen = [] {
    const std::string name = std::getenv("FOLIO_INT8_KERNEL") ? std::getenv("FOLIO_INT8_KERNEL") : "";
    const kernels::IntegerKernel& fastest = kernels::integer_kernels().back();
    if (name.empty()) return Int8Choice{fastest.rows, std::string_view(fastest.name) != "vnni"};
    if (name == "widened") return Int8Choice{fastest.rows, true};
    if (const kernels::IntegerKernel* k = kernels::find_integer_kernel(name)) return Int8Choice{k->rows, false};
    std::string known;
    for (const kernels::IntegerKernel& k : kernels::integer_kernels()) known += std::string(k.name) + ", ";
    fail("decoder", "the environment variable FOLIO_INT8_KERNEL=", name,
         " names no integer kernel this CPU runs; expected one of ", known, "widened, or unset for the fastest");
  }();
  return chosen;
}

// A long prompt's products run on the calling thread's OpenMP threads, as the model's
// forward does; a step's and a short prompt's on the decoder's (step_threads).
bool long_prompt(bool prompt, int64_t M) { return prompt && M >= kPromptProductRows; }

}  // namespace

void check_int8_kernel() { int8_choice(); }

PanelStore::PanelStore(int64_t floats) {
  constexpr size_t kHuge = size_t(2) << 20;
  const size_t bytes = (size_t(floats) * sizeof(float) + kHuge - 1) / kHuge * kHuge;
  if (bytes == 0) return;
  data_.reset(static_cast<float*>(std::aligned_alloc(kHuge, bytes)));
  if (!data_) throw std::bad_alloc();
  madvise(data_.get(), bytes, MADV_HUGEPAGE);  // a hint: without it, 4 KiB pages
  size_ = floats;
}

void PanelStore::Free::operator()(float* p) const { std::free(p); }

float* PanelStore::take(int64_t floats) {
  if (used_ + floats > size_) fail("decoder", "panel store of ", size_, " floats asked for ", used_ + floats);
  used_ += floats;
  return data_.get() + used_ - floats;
}

StoredMatrix::StoredMatrix(const Tensor& weight, const Tensor& bias_, Precision p, Weights stored_as, PanelStore& store)
    : bias(data_or_null(bias_)), N(weight.size(0)), K(weight.size(1)), stored(stored_as), weight(weight.data()) {
  const float* w = weight.data();
  if (stored == Weights::int8) {  // quantized once, here, as the checkpoint loads
    const int64_t nb = kernels::q8_blocks(K);
    std::vector<kernels::BlockQ8> rows(size_t(N * nb));  // (N, nb) as a GGUF file stores them
    for (int64_t n = 0; n < N; ++n) kernels::quantize_q8(w + n * K, K, rows.data() + n * nb);
    q8.resize(size_t(kernels::q8x8_groups(N) * nb));
    kernels::repack_q8x8(rows.data(), N, K, q8.data());
    return;
  }
  if (p == Precision::bf16 || stored == Weights::bf16) {
    w16.resize(N * K);
    kernels::to_bf16(w, w16.data(), N * K);
    return;
  }
  float* out = store.take(panel_floats(weight));
  packed = out;
  for (int64_t first = 0; first < N; first += kPanel)  // written in order, rows past N as zeros
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = first; n < first + kPanel; ++n) *out++ = n < N ? w[n * K + k] : 0.0f;
}

int64_t StoredMatrix::bytes() const {
  // int8: the Q8_0 blocks of the N rows, 34 bytes per 32 weights (the last group's
  // padding rows, at most 7, aside)
  if (stored == Weights::int8) return N * kernels::q8_blocks(K) * int64_t(sizeof(kernels::BlockQ8));
  return N * K * (packed ? int64_t(sizeof(float)) : int64_t(sizeof(kernels::bf16)));
}

int StoredMatrix::step_threads(const ProductScratch& scratch) const {
  const int64_t rows = stored == Weights::int8 ? kernels::q8x8_groups(N) : packed ? (N + kPanel - 1) / kPanel : N;
  return N * K >= kSplitWeights ? int(std::clamp<int64_t>(scratch.threads, 1, rows)) : 1;
}

// x (M, K) quantized once for the whole product, then int8 x int8 dots per block, on
// `threads` threads: the rows' quantization split by rows, the product by groups of 8
// output columns.
void StoredMatrix::integer_rows(const float* x, float* y, int64_t M, ProductScratch& scratch, int threads) const {
  const int64_t nb = kernels::q8_blocks(K);
  scratch.xq.resize(size_t(M * nb * kernels::kQ8Block));
  scratch.xscale.resize(size_t(M * nb));
  int8_t* xq = scratch.xq.data();  // (M, nb * 32)
  float* xs = scratch.xscale.data();  // (M, nb)
  split(int(std::clamp<int64_t>(threads, 1, M)), M, [&](int64_t first, int64_t last) {
    kernels::quantize_rows_q8(x + first * K, last - first, K, xq + first * nb * kernels::kQ8Block, xs + first * nb);
  });
  kernels::Q8x8Rows* rows = int8_choice().rows;
  split(int(std::clamp<int64_t>(threads, 1, kernels::q8x8_groups(N))), kernels::q8x8_groups(N),
        [&](int64_t first, int64_t last) { rows(q8.data(), xq, xs, y, M, N, K, bias, first, last); });
}

namespace {

// R rows of x (R, K) against one panel (K, kPanel) of packed weights: sums (R, kPanel).
// Each weight is loaded once and used R times while R * kPanel sums stay in
// registers: the panel streams past once for all R rows.
template <int R, int64_t P>
void panel_rows(const float* panel, const float* x, int64_t K, float (&sums)[4][P]) {
  float acc[R][P] = {};
  for (int64_t k = 0; k < K; ++k) {
    const float* w = panel + k * P;
    for (int r = 0; r < R; ++r) {
      const float xr = x[r * K + k];
#pragma omp simd
      for (int64_t i = 0; i < P; ++i) acc[r][i] += xr * w[i];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int64_t i = 0; i < P; ++i) sums[r][i] = acc[r][i];
}

// One row against one panel (K, P): y (n <= P) = its sums [+ bias (n)], summed in
// panel_rows<1>'s order, in the loop a decode step's product ran as its own (with
// panel_rows<1> and its copy a one-row step took about 10 % more instructions,
// callgrind at config S).
template <int64_t P>
void panel_row(const float* panel, const float* x, int64_t K, float* y, int64_t n, const float* bias) {
  float sums[P] = {};
  for (int64_t k = 0; k < K; ++k) {
    const float xk = x[k];
#pragma omp simd
    for (int64_t i = 0; i < P; ++i) sums[i] += xk * panel[k * P + i];
  }
  for (int64_t i = 0; i < n; ++i) y[i] = sums[i] + (bias ? bias[i] : 0.0f);
}

}  // namespace

void StoredMatrix::widened_rows(const float* x, float* y, int64_t M, ProductScratch& scratch) const {
  // Tiles of about 256 KiB of fp32 weights, which stay in cache while the product
  // reads them; whole groups of 8 rows, as int8 stores them. Each tile is widened on
  // all the prompt's threads, as its product runs (on one, the others waited).
  const int64_t group = kernels::kQ8Group;
  const int64_t rows = std::min(std::max<int64_t>((int64_t(1) << 16) / K / group, 1) * group, N);
  scratch.tile.resize(size_t(rows * K));
  if (rows < N) scratch.ytile.resize(size_t(M * rows));
  for (int64_t first = 0; first < N; first += rows) {
    const int64_t n = std::min(rows, N - first), groups = (n + group - 1) / group;
    float* tile = scratch.tile.data();  // (n, K)
    split(int(std::min<int64_t>(omp_get_max_threads(), groups)), groups, [&](int64_t g0, int64_t g1) {
      if (stored == Weights::int8) {
        kernels::dequantize_q8x8_groups(q8.data(), first / group + g0, first / group + g1, N, K, tile + g0 * group * K);
        return;
      }
      for (int64_t r = g0 * group; r < std::min(n, g1 * group); ++r)
        for (int64_t k = 0; k < K; ++k) tile[r * K + k] = kernels::to_float(w16[size_t((first + r) * K + k)]);
    });
    float* out = rows < N ? scratch.ytile.data() : y;  // (M, n)
    kernels::matmul({.M = M, .N = n, .K = K, .trans_b = true}, x, tile, out, bias ? bias + first : nullptr);
    if (out != y)
      for (int64_t m = 0; m < M; ++m) std::copy_n(out + m * n, n, y + m * N + first);
  }
}

void StoredMatrix::apply_rows(const float* x, float* y, int64_t M, ProductScratch& scratch, bool prompt) const {
  // A long prompt's rows are bound by arithmetic, not by reading the weights: there
  // oneDNN's blocked fp32 product does more per instruction than the row kernels
  // (int8 on widened tiles: the integer dots take about 6 instructions per 32
  // products, fp32 FMAs 4, and the activations keep fp32). A step's few rows (M
  // streams), and a short prompt's, are bound by reading the weights, which the row
  // kernels do once for four rows (f32 panels) or all of them (int8, at a quarter of
  // the bytes); widening a whole int8 matrix for a 7-token prompt cost more than its
  // product.
  if (long_prompt(prompt, M)) {
    if (stored == Weights::bf16 || (stored == Weights::int8 && int8_choice().widened_prompts))
      return widened_rows(x, y, M, scratch);
    if (stored == Weights::int8) return integer_rows(x, y, M, scratch, omp_get_max_threads());
    if (packed)  // fp32: as the model's own forward computes its products
      return kernels::matmul({.M = M, .N = N, .K = K, .trans_b = true}, x, weight, y, bias);
  }
  if (stored == Weights::int8) return integer_rows(x, y, M, scratch, step_threads(scratch));
  if (stored == Weights::bf16) {
    // A range of weight rows writes that range of y's row. bf16_rows writes its rows
    // as many outputs apart as it computes, so with several rows each thread's range
    // goes to a part of its own, (M, its rows), copied into y's rows after.
    const int threads = step_threads(scratch);
    if (M > 1 && threads > 1) scratch.ytile.resize(size_t(M * N));
    return split(threads, N, [&](int64_t first, int64_t last) {
      const int64_t n = last - first;
      float* out = M > 1 && threads > 1 ? scratch.ytile.data() + M * first : y + first;  // (M, n), n or N apart
      kernels::bf16_rows(w16.data() + first * K, x, out, M, n, K, bias ? bias + first : nullptr);
      if (out != y + first)
        for (int64_t m = 0; m < M; ++m) std::copy_n(out + m * n, n, y + m * N + first);
    });
  }
  if (!packed) {  // bf16 products: one oneDNN product, both operands in bf16 as the model's round them
    scratch.x16.resize(M * K);  // (M, K)
    kernels::to_bf16(x, scratch.x16.data(), M * K);
    return kernels::matmul({.M = M, .N = N, .K = K, .trans_b = true}, scratch.x16.data(), w16.data(), y, bias);
  }
  packed_rows(x, y, M, scratch);
}

// Panel by panel, each panel's kPanel outputs summed in registers while its weights
// stream past once, in order, with no sum across lanes at the end; within a panel,
// rows four at a time. A panel (K * kPanel floats) is read from memory for the first
// four rows and from cache for the rest.
void StoredMatrix::packed_rows(const float* x, float* y, int64_t M, ProductScratch& scratch) const {
  split(step_threads(scratch), (N + kPanel - 1) / kPanel, [&](int64_t first_panel, int64_t last_panel) {
    for (int64_t p = first_panel; p < last_panel; ++p) {
      const float* w = packed + p * K * kPanel;
      const int64_t first = p * kPanel, n = std::min(kPanel, N - first);
      float sums[4][kPanel];
      for (int64_t r0 = 0; r0 < M; r0 += 4) {
        const int64_t rows = std::min<int64_t>(4, M - r0);
        const float* xr = x + r0 * K;
        switch (rows) {
          case 4: panel_rows<4>(w, xr, K, sums); break;
          case 3: panel_rows<3>(w, xr, K, sums); break;
          case 2: panel_rows<2>(w, xr, K, sums); break;
          default:
            panel_row<kPanel>(w, xr, K, y + r0 * N + first, n, bias ? bias + first : nullptr);
            continue;
        }
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t i = 0; i < n; ++i) y[(r0 + r) * N + first + i] = sums[r][i] + (bias ? bias[first + i] : 0.0f);
      }
    }
  });
}

namespace {
Weights checked(const GPT& model, Weights w) {
  if (w != Weights::f32 && model.precision() != Precision::fp32)
    fail("decoder", "weights ", to_string(w), " need fp32 products; the model's are ", to_string(model.precision()));
  return w;
}

// The floats of all the model's fp32 panels (0 for bf16 products or stored weights)
int64_t panel_floats(const GPT& model, Weights w) {
  if (model.precision() != Precision::fp32 || w != Weights::f32) return 0;
  int64_t n = StoredMatrix::panel_floats(model.lm_head->weight);
  for (const auto& b : model.blocks)
    for (const auto& [weight, bias] : block_products(*b)) n += StoredMatrix::panel_floats(*weight);
  return n;
}
}  // namespace

DecoderMatrices::DecoderMatrices(const GPT& model, Weights w)
    : weights(checked(model, w)), store(panel_floats(model, w)),
      lm_head(model.lm_head->weight, model.lm_head->bias, model.precision(), w, store) {
  for (const auto& b : model.blocks)
    for (const auto& [weight, bias] : block_products(*b))
      blocks.emplace_back(*weight, *bias, model.precision(), w, store);
}

}  // namespace folio::infer
