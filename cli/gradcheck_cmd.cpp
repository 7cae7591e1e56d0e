// folio gradcheck: the gradient check of every op and layer (or the ones named), as a
// table; exit 1 when one fails. The checks are the library's registry, the same ones
// the test suite runs (autograd/gradcheck_ops.cpp, nn/gradcheck_layers.cpp).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <set>

#include "autograd/gradcheck.h"
#include "cli/common.h"
#include "nn/gradcheck_layers.h"

namespace folio::cli {
namespace {

void declare(po::options_description& opts) {
  opts.add_options()("op", po::value<std::vector<std::string>>()->composing(),
                     "check this op only, e.g. matmul (repeat for several; --list names them)")
      ("layer", po::value<std::vector<std::string>>()->composing(),
       "check this layer only, e.g. LayerNorm (repeat for several)")
      ("list", po::bool_switch(), "list the ops and layers that have checks, and stop")
      // On tensors this small threads only wait for each other: on a busy machine the
      // GPT checks took 10x longer on 2 threads than on 1.
      ("threads", with_default<int64_t>(1), "threads inside the ops (0: all cores)");
}

// The names of `cases`, each once, in the order of their first check (a name's checks
// need not be adjacent in the registry).
std::vector<std::string> names_of(const std::vector<GradcheckCase>& cases) {
  std::vector<std::string> names;
  for (const GradcheckCase& c : cases)
    if (std::find(names.begin(), names.end(), c.name) == names.end()) names.push_back(c.name);
  return names;
}

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// The cases named by option `option` (every case when it is absent and `all`).
void select(const po::variables_map& vm, const char* option, const std::vector<GradcheckCase>& cases, bool all,
            std::vector<const GradcheckCase*>& out) {
  const std::vector<std::string> valid = names_of(cases);
  std::set<std::string> wanted;
  if (vm.count(option))
    for (const std::string& name : vm[option].as<std::vector<std::string>>()) {
      if (std::find(valid.begin(), valid.end(), name) == valid.end())
        throw UsageError(cat("--", option, " '", name, "' has no gradient check; expected one of: ", joined(valid)));
      wanted.insert(name);
    }
  for (const GradcheckCase& c : cases)
    if (all || wanted.count(c.name)) out.push_back(&c);
}

void list(const std::vector<GradcheckCase>& cases, const char* heading) {
  std::printf("%s\n", heading);
  for (const std::string& name : names_of(cases)) {
    const auto n = std::count_if(cases.begin(), cases.end(), [&](const GradcheckCase& c) { return c.name == name; });
    std::printf("  %-16s %ld check%s\n", name.c_str(), long(n), n == 1 ? "" : "s");
  }
}

std::function<int()> prepare(const po::variables_map& vm) {
  apply_threads(vm);
  const auto& ops = op_gradcheck_cases();
  const auto& layers = nn::layer_gradcheck_cases();
  if (vm["list"].as<bool>())
    return [&ops, &layers] {
      list(ops, "ops (--op NAME):");
      list(layers, "layers (--layer NAME):");
      return 0;
    };
  const bool everything = !vm.count("op") && !vm.count("layer");
  std::vector<const GradcheckCase*> chosen;
  select(vm, "op", ops, everything, chosen);
  select(vm, "layer", layers, everything, chosen);
  return [chosen] { return print_gradcheck_table(chosen, std::cout) ? 0 : 1; };
}

}  // namespace

const Command kGradcheck = {
    "gradcheck", "check every op's and layer's gradient against finite differences",
    "Runs the gradient check of the test suite on every op and layer, or on those named:\n"
    "backward of sum(f(inputs) * R), R fixed and random, against central differences\n"
    "(eps 1e-3, accumulated in double) for every element of every input. Prints a row\n"
    "per check: its shapes, the largest absolute and relative errors, PASS or FAIL, and\n"
    "under a failure its worst element. Exit code 1 when a check fails.\n"
    "  folio gradcheck --op matmul --layer LayerNorm",
    declare, prepare};

}  // namespace folio::cli
