#include "base/rng.h"

#include <cmath>
#include <cstring>

namespace folio {
namespace {
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
}  // namespace

void Rng::reseed(uint64_t seed) {
  for (auto& w : s_) w = splitmix64(seed);
  has_spare_ = false;
}

uint64_t Rng::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

float Rng::uniform() { return float(next_u64() >> 40) * 0x1.0p-24f; }

float Rng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  // 53-bit uniforms in (0, 1]; computed in double so the result is the same everywhere.
  const double u1 = double((next_u64() >> 11) + 1) * 0x1.0p-53;
  const double u2 = double(next_u64() >> 11) * 0x1.0p-53;
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double a = 2.0 * M_PI * u2;
  spare_ = float(r * std::sin(a));
  has_spare_ = true;
  return float(r * std::cos(a));
}

uint64_t Rng::below(uint64_t n) {
  if (n <= 1) return 0;
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;  // reject the biased tail
  uint64_t x;
  do x = next_u64();
  while (x >= limit);
  return x % n;
}

Rng::State Rng::state() const {
  uint32_t spare_bits;
  std::memcpy(&spare_bits, &spare_, sizeof spare_bits);
  return {s_[0], s_[1], s_[2], s_[3], (uint64_t(has_spare_) << 32) | spare_bits};
}

void Rng::set_state(const State& st) {
  for (int i = 0; i < 4; ++i) s_[i] = st[i];
  has_spare_ = (st[4] >> 32) & 1;
  const uint32_t spare_bits = uint32_t(st[4]);
  std::memcpy(&spare_, &spare_bits, sizeof spare_);
}

}  // namespace folio
