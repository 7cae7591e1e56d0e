// Muon: Newton-Schulz against a plain double-precision reference, the singular values
// it produces, which parameters it takes, and whole optimizer steps against a step
// written out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "base/error.h"
#include "autograd/kernels/matmul.h"
#include "autograd/parallel.h"
#include "nn/transformer.h"
#include "tests/support.h"
#include "train/optimizer.h"

namespace folio {
namespace {

using Matrix = std::vector<double>;  // row-major

// C (n, m) = A (n, k) @ B (k, m), with A or B read transposed when asked.
Matrix product(const Matrix& A, const Matrix& B, int64_t n, int64_t k, int64_t m, bool ta = false, bool tb = false) {
  Matrix C(size_t(n * m), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += (ta ? A[p * n + i] : A[i * k + p]) * (tb ? B[j * k + p] : B[p * m + j]);
      C[size_t(i * m + j)] = s;
    }
  return C;
}

Matrix transpose(const Matrix& X, int64_t rows, int64_t cols) {
  Matrix T(X.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) T[size_t(j * rows + i)] = X[size_t(i * cols + j)];
  return T;
}

// Keller Jordan's zeropower_via_newtonschulz5, in double, as written there: transpose
// a tall matrix, normalise, five quintic steps on X X^T, transpose back.
Matrix newton_schulz_reference(Matrix X, int64_t rows, int64_t cols) {
  const double a = 3.4445, b = -4.7750, c = 2.0315;
  const bool tall = rows > cols;
  if (tall) X = transpose(X, rows, cols), std::swap(rows, cols);
  double sq = 0;
  for (double x : X) sq += x * x;
  for (double& x : X) x /= std::sqrt(sq) + 1e-7;
  for (int s = 0; s < 5; ++s) {
    const Matrix A = product(X, X, rows, cols, rows, false, true);
    const Matrix AA = product(A, A, rows, rows, rows);
    Matrix B(A.size());
    for (size_t i = 0; i < A.size(); ++i) B[i] = b * A[i] + c * AA[i];
    const Matrix BX = product(B, X, rows, rows, cols);
    for (size_t i = 0; i < X.size(); ++i) X[i] = a * X[i] + BX[i];
  }
  return tall ? transpose(X, rows, cols) : X;
}

// The eigenvalues of a symmetric (n, n) matrix, by cyclic Jacobi rotations.
std::vector<double> eigenvalues(Matrix S, int64_t n) {
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0;
    for (int64_t p = 0; p < n; ++p)
      for (int64_t q = p + 1; q < n; ++q) off += S[p * n + q] * S[p * n + q];
    if (off < 1e-24) break;
    for (int64_t p = 0; p < n; ++p)
      for (int64_t q = p + 1; q < n; ++q) {
        const double apq = S[p * n + q];
        if (std::abs(apq) < 1e-300) continue;
        const double theta = (S[q * n + q] - S[p * n + p]) / (2 * apq);
        const double t = (theta >= 0 ? 1 : -1) / (std::abs(theta) + std::sqrt(theta * theta + 1));
        const double cs = 1 / std::sqrt(t * t + 1), sn = t * cs;
        for (int64_t k = 0; k < n; ++k) {  // columns p, q
          const double kp = S[k * n + p], kq = S[k * n + q];
          S[k * n + p] = cs * kp - sn * kq, S[k * n + q] = sn * kp + cs * kq;
        }
        for (int64_t k = 0; k < n; ++k) {  // rows p, q
          const double pk = S[p * n + k], qk = S[q * n + k];
          S[p * n + k] = cs * pk - sn * qk, S[q * n + k] = sn * pk + cs * qk;
        }
      }
  }
  std::vector<double> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(S[i * n + i]);
  return out;
}

std::vector<float> random_matrix(int64_t rows, int64_t cols, uint64_t seed, float scale = 1.0f) {
  Rng rng(seed);
  const Tensor t = Tensor::randn({rows, cols}, rng, scale);
  return t.to_vector();
}

struct Shape2 {
  int64_t rows, cols;
};
// Wide, tall, square, and the shapes of a small GPT's matrices.
const Shape2 kShapes[] = {{8, 32}, {40, 12}, {16, 16}, {24, 96}, {96, 24}, {1, 7}};

TEST(NewtonSchulz, MatchesDoublePrecisionReference) {
  std::vector<float> scratch;
  uint64_t seed = 1;
  for (const auto [rows, cols] : kShapes)
    for (float scale : {1.0f, 1e-3f, 50.0f}) {  // the normalisation makes the scale irrelevant
      SCOPED_TRACE(::testing::Message() << rows << "x" << cols << " scale " << scale);
      std::vector<float> X = random_matrix(rows, cols, seed++, scale);
      const Matrix expected = newton_schulz_reference(Matrix(X.begin(), X.end()), rows, cols);
      newton_schulz(X.data(), rows, cols, scratch);
      double worst = 0;
      for (size_t i = 0; i < X.size(); ++i) worst = std::max(worst, std::abs(double(X[i]) - expected[i]));
      // Entries are ~1/sqrt(max(rows, cols)); float rounding, amplified by the
      // quintic's slope (3.4 per step), stays below 1e-6 (measured: at most 7e-7).
      EXPECT_LT(worst, 5e-6) << "largest difference from the double reference";
    }
}

// The known behaviour of five steps with these coefficients: every singular value of
// the (normalised) input ends in about [0.7, 1.2]. Exactly: iterating
// f(x) = a x + b x^3 + c x^5 from any x in [2e-3, 1] lands in [0.682, 1.203] after five
// steps (and the band f keeps is [0.682, 1.134]). Random Gaussian matrices that are not
// square have no singular value that small after normalisation, so all of them land.
TEST(NewtonSchulz, SingularValuesLandNearOne) {
  std::vector<float> scratch;
  uint64_t seed = 100;
  for (const auto [rows, cols] : kShapes) {
    if (rows == cols) continue;  // a square Gaussian matrix can have a singular value near 0
    SCOPED_TRACE(::testing::Message() << rows << "x" << cols);
    std::vector<float> X = random_matrix(rows, cols, seed++);
    newton_schulz(X.data(), rows, cols, scratch);
    const Matrix Y(X.begin(), X.end());
    const int64_t n = std::min(rows, cols);
    const Matrix gram = rows <= cols ? product(Y, Y, rows, cols, rows, false, true)   // Y Y^T
                                     : product(Y, Y, cols, rows, cols, true, false);  // Y^T Y
    for (double ev : eigenvalues(gram, n)) {
      const double sigma = std::sqrt(std::max(ev, 0.0));
      EXPECT_GT(sigma, 0.68);
      EXPECT_LT(sigma, 1.21);
    }
  }
}

nn::GPTConfig tiny() { return {.vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16}; }

TEST(Muon, TakesTheHiddenMatricesWithTheHeadsAsOne) {
  const nn::GPT gpt(tiny());
  const MuonSplit split = split_for_muon(gpt.named_parameters());
  std::vector<std::string> names;
  for (const MuonMatrix& m : split.matrices) names.push_back(m.name + " " + std::to_string(m.rows) + "x" + std::to_string(m.cols));
  const std::vector<std::string> block0 = {"blocks.0.attn.heads.*.key.weight 16x16", "blocks.0.attn.heads.*.query.weight 16x16",
                                           "blocks.0.attn.heads.*.value.weight 16x16", "blocks.0.attn.proj.weight 16x16",
                                           "blocks.0.ffwd.fc.weight 64x16", "blocks.0.ffwd.proj.weight 16x64"};
  ASSERT_EQ(names.size(), 12u);
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 6), block0);
  EXPECT_EQ(split.matrices[1].parts.size(), 2u);  // the two heads' queries, in head order
  EXPECT_EQ(split.matrices[1].parts[1].data(), gpt.blocks[0]->attn->heads[1]->query->weight.data());
  // Everything else stays with AdamW: embeddings, LayerNorms, biases, the output head.
  int64_t in_muon = 0;
  for (const MuonMatrix& m : split.matrices) in_muon += m.rows * m.cols;
  int64_t in_rest = 0;
  for (const auto& [name, p] : split.rest) {
    in_rest += p.numel();
    EXPECT_TRUE(p.ndim() == 1 || name.rfind("blocks.", 0) != 0) << name;
  }
  EXPECT_EQ(in_muon + in_rest, gpt.num_parameters());
  for (const char* name : {"token_embedding.weight", "position_embedding.weight", "lm_head.weight", "ln_f.weight",
                           "blocks.1.ffwd.fc.bias", "blocks.1.ln2.bias"})
    EXPECT_TRUE(std::any_of(split.rest.begin(), split.rest.end(), [&](const auto& np) { return np.first == name; }))
        << name;
}

