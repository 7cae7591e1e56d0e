#pragma once
// GoogleTest's view of the library's gradient check (autograd/gradcheck.h): an
// AssertionResult whose message, on failure, names the input and its worst element.
#include <gtest/gtest.h>

#include <ostream>
#include <utility>
#include <vector>

#include "autograd/gradcheck.h"

namespace folio::testing {

inline ::testing::AssertionResult passed(const GradcheckResult& r) {
  if (r.pass()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << r.failure();
}

// Checks d sum(f(inputs) * R) / d input for every input that requires grad.
// A template, so that for a lambda it is a better match than folio::gradcheck, which
// argument-dependent lookup finds too (the inputs are folio::Tensors).
template <class F>
::testing::AssertionResult gradcheck(const F& f, std::vector<Tensor> inputs, GradcheckOptions opt = {}) {
  return passed(folio::gradcheck(GradcheckFn(f), std::move(inputs), opt));
}

// One case of the registry (autograd/gradcheck_ops.cpp, nn/gradcheck_layers.cpp).
inline ::testing::AssertionResult gradcheck(const GradcheckCase& c) { return passed(c.run()); }

// A leaf with values from N(0, stddev), requiring grad.
inline Tensor param(const Shape& shape, uint64_t seed, float stddev = 1.0f) { return randn_leaf(shape, seed, stddev); }

}  // namespace folio::testing

namespace folio {
// GoogleTest names a registry case by its label, not its bytes.
inline void PrintTo(const GradcheckCase& c, std::ostream* os) { *os << c.label(); }
}  // namespace folio
