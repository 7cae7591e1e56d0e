#pragma once
// What the folio subcommands share: how a command is described, the options several
// of them take, and how defaults are shown.
#include <boost/program_options.hpp>
#include <charconv>
#include <concepts>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "base/edit_distance.h"
#include "base/error.h"
#include "autograd/ops.h"
#include "nn/weights.h"
#include "infer/sampling.h"
#include "cli/outputs.h"

namespace folio::cli {

namespace po = boost::program_options;

// A problem with what the user asked for (options, input files): exit code 2.
struct UsageError : Error {
  using Error::Error;
};

// One subcommand. `declare` adds its options; `prepare` checks them and loads what the
// run needs, and returns the run. main() turns any error out of prepare into exit
// code 2 (nothing has been written yet) and any error out of the run into 1, but a
// UsageError (input found bad only by reading it; the run cleans up first) into 2.
struct Command {
  const char* name;
  const char* summary;  // one line, for folio --help
  const char* usage;    // the paragraph atop folio NAME --help
  void (*declare)(po::options_description& options);
  std::function<int()> (*prepare)(const po::variables_map& vm);
  const char* positional = nullptr;  // the option bare words go to (none: they are an error)
};

// Parses a command's options from its arguments (argv[0] is the command's name) and
// its --config file into `vm`; false after printing --help. An unknown option is a
// UsageError that names the nearest known one.
bool parse(const Command& command, int argc, char** argv, po::variables_map& vm);
// --max-new-tokens, --temperature (0: --greedy), --top-k, --top-p and --greedy, each checked
// under its flag's name, as folio generate and folio chat read them (cli/generate_cmd.cpp).
// --max-new-tokens must be >= fewest_new_tokens: 0 for generate (the prompt alone), 1 for
// chat (a reply), so that -5 and 0 meet the same bound.
SampleOptions sampling_flags(const po::variables_map& vm, int64_t fewest_new_tokens);

// The long name of `options`' option a typo or two away from `name` (dashes or
// underscores: --n_layer, n-layr), or "" when none is that near.
std::string nearest_option(std::string name, const po::options_description& options);

extern const Command kTrain, kGenerate, kEval, kInfo, kTokens, kTokenize, kAttention, kPlot, kGradcheck, kServe,
    kExport, kImport, kReport, kChat;

// A default as a person would type it: 0.8 (not 0.800000012), 0.1, "\n" for a newline.
std::string shown(float v);
std::string shown(double v);
std::string shown(const std::string& s);
inline std::string shown(std::integral auto v) { return std::to_string(v); }
// Text typed on the command line with shown()'s escapes undone: \n, \t, \" and \\ stand
// for a newline, a tab, a quote and a backslash, so that what --help shows can be typed
// back. Any other backslash stays. Every option that takes text uses it.
std::string unescaped(const std::string& s);
// The help line's note on those escapes, for every option that takes text.
inline constexpr const char* kEscapesHelp = "\\n, \\t, \\\" and \\\\ stand for a newline, a tab, a quote and a backslash";

// po::value<T>() with a default whose --help text is shown(v).
template <class T>
po::typed_value<T>* with_default(const T& v) {
  return po::value<T>()->default_value(v, shown(v));
}

// "folio: warning: <line>" on stderr (rank 0 only): a setting that works but makes
// little sense.
void warn(const std::string& line);
// "1 run", "2 runs".
std::string plural(int64_t n, const char* noun);
// What a person calls the run directory `path`: its last component, also when it is
// given as "runs/x/" or "." (then the working directory's own name). A plot's legend
// and a report's title name a run by it.
std::string run_name(const std::string& path);

// The options whose value came from the --config file (the command line wins over it).
std::set<std::string>& config_file_options();

// Options several commands take, declared here once.
void add_threads(po::options_description& options);     // --threads N
void apply_threads(const po::variables_map& vm);         // sets the thread count
// Warns when `option`'s thread count is above this machine's cores (allowed: a container
// may see fewer cores than it has); `hint` ends the warning.
void warn_beyond_cores(std::string_view option, int64_t threads, std::string_view hint = "");
void add_checkpoint(po::options_description& options);  // --checkpoint PATH
// --checkpoint's value, refused (naming it and what was expected) when nothing is there.
std::string checkpoint_option(const po::variables_map& vm);
void add_dtype(po::options_description& options);       // --dtype fp32|bf16
// --dtype's value (auto: what this CPU runs best), refused where this CPU cannot run it (check_dtype).
Precision dtype_option(const po::variables_map& vm);
std::string dtype_auto_line(Precision chosen);           // what --dtype auto chose here, and why
// Refuses bf16 where the CPU lacks AVX512-BF16: oneDNN would emulate it, slower than fp32.
void check_dtype(Precision p);
void add_weights(po::options_description& options);  // --weights f32|bf16|int8
// --weights' value; refused unless known, and unless the products are fp32 (`dtype`).
nn::Weights weights_option(const po::variables_map& vm, Precision dtype);

// An option's value, refused (naming it and the range expected) unless > 0 (>= 0) and
// at most `max`. NaN is refused, and so is an infinity: a floating-point option is
// finite, and one whose use could overflow (seconds made milliseconds) gives a `max`.
template <class T>
T positive(const po::variables_map& vm, const char* name, T max = std::numeric_limits<T>::max()) {
  const T v = vm[name].as<T>();
  if (!(v > 0 && v <= max))
    throw UsageError(max < std::numeric_limits<T>::max()
                         ? cat("--", name, " must be in ", std::is_integral_v<T> ? "[1, " : "(0, ", max, "], got ", v)
                     : std::is_floating_point_v<T>       ? cat("--", name, " must be positive and finite, got ", v)
                                                         : cat("--", name, " must be positive, got ", v));
  return v;
}
template <class T>
T non_negative(const po::variables_map& vm, const char* name, T max = std::numeric_limits<T>::max()) {
  const T v = vm[name].as<T>();
  if (!(v >= 0 && v <= max))
    throw UsageError(max < std::numeric_limits<T>::max() ? cat("--", name, " must be in [0, ", max, "], got ", v)
                     : std::is_floating_point_v<T>       ? cat("--", name, " must be >= 0 and finite, got ", v)
                                                         : cat("--", name, " must be >= 0, got ", v));
  return v;
}

// The whole of `text` as a T (an integer or a floating-point number), or nothing when
// any of it is not: "1e-3x", "" and an out-of-range value are all refused.
template <class T>
std::optional<T> whole_number(const std::string& text) {
  T v{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// An unsigned 64-bit option (a seed), declared as a string: boost's own conversion
// would read "-1" as 2^64 - 1 instead of refusing it.
inline uint64_t u64_option(const std::string& text, const char* name) {
  if (const auto v = whole_number<uint64_t>(text)) return *v;
  throw UsageError(cat("--", name, " must be an integer in [0, 2^64), got '", text, "'"));
}

}  // namespace folio::cli