// Random gradients into every parameter of `gpt`, from `seed`.
void fill_gradients(const nn::GPT& gpt, uint64_t seed) {
  Rng rng(seed);
  for (const auto& [name, p] : gpt.named_parameters())
    for (int64_t i = 0; i < p.numel(); ++i) p.grad_data()[i] = rng.normal() * 0.1f;
}

// Three steps of Optimizer(muon) on a tiny GPT, against Muon written out in double
// (momentum and its warm-up over the first two steps, Nesterov, Keller Jordan's
// Newton-Schulz, scale, decoupled decay) for the hidden matrices and a separate AdamW
// for the rest, on a twin model.
TEST(Muon, ThreeStepsMatchAHandWrittenReference) {
  const nn::GPT gpt(tiny()), twin(tiny());
  TrainConfig config;
  config.optimizer = OptimizerKind::muon;
  config.lr = 1e-3f;
  config.muon_lr = 0.02f;
  config.muon_weight_decay = 0.5f;
  config.muon_momentum_warmup = 2;
  Optimizer opt(gpt.named_parameters(), config);
  ASSERT_NE(opt.muon(), nullptr);
  const MuonSplit split = split_for_muon(twin.named_parameters());
  AdamW adamw(split.rest, {.beta1 = 0.9f, .beta2 = config.beta2, .eps = 1e-8f, .weight_decay = config.weight_decay});
  std::vector<Matrix> momentum;
  for (const MuonMatrix& m : split.matrices) momentum.emplace_back(size_t(m.rows * m.cols), 0.0);
  const float lrs[] = {1e-3f, 5e-4f, 2.5e-4f};  // AdamW's; Muon's is 0.02, 0.01, 0.005
  const double betas[] = {0.85, 0.90, 0.95};      // the warm-up's, then the momentum's
  for (int step = 0; step < 3; ++step) {
    fill_gradients(gpt, 7 + step);
    fill_gradients(twin, 7 + step);
    opt.step(lrs[step], step);
    adamw.step(lrs[step]);
    const double muon_lr = 0.02 * lrs[step] / 1e-3, beta = betas[step];
    for (size_t k = 0; k < split.matrices.size(); ++k) {
      const MuonMatrix& m = split.matrices[k];
      Matrix u;
      for (const Tensor& p : m.parts) u.insert(u.end(), p.grad_data(), p.grad_data() + p.numel());
      for (size_t i = 0; i < u.size(); ++i) {
        momentum[k][i] = beta * momentum[k][i] + (1 - beta) * u[i];
        u[i] = (1 - beta) * u[i] + beta * momentum[k][i];
      }
      const Matrix o = newton_schulz_reference(u, m.rows, m.cols);
      const double scale = std::sqrt(std::max(1.0, double(m.rows) / double(m.cols)));
      size_t at = 0;
      for (const Tensor& p : m.parts)
        for (int64_t i = 0; i < p.numel(); ++i, ++at)
          p.data()[i] = float(p.data()[i] * (1 - muon_lr * 0.5) - muon_lr * scale * o[at]);
    }
  }
  const auto got = gpt.named_parameters(), want = twin.named_parameters();
  const nn::GPT fresh(tiny());
  const auto start = fresh.named_parameters();
  for (size_t i = 0; i < got.size(); ++i) {
    const bool hidden = got[i].first.rfind("blocks.", 0) == 0 && got[i].second.ndim() == 2;
    const std::vector<float> g = got[i].second.to_vector(), w = want[i].second.to_vector();
    if (!hidden) {
      EXPECT_EQ(g, w) << got[i].first << ": AdamW's part differs from AdamW alone";
      continue;
    }
    double worst = 0, moved = 0;
    for (size_t j = 0; j < g.size(); ++j) worst = std::max(worst, std::abs(double(g[j]) - w[j]));
    const std::vector<float> init = start[i].second.to_vector();
    for (size_t j = 0; j < g.size(); ++j) moved = std::max(moved, std::abs(double(g[j]) - init[j]));
    EXPECT_LT(worst, 1e-6) << got[i].first;
    EXPECT_GT(moved, 1e-3) << got[i].first << " did not move";
  }
}

