// Matrix products at the model's shapes, several ways, in one program so that their
// GFLOP/s can be compared within one run (same machine state, same buffers):
//   Raw         oneDNN directly: primitive and memory objects made once, outside the
//               timing loop; only execute() + wait() is timed.
//   Kernel      folio::kernels::matmul(Gemm, A, B, C): the cached-primitive path.
//   Op          folio::matmul(a, b) under NoGradGuard: the whole op (shape checks,
//               output tensor from the pool, the kernel).
//   RawGrad     forward, dA += dC B^T and dB += A^T dC on raw oneDNN primitives
//               (3x the forward's FLOPs): the baseline for the two below.
//   OpGrad      folio::matmul(a, b) with requires_grad inputs, then c.backward(dC).
//   OpGradNode  as OpGrad, but calls the recorded node's backward closure with dC
//               directly: the op's own backward, without Tensor::backward's
//               gradient seeding and graph walk.
//   Bf16, KernelGrad, Bf16Grad, Bf16GradConv
//               the products of a training step through folio::kernels::matmul: the
//               forward alone in bf16 (Bf16, against Kernel), then forward, dA = dC B^T
//               and dB = A^T dC (transposed operands read in place) in fp32 and in
//               bf16; Bf16GradConv adds the fp32 -> bf16 roundings a training step does
//               before each product (A and B, then dC, B and A). Bf16 operands are
//               rounded once outside the loop otherwise. What bf16 buys per product.
// One forward does 2 * batch * M * N * K FLOPs; the *Grad variants count 3x that.
// After the runs, a summary prints per shape the GFLOP/s and Kernel/Raw, Op/Raw,
// OpGrad/RawGrad, OpGradNode/RawGrad from the medians over repetitions (or from the
// single run without --benchmark_repetitions).
//
// Threads: --threads=N or FOLIO_BENCH_THREADS=N (default: OMP_NUM_THREADS if set, else
// all cores).
#include <cstdio>
#include <string>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "autograd/kernels/matmul.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "bench/bench_common.h"

namespace {

using folio::bench::Buffer;

struct MatmulShape {
  const char* label;
  int64_t batch, M, K, N;
  double flops() const { return 2.0 * double(batch) * double(M) * double(N) * double(K); }
};

// (M x K) @ (K x N), batch times.
const MatmulShape kShapes[] = {
    {"768x128x128", 1, 768, 128, 128},
    {"768x128x512", 1, 768, 128, 512},
    {"768x512x128", 1, 768, 512, 128},
    {"48x64x32x64", 48, 64, 32, 64},
    {"16384x384x1536", 1, 16384, 384, 1536},
    // One data-parallel replica's products at config S (batch 12 x 64 on 2 threads):
    {"384x128x512", 1, 384, 128, 512},
    {"24x64x32x64", 24, 64, 32, 64},
};

// ---- raw oneDNN

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}
dnnl::stream& stream() {
  static dnnl::stream s(engine());
  return s;
}

// A (rows, cols) operand, stored as is or transposed; 2-D without a batch.
dnnl::memory::desc operand(int64_t batch, int64_t rows, int64_t cols, bool transposed) {
  using tag = dnnl::memory::format_tag;
  const auto f32 = dnnl::memory::data_type::f32;
  if (batch == 1) return {{rows, cols}, f32, transposed ? tag::ba : tag::ab};
  return {{batch, rows, cols}, f32, transposed ? tag::acb : tag::abc};
}

// C (M, N) [+]= op(A) (M, K) @ op(B) (K, N), batch times, bound to fixed buffers.
struct RawMatmul {
  dnnl::matmul primitive;
  std::unordered_map<int, dnnl::memory> args;

