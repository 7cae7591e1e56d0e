#pragma once
// Shape of a tensor: up to 4 dimensions, row-major. A 0-d shape is a scalar.
#include <array>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>

namespace folio {

struct Shape {
  static constexpr int kMaxDims = 4;
  std::array<int64_t, kMaxDims> dims{};
  int ndim = 0;

  Shape() = default;
  Shape(std::initializer_list<int64_t> d);

  int64_t operator[](int i) const { return dims[i < 0 ? i + ndim : i]; }
  int64_t& operator[](int i) { return dims[i < 0 ? i + ndim : i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= dims[i];
    return n;
  }
  int64_t last() const { return ndim ? dims[ndim - 1] : 1; }
  // Product of all dimensions but the last: the number of rows of a (rows, last) view.
  int64_t rows() const { return ndim ? numel() / dims[ndim - 1] : 1; }
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }
  std::string str() const;  // "(4, 3)"
};

std::ostream& operator<<(std::ostream& os, const Shape& s);

}  // namespace folio