// A tiny GPT with gradients from `seed` and a default Optimizer(muon) over it.
struct MuonOnTiny {
  explicit MuonOnTiny(uint64_t seed) { fill_gradients(gpt, seed); }
  static TrainConfig muon() {
    TrainConfig c;
    c.optimizer = OptimizerKind::muon;
    return c;
  }
  const nn::GPT gpt{tiny()};
  const TrainConfig config = muon();
  Optimizer opt{gpt.named_parameters(), config};
};

// Muon's update does not depend on how many threads compute it.
TEST(Muon, SameStepOnOneThreadAndTwo) {
  auto step_with = [](int threads) {
    set_num_threads(threads);
    MuonOnTiny m(3);
    m.opt.step(m.config.lr, 0);
    set_num_threads(0);
    return m.gpt.flat_parameters().to_vector();
  };
  EXPECT_EQ(step_with(1), step_with(2));
}

// After its first step, Muon creates no oneDNN primitive and no buffer: each thread
// meets the same matrices every step.
TEST(Muon, StepsAfterTheFirstCreateNoPrimitive) {
  set_num_threads(2);
  MuonOnTiny m(5);
  m.opt.step(m.config.lr, 0);
  const int64_t primitives = kernels::matmul_primitives_created();
  for (int i = 1; i < 4; ++i) m.opt.step(m.config.lr, i);
  EXPECT_EQ(kernels::matmul_primitives_created(), primitives);
  set_num_threads(0);
}

