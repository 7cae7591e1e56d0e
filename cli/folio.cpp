// folio: train small GPTs on a CPU (characters or subwords) and generate text from them.
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>

#include "cli/common.h"
#include "folio/version.h"
#include "train/distributed.h"

namespace folio::cli {
namespace {

constexpr const Command* kCommands[] = {&kTrain, &kTokenize, &kGenerate, &kEval, &kInfo, &kTokens, &kAttention, &kPlot, &kGradcheck,
                                        &kServe, &kExport, &kImport, &kReport, &kChat};

void print_usage() {
  std::printf("usage: folio <command> [options]\n\n"
              "Train small GPT models on a CPU, on characters or subwords, and generate text from them.\n\ncommands:\n");
  for (const Command* c : kCommands) std::printf("  %-10s %s\n", c->name, c->summary);
  std::printf("\nRun 'folio <command> --help' for the options of a command, 'folio version'\n"
              "(or --version) for the version.\n");
}

// Prints the error and ends this process with `code`, and under MPI every rank: the
// others may be waiting for this one in a collective call.
[[noreturn]] void fail_with(const Command& command, const char* what, int code, const char* hint = "") {
  if (dist::size() > 1) std::fprintf(stderr, "folio %s (rank %d): %s%s\n", command.name, dist::rank(), what, hint);
  else std::fprintf(stderr, "folio %s: %s%s\n", command.name, what, hint);
  std::fflush(stderr);
  dist::abort(code);
}

// Exit codes: 2 for anything wrong with what the user gave (options, input files): out
// of prepare, before anything is written, or a UsageError out of the run, for input
// found bad only by reading it (the command cleans up what it wrote); 1 for a failure
// during the run.
int run(const Command& command, int argc, char** argv) {
  std::function<int()> job;
  try {
    po::variables_map vm;
    if (!parse(command, argc, argv, vm)) return 0;
    job = command.prepare(vm);
  } catch (const po::error& e) {
    fail_with(command, e.what(), 2, cat(" (see folio ", command.name, " --help)").c_str());
  } catch (const std::exception& e) {
    fail_with(command, e.what(), 2);
  }
  try {
    return job();
  } catch (const UsageError& e) {
    fail_with(command, e.what(), 2);
  } catch (const std::exception& e) {
    fail_with(command, e.what(), 1);
  }
}

}  // namespace
}  // namespace folio::cli

int main(int argc, char** argv) {
  using namespace folio::cli;
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version") || !std::strcmp(argv[1], "-V") || !std::strcmp(argv[1], "version")) {
    std::printf("folio %s\n", FOLIO_VERSION);
    return 0;
  }
  try {
    folio::dist::init(&argc, &argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "folio: %s\n", e.what());
    return 2;
  }
  for (const Command* c : kCommands)
    if (argv[1] == std::string(c->name)) return run(*c, argc - 1, argv + 1);
  std::string expected, nearest;
  size_t nearest_distance = 3;  // a typo or two
  for (const Command* c : kCommands) {
    expected += folio::cat(expected.empty() ? "" : ", ", c->name);
    if (const size_t d = folio::edit_distance(argv[1], c->name); d < nearest_distance) nearest_distance = d, nearest = c->name;
  }
  const std::string hint = nearest.empty() ? "" : folio::cat("did you mean ", nearest, "? ");
  std::fprintf(stderr, "folio: unknown command '%s' (%sexpected one of %s; see folio --help)\n", argv[1],
               hint.c_str(), expected.c_str());
  return 2;
}
