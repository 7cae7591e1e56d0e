// folio: train character-level GPTs on a CPU and generate text from them.
#include <charconv>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "autograd/parallel.h"
#include "cli/common.h"
#include "folio/version.h"

namespace folio::cli {

bool parse(int argc, char** argv, const char* usage, const po::options_description& options, po::variables_map& vm) {
  const po::parsed_options parsed = po::command_line_parser(argc, argv).options(options).run();
  po::store(parsed, vm);
  // Boost drops a bare word (`folio generate runs/x`) without a word; say so instead.
  for (const std::string& extra : po::collect_unrecognized(parsed.options, po::include_positional))
    throw UsageError(cat("unexpected argument '", extra, "': every option is named, as in --checkpoint DIR (see --help)"));
  if (vm.count("help")) {
    std::printf("%s\n\n", usage);
    std::cout << options << std::flush;
    return false;
  }
  po::notify(vm);
  return true;
}

std::string shown(float v) {
  char buf[32];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general).ptr);  // shortest that reads back
}

std::string shown(double v) {  // 15 digits: 1.0 - 0.9 shows as 0.1
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

std::string shown(const std::string& s) {  // quoted only when it has to be
  std::string out;
  bool quote = s.empty();
  for (char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '"' || c == '\\') out += {'\\', c};
    else out += c;
    quote |= c == ' ' || c == '\n' || c == '\t' || c == '"' || c == '\\';
  }
  return quote ? '"' + out + '"' : out;
}

void apply_threads(const po::variables_map& vm) {
  const int threads = vm["threads"].as<int>();
  if (threads < 0) throw UsageError(cat("--threads must be >= 0 (0: all cores), got ", threads));
  set_num_threads(threads);
}

}  // namespace folio::cli

namespace {

constexpr const char* kUsage = R"(usage: folio <command> [options]

Train small character-level GPT models on a CPU and generate text from them.

commands:
  train      train a model on a text file (default: the bundled tiny Shakespeare)
  generate   write text from a checkpoint
  eval       loss of a checkpoint on a text file
  info       config, parameter count and training state of a checkpoint

Run 'folio <command> --help' for the options of a command, 'folio --version'
for the version.)";

}  // namespace

int main(int argc, char** argv) {
  using namespace folio::cli;
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    std::printf("%s\n", kUsage);
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version") || !std::strcmp(argv[1], "-V")) {
    std::printf("folio %s\n", FOLIO_VERSION);
    return 0;
  }
  const std::string command = argv[1];
  int (*run)(int, char**) = command == "train"      ? train_main
                            : command == "generate" ? generate_main
                            : command == "eval"     ? eval_main
                            : command == "info"     ? info_main
                                                    : nullptr;
  if (!run) {
    std::fprintf(stderr, "folio: unknown command '%s' (expected train, generate, eval or info; see folio --help)\n",
                 command.c_str());
    return 2;
  }
  try {
    return run(argc - 1, argv + 1);
  } catch (const po::error& e) {
    std::fprintf(stderr, "folio %s: %s (see folio %s --help)\n", command.c_str(), e.what(), command.c_str());
    return 2;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "folio %s: %s\n", command.c_str(), e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "folio %s: %s\n", command.c_str(), e.what());
    return 1;
  }
}
