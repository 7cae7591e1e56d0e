// oneDNN matmul with a primitive cache. Each distinct (shape, layout) creates its
// primitive once, together with the memory objects and argument map it runs with;
// a repeated call only swaps data pointers, so it neither allocates nor re-creates.
// The cache is per thread: data-parallel training (train/data_parallel.h) runs one
// model replica per thread, each with single-threaded matmuls, and a shared cache
// would serialise them on its lock and on the shared memory objects.
// The bf16 products (bf16 A and B, fp32 accumulation, C and bias) share the cache: on
// AVX512-BF16 oneDNN 2.6 runs them as brg:avx512_core_bf16 (see bench/README.md).
#include <atomic>
#include <unordered_map>

#include <oneapi/dnnl/dnnl.hpp>

#include "autograd/kernels/defer_signals.h"
#include "autograd/kernels/matmul.h"
#include "autograd/parallel.h"

namespace folio::kernels {
namespace {

using dnnl::memory;
using Dims = memory::dims;

struct Key {
  int64_t batch, M, N, K;
  int threads;  // oneDNN plans a primitive for the threads it may use
  bool trans_a, trans_b, broadcast_a, broadcast_b, accumulate, relu, bias, bf16;
  bool operator==(const Key&) const = default;
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = 1469598103934665603ULL;
    for (int64_t v : {k.batch, k.M, k.N, k.K, int64_t(k.threads)}) h = (h ^ size_t(v)) * 1099511628211ULL;
    const int flags = k.trans_a | k.trans_b << 1 | k.broadcast_a << 2 | k.broadcast_b << 3 |
                      k.accumulate << 4 | k.bias << 5 | k.bf16 << 6 | k.relu << 7;
    return (h ^ size_t(flags)) * 1099511628211ULL;
  }
};

struct Entry {
  dnnl::matmul primitive;
  memory a, b, c, bias;
  std::unordered_map<int, memory> args;
};

struct Context {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::unordered_map<Key, Entry, KeyHash> cache;
};

std::atomic<int64_t> g_created{0};  // primitives created, all threads
std::atomic<int64_t> g_calls[2];    // products run, fp32 and bf16, all threads

Context& context() {
  // Destroyed when its thread ends: OpenMP retires threads when a team shrinks.
  thread_local Context c;
  return c;
}

// A (rows, cols) operand stored either as is or transposed, with a batch dimension.
memory::desc operand(int64_t batch, int64_t rows, int64_t cols, bool transposed,
                     memory::data_type type = memory::data_type::f32) {
  const Dims strides = transposed ? Dims{rows * cols, 1, rows} : Dims{rows * cols, cols, 1};
  return memory::desc({batch, rows, cols}, type, strides);
}

Entry make_entry(Context& ctx, const Key& k) {
  const auto in = k.bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  const auto a_md = operand(k.broadcast_a ? 1 : k.batch, k.M, k.K, k.trans_a, in);
  const auto b_md = operand(k.broadcast_b ? 1 : k.batch, k.K, k.N, k.trans_b, in);
  const auto c_md = operand(k.batch, k.M, k.N, false);
  const auto bias_md = memory::desc({1, 1, k.N}, memory::data_type::f32, Dims{k.N, k.N, 1});
  // Post-ops run in order on the product plus bias: the sum adds C's old values, then
  // the ReLU applies to all of it.
  dnnl::post_ops ops;
  if (k.accumulate) ops.append_sum(1.0f);
  if (k.relu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  const auto desc = k.bias ? dnnl::matmul::desc(a_md, b_md, bias_md, c_md)
                           : dnnl::matmul::desc(a_md, b_md, c_md);
  Entry e{dnnl::matmul(dnnl::matmul::primitive_desc(desc, attr, ctx.engine)),
          memory(a_md, ctx.engine, DNNL_MEMORY_NONE), memory(b_md, ctx.engine, DNNL_MEMORY_NONE),
          memory(c_md, ctx.engine, DNNL_MEMORY_NONE), memory(bias_md, ctx.engine, DNNL_MEMORY_NONE),
          {}};
  e.args = {{DNNL_ARG_SRC, e.a}, {DNNL_ARG_WEIGHTS, e.b}, {DNNL_ARG_DST, e.c}};
  if (k.bias) e.args.insert({DNNL_ARG_BIAS, e.bias});
  g_created.fetch_add(1, std::memory_order_relaxed);
  return e;
}

// Both operand types: A and B are only handed to oneDNN, whose primitive knows their type.
void run(const Gemm& g0, bool bf16, const void* A, const void* B, float* C, const float* bias) {
  g_calls[bf16].fetch_add(1, std::memory_order_relaxed);
  Gemm g = g0;
  // A batch against one shared, untransposed-A weight is a single taller matmul.
  if (g.batch > 1 && g.broadcast_b && !g.broadcast_a && !g.trans_a) {
    g.M *= g.batch;
    g.batch = 1;
  }
  if (g.batch == 1) g.broadcast_a = g.broadcast_b = false;
  if (g.M == 0 || g.N == 0 || g.batch == 0) return;
  if (!bf16 && g.M == 1 && g.K > 0)
    return matmul_row(g, static_cast<const float*>(A), static_cast<const float*>(B), C, bias);
  if (g.K == 0) {  // an empty sum: oneDNN rejects zero-sized K
    if (!g.accumulate)
      for (int64_t i = 0; i < g.batch * g.M * g.N; ++i) C[i] = 0.0f;
    if (bias)
      for (int64_t i = 0; i < g.batch * g.M; ++i)
        for (int64_t j = 0; j < g.N; ++j) C[i * g.N + j] += bias[j];
    if (g.relu) relu_in_place(C, g.batch * g.M * g.N);
    return;
  }
  const Key key{g.batch,     g.M,           g.N,           g.K,           num_threads(),
                g.trans_a,   g.trans_b,     g.broadcast_a, g.broadcast_b, g.accumulate,
                g.relu,      bias != nullptr, bf16};
  Context& ctx = context();
  auto it = ctx.cache.find(key);
  if (it == ctx.cache.end()) it = ctx.cache.emplace(key, make_entry(ctx, key)).first;
  Entry& e = it->second;
  e.a.set_data_handle(const_cast<void*>(A));
  e.b.set_data_handle(const_cast<void*>(B));
  e.c.set_data_handle(C);
  if (bias) e.bias.set_data_handle(const_cast<float*>(bias));
  const DeferSignals until_done;  // its JIT code may move the stack pointer (defer_signals.h)
  e.primitive.execute(ctx.stream, e.args);
  ctx.stream.wait();
}

}  // namespace

void matmul(const Gemm& g, const float* A, const float* B, float* C, const float* bias) {
  run(g, false, A, B, C, bias);
}

void matmul(const Gemm& g, const bf16* A, const bf16* B, float* C, const float* bias) {
  run(g, true, A, B, C, bias);
}

int64_t matmul_primitives_created() { return g_created.load(std::memory_order_relaxed); }

MatmulCalls matmul_calls() {
  return {g_calls[0].load(std::memory_order_relaxed), g_calls[1].load(std::memory_order_relaxed)};
}

}  // namespace folio::kernels
