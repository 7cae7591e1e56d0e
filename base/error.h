#pragma once
// One exception type for every bad call or bad input. Messages start with where
// the problem was found, e.g. "[matmul] shapes (4, 3) and (5, 2) do not match".
#include <sstream>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

namespace folio {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <class... Parts>
std::string cat(const Parts&... parts) {
  std::ostringstream s;
  (s << ... << parts);
  return s.str();
}

// fail("matmul", "shapes ", a, " and ", b, " do not match") throws "[matmul] shapes ...".
template <class... Parts>
[[noreturn]] void fail(const char* where, const Parts&... parts) {
  throw Error(cat("[", where, "] ", parts...));
}

// fail(where, "<name> must be positive, got <v>") for the first named value below 1.
inline void require_positive(const char* where, std::initializer_list<std::pair<const char*, int64_t>> values) {
  for (const auto& [name, v] : values)
    if (v < 1) fail(where, name, " must be positive, got ", v);
}

// fail(where, ...) unless p is a probability in [0, 1) (a dropout rate; NaN fails).
inline void require_probability(const char* where, float p) {
  if (!(p >= 0.0f && p < 1.0f)) fail(where, "probability ", p, " outside [0, 1)");
}

// fail(where, ...) unless a softmax scale is finite and >= 0 (NaN fails the comparison).
inline void require_softmax_scale(const char* where, float scale) {
  if (!(scale >= 0.0f && scale <= std::numeric_limits<float>::max()))
    fail(where, "scale ", scale, " must be finite and >= 0");
}

}  // namespace folio
