#pragma once
// One exception type for every bad call or bad input. Messages start with where
// the problem was found, e.g. "[matmul] shapes (4, 3) and (5, 2) do not match".
#include <sstream>
#include <stdexcept>
#include <string>

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

}  // namespace folio
