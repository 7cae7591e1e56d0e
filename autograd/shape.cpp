#include "autograd/shape.h"

#include "base/error.h"

namespace folio {

Shape::Shape(std::initializer_list<int64_t> d) {
  if (d.size() > kMaxDims) fail("shape", "at most ", kMaxDims, " dimensions, got ", d.size());
  for (int64_t v : d) {
    if (v < 0) fail("shape", "negative dimension ", v);
    dims[ndim++] = v;
  }
}

bool Shape::operator==(const Shape& o) const {
  if (ndim != o.ndim) return false;
  for (int i = 0; i < ndim; ++i)
    if (dims[i] != o.dims[i]) return false;
  return true;
}

std::string Shape::str() const {
  std::string s = "(";
  for (int i = 0; i < ndim; ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + ")";
}

std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << s.str(); }

}  // namespace folio
