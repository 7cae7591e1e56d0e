#pragma once
// Shared pieces of the folio subcommands.
#include <boost/program_options.hpp>
#include <charconv>
#include <concepts>
#include <cstdint>
#include <string>

#include "autograd/error.h"

namespace folio::cli {

namespace po = boost::program_options;

// A problem with what the user asked for (options, input files): exit code 2.
struct UsageError : Error {
  using Error::Error;
};

// A default as a person would type it: 0.8 (not 0.800000012), 0.1, "\n" for a newline.
std::string shown(float v);
std::string shown(double v);
std::string shown(const std::string& s);
inline std::string shown(std::integral auto v) { return std::to_string(v); }

// po::value<T>() with a default whose --help text is shown(v).
template <class T>
po::typed_value<T>* with_default(const T& v) {
  return po::value<T>()->default_value(v, shown(v));
}

// Parses argv for one subcommand; --help prints the options and returns false.
bool parse(int argc, char** argv, const char* usage, const po::options_description& options, po::variables_map& vm);

template <class T>
T positive(const po::variables_map& vm, const char* name) {
  const T v = vm[name].as<T>();
  if (v <= 0) throw UsageError(cat("--", name, " must be positive, got ", v));
  return v;
}

// An unsigned 64-bit option (a seed), declared as po::value<std::string>: boost's own
// conversion would read "-1" as 2^64 - 1 instead of refusing it.
inline uint64_t u64_option(const po::variables_map& vm, const char* name) {
  const std::string t = vm[name].as<std::string>();
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || end != t.data() + t.size())
    throw UsageError(cat("--", name, " must be an integer in [0, 2^64), got '", t, "'"));
  return v;
}

void apply_threads(const po::variables_map& vm);  // --threads

int train_main(int argc, char** argv);
int generate_main(int argc, char** argv);
int eval_main(int argc, char** argv);
int info_main(int argc, char** argv);

}  // namespace folio::cli
