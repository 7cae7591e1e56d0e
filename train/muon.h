#pragma once
// Muon (Keller Jordan, "Muon: An optimizer for hidden layers in neural networks", 2024,
// and modded-nanogpt): SGD with Nesterov momentum whose update, for each hidden weight
// matrix, is replaced by the nearest semi-orthogonal matrix, computed approximately by
// five Newton-Schulz iterations. Embeddings, the output head, LayerNorm parameters and
// biases are not matrices of that kind; AdamW keeps them (train/optimizer.h).
//
// Which matrices: every 2-D parameter under "blocks." (attention and feed-forward
// weights). The attention heads' weights are stored per head (nn/attention.h:
// blocks.L.attn.heads.H.{key,query,value}.weight, each (head_size, C)); Muon
// orthogonalises the queries of all heads as one (n_head * head_size, C) matrix, and
// the keys and the values likewise, as modded-nanogpt does with its q, k and v
// weights: each is one linear map of the input, whose singular directions span the
// heads. Fusing q, k and v into one matrix would tie the three maps' update scales to
// one another, and per head (head_size, C) pieces would orthogonalise each head
// alone; modded-nanogpt, the tested recipe, does neither.
#include <cstdint>
#include <string>
#include <vector>

#include "nn/module.h"
#include "train/optimizer_state.h"

namespace folio {

// X (rows, cols), in place: X / (|X|_F + 1e-7), then `steps` iterations of
//   A = X X^T,  X <- a X + (b A + c A A) X,   (a, b, c) = (3.4445, -4.7750, 2.0315)
// on the wide orientation (rows > cols: the same on X^T, written here as
// A = X^T X, X <- a X + X (b A + c A A), so nothing is transposed). The quintic pushes
// every singular value of the normalised X towards 1 (into about [0.7, 1.2] after five
// steps, for those not far below 1e-3), keeping the singular vectors: X -> ~U V^T.
// Products on oneDNN (autograd/kernels); `scratch` grows to 2 n^2 + rows*cols floats
// (n = min(rows, cols)) on first use and is reused.
void newton_schulz(float* X, int64_t rows, int64_t cols, std::vector<float>& scratch, int steps = 5);

struct MuonConfig {
  float momentum = 0.95f;      // Nesterov
  // A warm-up of the momentum: it rises linearly from momentum_start at step 0 to
  // `momentum` at step momentum_warmup (0: `momentum` throughout). Early on the
  // gradients change fast, so the momentum averages over ~1/(1 - 0.85) ≈ 7 steps
  // rather than 1/(1 - 0.95) = 20.
  float momentum_start = 0.85f;
  int64_t momentum_warmup = 0;
  float weight_decay = 0.0f;   // decoupled: W <- W (1 - lr * weight_decay) before the update
  int ns_steps = 5;
};

// The momentum at `step`: the warm-up's line, then config.momentum.
float momentum_at(const MuonConfig& config, int64_t step);

// One matrix Muon orthogonalises: `parts` are parameters of `cols` columns whose rows,
// stacked in order, make it (a single parameter, or the heads' queries, ...).
struct MuonMatrix {
  std::string name;  // "blocks.0.attn.heads.*.query.weight"
  std::vector<Tensor> parts;
  int64_t rows = 0, cols = 0;
};

// The model's parameters, split between Muon (hidden matrices, grouped as above) and
// AdamW (the rest, in named_parameters() order).
struct MuonSplit {
  std::vector<MuonMatrix> matrices;
  nn::NamedParameters rest;
};
MuonSplit split_for_muon(const nn::NamedParameters& params);

class Muon {
 public:
  Muon(std::vector<MuonMatrix> matrices, MuonConfig config);
  // For each matrix, with G its gradient and M its momentum:
  //   M <- beta M + (1 - beta) G,  U = (1 - beta) G + beta M    (Nesterov)
  //   W <- W (1 - lr wd) - lr sqrt(max(1, rows / cols)) newton_schulz(U)
  // with beta = momentum_at(config, step), the run's step (so a resumed run continues the
  // warm-up where it stopped). The matrices are independent: they are spread over the
  // threads, each running its products single-threaded, so the result does not depend
  // on the thread count.
  void step(float lr, int64_t step);

  // The state, under Muon's name: "muon.momentum", (M,) the momentum of every matrix,
  // flat, in matrix order (rows stacked as in `parts`). check_state() checks a state
  // read from the file `where` holds it; load_state() also that it fits these matrices.
  void save_state(OptimizerState& into) const;
  static void check_state(const OptimizerState& s, const std::string& where);
  void load_state(const OptimizerState& s, const std::string& where);
  static bool owns(std::string_view name) { return name == "muon.momentum"; }
  int64_t size() const { return momentum_.numel(); }  // M, the weights of its matrices
  const std::vector<MuonMatrix>& matrices() const { return matrices_; }
  const MuonConfig& config() const { return config_; }

 private:
  MuonConfig config_;
  std::vector<MuonMatrix> matrices_;
  std::vector<int64_t> offsets_;     // of each matrix in momentum_
  std::vector<size_t> order_;        // largest first, dealt to the threads in turn
  Tensor momentum_;                  // (M,); save_state shares it
  std::vector<std::vector<float>> update_, scratch_;  // per thread
};

}  // namespace folio
