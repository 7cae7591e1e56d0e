#pragma once
// folio's own random number generator (xoshiro256**), so that a seed gives the
// same numbers on every machine and compiler (std:: distributions do not).
#include <array>
#include <cstdint>

namespace folio {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { reseed(seed); }
  void reseed(uint64_t seed);

  uint64_t next_u64();
  uint32_t next_u32() { return uint32_t(next_u64() >> 32); }
  float uniform();                       // [0, 1) with 24 random bits
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  float normal();                        // standard normal (Box-Muller)
  uint64_t below(uint64_t n);            // uniform integer in [0, n), unbiased

  using State = std::array<uint64_t, 5>;  // 4 words of xoshiro + the cached normal
  State state() const;
  void set_state(const State& s);

 private:
  std::array<uint64_t, 4> s_{};
  bool has_spare_ = false;
  float spare_ = 0.0f;
};

}  // namespace folio
