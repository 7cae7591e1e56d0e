#pragma once
// The two hashes folio keeps stable across machines and releases, because files and
// splits depend on them: FNV-1a 64 over bytes (fingerprints, a document's split) and
// splitmix64's finaliser (which spreads every input bit over all 64 output bits).
#include <cstdint>
#include <string_view>

namespace folio {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull, kFnvPrime = 0x100000001b3ull;

// FNV-1a 64 of `bytes`, continuing from `h`.
constexpr uint64_t fnv1a64(std::string_view bytes, uint64_t h = kFnvOffset) {
  for (const unsigned char c : bytes) h = (h ^ c) * kFnvPrime;
  return h;
}

constexpr uint64_t mix64(uint64_t x) {
  x ^= x >> 30, x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27, x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace folio