  RawMatmul(int64_t batch, int64_t M, int64_t K, int64_t N, bool trans_a, bool trans_b,
            bool accumulate, const float* A, const float* B, float* C) {
    const auto a_md = operand(batch, M, K, trans_a);
    const auto b_md = operand(batch, K, N, trans_b);
    const auto c_md = operand(batch, M, N, false);
    dnnl::primitive_attr attr;
    if (accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    const dnnl::matmul::desc desc(a_md, b_md, c_md);
    primitive = dnnl::matmul(dnnl::matmul::primitive_desc(desc, attr, engine()));
    args = {{DNNL_ARG_SRC, dnnl::memory(a_md, engine(), const_cast<float*>(A))},
            {DNNL_ARG_WEIGHTS, dnnl::memory(b_md, engine(), const_cast<float*>(B))},
            {DNNL_ARG_DST, dnnl::memory(c_md, engine(), C)}};
  }
  void run() { primitive.execute(stream(), args); }
};

void set_flops(benchmark::State& state, double flops) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Raw(benchmark::State& state, MatmulShape s) {
  Buffer A(s.batch * s.M * s.K, 1), B(s.batch * s.K * s.N, 2), C(s.batch * s.M * s.N, 3);
  RawMatmul mm(s.batch, s.M, s.K, s.N, false, false, false, A.data(), B.data(), C.data());
  mm.run();  // warm-up: first touch, caches
  stream().wait();
  for (auto _ : state) {
    mm.run();
    stream().wait();
  }
  benchmark::DoNotOptimize(C.data());
  set_flops(state, s.flops());
}

void BM_RawGrad(benchmark::State& state, MatmulShape s) {
  Buffer A(s.batch * s.M * s.K, 1), B(s.batch * s.K * s.N, 2), C(s.batch * s.M * s.N, 3);
  Buffer dC(s.batch * s.M * s.N, 4), dA(s.batch * s.M * s.K, 5), dB(s.batch * s.K * s.N, 6);
  RawMatmul fwd(s.batch, s.M, s.K, s.N, false, false, false, A.data(), B.data(), C.data());
  // dA (M, K) += dC (M, N) @ B^T (N, K): B (K, N) read transposed.
  RawMatmul da(s.batch, s.M, s.N, s.K, false, true, true, dC.data(), B.data(), dA.data());
  // dB (K, N) += A^T (K, M) @ dC (M, N): A (M, K) read transposed.
  RawMatmul db(s.batch, s.K, s.M, s.N, true, false, true, A.data(), dC.data(), dB.data());
  auto step = [&] {
    fwd.run();
    stream().wait();
    da.run();
    stream().wait();
    db.run();
    stream().wait();
  };
  step();
  for (auto _ : state) step();
  benchmark::DoNotOptimize(dB.data());
  set_flops(state, 3 * s.flops());
}

// ---- folio

void BM_Kernel(benchmark::State& state, MatmulShape s) {
  Buffer A(s.batch * s.M * s.K, 1), B(s.batch * s.K * s.N, 2), C(s.batch * s.M * s.N, 3);
  folio::kernels::Gemm g;
  g.batch = s.batch, g.M = s.M, g.N = s.N, g.K = s.K;
  folio::kernels::matmul(g, A.data(), B.data(), C.data());  // creates the cached primitive
  for (auto _ : state) folio::kernels::matmul(g, A.data(), B.data(), C.data());
  benchmark::DoNotOptimize(C.data());
  set_flops(state, s.flops());
}

folio::Shape shape_of(int64_t batch, int64_t rows, int64_t cols) {
  return batch == 1 ? folio::Shape{rows, cols} : folio::Shape{batch, rows, cols};
}

folio::Tensor random_tensor(const folio::Shape& shape, uint32_t seed) {
  Buffer values(size_t(shape.numel()), seed);
  return folio::Tensor::from(shape, {values.data(), values.n});
}

void BM_Op(benchmark::State& state, MatmulShape s) {
  const folio::Tensor a = random_tensor(shape_of(s.batch, s.M, s.K), 1);
  const folio::Tensor b = random_tensor(shape_of(s.batch, s.K, s.N), 2);
  folio::NoGradGuard no_grad;
  benchmark::DoNotOptimize(folio::matmul(a, b).data());  // warm-up: primitive, pool buffer
  for (auto _ : state) {
    folio::Tensor c = folio::matmul(a, b);
    benchmark::DoNotOptimize(c.data());
  }
  set_flops(state, s.flops());
}

// Forward, then backward from a fixed dC: dA += dC B^T, dB += A^T dC. backward(dC)
// also takes c's gradient buffer from the pool, zero-fills it and adds dC into it
// (M*N floats each). Leaf gradients keep accumulating across iterations.
// a (M, K) and b (K, N) that need gradients, and a dC (M, N) to start from.
struct GradOperands {
  folio::Tensor a, b, dC;
  explicit GradOperands(const MatmulShape& s)
      : a(random_tensor(shape_of(s.batch, s.M, s.K), 1)),
        b(random_tensor(shape_of(s.batch, s.K, s.N), 2)),
        dC(random_tensor(shape_of(s.batch, s.M, s.N), 4)) {
    a.set_requires_grad();
    b.set_requires_grad();
  }
};

void BM_OpGrad(benchmark::State& state, MatmulShape s) {
  auto [a, b, dC] = GradOperands(s);
  auto step = [&] {
    folio::Tensor c = folio::matmul(a, b);
    c.backward(dC);
  };
  step();
  for (auto _ : state) step();
  benchmark::DoNotOptimize(a.grad_data());
  set_flops(state, 3 * s.flops());
}

// OpGrad without Tensor::backward's graph walk and gradient seeding: forward, then the
// recorded matmul node's backward closure called directly with dC. Times exactly the
// op's own backward (dA and dB products plus their setup).
void BM_OpGradNode(benchmark::State& state, MatmulShape s) {
  auto [a, b, dC] = GradOperands(s);
  auto step = [&] {
    folio::Tensor c = folio::matmul(a, b);
    folio::Node& node = *c.impl()->node;
    node.backward(dC, folio::InputGrads(node));
  };
  step();
  for (auto _ : state) step();
  benchmark::DoNotOptimize(a.grad_data());
  set_flops(state, 3 * s.flops());
}

// ---- bf16 against fp32, on folio's kernel

using folio::kernels::bf16;

// The operands of one product and its gradients, in fp32 and rounded to bf16.
struct StepOperands {
  folio::kernels::Gemm fwd, da, db;  // C = A B;  dA = dC B^T;  dB = A^T dC
  Buffer A, B, C, dC, dA, dB;
  std::vector<bf16> a16, b16, dc16;
  explicit StepOperands(const MatmulShape& s)
      : A(s.batch * s.M * s.K, 1), B(s.batch * s.K * s.N, 2), C(s.batch * s.M * s.N, 3),
        dC(s.batch * s.M * s.N, 4), dA(s.batch * s.M * s.K, 5), dB(s.batch * s.K * s.N, 6),
        a16(A.n), b16(B.n), dc16(dC.n) {
    fwd.batch = da.batch = db.batch = s.batch;
    fwd.M = s.M, fwd.K = s.K, fwd.N = s.N;
    da.M = s.M, da.K = s.N, da.N = s.K, da.trans_b = true;
    db.M = s.K, db.K = s.M, db.N = s.N, db.trans_a = true;
    round_all();
  }
  void round_all() {
    folio::kernels::to_bf16(A.data(), a16.data(), int64_t(A.n));
    folio::kernels::to_bf16(B.data(), b16.data(), int64_t(B.n));
    folio::kernels::to_bf16(dC.data(), dc16.data(), int64_t(dC.n));
  }
  template <class T>
  void step(const T* a, const T* b, const T* dc) {
    folio::kernels::matmul(fwd, a, b, C.data());
    folio::kernels::matmul(da, dc, b, dA.data());
    folio::kernels::matmul(db, a, dc, dB.data());
  }
};

void BM_Bf16(benchmark::State& state, MatmulShape s) {
  StepOperands o(s);
  folio::kernels::matmul(o.fwd, o.a16.data(), o.b16.data(), o.C.data());
  for (auto _ : state) folio::kernels::matmul(o.fwd, o.a16.data(), o.b16.data(), o.C.data());
  benchmark::DoNotOptimize(o.C.data());
  set_flops(state, s.flops());
}

// Times `step` (a step's three products, after one untimed call) at 3x the forward's FLOPs.
template <class Step>
void time_grad_step(benchmark::State& state, const MatmulShape& s, StepOperands& o, Step step) {
  step();
  for (auto _ : state) step();
  benchmark::DoNotOptimize(o.dB.data());
  set_flops(state, 3 * s.flops());
}

void BM_KernelGrad(benchmark::State& state, MatmulShape s) {
  StepOperands o(s);
  time_grad_step(state, s, o, [&] { o.step(o.A.data(), o.B.data(), o.dC.data()); });
}

void BM_Bf16Grad(benchmark::State& state, MatmulShape s) {
  StepOperands o(s);
  time_grad_step(state, s, o, [&] { o.step(o.a16.data(), o.b16.data(), o.dc16.data()); });
}

// As a training step pays it: A and B rounded before the forward, dC before the
// backward, and B and A again before their gradient products.
void BM_Bf16GradConv(benchmark::State& state, MatmulShape s) {
  StepOperands o(s);
  time_grad_step(state, s, o, [&] {
    o.round_all();
    folio::kernels::to_bf16(o.B.data(), o.b16.data(), int64_t(o.B.n));
    folio::kernels::to_bf16(o.A.data(), o.a16.data(), int64_t(o.A.n));
    o.step(o.a16.data(), o.b16.data(), o.dc16.data());
  });
}

std::string name_of(const MatmulShape& s, const char* variant) {
  return std::string("matmul/") + s.label + "/" + variant;
}

void register_all() {
  using Fn = void (*)(benchmark::State&, MatmulShape);
  const std::pair<const char*, Fn> variants[] = {
      {"Raw", BM_Raw}, {"Kernel", BM_Kernel}, {"Op", BM_Op},
      {"RawGrad", BM_RawGrad}, {"OpGrad", BM_OpGrad}, {"OpGradNode", BM_OpGradNode},
      {"Bf16", BM_Bf16}, {"KernelGrad", BM_KernelGrad}, {"Bf16Grad", BM_Bf16Grad},
      {"Bf16GradConv", BM_Bf16GradConv},
  };
  for (const MatmulShape& s : kShapes)
    for (const auto& [variant, fn] : variants)
      folio::bench::add_min_max(benchmark::RegisterBenchmark(name_of(s, variant).c_str(), fn, s))
          ->UseRealTime()  // oneDNN runs on several threads: wall time, not this thread's CPU
          ->Unit(benchmark::kMicrosecond);
}

void print_summary(const folio::bench::CollectingReporter& rep, const std::string& aggregate,
                   FILE* out) {
  constexpr int kN = 6;
  const char* names[kN] = {"Raw", "Kernel", "Op", "RawGrad", "OpGrad", "OpGradNode"};
  std::fprintf(out, "\nGFLOP/s, %s over repetitions (else the single run), and ratios\n",
               aggregate == "max" ? "best (max)" : aggregate.c_str());
  std::fprintf(out, "%-15s %8s %8s %8s %9s %7s | %8s %8s %8s %11s %12s\n", "shape", "Raw",
               "Kernel", "Op", "Kern/Raw", "Op/Raw", "RawGrad", "OpGrad", "GradNode",
               "OpGrad/RawG", "GradNode/RawG");
  for (const MatmulShape& s : kShapes) {
    double v[kN];
    bool have[kN], any = false;
    for (int i = 0; i < kN; ++i) {
      have[i] = folio::bench::counter_of(rep.runs(), name_of(s, names[i]), "GFLOP/s", aggregate,
                                         v[i]);
      any = any || have[i];
    }
    if (!any) continue;
    auto num = [&](int i) {
      char buf[32] = "-";
      if (have[i]) std::snprintf(buf, sizeof buf, "%.1f", v[i]);
      return std::string(buf);
    };
    auto ratio = [&](int i, int j) {
      char buf[32] = "-";
      if (have[i] && have[j])
        std::snprintf(buf, sizeof buf, "%.3f%s", v[i] / v[j], v[i] / v[j] < 0.90 ? "!" : "");
      return std::string(buf);
    };
    std::fprintf(out, "%-15s %8s %8s %8s %9s %7s | %8s %8s %8s %11s %12s\n", s.label,
                 num(0).c_str(), num(1).c_str(), num(2).c_str(), ratio(1, 0).c_str(),
                 ratio(2, 0).c_str(), num(3).c_str(), num(4).c_str(), num(5).c_str(),
                 ratio(4, 3).c_str(), ratio(5, 3).c_str());
  }
}

// bf16 against fp32 per shape: the forward, the three products of a step, and the
// step's products with their roundings.
void print_bf16_summary(const folio::bench::CollectingReporter& rep, const std::string& aggregate,
                        FILE* out) {
  constexpr int kN = 5;
  const char* names[kN] = {"Kernel", "Bf16", "KernelGrad", "Bf16Grad", "Bf16GradConv"};
  std::fprintf(out, "\nbf16 against fp32, GFLOP/s, %s\n", aggregate.c_str());
  std::fprintf(out, "%-15s %8s %8s %6s | %8s %8s %6s | %9s %6s\n", "shape", "fp32", "bf16", "x",
               "fp32grad", "bf16grad", "x", "+rounding", "x");
  for (const MatmulShape& s : kShapes) {
    double v[kN];
    bool ok = true;
    for (int i = 0; i < kN; ++i)
      ok = folio::bench::counter_of(rep.runs(), name_of(s, names[i]), "GFLOP/s", aggregate, v[i]) && ok;
    if (!ok) continue;
    std::fprintf(out, "%-15s %8.1f %8.1f %6.2f | %8.1f %8.1f %6.2f | %9.1f %6.2f\n", s.label, v[0], v[1],
                 v[1] / v[0], v[2], v[3], v[3] / v[2], v[4], v[4] / v[2]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = folio::bench::setup_threads(argc, argv);
  const std::string format = folio::bench::display_format(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  register_all();
  folio::bench::CollectingReporter reporter(format);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  // Keep machine-readable stdout clean: the summary goes to stderr unless on the console.
  FILE* out = format == "console" ? stdout : stderr;
  std::fprintf(out, "\nthreads: %d\n", threads);
  print_summary(reporter, "median", out);
  print_summary(reporter, "max", out);
  print_bf16_summary(reporter, "median", out);
  std::fprintf(out, "the issue asks Op/Raw >= 0.90; ! marks a ratio below 0.90\n");
  benchmark::Shutdown();
  return 0;
}