// The momentum's warm-up: a straight line from its start to the momentum, then flat.
TEST(Muon, MomentumWarmsUpLinearly) {
  auto at = [](int64_t warmup, int64_t step) { return momentum_at({.momentum_warmup = warmup}, step); };
  EXPECT_FLOAT_EQ(at(0, 0), 0.95f);
  EXPECT_FLOAT_EQ(at(1, 0), 0.85f);
  EXPECT_FLOAT_EQ(at(1, 1), 0.95f);
  EXPECT_FLOAT_EQ(at(300, 0), 0.85f);
  EXPECT_FLOAT_EQ(at(300, 75), 0.875f);
  EXPECT_FLOAT_EQ(at(300, 150), 0.90f);
  EXPECT_FLOAT_EQ(at(300, 300), 0.95f);
  EXPECT_FLOAT_EQ(at(300, 5000), 0.95f);
  EXPECT_THROW(Muon({}, {.momentum_warmup = -1}), Error);
  EXPECT_THROW(Muon({}, {.momentum_start = 1.0f}), Error);
}

TEST(Muon, MatricesOfDifferentWidthsAreNotJoined) {
  nn::NamedParameters params{{"blocks.0.attn.heads.0.query.weight", Tensor::zeros({4, 8}).set_requires_grad()},
                             {"blocks.0.attn.heads.1.query.weight", Tensor::zeros({4, 6}).set_requires_grad()}};
  try {
    split_for_muon(params);
    ADD_FAILURE() << "joined a 4x8 and a 4x6 matrix";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("heads.1.query.weight has 6 columns"), std::string::npos) << e.what();
  }
}

