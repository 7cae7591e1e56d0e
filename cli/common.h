#pragma once
// Shared pieces of the folio subcommands.
#include <boost/program_options.hpp>
#include <string>

#include "autograd/error.h"

namespace folio::cli {

namespace po = boost::program_options;

// A problem with what the user asked for (options, input files): exit code 2.
struct UsageError : Error {
  using Error::Error;
};

// Parses argv for one subcommand; --help prints the options and returns false.
bool parse(int argc, char** argv, const char* usage, const po::options_description& options, po::variables_map& vm);

template <class T>
T positive(const po::variables_map& vm, const char* name) {
  const T v = vm[name].as<T>();
  if (v <= 0) throw UsageError(cat("--", name, " must be positive, got ", v));
  return v;
}

void apply_threads(const po::variables_map& vm);  // --threads

int train_main(int argc, char** argv);
int generate_main(int argc, char** argv);
int eval_main(int argc, char** argv);
int info_main(int argc, char** argv);

}  // namespace folio::cli
