// folio: train small GPTs on a CPU (characters or subwords) and generate text from them.
#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "autograd/kernels/matmul.h"
#include "autograd/parallel.h"
#include "cli/common.h"
#include "folio/version.h"
#include "io/atomic_file.h"
#include "train/distributed.h"

namespace folio::cli {

std::string shown(float v) {
  char buf[32];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general).ptr);  // shortest
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

void write_output(const std::string& path, const std::string& text, const std::string& what) {
  if (path.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return;
  }
  write_file_atomic(path, text);
  std::printf("wrote %s (%s)\n", path.c_str(), what.c_str());
}

void add_threads(po::options_description& options) {
  options.add_options()("threads", with_default<int>(0), "threads (0: all cores, or OMP_NUM_THREADS)");
}

void apply_threads(const po::variables_map& vm) {
  int threads = vm["threads"].as<int>();
  if (threads < 0) throw UsageError(cat("--threads must be >= 0 (0: all cores), got ", threads));
  // Several ranks on one machine share its cores, unless OMP_NUM_THREADS says otherwise.
  if (threads == 0 && dist::local_size() > 1 && !std::getenv("OMP_NUM_THREADS"))
    threads = std::max(1, int(std::thread::hardware_concurrency()) / dist::local_size());
  set_num_threads(threads);
}

void add_checkpoint(po::options_description& options) {
  options.add_options()("checkpoint", with_default<std::string>("out"), "run directory or .safetensors file");
}

void add_dtype(po::options_description& options) {
  options.add_options()("dtype", with_default<std::string>("fp32"),
                        "matrix products: fp32, or bf16 (bf16 operands, fp32 sums; needs AVX512-BF16)");
}

Precision dtype_option(const std::string& text) {
  const auto p = parse_precision(text);
  if (!p) throw UsageError(cat("--dtype must be fp32 or bf16, got '", text, "'"));
  return *p;
}

void check_dtype(Precision p) {
  if (p == Precision::bf16 && !kernels::bf16_native())
    throw UsageError("--dtype bf16 needs a CPU with AVX512-BF16 (flag avx512_bf16 in /proc/cpuinfo), which this "
                     "one lacks (or ONEDNN_MAX_CPU_ISA hides)");
}

namespace {

constexpr const Command* kCommands[] = {&kTrain, &kGenerate, &kEval, &kInfo, &kTokens, &kAttention, &kPlot, &kGradcheck,
                                        &kServe};

void print_usage() {
  std::printf("usage: folio <command> [options]\n\n"
              "Train small GPT models on a CPU, on characters or subwords, and generate text from them.\n\ncommands:\n");
  for (const Command* c : kCommands) std::printf("  %-10s %s\n", c->name, c->summary);
  std::printf("\nRun 'folio <command> --help' for the options of a command, 'folio --version'\n"
              "for the version.\n");
}

// Adds the options in an INI-style file (`lr = 2e-3`, `no-bias = true`, # comments) to
// `vm`; the command line, stored first, wins.
void read_config_file(const std::string& path, const po::options_description& options, po::variables_map& vm) {
  std::ifstream in(path);
  if (!in || std::filesystem::is_directory(path)) throw UsageError(cat("--config ", path, ": cannot read this file"));
  try {
    po::store(po::parse_config_file(in, options), vm);
  } catch (const po::error& e) {
    throw UsageError(cat("--config ", path, ": ", e.what(), " (expected lines such as 'max-iters = 5000')"));
  }
}

// Parses the command's options; false after printing --help.
bool parse(const Command& command, int argc, char** argv, po::variables_map& vm) {
  po::options_description options("options");
  options.add_options()("help,h", "show this help");
  command.declare(options);
  po::command_line_parser parser(argc, argv);
  parser.options(options);
  po::positional_options_description positional;
  if (command.positional) parser.positional(positional.add(command.positional, -1));
  const po::parsed_options parsed = parser.run();
  po::store(parsed, vm);
  // Boost drops a bare word (`folio generate runs/x`) without a word; say so instead.
  const auto bare = command.positional ? po::exclude_positional : po::include_positional;
  for (const std::string& extra : po::collect_unrecognized(parsed.options, bare))
    throw UsageError(cat("unexpected argument '", extra, "': every option is named, as in --checkpoint DIR (see --help)"));
  if (vm.count("config") && !vm["config"].defaulted()) read_config_file(vm["config"].as<std::string>(), options, vm);
  if (vm.count("help")) {
    std::printf("usage: folio %s [options]\n\n%s\n\n", command.name, command.usage);
    std::cout << options << std::flush;
    return false;
  }
  po::notify(vm);
  return true;
}

// Prints the error and ends this process with `code`, and under MPI every rank: the
// others may be waiting for this one in a collective call.
[[noreturn]] void fail_with(const Command& command, const char* what, int code, const char* hint = "") {
  if (dist::size() > 1) std::fprintf(stderr, "folio %s (rank %d): %s%s\n", command.name, dist::rank(), what, hint);
  else std::fprintf(stderr, "folio %s: %s%s\n", command.name, what, hint);
  std::fflush(stderr);
  dist::abort(code);
}

// Exit codes: 2 for anything wrong before the run starts (options, input files), with
// nothing written; 1 for a failure during the run.
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
  if (!std::strcmp(argv[1], "--version") || !std::strcmp(argv[1], "-V")) {
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
  std::string expected;
  for (const Command* c : kCommands) expected += folio::cat(expected.empty() ? "" : ", ", c->name);
  std::fprintf(stderr, "folio: unknown command '%s' (expected one of %s; see folio --help)\n", argv[1],
               expected.c_str());
  return 2;
}
