#include "data/batch_sampler.h"

#include <algorithm>
#include <bit>
#include <utility>

#include "base/error.h"
#include "base/parse_name.h"
#include "data/hash.h"

namespace folio {
namespace {

// A bijection of [0, n) keyed by `key`: a 4-round Feistel network on the smallest even
// number of bits that holds n, walked until it lands inside [0, n) (under 4 steps on
// average, since n is more than a quarter of the network's range).
uint64_t permute(uint64_t x, uint64_t n, uint64_t key) {
  int bits = std::max(2, int(std::bit_width(n - 1)));
  bits += bits & 1;
  const int half = bits / 2;
  const uint64_t mask = (uint64_t(1) << half) - 1;
  do {
    uint64_t left = x >> half, right = x & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      const uint64_t f = mix64(right ^ mix64(key + round)) & mask;
      left = std::exchange(right, left ^ f);
    }
    x = left << half | right;
  } while (x >= n);
  return x;
}

}  // namespace

void resize_batch(Batch& batch, int64_t B, int64_t T) {
  if (B < 1 || T < 1) fail("data", "batch size and block size must be positive, got B = ", B, ", T = ", T);
  batch.B = B;
  batch.T = T;
  batch.inputs.resize(size_t(B * T));  // resize keeps capacity: no allocation after the first call
  batch.targets.resize(size_t(B * T));
}

void copy_window(const TokenSequence& tokens, int64_t start, int64_t b, Batch& batch) {
  const int64_t T = batch.T;
  tokens.read(start, T, batch.inputs.data() + b * T);
  tokens.read(start + 1, T, batch.targets.data() + b * T);
}

void sample_batch(const TokenSequence& tokens, int64_t B, int64_t T, Rng& rng, Batch& batch,
                  std::string_view split_name, int64_t row_begin, int64_t row_end) {
  resize_batch(batch, B, T);
  const int64_t n = tokens.size();
  if (n < T + 1)
    fail("data", split_name, " split has ", n, " tokens, needs at least block_size + 1 = ", T + 1);
  if (row_end < 0) row_end = B;
  for (int64_t b = 0; b < B; ++b) {
    const auto start = int64_t(rng.below(uint64_t(n - T)));  // T + 1 tokens from here
    if (b >= row_begin && b < row_end) copy_window(tokens, start, b, batch);
  }
}

const char* to_string(Sampling s) { return s == Sampling::epoch ? "epoch" : "random"; }
std::optional<Sampling> parse_sampling(std::string_view name) {
  return parse_name(name, {Sampling::random, Sampling::epoch});
}

BatchSampler::BatchSampler(Sampling mode, uint64_t seed) : mode_(mode), seed_(seed), rng_(seed) {}

void BatchSampler::restore(const State& s) {
  rng_.set_state(s.rng);
  epoch_ = s.epoch;
  position_ = s.position;
}

BatchSampler::EpochLayout BatchSampler::layout(int64_t epoch, int64_t n, int64_t T) const {
  const uint64_t h = mix64(seed_ ^ mix64(uint64_t(epoch) + 0x5eed));
  const int64_t phase = epoch == 0 ? 0 : int64_t(h % uint64_t(std::min(T, n - T)));  // n >= T + 1
  return {phase, (n - 1 - phase) / T};
}

int64_t BatchSampler::window_start(int64_t epoch, int64_t k, int64_t n, int64_t T) const {
  return start_in(layout(epoch, n, T), epoch, k, T);
}

int64_t BatchSampler::start_in(const EpochLayout& l, int64_t epoch, int64_t k, int64_t T) const {
  return l.phase + int64_t(permute(uint64_t(k), uint64_t(l.windows), mix64(seed_ + uint64_t(epoch)))) * T;
}

void BatchSampler::next(const TokenSequence& tokens, int64_t B, int64_t T, Batch& batch, int64_t row_begin,
                        int64_t row_end) {
  if (mode_ == Sampling::random) return sample_batch(tokens, B, T, rng_, batch, "train", row_begin, row_end);
  resize_batch(batch, B, T);
  const int64_t n = tokens.size();
  if (n < T + 1) fail("data", "train split has ", n, " tokens, needs at least block_size + 1 = ", T + 1);
  if (row_end < 0) row_end = B;
  EpochLayout l = layout(epoch_, n, T);  // once an epoch, not once a window
  for (int64_t b = 0; b < B; ++b) {
    if (position_ >= l.windows) ++epoch_, position_ = 0, l = layout(epoch_, n, T);
    const int64_t start = start_in(l, epoch_, position_++, T);
    if (b >= row_begin && b < row_end) copy_window(tokens, start, b, batch);
  }
}

int64_t BatchSampler::next_index(int64_t n) {
  if (n < 1) fail("data", "no items to draw from");
  if (mode_ == Sampling::random) return int64_t(rng_.below(uint64_t(n)));
  if (position_ >= n) ++epoch_, position_ = 0;
  return int64_t(permute(uint64_t(position_++), uint64_t(n), mix64(seed_ + uint64_t(epoch_))));
}

}  // namespace folio
