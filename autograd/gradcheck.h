#pragma once
// The one gradient check every op and layer goes through: backward of the scalar
// sum(f(inputs) * R), with R a fixed random tensor, against central differences of
// the same scalar. The ops compute in float32; the weighted sums and differences are
// accumulated in double, so the numeric side adds no rounding of its own.
//
// The check looks at every element of every input and reports the largest errors and
// the worst element of each, rather than stopping at the first bad one: `folio
// gradcheck` prints them as a table, and the test suite (tests/gradcheck.h) turns
// them into a GoogleTest assertion. Both run the same registry of named checks.
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "autograd/ops.h"

namespace folio {

// An element passes when |analytic - numeric| <= atol + rtol * max(|analytic|, |numeric|).
// float32 forwards need eps near 1e-3: smaller steps drown the difference in rounding.
struct GradcheckOptions {
  float eps = 1e-3f;
  float rtol = 1e-2f;
  float atol = 2e-3f;
  uint64_t seed = 1234;  // of R
};

using GradcheckFn = std::function<Tensor(const std::vector<Tensor>&)>;

// One input that requires grad: its analytic gradient against the numeric one.
struct InputGradcheck {
  size_t index = 0;  // position among the inputs
  Shape shape;
  bool received_gradient = true;  // false: backward never reached it (compared as zero; fails)
  double max_abs_error = 0.0;     // max |analytic - numeric|
  // max |analytic - numeric| / max(|analytic|, |numeric|, atol / rtol): below atol / rtol
  // the absolute tolerance decides, and a plain ratio would measure the rounding noise
  // of a near-zero gradient. Every failing element has one above rtol.
  double max_rel_error = 0.0;
  // The element furthest outside its tolerance (closest to it when all pass).
  int64_t worst = -1;
  double worst_analytic = 0.0, worst_numeric = 0.0;
  bool pass = true;
};

struct GradcheckResult {
  Shape output_shape;
  std::string error;                   // why nothing could be compared ("" when it ran)
  std::vector<InputGradcheck> inputs;  // every input that requires grad, in order
  bool pass() const;                   // ran, and every input passed
  double max_abs_error() const;        // over the inputs (NaN if any is NaN)
  double max_rel_error() const;
  // What went wrong, for a person: the error, an input that received no gradient, or
  // the first failing input's worst element ("input 0 (3, 2) element 4: analytic 1.2
  // vs numeric 0.6"); "" when it passed.
  std::string failure() const;
};

// Checks d sum(f(inputs) * R) / d input for every input that requires grad. f is
// called 1 + 2 * (elements of those inputs) times, and must give the same output for
// the same inputs (a dropout mask drawn from a fresh, seeded Rng on each call).
GradcheckResult gradcheck(const GradcheckFn& f, std::vector<Tensor> inputs, const GradcheckOptions& opt = {});

// A leaf with values from N(0, stddev) drawn from Rng(seed), requiring grad.
Tensor randn_leaf(const Shape& shape, uint64_t seed, float stddev = 1.0f);

// A named check of the registry (op_gradcheck_cases() below, nn/gradcheck_layers.h for
// the layers) that the tests and `folio gradcheck` both run.
struct GradcheckSetup {
  GradcheckFn f;               // holds whatever module it runs
  std::vector<Tensor> inputs;  // a module's parameters first, then the data inputs
  size_t n_weights = 0;        // how many leading inputs are a module's parameters
  std::string other_inputs;    // inputs that are not tensors, for the table: "ids (2, 3)"
};
struct GradcheckCase {
  std::string name;     // what `--op` or `--layer` selects: "matmul", "LayerNorm"
  std::string variant;  // which of its checks ("batched a^T b"); "" when it has one
  std::function<GradcheckSetup()> setup;  // fresh inputs (and module) on every call
  std::string label() const { return variant.empty() ? name : name + " " + variant; }
  GradcheckResult run() const;  // the check, with the default options
};

// Every differentiable op of autograd/ops.h, named as the op, once or more (variants:
// broadcasting, axes, transposed operands), on small shapes (autograd/gradcheck_ops.cpp).
// The layers' checks are in nn/gradcheck_layers.h.
const std::vector<GradcheckCase>& op_gradcheck_cases();

// Runs every case and prints a table row each as it finishes (check, shapes, max
// absolute and relative error, PASS/FAIL, and under a failure what went wrong), then
// a summary line. A case that throws is a failure. True when all passed.
bool print_gradcheck_table(const std::vector<const GradcheckCase*>& cases, std::ostream& out);

}  // namespace folio
