// What the commands share (cli/common.h): how values are shown and read, the options
// every command has, and the parsing of a command's options from its arguments and
// --config file (folio.cpp's main, and the Python module's folio.train).

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "autograd/kernels/matmul.h"
#include "autograd/parallel.h"
#include "cli/common.h"
#include "infer/decoder_matrices.h"
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

std::string unescaped(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const char next = i + 1 < s.size() ? s[i + 1] : '\0';
    if (s[i] == '\\' && (next == 'n' || next == 't' || next == '"' || next == '\\')) {
      out += next == 'n' ? '\n' : next == 't' ? '\t' : next;
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

void warn(const std::string& line) {
  if (!dist::is_root()) return;  // the ranks run the same options: one warning
  std::fprintf(stderr, "folio: warning: %s\n", line.c_str());
  std::fflush(stderr);
}

std::string plural(int64_t n, const char* noun) { return cat(n, " ", noun, n == 1 ? "" : "s"); }

std::string run_name(const std::string& path) {
  // "runs/x/" has no filename, and "." and ".." name no directory by themselves: the
  // absolute path's last directory is the run's.
  const std::filesystem::path p(path.empty() ? "." : path);
  const std::string name = p.lexically_normal().filename().string();
  if (!name.empty() && name != "." && name != "..") return name;
  const std::filesystem::path whole = std::filesystem::absolute(p).lexically_normal();
  return (whole.has_filename() ? whole : whole.parent_path()).filename().string();
}

std::set<std::string>& config_file_options() {
  static std::set<std::string> names;
  return names;
}

void add_threads(po::options_description& options) {
  options.add_options()("threads", with_default<int64_t>(0),
                        cat("threads, at most ", kMaxThreads, " (0: all cores, or OMP_NUM_THREADS)").c_str());
}

void apply_threads(const po::variables_map& vm) {
  int64_t threads = vm["threads"].as<int64_t>();
  if (threads < 0 || threads > kMaxThreads)
    throw UsageError(cat("--threads must be in [0, ", kMaxThreads, "] (0: all cores), got ", threads));
  warn_beyond_cores("--threads", threads, " (0 uses every core)");
  // Several ranks on one machine share its cores, unless OMP_NUM_THREADS says otherwise.
  const int local = dist::local_size(), cores = int(std::thread::hardware_concurrency());
  if (threads == 0 && local > 1 && !std::getenv("OMP_NUM_THREADS")) threads = std::max(1, cores / local);
  // Given to each of them, N threads take N x ranks of the cores, which the check of one
  // process above lets through: 2 ranks of --threads 2 on 2 cores, without a word.
  if (threads > 0 && local > 1 && cores > 0 && threads <= cores && threads * local > cores)
    warn(cat("--threads ", threads, " on each of the ", local, " ranks on this machine makes ", threads * local,
             " threads on its ", plural(cores, "core"), ": they will wait for each other (--threads 0 gives each rank "
             "its share, ", std::max(1, cores / local), ")"));
  set_num_threads(threads);
}

// More threads than cores only makes them wait for each other (1000 on 2 cores ran a
// step 50x slower).
void warn_beyond_cores(std::string_view option, int64_t threads, std::string_view hint) {
  if (const int cores = int(std::thread::hardware_concurrency()); cores > 0 && threads > cores)
    warn(cat(option, " ", threads, " is more than the ", plural(cores, "core"),
             " of this machine: the threads will wait for each other", hint));
}

void add_checkpoint(po::options_description& options) {
  options.add_options()("checkpoint", with_default<std::string>("out"),
                        "a run directory (the --out of folio train; means its latest weights, DIR/model.safetensors), "
                        "or a .safetensors file such as DIR/best.safetensors (the lowest validation loss)");
}

std::string checkpoint_option(const po::variables_map& vm) {
  namespace fs = std::filesystem;
  const std::string path = vm["checkpoint"].as<std::string>();
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    if (vm["checkpoint"].defaulted())
      throw UsageError(cat("no --checkpoint given, and ./", path, " (where folio train writes by default) holds no "
                           "run: give --checkpoint RUN_DIR or FILE.safetensors"));
    throw UsageError(cat("--checkpoint ", path, ": no such file or directory (expected a run directory written by "
                         "folio train, or a .safetensors file)"));
  }
  if (fs::is_directory(path, ec) && !fs::exists(fs::path(path) / "model.safetensors", ec))
    throw UsageError(cat("--checkpoint ", path, ": this directory holds no model.safetensors (expected a run "
                         "directory written by folio train --out, or a .safetensors file)"));
  return path;
}

void add_dtype(po::options_description& options) {
  options.add_options()("dtype", with_default<std::string>("fp32"),
                        "matrix products: fp32, bf16 (bf16 operands, fp32 sums; needs AVX512-BF16), or auto (bf16 "
                        "where the CPU has AVX512-BF16, else fp32)");
}

Precision dtype_option(const po::variables_map& vm) {
  const std::string text = vm["dtype"].as<std::string>();
  if (text == "auto") return kernels::bf16_native() ? Precision::bf16 : Precision::fp32;
  const auto p = parse_precision(text);
  if (!p) throw UsageError(cat("--dtype must be fp32, bf16 or auto, got '", text, "'"));
  check_dtype(*p);
  return *p;
}

std::string dtype_auto_line(Precision chosen) {
  return cat("--dtype auto: ", to_string(chosen), " matrix products (this CPU ",
             chosen == Precision::bf16 ? "has" : "lacks", " AVX512-BF16)");
}

void check_dtype(Precision p) {
  if (p == Precision::bf16 && !kernels::bf16_native())
    throw UsageError("--dtype bf16 needs a CPU with AVX512-BF16 (flag avx512_bf16 in /proc/cpuinfo), which this "
                     "one lacks (or ONEDNN_MAX_CPU_ISA hides)");
}

void add_weights(po::options_description& options) {
  options.add_options()("weights", with_default<std::string>("f32"),
                        "how inference stores the matrices: f32, bf16 (half the bytes) or int8 (blocks of 32 with "
                        "an fp16 scale, GGUF's Q8_0: about a quarter); quantized as the checkpoint loads, "
                        "activations stay fp32");
}

nn::Weights weights_option(const po::variables_map& vm, Precision dtype) {
  const std::string text = vm["weights"].as<std::string>();
  const auto w = nn::parse_weights(text);
  if (!w) throw UsageError(cat("--weights must be f32, bf16 or int8, got '", text, "'"));
  if (*w != nn::Weights::f32 && dtype != Precision::fp32)
    throw UsageError(cat("--weights ", text, " needs --dtype fp32 (its products are fp32 sums of the stored "
                         "weights), got --dtype ", to_string(dtype)));
  // Here, before anything runs, rather than at the first product: a usage error.
  if (*w == nn::Weights::int8) infer::check_int8_kernel();
  return *w;
}

// The edit distance between two option names, for "did you mean".
std::string nearest_option(std::string name, const po::options_description& options) {
  while (name.starts_with("-")) name.erase(0, 1);
  std::replace(name.begin(), name.end(), '_', '-');  // n_layer: the field's name
  std::string best;
  size_t best_distance = std::max<size_t>(2, name.size() / 3) + 1;
  for (const auto& o : options.options())
    if (const size_t d = edit_distance(name, o->long_name()); d < best_distance)
      best_distance = d, best = o->long_name();
  if (!best.empty() || name.empty()) return best;
  // Else the one option that `name` begins (--max-new: --max-new-tokens), if only one.
  for (const auto& o : options.options()) {
    if (!o->long_name().starts_with(name)) continue;
    if (!best.empty()) return "";
    best = o->long_name();
  }
  return best;
}

namespace {

// " (did you mean --n-layer?)" when an option is a typo or two away from `name`.
std::string did_you_mean(const std::string& name, const po::options_description& options) {
  const std::string best = nearest_option(name, options);
  return best.empty() ? "" : cat(" (did you mean --", best, "?)");
}

// The last of a repeated option wins (`folio train $BASE_ARGS --lr 3e-3`), as in most
// command-line tools; options that collect their values (plot's runs, --op) keep all.
void keep_last(std::vector<po::option>& parsed, const po::options_description& options) {
  std::map<std::string, size_t> last;
  for (size_t i = 0; i < parsed.size(); ++i) last[parsed[i].string_key] = i;
  std::vector<po::option> kept;
  for (size_t i = 0; i < parsed.size(); ++i) {
    if (parsed[i].unregistered || parsed[i].string_key.empty()) {  // a bare word: reported after
      kept.push_back(parsed[i]);
      continue;
    }
    const po::option_description* d = options.find_nothrow(parsed[i].string_key, false);
    if (!d || d->semantic()->is_composing() || last[parsed[i].string_key] == i) kept.push_back(parsed[i]);
  }
  parsed = std::move(kept);
}

std::string trimmed(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Adds the options in an INI-style file (`lr = 2e-3`, `no-bias = true`, # comments,
// optionally under a [train] heading) to `vm`; the command line, stored first, wins.
// Errors name the file and line.
void read_config_file(const std::string& path, const Command& command, const po::options_description& options,
                      po::variables_map& vm) {
  std::ifstream in(path);
  if (!in || std::filesystem::is_directory(path)) throw UsageError(cat("--config ", path, ": cannot read this file"));
  std::vector<po::option> parsed;
  std::map<std::string, int> line_of;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::string where = cat("--config ", path, ":", number, ": ");
    if (number == 1 && line.starts_with("\xEF\xBB\xBF")) line.erase(0, 3);  // a UTF-8 byte order mark
    line = trimmed(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    if (line.front() == '[') {
      if (line == cat("[", command.name, "]")) continue;
      throw UsageError(cat(where, "section ", line, ": a recipe holds 'name = value' lines, at the top or under [",
                           command.name, "]"));
    }
    const size_t eq = line.find('=');
    if (eq == std::string::npos)
      throw UsageError(cat(where, "expected a line such as 'max-iters = 5000', got '", line, "'"));
    const std::string name = trimmed(line.substr(0, eq)), value = trimmed(line.substr(eq + 1));
    if (name.empty()) throw UsageError(cat(where, "expected a name before '=', got '", line, "'"));
    if (name == "config" || name == "help")
      throw UsageError(cat(where, "'", name, "' cannot be set in a recipe (one --config on the command line names "
                           "the recipe, and its lines set the other options)"));
    // Replacing a run is said on the command line, each time: a recipe is reused, and its
    // next run would replace the last one's results without a word.
    if (name == "overwrite")
      throw UsageError(cat(where, "'overwrite' cannot be set in a recipe: give --overwrite on the command line, "
                           "for the run it is meant for"));
    if (!options.find_nothrow(name, false))
      throw UsageError(cat(where, "unknown option '", name, "'", did_you_mean(name, options)));
    parsed.emplace_back(name, std::vector<std::string>{value});
    line_of[name] = number;
  }
  keep_last(parsed, options);
  for (const po::option& o : parsed) {
    if (!vm.count(o.string_key) || vm[o.string_key].defaulted()) config_file_options().insert(o.string_key);
    po::parsed_options one(&options);
    one.options.push_back(o);
    try {
      po::store(one, vm);
    } catch (const po::error& e) {
      throw UsageError(cat("--config ", path, ":", line_of[o.string_key], ": ", e.what()));
    }
  }
}

}  // namespace

bool parse(const Command& command, int argc, char** argv, po::variables_map& vm) {
  po::options_description options("options");
  options.add_options()("help,h", "show this help");
  command.declare(options);
  po::command_line_parser parser(argc, argv);
  // Boost would take a prefix (--max-iter) as the one option it begins: a typo should
  // get "did you mean", not a guess.
  parser.options(options).style(po::command_line_style::default_style & ~po::command_line_style::allow_guessing);
  po::positional_options_description positional;
  if (command.positional) parser.positional(positional.add(command.positional, -1));
  po::parsed_options parsed(&options);
  try {
    parsed = parser.run();
  } catch (const po::unknown_option& e) {
    throw UsageError(cat("unknown option '", e.get_option_name(), "'", did_you_mean(e.get_option_name(), options),
                         " (see folio ", command.name, " --help)"));
  }
  keep_last(parsed.options, options);
  po::store(parsed, vm);
  // Boost drops a bare word (`folio generate runs/x`) without a word; say so instead.
  const auto bare = command.positional ? po::exclude_positional : po::include_positional;
  for (const std::string& extra : po::collect_unrecognized(parsed.options, bare))
    throw UsageError(cat("unexpected argument '", extra, "': every option is named, as in --checkpoint DIR (see --help)"));
  config_file_options().clear();  // this command's recipe alone (the Python module parses many)
  if (vm.count("config") && !vm["config"].defaulted())
    read_config_file(vm["config"].as<std::string>(), command, options, vm);
  if (vm.count("help")) {
    std::printf("usage: folio %s [options]\n\n%s\n\n", command.name, command.usage);
    std::cout << options << std::flush;
    return false;
  }
  po::notify(vm);
  return true;
}

}  // namespace folio::cli