// A shared state holds the optimizers' buffers, as a state_dict does, so a save writes
// the moments without a copy of them beside it; state() (a rollback's start) keeps its
// values while the steps go on.
TEST(Muon, ASharedStateHoldsTheBuffersAndStateKeepsItsValues) {
  const nn::GPT gpt(tiny());
  TrainConfig config;
  config.optimizer = OptimizerKind::muon;
  Optimizer opt(gpt.named_parameters(), config);
  fill_gradients(gpt, 3);
  opt.step(1e-3f, 0);
  const OptimizerState live = opt.shared_state(), kept = opt.state();
  std::vector<std::vector<float>> at_step_1;
  for (const NamedTensor& t : kept.tensors) at_step_1.push_back(t.tensor.to_vector());
  fill_gradients(gpt, 4);
  opt.step(1e-3f, 1);
  const OptimizerState now = opt.shared_state();
  for (size_t i = 0; i < live.tensors.size(); ++i) {
    EXPECT_EQ(live.tensors[i].tensor.data(), now.tensors[i].tensor.data()) << live.tensors[i].name << " was copied";
    EXPECT_EQ(kept.tensors[i].tensor.to_vector(), at_step_1[i]) << kept.tensors[i].name << " moved with the step";
    EXPECT_NE(now.tensors[i].tensor.to_vector(), at_step_1[i]) << now.tensors[i].name << " did not move";
  }
}

// The state goes out and comes back under the optimizers' own names; one that does
// not fit the model, lacks a part or holds a tensor no optimizer owns is refused,
// naming the file and the tensor.
TEST(Muon, StateRoundTripsAndBadStatesAreRefusedByName) {
  const nn::GPT gpt(tiny());
  TrainConfig config;
  config.optimizer = OptimizerKind::muon;
  Optimizer opt(gpt.named_parameters(), config);
  fill_gradients(gpt, 3);
  opt.step(1e-3f, 0);
  const OptimizerState s = opt.state();
  ASSERT_EQ(s.tensors.size(), 3u);
  EXPECT_EQ(s.tensors[0].name, "adamw.m");
  EXPECT_EQ(s.tensors[1].name, "adamw.v");
  EXPECT_EQ(s.tensors[2].name, "muon.momentum");
  EXPECT_EQ(s.counters, (Metadata{{"adamw_steps", "1"}}));
  Optimizer back(gpt.named_parameters(), config);
  back.load_state(s, "f.safetensors");
  const OptimizerState again = back.state();
  for (size_t i = 0; i < s.tensors.size(); ++i)
    EXPECT_EQ(again.tensors[i].tensor.to_vector(), s.tensors[i].tensor.to_vector()) << s.tensors[i].name;
  EXPECT_EQ(again.counters, s.counters);

  OptimizerState short_m = s;
  short_m.tensors[0].tensor = flat_tensor({1.0f, 2.0f});
  short_m.tensors[1].tensor = flat_tensor({1.0f, 2.0f});
  testing::expect_error([&] { back.load_state(short_m, "f.safetensors"); },
                        {"f.safetensors", "adamw.m has 2 values"});
  OptimizerState no_momentum = s;
  no_momentum.tensors.pop_back();
  testing::expect_error([&] { back.load_state(no_momentum, "f.safetensors"); },
                        {"f.safetensors", "muon.momentum is missing"});
  OptimizerState foreign = s;
  foreign.tensors.push_back({"sgd.buf", flat_tensor({0.0f})});
  testing::expect_error([&] { back.load_state(foreign, "f.safetensors"); },
                        {"f.safetensors", "sgd.buf is not part of the state of muon"});
  testing::expect_error([&] { Optimizer::check_state(OptimizerKind::adamw, s, "f.safetensors"); },
                        {"muon.momentum is not part of the state of adamw"});
}

}  // namespace
}  // namespace folio
