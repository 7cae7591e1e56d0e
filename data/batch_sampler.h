#pragma once
// The stream of training batches, in one of two orders:
//   random  every window starts at a uniformly random token (with replacement), as
//           nanoGPT's get_batch does; folio's default, bit for bit as before.
//   epoch   a shuffled pass over non-overlapping windows, without replacement: epoch e
//           cuts the tokens into windows of T (+1 for the last target) from an offset
//           phase(e) in [0, T), and visits them in a pseudo-random order that is a
//           bijection of the window numbers (a keyed Feistel permutation, so it takes no
//           memory however many windows there are). Every window is seen once an
//           epoch; the phase moves the cut between epochs.
// Its whole position is State: --resume continues it exactly. Every rank draws the
// same stream and reads only its rows of each batch (row_begin..row_end), so the
// ranks see disjoint windows of every global batch.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "base/rng.h"
#include "data/token_sequence.h"

namespace folio {

// B windows of T tokens, row-major (B, T): targets are the inputs shifted by one.
struct Batch {
  int64_t B = 0, T = 0;
  std::vector<int32_t> inputs, targets;
};
// Row b starts at rng.below(n - T), drawn in order b = 0..B-1, so x[b, t] = tokens[s + t]
// and y[b, t] = tokens[s + t + 1] with s in [0, n - T - 1]. Only rows [row_begin,
// row_end) are read (a rank's share; -1: to B), though all B starts are drawn, so every
// rank walks the same stream. Reuses `batch`'s capacity (no allocation once sized).
// Throws "[data] <split_name> split has N tokens, needs at least block_size + 1 = M"
// when the tokens are too few.
void sample_batch(const TokenSequence& tokens, int64_t B, int64_t T, Rng& rng, Batch& batch,
                  std::string_view split_name = "train", int64_t row_begin = 0, int64_t row_end = -1);

// Sizes `batch` to (B, T) and copies into row b the window of T + 1 tokens at `start`.
void resize_batch(Batch& batch, int64_t B, int64_t T);
void copy_window(const TokenSequence& tokens, int64_t start, int64_t b, Batch& batch);

enum class Sampling { random, epoch };
const char* to_string(Sampling s);                              // "random", "epoch"
std::optional<Sampling> parse_sampling(std::string_view name);  // nullopt: neither

class BatchSampler {
 public:
  struct State {
    Rng::State rng{};      // random: the window starts' generator
    int64_t epoch = 0;     // epoch: which pass, and how many windows of it are drawn
    int64_t position = 0;
    bool same(const State& o) const { return rng == o.rng && epoch == o.epoch && position == o.position; }
  };

  explicit BatchSampler(Sampling mode = Sampling::random, uint64_t seed = 0);
  Sampling mode() const { return mode_; }
  // The next batch of B windows of T + 1 tokens; rows outside [row_begin, row_end) are
  // drawn but not read. Throws "[data] train split has N tokens, needs at least ...".
  void next(const TokenSequence& tokens, int64_t B, int64_t T, Batch& batch, int64_t row_begin = 0,
            int64_t row_end = -1);
  // The next of n items (conversations, data/conversations.h), in the same two orders:
  // random, drawn with replacement; epoch, a shuffled pass over all n, then the next.
  int64_t next_index(int64_t n);
  State state() const { return {rng_.state(), epoch_, position_}; }
  void restore(const State& s);

  // Epoch mode's order, exposed for tests: where window `k` of epoch `epoch` starts,
  // and how many windows the epoch has, for n tokens and context T.
  struct EpochLayout {
    int64_t phase, windows;
  };
  EpochLayout layout(int64_t epoch, int64_t n, int64_t T) const;
  int64_t window_start(int64_t epoch, int64_t k, int64_t n, int64_t T) const;

 private:
  int64_t start_in(const EpochLayout& l, int64_t epoch, int64_t k, int64_t T) const;  // window_start, laid out
  Sampling mode_;
  uint64_t seed_;
  Rng rng_;
  int64_t epoch_ = 0, position_ = 0;
};

}  // namespace folio
