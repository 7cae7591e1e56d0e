#include "train/muon.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <map>

#include "base/error.h"
#include "autograd/kernels/matmul.h"
#include "autograd/parallel.h"

namespace folio {

void newton_schulz(float* X, int64_t rows, int64_t cols, std::vector<float>& scratch, int steps) {
  constexpr float a = 3.4445f, b = -4.7750f, c = 2.0315f;
  const int64_t numel = rows * cols, n = std::min(rows, cols);
  const bool tall = rows > cols;
  double sq = 0;
  for (int64_t i = 0; i < numel; ++i) sq += double(X[i]) * X[i];
  const float inv = float(1.0 / (std::sqrt(sq) + 1e-7));  // the spectral norm is now <= 1
  for (int64_t i = 0; i < numel; ++i) X[i] *= inv;
  if (scratch.size() < size_t(2 * n * n + numel)) scratch.resize(size_t(2 * n * n + numel));
  float *A = scratch.data(), *AA = A + n * n, *Y = AA + n * n;
  using kernels::Gemm;
  for (int s = 0; s < steps; ++s) {
    // A = X X^T (wide) or X^T X (tall): (n, n)
    kernels::matmul(tall ? Gemm{.M = n, .N = n, .K = rows, .trans_a = true}
                         : Gemm{.M = n, .N = n, .K = cols, .trans_b = true},
                    X, X, A);
    kernels::matmul(Gemm{.M = n, .N = n, .K = n}, A, A, AA);
    for (int64_t i = 0; i < n * n; ++i) A[i] = b * A[i] + c * AA[i];  // B, symmetric
    // Y = a X + B X (wide) or a X + X B (tall)
    for (int64_t i = 0; i < numel; ++i) Y[i] = a * X[i];
    if (tall) kernels::matmul(Gemm{.M = rows, .N = cols, .K = cols, .accumulate = true}, X, A, Y);
    else kernels::matmul(Gemm{.M = rows, .N = cols, .K = rows, .accumulate = true}, A, X, Y);
    std::memcpy(X, Y, sizeof(float) * size_t(numel));
  }
}

MuonSplit split_for_muon(const nn::NamedParameters& params) {
  MuonSplit out;
  std::map<std::string, size_t> group;  // name with the head number as "*" -> matrix
  for (const auto& [name, p] : params) {
    if (name.rfind("blocks.", 0) != 0 || p.ndim() != 2) {
      out.rest.emplace_back(name, p);
      continue;
    }
    // "blocks.0.attn.heads.3.query.weight" joins "blocks.0.attn.heads.*.query.weight".
    std::string key = name;
    const size_t h = name.find(".heads.");
    if (const size_t end = h == std::string::npos ? h : name.find('.', h + 7); end != std::string::npos)
      key = name.substr(0, h + 7) + "*" + name.substr(end);
    auto [it, fresh] = group.emplace(key, out.matrices.size());
    if (fresh) out.matrices.push_back({key, {}, 0, p.size(1)});
    MuonMatrix& m = out.matrices[it->second];
    if (p.size(1) != m.cols)
      fail("muon", name, " has ", p.size(1), " columns but ", m.name, " has ", m.cols, ": they cannot be one matrix");
    m.parts.push_back(p);
    m.rows += p.size(0);
  }
  return out;
}

Muon::Muon(std::vector<MuonMatrix> matrices, MuonConfig config) : config_(config), matrices_(std::move(matrices)) {
  for (float m : {config_.momentum, config_.momentum_start})
    if (!(m >= 0.0f && m < 1.0f)) fail("muon", "momentum ", m, " outside [0, 1)");
  if (config_.momentum_warmup < 0)
    fail("muon", "momentum warm-up of ", config_.momentum_warmup, " steps: expected >= 0");
  int64_t total = 0;
  for (const MuonMatrix& m : matrices_) {
    offsets_.push_back(total);
    total += m.rows * m.cols;
    order_.push_back(order_.size());
  }
  momentum_ = Tensor::zeros({total});
  auto cost = [&](size_t i) {
    const MuonMatrix& m = matrices_[i];
    return m.rows * m.cols * std::min(m.rows, m.cols);
  };
  std::stable_sort(order_.begin(), order_.end(), [&](size_t x, size_t y) { return cost(x) > cost(y); });
}

void Muon::save_state(OptimizerState& into) const { into.tensors.push_back({"muon.momentum", momentum_}); }

void Muon::check_state(const OptimizerState& s, const std::string& where) {
  checked_tensor(s, "muon.momentum", where, false, "the run's optimizer is muon");
}

void Muon::load_state(const OptimizerState& s, const std::string& where) {
  check_state(s, where);
  const Tensor& m = *s.find("muon.momentum");
  if (m.numel() != size())
    fail("checkpoint", where, ": tensor muon.momentum has ", m.numel(), " values but the model's hidden matrices have ",
         size());
  std::copy_n(m.data(), m.numel(), momentum_.data());
}

float momentum_at(const MuonConfig& c, int64_t step) {
  if (step >= c.momentum_warmup) return c.momentum;
  const float t = float(step) / float(c.momentum_warmup);
  return (1.0f - t) * c.momentum_start + t * c.momentum;
}

void Muon::step(float lr, int64_t step) {
  const int threads = std::max(1, std::min(num_threads(), int(matrices_.size())));
  if (update_.size() < size_t(threads)) update_.resize(size_t(threads)), scratch_.resize(size_t(threads));
  const float beta = momentum_at(config_, step), decay = 1.0f - lr * config_.weight_decay;
  std::exception_ptr error;
#pragma omp parallel num_threads(threads)
  {
    omp_set_num_threads(1);  // this thread's products run on it alone (see data_parallel.cpp)
    std::vector<float>& u = update_[size_t(omp_get_thread_num())];
    std::vector<float>& scratch = scratch_[size_t(omp_get_thread_num())];
    // Round robin over the matrices, largest first: each thread takes the same ones
    // every step, so its buffers and oneDNN primitives are made at the first step only.
#pragma omp for schedule(static, 1)
    for (size_t k = 0; k < order_.size(); ++k) {
      try {
        const MuonMatrix& mat = matrices_[order_[k]];
        const int64_t numel = mat.rows * mat.cols;
        if (u.size() < size_t(numel)) u.resize(size_t(numel));
        int64_t at = 0;  // gather the parts' gradients: (rows, cols)
        for (const Tensor& p : mat.parts) {
          std::memcpy(u.data() + at, p.grad_data(), sizeof(float) * size_t(p.numel()));
          at += p.numel();
        }
        float* m = momentum_.data() + offsets_[order_[k]];
        for (int64_t i = 0; i < numel; ++i) {
          m[i] = beta * m[i] + (1.0f - beta) * u[size_t(i)];
          u[size_t(i)] = (1.0f - beta) * u[size_t(i)] + beta * m[i];
        }
        newton_schulz(u.data(), mat.rows, mat.cols, scratch, config_.ns_steps);
        const float rate = lr * std::sqrt(std::max(1.0f, float(mat.rows) / float(mat.cols)));
        at = 0;
        for (const Tensor& p : mat.parts) {
          float* w = p.data();
          for (int64_t i = 0; i < p.numel(); ++i) w[i] = w[i] * decay - rate * u[size_t(at + i)];
          at += p.numel();
        }
      } catch (...) {
#pragma omp critical(folio_muon_error)
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
  // A graph recorded before this step saved the old weights: its backward must fail.
  for (const MuonMatrix& mat : matrices_)
    for (const Tensor& p : mat.parts) p.mark_modified();
}

}  // namespace folio
